"""SQLite stores on an SSH host (Codex's index, Antigravity's conversation index),
read on the host by the scan's own rounds: the same sessions a local scan of
them gives, nothing written on the host. Also what keeps a whole scan within
its bound there: answers past a round's bound, a store whose listing alone
overflows, and a harness's command first asked for in the last pass."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import pwd
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from clanker.api import Clanker
from clanker.environment.ssh_scan import MAX_ROUNDS
from clanker.errors import ErrorKind
from clanker.sessions.service import SessionListing, SessionService
from clanker.sessions.types import HarnessSession
from tests.core.ssh.test_remote_sessions import (
    _FIXTURES,
    _chown_tree,
    _local_listing,
    _remote_listing,
    _tree,
)
from tests.sshd import Sshd

_CODEX = _FIXTURES / "codex" / "sessions" / "codex-home"
_AGY_SQL = (_FIXTURES / "agy" / "sessions" / "SYNTHETIC-agy-home" / ".gemini"
            / "antigravity-cli" / "conversation_summaries.sql")
_RENAMED = "01a22bbd-56a4-7aa3-bd97-9688376268d5"  # "README work" in the index
_ARCHIVED = "01a22bbd-9b3a-7f73-ae36-75a8131c0999"  # archived below, in the index only
_FIRST_AGY = "11111111-1111-4111-8111-111111111111"  # a CLI conversation of the index


def _wal(path: Path, script: str) -> None:
    """A database in WAL mode, closed cleanly (so without its side files, as a
    harness that is not running leaves it)."""
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=wal")
    connection.executescript(script)
    connection.commit()
    connection.close()
    assert not Path(f"{path}-wal").exists() and not Path(f"{path}-shm").exists()


@pytest.fixture
def sqlite_home(sshd: Sshd) -> Iterator[Path]:
    """A home of its own in the test user's (other tests use that one), holding
    Codex's rollouts and index and agy's index; removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("placing stores in the remote home needs the dedicated test user (root)")
    home = Path(tempfile.mkdtemp(prefix="sqlite-", dir=sshd.home))
    codex = home / ".codex"
    shutil.copytree(_CODEX, codex, ignore=shutil.ignore_patterns("sqlite"))
    rows = (_CODEX / "sqlite" / "state_5.threads.sql").read_text() \
        .replace("/home/dev/.codex", str(codex))
    _wal(codex / "state_5.sqlite", (_CODEX / "sqlite" / "state_5.schema.sql").read_text()
         + rows + f"UPDATE threads SET archived = 1 WHERE id = '{_ARCHIVED}';")
    agy = home / ".gemini" / "antigravity-cli"
    (agy / "conversations").mkdir(parents=True)
    _wal(agy / "conversation_summaries.db", _AGY_SQL.read_text())
    index = sqlite3.connect(":memory:")
    index.executescript(_AGY_SQL.read_text())
    for (native_id,) in index.execute("SELECT conversation_id FROM conversation_summaries"):
        (agy / "conversations" / f"{native_id}.db").write_bytes(b"")
    index.close()
    _own(sshd, home)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _own(sshd: Sshd, top: Path) -> None:
    entry = pwd.getpwnam(sshd.user)
    _chown_tree(top, entry.pw_uid, entry.pw_gid)


def _remote(sshd: Sshd, home: Path) -> tuple[SessionListing, int, int]:
    return asyncio.run(_remote_listing(sshd, home))


def test_a_hosts_sqlite_stores_give_what_a_local_scan_gives(
    sshd: Sshd, sqlite_home: Path
) -> None:
    # One conversation's file is a link out of the store: not a conversation to resume.
    conversations = sqlite_home / ".gemini" / "antigravity-cli" / "conversations"
    linked = _FIRST_AGY
    (conversations / f"{linked}.db").unlink()
    (conversations / f"{linked}.db").symlink_to("/etc/hostname")
    stores = (sqlite_home / ".codex", sqlite_home / ".gemini")
    before = [_tree(top) for top in stores]
    remote, rounds, executions = _remote(sshd, sqlite_home)
    # Read-only and immutable: no -wal or -shm file appears beside either database.
    assert [_tree(top) for top in stores] == before
    local = _local_listing(sqlite_home)
    errors = {scan.harness: scan.scan.error for scan in remote.scans}
    assert errors["codex"] is None and errors["agy"] is None, errors
    assert remote.sessions == local.sessions
    assert linked not in {s.native_id for s in remote.sessions}
    titles = {s.native_id: s.title for s in remote.sessions if s.harness == "codex"}
    assert titles[_RENAMED] == "README work", "the index's name reached the listing"
    assert _ARCHIVED not in titles, "the index's archived thread is not offered"
    assert any(s.harness == "agy" for s in remote.sessions)
    assert rounds == 2 and executions == 1 + 3


