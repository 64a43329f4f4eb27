"""The two halves of reading an SQLite store on a host, each against real SQLite:
the host program's part (run here on real files, as the host runs it) and the
connection a provider is handed (answering from what a round fetched)."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from clanker.environment.ssh_scan import PROGRAM
from clanker.environment.ssh_sqlite import HOST_PART, RemoteConnection, query_key
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.stores import require_columns


def _host() -> dict[str, Any]:
    """The host program's functions (all of it but its last line, the call of
    ``main``), with a 4 KiB bound on a query's rows."""
    program, call = PROGRAM.rstrip().rsplit("\n", 1)
    assert call.startswith("main(") and HOST_PART in program
    namespace: dict[str, Any] = {}
    exec(program.replace("__BUDGET__", "0").replace("__QUERY_BYTES__", "4096"), namespace)
    return namespace


def _database(path: Path, *, wal: bool = False) -> Path:
    connection = sqlite3.connect(path)
    if wal:
        connection.execute("PRAGMA journal_mode=wal")
    connection.executescript(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, data BLOB);"
        "CREATE VIEW v AS SELECT name FROM t;"
        "INSERT INTO t (name, data) VALUES ('one', x'00ff'), ('caf\u00e9', NULL);")
    connection.commit()
    connection.close()
    return path


def _connection(path: Path, asked: list[tuple[str, str]] | None = None) -> RemoteConnection:
    host = _host()
    schema = host["sqlite_schema"](str(path))

    def ask(sql: str, params: str) -> dict[str, Any] | None:
        if asked is not None:
            asked.append((sql, params))
        return host["sqlite_query"](str(path), sql, params)  # type: ignore[no-any-return]

    return RemoteConnection(harness="test", schema=schema, ask=ask)


def test_schema_queries_are_answered_by_the_clone_exactly(tmp_path: Path) -> None:
    db = _database(tmp_path / "a.db")
    asked: list[tuple[str, str]] = []
    remote = _connection(db, asked)
    local = sqlite3.connect(db)
    for sql in ("PRAGMA table_info(t)", "PRAGMA table_info(v)",
                "SELECT name FROM sqlite_master WHERE type = 'table'", "PRAGMA busy_timeout = 50"):
        assert remote.execute(sql).fetchall() == local.execute(sql).fetchall(), sql
    require_columns(remote, {"t": frozenset({"id", "name"})}, harness="test")  # type: ignore[arg-type]
    with pytest.raises(HarnessCapabilityError) as caught:
        require_columns(remote, {"t": frozenset({"gone"})}, harness="test")  # type: ignore[arg-type]
    assert caught.value.kind is ErrorKind.STORAGE_CHANGED
    assert asked == [], "no schema query went to the host"


def test_data_queries_go_to_the_host_and_come_back_typed_as_here(tmp_path: Path) -> None:
    db = _database(tmp_path / "a.db")
    asked: list[tuple[str, str]] = []
    remote = _connection(db, asked)
    local = sqlite3.connect(db)
    sql = "SELECT id, name, data FROM t WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id"
    params = ("[1, 2]",)
    assert remote.execute(sql, params).fetchall() == local.execute(sql, params).fetchall()
    assert asked == [query_key(sql, params)]
    named = "SELECT name FROM t WHERE id = :id"
    assert remote.execute(named, {"id": 2}).fetchall() == local.execute(named, {"id": 2}).fetchall()
    remote.text_factory = bytes
    local.text_factory = bytes
    assert remote.execute("SELECT name FROM t").fetchall() \
        == local.execute("SELECT name FROM t").fetchall()
    cursor = remote.execute("SELECT id FROM t ORDER BY id")
    assert cursor.fetchone() == (1,) and list(cursor) == [(2,)] and cursor.fetchone() is None


def test_text_that_is_not_utf8_fails_as_sqlite_fails_unless_the_reader_decodes(
    tmp_path: Path,
) -> None:
    db = _database(tmp_path / "a.db")
    with sqlite3.connect(db) as writer:
        writer.execute("UPDATE t SET name = CAST(x'ff41' AS TEXT) WHERE id = 1")
    writer.close()
    remote, local = _connection(db), sqlite3.connect(db)
    for connection in (remote, local):
        with pytest.raises(sqlite3.OperationalError):
            connection.execute("SELECT name FROM t WHERE id = 1").fetchall()
        connection.text_factory = lambda data: data.decode("utf-8", errors="replace")
        assert connection.execute("SELECT name FROM t WHERE id = 1").fetchall() == [("\ufffdA",)]


