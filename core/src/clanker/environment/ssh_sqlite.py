"""A harness's SQLite store on an SSH host, read within a scan's rounds.

A provider reads its database through a connection and asks its next query
from the last one's rows, as it does locally. Over SSH a query cannot be an
execution of its own, so the connection handed out here answers from what the
rounds fetched (:class:`~clanker.environment.ssh_scan.RemoteFiles`):

* the database's *schema* comes with the status of the file: a round that
  answers ``stat`` of a regular file that starts as an SQLite database also
  sends its ``sqlite_master`` rows (:data:`HOST_PART`). Those rows are
  replayed into an empty in-memory database here (a *schema clone*), so
  the column checks a provider makes (``PRAGMA table_info``,
  ``sqlite_master``) are answered without a round, exactly;
* any other query (one that reads a table of the harness) is run on the host
  in the next round, read-only, its rows bounded (:data:`MAX_QUERY_BYTES`),
  and answered from then on. Until then it has no rows: the pass that asked is
  not the scan's answer (the rounds run it again), so its other reads are
  recorded in the same round instead of one round later each.

On the host the database is opened read-only (``mode=ro``), and as immutable
(no side files created) when it is in WAL mode without both its ``-wal`` and
``-shm`` files, or when its directory is not writable and it has no ``-shm``:
reading it never creates a file beside it. A query may only read (an
authorizer there refuses anything else, ``ATTACH`` included).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

from clanker.errors import ErrorKind, HarnessCapabilityError

__all__ = ["HOST_PART", "MAX_QUERY_BYTES", "RemoteConnection", "decode_rows", "query_key"]

MAX_QUERY_BYTES: Final = 2 * 1024 * 1024
"""The most one query's rows may take (as sent, before compression)."""

# The program's SQLite part (see ssh_scan.PROGRAM, which it is joined to).
HOST_PART: Final = r'''
SQLITE_MAGIC = b"SQLite format 3\x00"
MAX_SCHEMA = 512
MAX_QUERY_BYTES = __QUERY_BYTES__
READ_PRAGMAS = {"table_info", "table_xinfo", "index_list", "index_info", "busy_timeout",
                "user_version"}

def sqlite_header(path):
    head = read_regular(path, lambda fd: os.pread(fd, 100, 0))
    # An empty file is what SQLite takes for an empty database.
    return head if head is not None and (head.startswith(SQLITE_MAGIC) or not head) else None

def sqlite_open(path):
    try:
        import sqlite3
    except ImportError:
        raise LookupError("no-sqlite3")
    from urllib.parse import quote
    head = sqlite_header(path)
    if head is None:
        raise ValueError("not an SQLite database")
    uri = "file:" + quote(path) + "?mode=ro"
    wal = len(head) > 19 and head[18] == 2
    sides = os.path.exists(path + "-wal") and os.path.exists(path + "-shm")
    writable = os.access(os.path.dirname(path) or ".", os.W_OK)
    if (wal and not sides) or (not writable and not os.path.exists(path + "-shm")):
        uri += "&immutable=1"
    connection = sqlite3.connect(uri, uri=True, timeout=2.0)

    # The connection is read-only already; this keeps a query from attaching
    # another file or changing how the database is opened.
    def authorize(action, arg1, arg2, database, trigger):
        if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() not in READ_PRAGMAS:
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    connection.set_authorizer(authorize)
    # Text and blobs kept apart, both as bytes: the reader decodes as it asked.
    connection.text_factory = lambda data: ("t", data)
    return connection

def sqlite_connect(path):
    # The connection, or None and the answer that says why there is none.
    try:
        return sqlite_open(path), None
    except LookupError:
        return None, {"error": "no-sqlite3"}
    except Exception as exc:
        return None, {"error": type(exc).__name__}

def sqlite_value(value):
    if isinstance(value, tuple):
        return ["t", raw(value[1])]
    if isinstance(value, bytes):
        return ["b", raw(value)]
    return value

def sqlite_schema(path):
    connection, refused = sqlite_connect(path)
    if connection is None:
        return refused
    try:
        rows = connection.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master LIMIT ?",
            (MAX_SCHEMA + 1,)).fetchall()
    except Exception as exc:
        return {"error": type(exc).__name__}
    finally:
        connection.close()
    if len(rows) > MAX_SCHEMA:
        return {"error": "too-large"}
    return {"objects": [[sqlite_value(v) for v in row] for row in rows]}

def sqlite_query(path, sql, params):
    connection, refused = sqlite_connect(path)
    if connection is None:
        return refused
    rows = []
    spent = 0
    try:
        cursor = connection.execute(sql, json.loads(params))
        for row in cursor:
            values = [sqlite_value(v) for v in row]
            spent += len(json.dumps(values, ensure_ascii=False))
            if spent > MAX_QUERY_BYTES:
                return {"error": "too-large"}
            rows.append(values)
    except Exception as exc:
        return {"error": type(exc).__name__, "message": str(exc)[:200]}
    finally:
        connection.close()
    return {"rows": rows}
'''

# Tables every SQLite database has, which a schema clone has of its own.
_SCHEMA_TABLES: Final = frozenset({"sqlite_master", "sqlite_schema", "sqlite_temp_master",
                                   "sqlite_temp_schema"})
# Pragmas the clone answers as the host's database would: its tables' columns, and
# the busy timeout (the host's query has its own).
_CLONE_PRAGMAS: Final = frozenset({"table_info", "table_xinfo", "busy_timeout"})


