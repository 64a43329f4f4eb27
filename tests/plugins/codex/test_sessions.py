"""Codex's session history, against a store captured from Codex CLI 0.171.0
(tests/fixtures/codex/sessions, listed in tests/fixtures/codex/README.md)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

import clanker_codex
from clanker.descriptor import SessionOperation
from clanker.environment.files import FileSample, confined, read_sample
from clanker.environment.local import LocalFiles
from clanker.launch.planning import plan_launch
from clanker.launch.request import LaunchOperation, LaunchRequest, SessionTarget
from clanker.registry import Registry
from clanker.sessions.capability import SessionsContext
from clanker.sessions.selection import (
    AmbiguousSelectionError,
    Selection,
    SessionNotFoundError,
    resolve_selection,
)
from clanker.sessions.types import SessionScan
from clanker.testing import registered
from clanker.testing.sessions import (
    check_unchanged_store_is_remembered,
    sample_of_bytes,
    sessions_context,
)
from clanker.testing.sessions import session_service as service
from clanker.testing.strategies import awkward_values
from clanker_codex.sessions import (
    INDEX_NAME,
    CodexSessions,
    codex_home,
    index_path,
    sessions_dir,
)
from clanker_codex.summaries import (
    HEAD_BYTES,
    TAIL_BYTES,
    IndexEntry,
    read_index,
    summarize,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "codex" / "sessions"
HOME = FIXTURES / "codex-home"
DAY = HOME / "sessions" / "2026" / "11" / "30"
SQL = HOME / "sqlite"
A = "01a22bbd-56a4-7aa3-bd97-9688376268d5"  # exec, resumed from src/beta, renamed "README work"
B = "01a22bbd-9b3a-7f73-ae36-75a8131c0999"  # TUI
C = "01a22bbd-e935-7293-b6b0-2101bb7921eb"  # TUI fork of B, no message
D = "01a22bbe-197e-74e3-85ed-caf27f18d13c"  # exec fork of A
E = "01a22bbe-38e0-7b13-be71-40829f139288"  # review parent
F = "01a22bbe-3942-78d0-af57-4ec9f989b2b5"  # review sub-agent
G = "01a22bbe-5880-77a1-834a-598cb6efca84"  # archived
H = "01a22bbe-7a34-7333-8b93-492c32aa1ef8"  # TZ=Asia/Tokyo
MTIME = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


def rollout(native_id: str) -> Path:
    [path] = [*HOME.rglob(f"rollout-*-{native_id}.jsonl")]
    return path


def sample(path: Path) -> FileSample:
    return read_sample(path, head_bytes=HEAD_BYTES, tail_bytes=TAIL_BYTES)


def sample_of(data: bytes, *, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> FileSample:
    """What read_sample would see of ``data``, without a file."""
    return sample_of_bytes(data, head_bytes=head, tail_bytes=tail, mtime=MTIME)


def iso(value: str) -> datetime:
    return datetime.fromisoformat(value)


# -- every captured rollout -----------------------------------------------------------------

# (id, title, cwd, updated, created, model, parent), read off the files by hand: e.g. A's
# last line is its second prompt's item_completed at 09:16:07.673Z, and its newest
# turn_context ran in src/beta with gpt-6.2-astra after the resume.
CAPTURED = [
    (A, "Add a README section about installation", "/home/dev/src/beta",
     "2026-11-30T09:16:07.673+00:00", "2026-11-30T09:15:58.514+00:00", "gpt-6.2-astra", None),
    (B, "Explain the build in my project (café ✓)", "/home/dev/src/my project.v2",
     "2026-11-30T09:16:22.564+00:00", "2026-11-30T09:16:16.071+00:00", "gpt-6.2-sol", None),
    # A TUI fork with no message: no title of its own, the model from the
    # thread_settings_applied line (it has no turn_context), the parent recorded.
    (C, None, "/home/dev/src/my project.v2", "2026-11-30T09:16:36.069+00:00",
     "2026-11-30T09:16:36.027+00:00", "gpt-6.2-sol", B),
    (D, "Try a different approach for the README", "/home/dev/src/alpha",
     "2026-11-30T09:16:48.534+00:00", "2026-11-30T09:16:48.398+00:00", "gpt-6.2-sol", A),
    # The review parent holds its sub-agent's UserMessage (thread_id = F): not its title.
    (E, None, "/home/dev/src/review", "2026-11-30T09:16:56.575+00:00",
     "2026-11-30T09:16:56.430+00:00", None, None),
    (G, "Old experiment that gets archived", "/home/dev/src/alpha",
     "2026-11-30T09:17:04.648+00:00", "2026-11-30T09:17:04.527+00:00", "gpt-6.2-sol", None),
    # The file name says 18-17-13 (local time, Asia/Tokyo); the records are UTC.
    (H, "Session started with TZ=Asia/Tokyo", "/home/dev/src/alpha",
     "2026-11-30T09:17:13.317+00:00", "2026-11-30T09:17:13.158+00:00", "gpt-6.2-sol", None),
]


def test_the_table_covers_every_captured_rollout() -> None:
    listed = {rollout(row[0]) for row in CAPTURED}
    assert set(HOME.rglob("rollout-*.jsonl")) == listed | {rollout(F)}


def compact(value: object) -> bytes:
    """JSON as Codex writes it (serde: no spaces)."""
    return json.dumps(value, separators=(",", ":")).encode()


def test_a_sub_agent_rollout_is_not_a_session_of_its_own() -> None:
    meta = json.loads(rollout(F).read_text().splitlines()[0])["payload"]
    assert meta["source"] == {"subagent": "review"}
    assert meta["thread_source"] == "subagent"
    hidden = summarize(sample(rollout(F)))
    assert hidden is not None
    assert hidden.hidden  # listed nowhere, but found by id
    line = json.loads(rollout(A).read_text().splitlines()[0])
    for change in ({"source": {"subagent": {"thread_spawn": {"depth": 1}}}},
                   {"thread_source": "subagent"}, {"parent_thread_id": E}):
        # Where Codex writes them: before base_instructions (serde keeps field order).
        edited = {**line, "payload": {**change, **line["payload"], **change}}
        data = compact(edited) + b"\n" + rollout(A).read_bytes().split(b"\n", 1)[1]
        found = summarize(sample_of(data))
        assert found is not None
        assert found.hidden, change
    # A custom source is an object too, but no sub-agent.
    edited = {**line, "payload": {**line["payload"], "source": {"custom": "atlas"}}}
    data = compact(edited) + b"\n" + rollout(A).read_bytes().split(b"\n", 1)[1]
    custom = summarize(sample_of(data))
    assert custom is not None
    assert not custom.hidden


@pytest.mark.parametrize("name", ["history.jsonl", "session_index.jsonl"])
def test_other_json_lines_are_not_sessions(name: str) -> None:
    assert summarize(sample(HOME / name)) is None


def test_line_one_decoded_in_part_or_whole_gives_the_same_session() -> None:
    # The prefix before base_instructions is decoded; a reordered line is decoded whole.
    lines = rollout(D).read_bytes().split(b"\n", 1)
    meta = json.loads(lines[0])
    payload = meta["payload"]
    reordered = {"base_instructions": payload["base_instructions"],
                 **{k: v for k, v in payload.items() if k != "base_instructions"}}
    data = compact({**meta, "payload": reordered}) + b"\n" + lines[1]
    assert summarize(sample_of(data)) == summarize(sample(rollout(D)))


# -- bounds: files larger than the head and the tail -----------------------------------------


def line(kind: str, payload: dict[str, Any], when: str = "2026-11-30T10:00:00.000Z") -> bytes:
    return compact({"timestamp": when, "ordinal": 0, "type": kind, "payload": payload}) + b"\n"


ID = "01a22bbd-0000-7000-8000-000000000001"
META = line("session_meta", {
    "id": ID, "session_id": ID, "timestamp": "2026-11-30T08:00:00.000Z", "cwd": "/w/first",
    "source": "cli", "thread_source": "user", "base_instructions": {"text": "i" * 26_000},
})
FILLER = line("response_item", {"type": "message", "role": "developer",
                                "content": [{"type": "input_text", "text": "d" * 26_000}]})
ENVIRONMENT = line("response_item", {"type": "message", "role": "user", "content": [
    {"type": "input_text", "text": "<environment_context>cwd</environment_context>"}]})


def prompt(text: str, thread: str = ID) -> bytes:
    return line("event_msg", {"type": "item_completed", "thread_id": thread, "item": {
        "type": "UserMessage", "content": [{"type": "text", "text": text}]}})


def turn(cwd: str, model: str, when: str = "2026-11-30T10:00:00.000Z") -> bytes:
    return line("turn_context", {"cwd": cwd, "model": model,
                                 "permission_profile": {"cwd": "/nested/not/this"}}, when)


def test_a_large_file_takes_cwd_model_and_time_from_its_tail() -> None:
    data = (META + FILLER + FILLER + ENVIRONMENT + turn("/w/first", "m1") + prompt("first ask")
            + FILLER * 8 + turn("/w/later", "m2") + FILLER
            + line("event_msg", {"type": "token_count"}, "2026-11-30T11:00:00.000Z"))
    found = summarize(sample_of(data))
    assert found is not None
    assert (found.title, found.cwd, found.model) == ("first ask", "/w/later", "m2")
    assert found.updated_at == iso("2026-11-30T11:00:00+00:00")
    assert found.created_at == iso("2026-11-30T08:00:00+00:00")


def test_a_resume_without_a_message_still_moves_the_cwd() -> None:
    # Verified live: `codex -C <dir> resume <id>` with no message appends only a
    # thread_settings_applied line with the new cwd (Codex's index follows it).
    settings_line = line("event_msg", {"type": "thread_settings_applied", "thread_id": ID,
                                       "thread_settings": {"model": "m3", "cwd": "/w/moved"}})
    data = META + prompt("ask") + turn("/w/first", "m1") + settings_line
    found = summarize(sample_of(data))
    assert found is not None
    assert (found.cwd, found.model) == ("/w/moved", "m3")
    other = settings_line.replace(ID.encode(), b"01a22bbd-0000-7000-8000-00000000000f")
    found = summarize(sample_of(META + prompt("ask") + turn("/w/first", "m1") + other))
    assert found is not None
    assert found.cwd == "/w/first"  # another thread's settings are not this session's


def test_without_settings_in_the_tail_the_head_stands_in() -> None:
    data = META + FILLER + ENVIRONMENT + turn("/w/head", "m-head") + prompt("ask") + FILLER * 10
    found = summarize(sample_of(data))
    assert found is not None
    assert (found.cwd, found.model) == ("/w/head", "m-head")


def test_without_settings_anywhere_line_one_names_the_cwd() -> None:
    found = summarize(sample_of(META + FILLER * 10))
    assert found is not None
    assert (found.cwd, found.model, found.title) == ("/w/first", None, None)


def test_a_first_prompt_past_the_head_gives_no_title() -> None:
    data = META + FILLER * 5 + ENVIRONMENT + prompt("too far") + turn("/w/first", "m")
    assert len(data) - len(prompt("too far")) > HEAD_BYTES
    found = summarize(sample_of(data))
    assert found is not None
    assert found.title is None


def test_the_environment_context_and_other_threads_are_not_titles() -> None:
    data = (META + prompt("<environment_context>x</environment_context>")
            + prompt("the sub-agent's", thread=E) + prompt("  ") + prompt("mine"))
    found = summarize(sample_of(data))
    assert found is not None
    assert found.title == "mine"


def test_a_legacy_rollout_titles_from_its_user_message_event() -> None:
    data = META + line("event_msg", {"type": "user_message", "message": "legacy hello"})
    found = summarize(sample_of(data))
    assert found is not None
    assert found.title == "legacy hello"


def test_a_giant_last_line_leaves_the_file_time() -> None:
    data = META + prompt("ask") + FILLER + line("event_msg", {"x": "y" * (200 * 1024)})
    found = summarize(sample_of(data))
    assert found is not None
    assert found.updated_at == MTIME


def test_a_cut_last_line_still_dates_the_session() -> None:
    # Codex itself resumes such a file (it terminates the fragment first).
    data = META + prompt("ask") + b'{"timestamp":"2026-12-01T00:00:00.000Z","ordinal":9,"ty'
    found = summarize(sample_of(data))
    assert found is not None
    assert found.updated_at == iso("2026-12-01T00:00:00+00:00")


def test_line_one_larger_than_the_head_is_a_skip() -> None:
    big = line("session_meta", {"id": ID, "cwd": "/w", "base_instructions": "x" * HEAD_BYTES})
    assert summarize(sample_of(big + prompt("ask") + FILLER)) is None


# -- where the store is -------------------------------------------------------------------


def test_the_home_defaults_to_dot_codex() -> None:
    assert codex_home({"HOME": "/home/u"}) == Path("/home/u/.codex")
    # Verified live: an empty CODEX_HOME is unset (~/.codex is used).
    assert codex_home({"HOME": "/home/u", "CODEX_HOME": ""}) == Path("/home/u/.codex")
    assert sessions_dir({"HOME": "/home/u"}) == Path("/home/u/.codex/sessions")
    assert (CodexSessions().store_roots({"HOME": "/home/u"}, LocalFiles())
            == (Path("/home/u/.codex/sessions"),))


def test_codex_home_wins_and_a_relative_one_is_not_guessed() -> None:
    assert codex_home({"HOME": "/home/u", "CODEX_HOME": "/srv/codex/"}) == Path("/srv/codex")
    # Codex takes "rel" relative to its own cwd ("CODEX_HOME points to "rel"").
    assert codex_home({"HOME": "/home/u", "CODEX_HOME": "rel"}) is None
    assert CodexSessions().store_roots({"CODEX_HOME": "rel"}, LocalFiles()) == ()


def write_config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def test_the_index_lives_in_the_home_by_default(tmp_path: Path) -> None:
    environ = {"CODEX_HOME": str(tmp_path)}
    assert index_path(environ, LocalFiles()) == tmp_path / INDEX_NAME
    write_config(tmp_path, 'model = "x"\n')
    assert index_path(environ, LocalFiles()) == tmp_path / INDEX_NAME


def test_codex_sqlite_home_moves_the_index(tmp_path: Path) -> None:
    environ = {"CODEX_HOME": str(tmp_path), "CODEX_SQLITE_HOME": "/srv/db"}
    assert index_path(environ, LocalFiles()) == Path("/srv/db") / INDEX_NAME
    assert index_path({**environ, "CODEX_SQLITE_HOME": ""}, LocalFiles()) == tmp_path / INDEX_NAME
    assert index_path({**environ, "CODEX_SQLITE_HOME": "relative"}, LocalFiles()) is None


def test_the_config_key_beats_the_variable(tmp_path: Path) -> None:
    # Verified live: with both set, `sqlite_home` won.
    write_config(tmp_path, 'sqlite_home = "/from/config"\n')
    environ = {"CODEX_HOME": str(tmp_path), "CODEX_SQLITE_HOME": "/from/env"}
    assert index_path(environ, LocalFiles()) == Path("/from/config") / INDEX_NAME


@pytest.mark.parametrize(("text", "expected"), [
    ('sqlite_home = "relative"\n', None),  # relative to Codex's cwd: unknown
    ("sqlite_home = 3\n", None),
    ("not = [valid toml\n", "ENV"),  # Codex refuses such a config; nothing to follow
    ("[profiles.x]\nsqlite_home = '/in/profile'\n", "ENV"),  # a profile is not chosen here
])
def test_config_values_clanker_cannot_follow(tmp_path: Path, text: str,
                                             expected: str | None) -> None:
    write_config(tmp_path, text)
    environ = {"CODEX_HOME": str(tmp_path), "CODEX_SQLITE_HOME": "/from/env"}
    assert (index_path(environ, LocalFiles())
            == (None if expected is None else Path("/from/env") / INDEX_NAME))


# -- the index ----------------------------------------------------------------------------


def make_index(path: Path, codex: Path, *, archive: str | None = None) -> None:
    """The captured index (schema and rows), with rollout paths under ``codex``."""
    rows = (SQL / "state_5.threads.sql").read_text().replace("/home/dev/.codex", str(codex))
    with sqlite3.connect(path) as connection:
        connection.executescript((SQL / "state_5.schema.sql").read_text() + rows)
        if archive is not None:
            connection.execute("UPDATE threads SET archived = 1 WHERE id = ?", (archive,))
    connection.close()


def test_index_rows_are_read_by_rollout_path(tmp_path: Path) -> None:
    make_index(tmp_path / INDEX_NAME, Path("/c"))
    a = f"/c/sessions/2026/11/30/{rollout(A).name}"
    g = f"/c/archived_sessions/{rollout(G).name}"
    entries = read_index(LocalFiles(), tmp_path / INDEX_NAME, [a, g, "/c/none.jsonl"])
    assert entries == {
        a: IndexEntry(name="README work", title="Add a README section about installation",
                      archived=False),
        g: IndexEntry(name=None, title="Old experiment that gets archived", archived=True),
    }


def test_an_index_clanker_cannot_trust_is_not_read(tmp_path: Path) -> None:
    paths = [f"/c/sessions/2026/11/30/{rollout(A).name}"]
    assert read_index(LocalFiles(), None, paths) == {}
    assert read_index(LocalFiles(), tmp_path / INDEX_NAME, paths) == {}  # missing
    (tmp_path / "garbage.sqlite").write_bytes(b"not a database" * 100)
    assert read_index(LocalFiles(), tmp_path / "garbage.sqlite", paths) is None
    changed = tmp_path / "changed.sqlite"
    with sqlite3.connect(changed) as connection:
        connection.execute("CREATE TABLE threads (id TEXT, rollout_path TEXT, title TEXT)")
        connection.execute("INSERT INTO threads VALUES ('x', ?, 't')", (paths[0],))
    connection.close()
    assert read_index(LocalFiles(), changed, paths) is None  # a column is missing: storage changed
    (tmp_path / "dir.sqlite").mkdir()
    assert read_index(LocalFiles(), tmp_path / "dir.sqlite", paths) == {}


# -- discovery, end to end ----------------------------------------------------------------


def registry() -> Registry:
    return Registry.from_plugins({"codex": clanker_codex.plugin}, environ={})


PROVIDER = registered(clanker_codex.plugin, "codex")


@pytest.fixture
def store(tmp_path: Path) -> dict[str, str]:
    """The captured Codex home, copied (without its SQL text); the environ pointing at it."""
    shutil.copytree(HOME, tmp_path / "codex", ignore=shutil.ignore_patterns("sqlite"))
    return {"HOME": str(tmp_path), "CODEX_HOME": str(tmp_path / "codex"),
            "PATH": os.environ["PATH"]}


def context(environ: Mapping[str, str], **fields: Any) -> SessionsContext:
    return sessions_context("codex", environ, **fields)


def test_the_whole_store_is_listed(store: dict[str, str]) -> None:
    listing = asyncio.run(service(store).discover([PROVIDER], workspace=None))
    assert listing.complete
    # The sub-agent's rollout is left out on purpose, not counted as unreadable.
    assert listing.scans[0].scan.skipped == 0
    assert sorted(s.native_id for s in listing.sessions) == sorted([A, B, C, D, E, H])
    roots = CodexSessions().store_roots(store, LocalFiles())
    assert all(s.store_path and confined(s.store_path, roots) for s in listing.sessions)
    # Without an index the rollouts alone decide.
    assert next(s for s in listing.sessions if s.native_id == A).title == (
        "Add a README section about installation")


def test_a_workspace_lists_its_sessions_by_their_latest_cwd(store: dict[str, str]) -> None:
    alpha = asyncio.run(service(store).discover([PROVIDER], workspace="/home/dev/src/alpha"))
    assert [s.native_id for s in alpha.sessions] == [H, D]  # newest first; A moved to beta
    beta = asyncio.run(service(store).discover([PROVIDER], workspace="/home/dev/src/beta"))
    assert [s.native_id for s in beta.sessions] == [A]


def test_the_index_names_sessions_and_hides_archived_ones(store: dict[str, str]) -> None:
    codex = Path(store["CODEX_HOME"])
    make_index(codex / INDEX_NAME, Path(os.path.realpath(codex)), archive=B)
    listing = asyncio.run(service(store).discover([PROVIDER], workspace=None))
    titles = {s.native_id: s.title for s in listing.sessions}
    assert titles[A] == "README work"  # a rename touches only the index
    # The review parent has no prompt of its own; the index's title stands in.
    assert titles[E] is not None and titles[E].startswith("Review the current code changes")
    assert B not in titles  # archived in the index: `codex resume` would refuse it
    assert titles[C] is None  # the index's title is '' for a fork without a message


@pytest.mark.parametrize("linked", [False, True], ids=["in place", "through a link"])
def test_a_renamed_thread_shows_although_no_rollout_changed(
    store: dict[str, str], tmp_path: Path, linked: bool
) -> None:
    codex = Path(store["CODEX_HOME"])
    database = tmp_path / "dotfiles" / INDEX_NAME if linked else codex / INDEX_NAME
    database.parent.mkdir(exist_ok=True)
    make_index(database, Path(os.path.realpath(codex)))
    if linked:
        (codex / INDEX_NAME).symlink_to(database)

    def rename() -> None:
        with sqlite3.connect(database) as connection:
            connection.execute("UPDATE threads SET name = 'Renamed' WHERE id = ?", (A,))
        connection.close()

    check_unchanged_store_is_remembered(
        CodexSessions(), lambda memo: context(store, memo=memo), rename)


def test_a_listing_made_while_the_index_was_locked_is_not_remembered(
    store: dict[str, str]
) -> None:
    from clanker.sessions.witness import ScanMemo

    codex = Path(store["CODEX_HOME"])
    make_index(codex / INDEX_NAME, Path(os.path.realpath(codex)))
    memo = ScanMemo(settle_ns=0)
    time.sleep(0.03)
    holder = sqlite3.connect(codex / INDEX_NAME, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # as a writer mid-commit: readers are turned away
    try:
        locked = asyncio.run(CodexSessions().discover(context(store, memo=memo)))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert {s.native_id: s.title for s in locked.sessions}[A] != "README work"
    again = asyncio.run(CodexSessions().discover(context(store, memo=memo)))
    assert {s.native_id: s.title for s in again.sessions}[A] == "README work"


def test_an_index_elsewhere_is_found_through_the_variable(store: dict[str, str],
                                                          tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    make_index(tmp_path / "db" / INDEX_NAME, Path(os.path.realpath(store["CODEX_HOME"])))
    environ = {**store, "CODEX_SQLITE_HOME": str(tmp_path / "db")}
    found = asyncio.run(service(environ).find(PROVIDER, A))
    assert found is not None and found.title == "README work"


def test_refinding_by_id_and_continuing_elsewhere(store: dict[str, str], tmp_path: Path) -> None:
    found = asyncio.run(service(store).find(PROVIDER, A))
    assert found is not None
    assert found.store_path == str(Path(os.path.realpath(store["CODEX_HOME"]))
                                   / "sessions" / "2026" / "11" / "30" / rollout(A).name)
    workspace = tmp_path / "work"
    workspace.mkdir()
    selection = asyncio.run(resolve_selection(
        service(store), registry(), f"codex:{A}", operation=SessionOperation.RESUME,
        workspace=str(workspace)))
    assert isinstance(selection, Selection)
    # A unique prefix of its id selects it as well. Codex ids are UUIDv7, whose
    # first 48 bits are the time: sessions of one minute share eight characters.
    by_prefix = asyncio.run(resolve_selection(
        service(store), registry(), f"codex:{A[:18]}", operation=SessionOperation.RESUME,
        workspace=str(workspace)))
    assert by_prefix.session == selection.session
    with pytest.raises(AmbiguousSelectionError) as caught:
        asyncio.run(resolve_selection(service(store), registry(), f"codex:{A[:8]}",
                                      operation=None, workspace=str(workspace)))
    assert f"codex:{A}" in caught.value.candidates
    # /home/dev/src/beta does not exist here; Codex continues elsewhere with -C.
    assert selection.launch_cwd == str(workspace)
    assert selection.notice is not None and "/home/dev/src/beta" in selection.notice
    target = SessionTarget(native_id=A, store_path=selection.session.store_path)
    for operation in (LaunchOperation.RESUME, LaunchOperation.FORK):
        plan = plan_launch(selection.provider, LaunchRequest(
            operation=operation, session=target, cwd=selection.launch_cwd))
        assert plan.argv == ("codex", "-C", str(workspace), operation.value, A)


def test_archived_sessions_are_not_refound_and_sub_agents_only_by_id(
    store: dict[str, str]
) -> None:
    sub_agent = asyncio.run(service(store).find(PROVIDER, F))
    assert sub_agent is not None
    assert sub_agent.hidden  # never listed, but its id names it exactly
    listing = asyncio.run(service(store).discover([PROVIDER], workspace=None))
    assert F not in {s.native_id for s in listing.sessions}
    for native_id in (G,):
        assert asyncio.run(service(store).find(PROVIDER, native_id)) is None
        with pytest.raises(SessionNotFoundError):
            asyncio.run(resolve_selection(service(store), registry(), f"codex:{native_id}",
                                          operation=SessionOperation.RESUME,
                                          workspace="/"))


def test_a_refind_reads_only_the_rollout_named_by_the_id(store: dict[str, str]) -> None:
    decoy = Path(store["CODEX_HOME"]) / "sessions" / "2026" / "11" / "30" / (
        "rollout-2026-11-30T00-00-00-00000000-0000-7000-8000-000000000000.jsonl")
    decoy.write_bytes(b"not a rollout")
    scan = asyncio.run(CodexSessions().discover(context(store, native_id=D)))
    assert [s.native_id for s in scan.sessions] == [D]
    assert scan.skipped == 0  # nothing else was read
    # The scopes on a re-find only say where the caller is.
    scan = asyncio.run(CodexSessions().discover(context(store, native_id=D,
                                                        scopes=("/somewhere/else",))))
    assert [s.native_id for s in scan.sessions] == [D]
    found = asyncio.run(service(store).find(PROVIDER, D, workspace="/somewhere/else"))
    assert found is not None and found.cwd == "/home/dev/src/alpha"


def test_what_is_not_a_rollout_is_never_read(store: dict[str, str], tmp_path: Path) -> None:
    codex = Path(store["CODEX_HOME"])
    day = codex / "sessions" / "2026" / "11" / "30"
    outside = tmp_path / "outside"
    outside.mkdir()
    copy = rollout(B).read_bytes()
    (outside / "rollout-x.jsonl").write_bytes(copy)
    (day / "notes.jsonl").write_bytes(copy)  # not rollout-*
    (day / "rollout-x.jsonl.tmp").write_bytes(copy)
    (day / "deeper").mkdir()
    (day / "deeper" / "rollout-deeper.jsonl").write_bytes(copy)
    (codex / "sessions" / "rollout-top.jsonl").write_bytes(copy)
    (codex / "sessions" / "misc" / "11" / "30").mkdir(parents=True)
    (codex / "sessions" / "misc" / "11" / "30" / "rollout-misc.jsonl").write_bytes(copy)
    (day / "rollout-link.jsonl").symlink_to(outside / "rollout-x.jsonl")
    (codex / "sessions" / "2026" / "12").symlink_to(outside)
    listing = asyncio.run(service(store).discover([PROVIDER], workspace=None))
    assert len(listing.sessions) == 6
    assert listing.scans[0].scan.skipped == 0


def test_a_relative_codex_home_is_an_empty_store() -> None:
    # A missing store is empty (the contract); a home clanker cannot place is no store.
    assert asyncio.run(CodexSessions().discover(context({"CODEX_HOME": "rel"}))) == SessionScan()


def test_codex_continues_a_session_whose_directory_is_gone() -> None:
    # Verified 2026-11-30 with Codex 0.171.0, the session's cwd removed
    # (tests/fixtures/codex/sessions/cli-output/): `codex resume <id>` asks
    # "Working directory · resume" and defaults to the missing directory;
    # `codex -C <dir> resume <id>`, the argv clanker builds, loads the history
    # in <dir> without asking. `codex exec resume <id>` continues it too.
    assert CodexSessions.resumes_without_original_directory is True
    output = FIXTURES / "cli-output"
    asked = (output / "tui-resume-gone-cwd-without-C.txt").read_text()
    assert "Working directory · resume" in asked
    assert "Use session directory (/home/dev/src/gone2)" in asked
    continued = (output / "tui-resume-gone-cwd-with-C-before-resume.txt").read_text()
    assert "Working directory" not in continued
    assert "second prompt" in continued and "~/src/main" in continued
    forked = (output / "tui-fork-gone-cwd-with-C-before-fork.txt").read_text()
    assert "Working directory" not in forked
    assert "third prompt" in forked and "~/src/main" in forked


# -- shapes for the contract's properties (test_contract.py) --------------------------------

_field = awkward_values([ID, ID.upper(), {"subagent": "review"}, [ID]])


def _rollout(meta: dict[str, object], records: list[tuple[str, dict[str, object], object]]
             ) -> bytes:
    out = compact({"timestamp": "2026-11-30T00:00:00Z", "type": "session_meta",
                   "payload": meta}) + b"\n"
    for kind, payload, when in records:
        out += compact({"timestamp": when, "type": kind, "payload": payload}) + b"\n"
    return out


ROLLOUTS = st.builds(
    _rollout,
    st.dictionaries(st.sampled_from(["id", "cwd", "timestamp", "source", "thread_source",
                                     "forked_from_id", "parent_thread_id",
                                     "base_instructions"]), _field, max_size=8),
    st.lists(st.tuples(
        st.sampled_from(["event_msg", "turn_context", "response_item", "x"]),
        st.dictionaries(st.sampled_from(["type", "thread_id", "item", "cwd", "model",
                                         "thread_settings", "message"]), _field, max_size=6),
        _field,
    ), max_size=6),
)
"""Rollouts with values of any type where Codex's fields are."""

