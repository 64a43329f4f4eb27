"""Reading a harness's SQLite store: read-only, bounded, schema-checked.

A harness owns its database and may be writing to it right now. clanker opens
it read-only (never creating it), with a busy timeout, and checks that every
column it reads exists with the expected name before running a query: a
changed schema is a typed ``storage-changed`` error, never a guess.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import quote

from clanker.errors import ErrorKind, HarnessCapabilityError

__all__ = ["open_readonly", "require_columns"]

_BUSY_TIMEOUT_MS = 2000


@contextlib.contextmanager
def open_readonly(path: Path, *, harness: str) -> Iterator[sqlite3.Connection]:
    """Open ``path`` read-only; a missing file is for the caller to check first.

    A WAL database needs its ``-shm`` file even to be read. When the directory
    is not writable (so the harness cannot be writing either), the database is
    opened as immutable instead, which needs no side files.
    """
    uri = f"file:{quote(str(path))}?mode=ro"
    if not os.access(path.parent, os.W_OK) and not Path(f"{path}-shm").exists():
        uri += "&immutable=1"
    try:
        connection = sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise HarnessCapabilityError(
            ErrorKind.STORAGE_CHANGED, "the history database cannot be opened", harness=harness,
            cause=exc,
        ) from exc
    try:
        connection.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        yield connection
    except sqlite3.DatabaseError as exc:
        raise HarnessCapabilityError(
            ErrorKind.STORAGE_CHANGED, "the history database could not be read", harness=harness,
            cause=exc,
        ) from exc
    finally:
        connection.close()


def require_columns(
    connection: sqlite3.Connection,
    tables: Mapping[str, frozenset[str]],
    *,
    harness: str,
) -> None:
    """Raise ``storage-changed`` unless every table has at least these columns."""
    for table, columns in tables.items():
        rows = connection.execute(f"PRAGMA table_info({_identifier(table)})").fetchall()
        present = {row[1] for row in rows}
        missing = sorted(columns - present)
        if not rows or missing:
            raise HarnessCapabilityError(
                ErrorKind.STORAGE_CHANGED,
                f"table {table} lacks {', '.join(missing) or 'everything'}",
                harness=harness,
            )


def _identifier(name: str) -> str:
    if not name.replace("_", "").isalnum():
        raise ValueError(f"not an identifier: {name!r}")
    return f'"{name}"'
