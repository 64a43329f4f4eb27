"""SQLite stores on an SSH host (Codex's index, Antigravity's conversation index),
read on the host by the scan's own rounds: the same sessions a local scan of
them gives, the three executions of a whole scan, nothing written on the host."""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

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
    """The test user's home with Codex's rollouts and index and agy's index."""
    if os.geteuid() != 0:
        pytest.skip("placing stores in the remote home needs the dedicated test user (root)")
    home = sshd.home
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
    entry = pwd.getpwnam(sshd.user)
    for top in (codex, home / ".gemini"):
        _chown_tree(top, entry.pw_uid, entry.pw_gid)
    try:
        yield home
    finally:
        for top in (codex, home / ".gemini", home / ".hermes"):
            shutil.rmtree(top, ignore_errors=True)


def test_a_hosts_sqlite_stores_give_what_a_local_scan_gives(
    sshd: Sshd, sqlite_home: Path
) -> None:
    stores = (sqlite_home / ".codex", sqlite_home / ".gemini")
    before = [_tree(top) for top in stores]
    remote, rounds, executions = asyncio.run(_remote_listing(sshd))
    # Read-only and immutable: no -wal or -shm file appears beside either database.
    assert [_tree(top) for top in stores] == before
    local = _local_listing(sqlite_home)
    errors = {scan.harness: scan.scan.error for scan in remote.scans}
    assert errors["codex"] is None and errors["agy"] is None, errors
    assert remote.sessions == local.sessions
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
    entry = pwd.getpwnam(sshd.user)
    _chown_tree(sqlite_home / ".gemini", entry.pw_uid, entry.pw_gid)
    os.chown(index, entry.pw_uid, entry.pw_gid)
    remote, _, executions = asyncio.run(_remote_listing(sshd))
    local = _local_listing(sqlite_home)
    assert remote.sessions == local.sessions
    scans = {scan.harness: scan.scan for scan in remote.scans}
    assert scans["agy"].error is None and not scans["agy"].sessions  # not a database
    # A broken index is what a busy one is locally: the rollouts alone answer.
    assert scans["codex"].error is None and _ARCHIVED in {
        s.native_id for s in remote.sessions}
    assert executions <= 1 + 3