def test_a_fifo_or_garbage_where_a_database_was_is_no_hang_and_no_guess(
    sshd: Sshd, sqlite_home: Path
) -> None:
    agy = sqlite_home / ".gemini" / "antigravity-cli" / "conversation_summaries.db"
    agy.unlink()
    os.mkfifo(agy)
    index = sqlite_home / ".codex" / "state_5.sqlite"
    index.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
    (sqlite_home / ".hermes").mkdir()
    (sqlite_home / ".hermes" / "state.db").write_bytes(b"")  # an empty database
    _own(sshd, sqlite_home)
    remote, _, executions = _remote(sshd, sqlite_home)
    local = _local_listing(sqlite_home)
    assert remote.sessions == local.sessions
    scans = {scan.harness: scan.scan for scan in remote.scans}
    assert scans["agy"].error is None and not scans["agy"].sessions  # not a database
    assert scans["hermes"].error is None and not scans["hermes"].sessions
    # A broken index is what a busy one is locally: the rollouts alone answer.
    assert scans["codex"].error is None and _ARCHIVED in {
        s.native_id for s in remote.sessions}
    assert executions <= 1 + 3


def test_a_store_read_by_queries_in_sequence_fails_alone_typed_within_the_bound(
    sshd: Sshd, sqlite_home: Path
) -> None:
    # Hermes reads each session's row after the listing's, and its continuation
    # after that: more queries in sequence than a scan's two rounds answer. Its
    # history is not offered for SSH hosts; its store there is a typed error of
    # its own, never a hang, a guess or the other providers' loss.
    hermes = sqlite_home / ".hermes"
    hermes.mkdir()
    sql = _FIXTURES / "hermes" / "sessions" / "hermes-home" / ".hermes" / "state.sql"
    _wal(hermes / "state.db", sql.read_text())
    _own(sshd, sqlite_home)
    remote, rounds, executions = _remote(sshd, sqlite_home)
    scans = {scan.harness: scan.scan for scan in remote.scans}
    error = scans["hermes"].error
    assert error is not None and error.kind is ErrorKind.COMMAND_FAILED
    assert "more than 2 executions" in str(error)
    assert not scans["hermes"].sessions
    assert scans["codex"].error is None and scans["agy"].error is None
    assert rounds == 2 and executions == 1 + 3


def test_a_changed_schema_on_the_host_is_the_typed_failure_it_is_here(
    sshd: Sshd, sqlite_home: Path
) -> None:
    db = sqlite_home / ".gemini" / "antigravity-cli" / "conversation_summaries.db"
    connection = sqlite3.connect(db)
    connection.execute("ALTER TABLE conversation_summaries DROP COLUMN workspace_uris")
    connection.commit()
    connection.close()
    _own(sshd, sqlite_home)
    remote, _, executions = _remote(sshd, sqlite_home)
    local = _local_listing(sqlite_home)
    error = {scan.harness: scan.scan.error for scan in remote.scans}["agy"]
    here = {scan.harness: scan.scan.error for scan in local.scans}["agy"]
    assert error is not None and here is not None
    assert (error.kind, str(error)) == (here.kind, str(here)) \
        == (ErrorKind.STORAGE_CHANGED, str(here))
    assert "workspace_uris" in str(error)
    assert remote.sessions == local.sessions
    assert executions <= 1 + 3