def query_key(sql: str, params: Sequence[Any] | Mapping[str, Any] | None) -> tuple[str, str]:
    """The (hashable) form a query is asked for and answered by: its text and its
    parameters as JSON (positional or named; a value JSON cannot carry, bytes
    say, is a ``TypeError``)."""
    if isinstance(params, Mapping):
        return sql, json.dumps(dict(params), sort_keys=True)
    return sql, json.dumps(list(params or ()))


def _value(value: Any, text: Callable[[bytes], Any]) -> Any:
    if isinstance(value, list):
        tag, data = value
        raw = str(data).encode("latin-1")
        return text(raw) if tag == "t" else raw
    return value


def _utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:  # what sqlite3 itself says
        raise sqlite3.OperationalError("Could not decode to UTF-8") from exc


def decode_rows(rows: list[list[Any]], text_factory: Any) -> list[tuple[Any, ...]]:
    """Rows as the host sent them, in the types a local cursor gives."""
    text: Callable[[bytes], Any]
    if text_factory is str:
        text = _utf8
    elif text_factory is bytes:
        text = bytes
    else:
        text = text_factory
    return [tuple(_value(v, text) for v in row) for row in rows]


class _Cursor:
    """The rows of one query, as much of :class:`sqlite3.Cursor` as readers use."""

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows
        self._next = 0

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[tuple[Any, ...]]:
        rest = self._rows[self._next:]
        self._next = len(self._rows)
        return rest

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        while (row := self.fetchone()) is not None:
            yield row


def _schema_error(harness: str, code: str) -> HarnessCapabilityError:
    if code == "no-sqlite3":
        return HarnessCapabilityError(
            ErrorKind.NOT_CONFIGURED,
            "reading this store on the host needs Python's sqlite3 module there",
            harness=harness)
    if code == "too-large":
        return HarnessCapabilityError(
            ErrorKind.OUTPUT_LIMIT, "the history database's schema is larger than clanker "
            "reads on a host", harness=harness)
    return HarnessCapabilityError(ErrorKind.STORAGE_CHANGED,
                                  "the history database cannot be opened", harness=harness)


class RemoteConnection:
    """What :meth:`RemoteFiles.sqlite` hands a provider in place of a connection:
    ``execute(sql, parameters)`` (positional or named, values JSON carries) whose
    cursor has ``fetchone``, ``fetchall`` and iteration, and ``text_factory``.

    ``schema`` is the host's ``sqlite_master`` rows; ``ask(sql, params)`` returns
    the host's answer to a query (``None``: not fetched yet, recorded for the
    next round; in the last pass it raises instead).
    """

    def __init__(self, *, harness: str, schema: dict[str, Any],
                 ask: Callable[[str, str], dict[str, Any] | None]) -> None:
        if "error" in schema:
            raise _schema_error(harness, str(schema["error"]))
        self._harness = harness
        self._ask = ask
        self.text_factory: Any = str
        self._clone = _clone(schema.get("objects") or [])

    def execute(self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] = ()) -> _Cursor:
        local = self._on_clone(sql, parameters)
        if local is not None:
            return _Cursor(local)
        answer = self._ask(*query_key(sql, parameters))
        if answer is None:
            return _Cursor([])  # this pass is not the answer: the next round has the rows
        if "rows" in answer:
            return _Cursor(decode_rows(answer["rows"], self.text_factory))
        code = str(answer.get("error"))
        if code == "too-large":
            raise HarnessCapabilityError(
                ErrorKind.OUTPUT_LIMIT,
                "a query of the history database answers more than clanker reads on a host",
                harness=self._harness)
        if code == "no-sqlite3":
            raise _schema_error(self._harness, code)
        raise sqlite3.DatabaseError(f"{code} on the host")

    def _on_clone(self, sql: str, parameters: Sequence[Any] | Mapping[str, Any]
                  ) -> list[tuple[Any, ...]] | None:
        """The rows of a query that reads only the schema, or ``None`` for the host's."""
        reads_data = False

        def authorize(action: int, arg1: str | None, arg2: str | None,
                      database: str | None, trigger: str | None) -> int:
            nonlocal reads_data
            name = (arg1 or "").lower()
            if action == sqlite3.SQLITE_READ:
                reads_data = reads_data or name not in _SCHEMA_TABLES
            elif action == sqlite3.SQLITE_PRAGMA:
                reads_data = reads_data or name not in _CLONE_PRAGMAS
            elif action == sqlite3.SQLITE_UPDATE:  # how SQLite loads a schema
                reads_data = reads_data or name not in _SCHEMA_TABLES
            elif action not in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION):
                reads_data = True
            return sqlite3.SQLITE_DENY if reads_data else sqlite3.SQLITE_OK

        self._clone.set_authorizer(authorize)
        try:
            rows = self._clone.execute(sql, parameters).fetchall()
        except sqlite3.Error:
            if reads_data:
                return None
            raise  # a query the host's database would refuse as well
        finally:
            self._clone.set_authorizer(None)
        return None if reads_data else rows

    def close(self) -> None:
        self._clone.close()


def _clone(objects: list[list[Any]]) -> sqlite3.Connection:
    """An empty database with the host's tables and views (what cannot be made
    here, a virtual table of a module this Python lacks, is left out)."""
    clone = sqlite3.connect(":memory:")
    rows = decode_rows(objects, bytes)
    for wanted in ("table", "view"):
        for kind, name, _, sql in rows:
            if kind != wanted.encode() or not isinstance(sql, bytes) \
                    or name.startswith(b"sqlite_"):
                continue
            with contextlib.suppress(sqlite3.Error, UnicodeDecodeError):
                clone.execute(sql.decode("utf-8"))
    return clone
