"""A per-file cache of parsed session summaries, in memory and on disk.

Keyed by path plus (size, mtime, inode): an appended, replaced or rewritten
file is parsed again, an unchanged one never is. Files that were not sessions
are remembered too, so a corrupt file costs one parse, not one per listing, and
so are files that hold no conversation yet (:data:`~clanker.sessions.types.EMPTY`).
The disk copy is a cache: unreadable, foreign or corrupt means empty, and so
does anything that is not a regular file (a link, a FIFO, a directory: see
:func:`clanker.storage.read_own_file`); the next save replaces it.

The disk format is a list of fixed-position rows rather than objects: a
listing may load tens of thousands of them, and each row is still checked
strictly (exact types, no coercion, no extra or missing fields), just without
a generic converter's per-field cost.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from clanker._logging import get_logger
from clanker.ids import HarnessId
from clanker.sessions.types import HarnessSession, NoSession
from clanker.storage import read_json, write_bytes_atomic

if TYPE_CHECKING:
    from clanker.environment.witness import FileStat

__all__ = ["MISS", "SummaryCache"]

log = get_logger(__name__)

# 4: a row may end in "empty" (a file that holds no conversation yet).
# 5: or in "foreign" (another harness's file); the document says how files were
# read.
_VERSION: Final = 5
_MAX_CACHE_FILE: Final = 64 * 1024 * 1024
_ROWS_PER_PIECE: Final = 256
"""Rows encoded and written at a time: a few tens of KB each."""
MISS: Final = object()

_Summary = HarnessSession | NoSession | None
_Entry = tuple[int, int, int, _Summary]
"""size, mtime_ns, inode, summary: one flat tuple per file (a listing holds thousands)."""
_MARKS: Final = {NoSession.EMPTY.value: NoSession.EMPTY,
                  NoSession.FOREIGN.value: NoSession.FOREIGN}
# path, size, mtime_ns, inode, then nothing (not a session), "empty" (no
# conversation yet), "foreign" (another harness's), or native_id, updated, title,
# cwd, created, model, message_count, parent_id, hidden
_SESSION_TYPES: Final[tuple[tuple[type, ...], ...]] = (
    (str,), (float, int), (str, type(None)), (str, type(None)), (float, int, type(None)),
    (str, type(None)), (int, type(None)), (str, type(None)), (bool,),
)


def _row(path: str, entry: _Entry) -> list[Any]:
    size, mtime_ns, inode, session = entry
    row: list[Any] = [path, size, mtime_ns, inode]
    if isinstance(session, NoSession):
        row.append(session.value)
    elif isinstance(session, HarnessSession):
        row += [
            session.native_id, session.updated_at.timestamp(), session.title, session.cwd,
            session.created_at.timestamp() if session.created_at else None, session.model,
            session.message_count, session.parent_id, session.hidden,
        ]
    return row


# Every exact type sequence a session row may have: one set lookup checks a row
# (a listing loads tens of thousands). Exact types, not isinstance: True is not
# an int, 1 is not a bool.
_SESSION_SHAPES: Final = frozenset(itertools.product(*_SESSION_TYPES))
_IDENTITY: Final = (str, int, int, int)


def _session(harness: HarnessId, path: str, fields: list[Any],
             shared: dict[str | None, str | None] | None = None) -> HarnessSession:
    """The session of one row's fields; its ``cwd`` and ``model`` the equal strings
    ``shared`` holds, when given (a store has few of either, and the decoder makes
    one string per row)."""
    if tuple(map(type, fields)) not in _SESSION_SHAPES:
        raise ValueError("cache row: unexpected shape")
    native_id, updated, title, cwd, created, model, count, parent, hidden = fields
    if shared is not None:
        cwd, model = shared.setdefault(cwd, cwd), shared.setdefault(model, model)
    return HarnessSession(
        harness=harness, native_id=native_id, updated_at=datetime.fromtimestamp(updated, UTC),
        title=title, cwd=cwd,
        created_at=None if created is None else datetime.fromtimestamp(created, UTC),
        model=model, message_count=count, parent_id=parent, store_path=path, hidden=hidden,
    )


class SummaryCache:
    """Summaries of one harness's session files.

    ``path`` is where the disk copy lives; ``None`` keeps it in memory only.
    """

    def __init__(self, harness: HarnessId, path: Path | None) -> None:
        self._harness = harness
        self._path = path
        self._entries: dict[str, _Entry] = {}
        self._seen: set[str] = set()
        self._dirty = False
        self._reading = ""
        if path is not None:
            try:
                self._load(path)
            except Exception as exc:  # a cache is never a reason to fail: start afresh
                log.debug("sessions cache %s discarded: %s", path, type(exc).__name__)
                self._entries = {}

    def bind(self, reading: str) -> None:
        """Say how the files are read now, beside their contents: a provider whose
        summary of a file depends on more than the file (which directories another
        harness shares, say) names that here, and summaries made under another
        reading are dropped."""
        if reading != self._reading:
            if self._entries:
                self._entries = {}
                self._dirty = True
            self._reading = reading

    def lookup(self, path: str, stat: FileStat) -> _Summary | object:
        """Return the cached summary (``None`` for a known non-session, a
        :class:`~clanker.sessions.types.NoSession` for a file that is neither) or
        :data:`MISS`."""
        self._seen.add(path)
        entry = self._entries.get(path)
        if (entry is None or entry[1] != stat.st_mtime_ns or entry[0] != stat.st_size
                or entry[2] != stat.st_ino):
            return MISS
        return entry[3]

    def store(self, path: str, stat: FileStat, session: _Summary) -> None:
        self._seen.add(path)
        self._entries[path] = (stat.st_size, stat.st_mtime_ns, stat.st_ino, session)
        self._dirty = True

    def refresh(self, path: str, session: HarnessSession) -> None:
        """Replace a cached summary by an equivalent copy (placement changed), in memory,
        kept under ``path`` itself: the walk's string, which the copy and the scan's
        witness hold too. Assigning to the entry would keep its old key, an equal string
        read from the disk copy: one more copy of every path in a listing from it."""
        entry = self._entries.pop(path, None)
        if entry is not None:
            self._entries[path] = (*entry[:3], session)

    def forget_unseen(self) -> None:
        """Drop entries for files not looked up since the last call (deleted sessions)."""
        vanished = self._entries.keys() - self._seen
        for path in vanished:
            del self._entries[path]
        self._dirty = self._dirty or bool(vanished)
        self._seen.clear()

    def save(self) -> None:
        """Write the disk copy if anything changed; a failure costs re-parsing, nothing more."""
        if self._path is None or not self._dirty:
            return
        # ValueError: a string no UTF-8 holds (none is kept: scan_files skips such paths).
        with contextlib.suppress(OSError, ValueError):
            write_bytes_atomic(self._path, self._document(), fsync=False)  # rebuildable
            self._dirty = False

    def _document(self) -> Iterator[bytes]:
        """The disk copy, in pieces of :data:`_ROWS_PER_PIECE` rows: the text of one
        compact ``json.dumps`` of the whole document, without that string and every row
        built at once (together five times the file's size, the largest thing a cold
        listing held). msgspec's encoder writes it in a tenth of the standard library's
        time (0.6-0.8 ms against 6.3-7.3 ms for 3,334 rows): the scanning thread writes
        it between two stores, while the summary worker has nothing to do."""
        from msgspec.json import encode  # on first save: unchanged stores write nothing

        head = {"version": _VERSION, "harness": self._harness, "reading": self._reading}
        yield encode(head)[:-1] + b',"rows":['
        entries = iter(self._entries.items())
        separator = b""
        while piece := [_row(path, entry)
                        for path, entry in itertools.islice(entries, _ROWS_PER_PIECE)]:
            yield separator + encode(piece)[1:-1]  # the rows without their list's brackets
            separator = b","
        yield b"]}"

    def _load(self, path: Path) -> None:
        data = read_json(path, max_bytes=_MAX_CACHE_FILE)
        if (
            not isinstance(data, dict)
            or data.keys() != {"version", "harness", "reading", "rows"}
            or data["version"] != _VERSION
            or data["harness"] != self._harness
            or not isinstance(data["reading"], str)
            or not isinstance(data["rows"], list)
        ):
            return
        entries: dict[str, _Entry] = {}
        shared: dict[str | None, str | None] = {}
        rows = data["rows"]
        try:
            for index, row in enumerate(rows):
                rows[index] = None  # each decoded row freed as its entry is made
                if not isinstance(row, list) or len(row) < 4:
                    raise ValueError("cache row: too short")
                path_text, size, mtime_ns, inode = row[:4]
                if (type(path_text), type(size), type(mtime_ns), type(inode)) != _IDENTITY:
                    raise ValueError("cache row: bad identity")
                session: _Summary
                if len(row) == 4:
                    session = None
                elif len(row) == 5 and isinstance(row[4], str) and row[4] in _MARKS:
                    session = _MARKS[row[4]]
                else:
                    session = _session(self._harness, path_text, row[4:], shared)
                entries[path_text] = (size, mtime_ns, inode, session)
        except (ValueError, TypeError, OverflowError, OSError):
            return  # one bad row makes the whole file suspect: start afresh
        self._entries = entries
        self._reading = data["reading"]