def test_an_answer_past_the_rounds_bound_fails_its_reader_alone_typed(
    sshd: Sshd, sqlite_home: Path
) -> None:
    # Rows that hardly compress, under one query's bound but over what a round's
    # answer carries: never cut short, never shipped past the bound, never a hang.
    db = sqlite_home / ".gemini" / "antigravity-cli" / "conversation_summaries.db"
    connection = sqlite3.connect(db)
    noise = [(base64.b64encode(os.urandom(750)).decode(), f"{index:08x}-aaaa-4aaa-8aaa-"
              "aaaaaaaaaaaa", base64.b64encode(os.urandom(750)).decode())
             for index in range(600)]
    connection.executemany(
        "INSERT INTO conversation_summaries (conversation_id, title, preview,"
        " last_modified_time, workspace_uris, app_data_dir, last_user_input_time)"
        " VALUES (?2, ?1, ?3, '2026-11-30 08:00:00+00:00', '[]', 'antigravity-cli',"
        " '2026-11-30 08:00:00+00:00')", noise)
    connection.commit()
    connection.close()
    _own(sshd, sqlite_home)
    remote, _, executions = _remote(sshd, sqlite_home)
    scans = {scan.harness: scan.scan for scan in remote.scans}
    error = scans["agy"].error
    assert error is not None and error.kind is ErrorKind.OUTPUT_LIMIT, error
    assert not scans["agy"].sessions
    assert scans["codex"].error is None and scans["codex"].sessions
    assert executions <= 1 + 3


def test_a_store_whose_listing_overflows_is_read_newest_first_and_says_it_was_cut(
    sshd: Sshd, sqlite_home: Path
) -> None:
    # So many rollouts (names that hardly compress) that the walk's listing alone
    # is more than a round's answer: the host keeps the newest files and says the
    # walk was cut, so Codex lists its newest sessions, truncated, with nothing
    # cut silently and no more executions than a scan's bound.
    codex = sqlite_home / ".codex"
    (codex / "state_5.sqlite").unlink()
    day = codex / "sessions" / "2026" / "11" / "30"
    old = 1_700_000_000
    for index in range(24_000):
        name = f"rollout-{os.urandom(24).hex()}-{index:08d}.jsonl"
        path = day / name
        path.write_bytes(b"not a rollout\n")
        os.utime(path, (old + index, old + index))
    _own(sshd, sqlite_home)
    remote, rounds, executions = _remote(sshd, sqlite_home)
    local = _local_listing(sqlite_home)
    scan = {scan.harness: scan.scan for scan in remote.scans}["codex"]
    here = {scan.harness: scan.scan for scan in local.scans}["codex"]
    assert scan.error is None and scan.truncated
    # The fixture's rollouts are the newest files: read on the host as here.
    assert [s for s in remote.sessions if s.harness == "codex"] \
        == [s for s in local.sessions if s.harness == "codex"]
    assert scan.sessions and scan.skipped == here.skipped
    # The first round's walk carried no samples (they went first), the second did.
    assert rounds == 2 and executions == 1 + 3


# What `opencode` answers, from its captured output (tests/fixtures/opencode/sessions):
# `session list --format json --max-count 4097` prints the captured listing and
# `db path` the captured database path, as opencode 1.18 does; anything else fails.
_OPENCODE_DOUBLE = """#!/bin/sh
here=$(dirname "$0")
case "$*" in
  "session list --format json --max-count 4097") cat "$here/session-list.json" ;;
  "db path") cat "$here/db-path.txt" ;;
  *) echo "unexpected: $*" >&2; exit 2 ;;
esac
"""


def test_a_host_with_opencode_installed_still_costs_three_executions(
    sshd: Sshd, sqlite_home: Path
) -> None:
    # OpenCode asks where its database is (to prove its answer unchanged next
    # time) only once its binary is found and resolved, in the scan's last pass:
    # that command is refused there, so the listing alone runs, once.
    tools = sqlite_home / "bin"
    tools.mkdir()
    captured = _FIXTURES / "opencode" / "sessions"
    shutil.copy(captured / "session-list-global-project.json", tools / "session-list.json")
    shutil.copy(captured / "db-path.txt", tools / "db-path.txt")
    (tools / "opencode").write_text(_OPENCODE_DOUBLE)
    (tools / "opencode").chmod(0o755)
    _own(sshd, sqlite_home)
    path = f"{tools}:/usr/bin:/bin"
    remote, rounds, executions = asyncio.run(_remote_listing(sshd, sqlite_home, path=path))
    local = _local_listing(sqlite_home, path=path)
    scans = {scan.harness: scan.scan for scan in remote.scans}
    assert scans["opencode"].error is None and scans["opencode"].sessions
    assert remote.sessions == local.sessions
    assert rounds == 2 and executions == 1 + 3