HUGE_ROLLOUTS = (
    META + b"[" * 100_000 + b"\n",
    META + b'{"type":"event_msg","payload":' * 50_000,
    META + prompt("x" * 1_000_000),
    META + b'{"timestamp":"' + b"9" * 60 + b'"}\n',
    b'{"type":"session_meta","payload":{"id":"' + b"h" * 300_000 + b'"}}\n',
    META.replace(b'"cwd":"/w/first"', b'"cwd":"/' + b"a" * 100_000 + b'"'),
)
"""Huge and deeply nested values where the summarizer reads."""


# -- the real CLI ---------------------------------------------------------------------------

PROVIDER_FLAGS = (
    "-c", "model_provider=probe", "-c", "model_providers.probe.name=probe",
    "-c", "model_providers.probe.base_url=http://127.0.0.1:9/v1",
    "-c", "model_providers.probe.env_key=PROBE_KEY",
    "-c", "model_providers.probe.wire_api=responses",
    "-c", "model_providers.probe.stream_max_retries=0",
    "-c", "model_providers.probe.request_max_retries=0",
)


def run_until_written(environ: Mapping[str, str], cwd: Path, *args: str,
                      wait_for: Path | None = None) -> str:
    """Run ``codex exec``; it retries the refused loopback forever, so stop it once written."""
    size = -1 if wait_for is None else wait_for.stat().st_size
    with subprocess.Popen(["codex", *PROVIDER_FLAGS, "exec", "--json", "--skip-git-repo-check",
                           *args], cwd=cwd, env=dict(environ), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          start_new_session=True) as process:
        assert process.stdout is not None
        first = process.stdout.readline()  # {"type":"thread.started","thread_id":...}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if wait_for is None or wait_for.stat().st_size != size:
                time.sleep(1.0)  # the request goes out after the rollout is flushed
                break
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGKILL)
    started: str = json.loads(first)["thread_id"]
    return started


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("codex") is None, reason="codex is not installed")
def test_real_rollout_is_found_and_continued_from_elsewhere(tmp_path: Path) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CODEX_")}
    environ.update(HOME=str(tmp_path), CODEX_HOME=str(tmp_path / ".codex"),
                   PROBE_KEY="dummy-not-a-key")
    (tmp_path / ".codex").mkdir()
    native_id = run_until_written(environ, work, "real prompt")
    listing = asyncio.run(service(environ).discover([PROVIDER], workspace=str(work)))
    [found] = listing.sessions
    assert (found.native_id, found.title, found.cwd) == (native_id, "real prompt",
                                                         str(work.resolve()))
    assert found.store_path is not None
    # The policy behind resumes_without_original_directory, live (exec's path).
    work.rmdir()
    path = Path(found.store_path)
    resumed = run_until_written(environ, elsewhere, "resume", native_id, "again",
                                wait_for=path)
    assert resumed == native_id
    refound = asyncio.run(service(environ).find(PROVIDER, native_id))
    assert refound is not None and refound.cwd == str(elsewhere.resolve())