def test_the_host_refuses_a_query_that_would_reach_another_file(tmp_path: Path) -> None:
    db = _database(tmp_path / "a.db")
    other = _database(tmp_path / "other.db")
    host = _host()
    answer = host["sqlite_query"](str(db), f"ATTACH DATABASE '{other}' AS o", "[]")
    assert "error" in answer
    assert "error" in host["sqlite_query"](str(db), "PRAGMA journal_mode=delete", "[]")
    copy = tmp_path / "copy.db"
    assert "error" in host["sqlite_query"](str(db), f"VACUUM INTO '{copy}'", "[]")
    assert not copy.exists(), "a read-only connection may still write a copy: refused"
    remote = _connection(db)
    with pytest.raises(sqlite3.DatabaseError):
        remote.execute(f"ATTACH DATABASE '{other}' AS o")


def test_the_host_bounds_a_querys_rows(tmp_path: Path) -> None:
    db = _database(tmp_path / "a.db")
    with sqlite3.connect(db) as writer:
        writer.executemany("INSERT INTO t (name) VALUES (?)", [("x" * 1000,)] * 10)
    writer.close()
    remote = _connection(db)  # 4 KiB of rows at most here
    with pytest.raises(HarnessCapabilityError) as caught:
        remote.execute("SELECT name FROM t").fetchall()
    assert caught.value.kind is ErrorKind.OUTPUT_LIMIT


@pytest.mark.parametrize("wal", [False, True], ids=["rollback journal", "WAL"])
def test_reading_on_the_host_creates_no_file_beside_the_database(
    tmp_path: Path, wal: bool
) -> None:
    db = _database(tmp_path / "a.db", wal=wal)
    before = sorted(os.listdir(tmp_path))
    remote = _connection(db)
    assert remote.execute("SELECT count(*) FROM t").fetchall() == [(2,)]
    assert sorted(os.listdir(tmp_path)) == before


def test_what_is_not_a_database_has_no_schema(tmp_path: Path) -> None:
    host = _host()
    (tmp_path / "garbage").write_bytes(b"not a database at all")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "empty").write_bytes(b"")
    assert host["sqlite_header"](str(tmp_path / "garbage")) is None
    assert host["sqlite_header"](str(tmp_path / "fifo")) is None  # and did not block
    assert "error" in host["sqlite_schema"](str(tmp_path / "fifo"))
    assert host["sqlite_schema"](str(tmp_path / "empty")) == {"objects": []}
    with pytest.raises(HarnessCapabilityError) as caught:
        RemoteConnection(harness="test", schema=host["sqlite_schema"](str(tmp_path / "garbage")),
                         ask=lambda sql, params: None)
    assert caught.value.kind is ErrorKind.STORAGE_CHANGED


def _round(requests: list[list[Any]], *, limit: int) -> list[list[Any]]:
    """One round of the host program, run here as the host runs it (``python3 -``,
    the program on stdin), its answer bounded by ``limit`` bytes."""
    payload = base64.b64encode(json.dumps(requests).encode()).decode()
    program = (PROGRAM.replace("__BUDGET__", "0").replace("__HEAD__", "1024")
               .replace("__TAIL__", "1024").replace("__LIMIT__", str(limit))
               .replace("__QUERY_BYTES__", str(1 << 20)).replace("__REQUESTS__", payload))
    done = subprocess.run([sys.executable, "-I", "-"], input=program.encode(),
                          capture_output=True, check=True, timeout=60)
    answer: list[list[Any]] = json.loads(zlib.decompress(base64.b64decode(done.stdout)))
    return answer


def test_past_the_bound_only_an_answer_that_can_say_so_overflows(tmp_path: Path) -> None:
    db = _database(tmp_path / "a.db")
    with sqlite3.connect(db) as writer:
        writer.executemany("INSERT INTO t (name) VALUES (?)",
                           [(os.urandom(300).hex(),) for _ in range(200)])
    writer.close()
    # A small file whose bytes alone pass this bound: the answer is sent past it
    # (the transport's cap decides) rather than say the file is not there.
    small = tmp_path / "config.toml"
    small.write_text(os.urandom(2000).hex())
    answers = _round([["read_small", str(small), 8192],
                      ["sqlite", str(db), "SELECT name FROM t", "[]"]], limit=2048)
    by_op = {op: value for op, _, value in answers}
    assert by_op["read_small"] == small.read_text(), "a small file's bytes are never dropped"
    assert by_op["sqlite"] == {"error": "too-large"}