def test_a_session_of_a_hosts_sqlite_store_is_refound_there(
    sshd: Sshd, sqlite_home: Path
) -> None:
    # What resume and fork on a host start from: one session re-found by the host
    # scan (with the round a re-find has more), its index consulted as locally.
    async def find() -> dict[str, HarnessSession | None]:
        clanker = Clanker(ssh_config_file=sshd.config_file)
        clanker.add_host("box", sshd.alias)
        environment = await clanker.connect_host("box")
        env = {"HOME": str(sqlite_home), "PATH": "/usr/bin:/bin"}
        try:
            service = SessionService(environment=environment, cache_dir=None,
                                     homes=lambda provider: ((None, env),))
            found = {}
            for harness, native_id in (("codex", _RENAMED), ("codex", _ARCHIVED),
                                       ("agy", _FIRST_AGY)):
                provider = clanker.harness(harness)
                found[native_id] = await environment.gather(
                    lambda p=provider, n=native_id: service.find(p, n),
                    rounds=MAX_ROUNDS + 1)
            return found
        finally:
            environment.close()

    found = asyncio.run(find())
    renamed, agy = found[_RENAMED], found[_FIRST_AGY]
    assert renamed is not None and renamed.title == "README work"
    assert found[_ARCHIVED] is None, "archived in the index: not resumed"
    assert agy is not None and agy.store_path == str(
        sqlite_home / ".gemini" / "antigravity-cli" / "conversations" / f"{_FIRST_AGY}.db")


def test_codexs_index_names_a_store_too_large_for_one_rounds_samples(
    sshd: Sshd, sqlite_home: Path
) -> None:
    # Rollouts whose samples do not all fit the first round: the index is asked
    # about the same files in every pass, so it still names and hides threads.
    day = sqlite_home / ".codex" / "sessions" / "2026" / "11" / "30"
    good = min(day.glob("rollout-*.jsonl"))
    own = good.stem[-36:]
    for index in range(40):
        other = own[:-12] + f"{index:012x}"
        text = good.read_bytes().replace(own.encode(), other.encode())
        noise = json.dumps({"type": "x", "d": base64.b64encode(os.urandom(150_000)).decode()})
        (day / good.name.replace(own, other)).write_bytes(text + noise.encode() + b"\n" + text)
    _own(sshd, sqlite_home)
    remote, rounds, executions = _remote(sshd, sqlite_home)
    codex = {scan.harness: scan.scan for scan in remote.scans}["codex"]
    assert codex.error is None and codex.skipped > 0, "some samples did not fit at all"
    titles = {s.native_id: s.title for s in remote.sessions if s.harness == "codex"}
    assert titles[_RENAMED] == "README work"
    assert _ARCHIVED not in titles
    assert rounds == 2 and executions == 1 + 3


# A python3 whose standard library lacks sqlite3 (as some minimal builds do): the
# real interpreter with the module made unimportable, running the program on stdin.
_PYTHON_WITHOUT_SQLITE = """#!/bin/sh
exec /usr/bin/python3 -c 'import sys; sys.modules["sqlite3"] = None; \
exec(compile(sys.stdin.read(), "<stdin>", "exec"))'
"""


def test_a_host_python_without_sqlite3_says_what_is_needed(
    sshd: Sshd, sqlite_home: Path, remote_bin: Path
) -> None:
    (remote_bin / "python3").write_text(_PYTHON_WITHOUT_SQLITE)
    (remote_bin / "python3").chmod(0o755)
    remote, _, executions = _remote(sshd, sqlite_home)
    scans = {scan.harness: scan.scan for scan in remote.scans}
    error = scans["agy"].error
    assert error is not None and error.kind is ErrorKind.NOT_CONFIGURED
    assert "sqlite3" in str(error)
    # Codex's index is an addition: its rollouts are listed without it.
    assert scans["codex"].error is None and scans["codex"].sessions
    assert executions <= 1 + 3
