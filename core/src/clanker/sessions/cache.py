"""A per-file cache of parsed session summaries, in memory and on disk.

Keyed by path plus (size, mtime, inode): an appended, replaced or rewritten
file is parsed again, an unchanged one never is. Files that were not sessions
are remembered too, so a corrupt file costs one parse, not one per listing.
The disk copy is a cache: unreadable, foreign or corrupt means empty.
"""

from __future__ import annotations

import contextlib
import os
from datetime import datetime
from pathlib import Path
from typing import Final

from attrs import frozen

from clanker.converters import BoundaryError, make_boundary_converter, structure
from clanker.ids import HarnessId
from clanker.sessions.types import HarnessSession
from clanker.storage import read_json, write_json_atomic

__all__ = ["MISS", "SummaryCache"]

_VERSION: Final = 2
_MAX_CACHE_FILE: Final = 64 * 1024 * 1024
MISS: Final = object()
_converter = make_boundary_converter()


@frozen(kw_only=True)
class _Entry:
    path: str
    size: int
    mtime_ns: int
    inode: int
    native_id: str | None
    updated_at: datetime | None
    title: str | None
    cwd: str | None
    created_at: datetime | None
    model: str | None
    message_count: int | None
    parent_id: str | None
    hidden: bool


@frozen(kw_only=True)
class _File:
    version: int
    harness: str
    entries: tuple[_Entry, ...]


def _identity(stat: os.stat_result) -> tuple[int, int, int]:
    return (stat.st_size, stat.st_mtime_ns, stat.st_ino)


class SummaryCache:
    """Summaries of one harness's session files.

    ``path`` is where the disk copy lives; ``None`` keeps it in memory only.
    """

    def __init__(self, harness: HarnessId, path: Path | None) -> None:
        self._harness = harness
        self._path = path
        self._entries: dict[str, tuple[tuple[int, int, int], HarnessSession | None]] = {}
        self._seen: set[str] = set()
        self._dirty = False
        if path is not None:
            self._load(path)

    def lookup(self, path: str, stat: os.stat_result) -> HarnessSession | object | None:
        """Return the cached summary (``None`` for a known non-session) or :data:`MISS`."""
        self._seen.add(path)
        entry = self._entries.get(path)
        if entry is None or entry[0] != _identity(stat):
            return MISS
        return entry[1]

    def store(self, path: str, stat: os.stat_result, session: HarnessSession | None) -> None:
        self._seen.add(path)
        self._entries[path] = (_identity(stat), session)
        self._dirty = True

    def refresh(self, path: str, session: HarnessSession) -> None:
        """Replace a cached summary by an equivalent copy (placement changed), in memory."""
        entry = self._entries.get(path)
        if entry is not None:
            self._entries[path] = (entry[0], session)

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
        entries = []
        for path, ((size, mtime_ns, inode), s) in self._entries.items():
            entries.append(_Entry(
                path=path, size=size, mtime_ns=mtime_ns, inode=inode,
                native_id=s.native_id if s else None, updated_at=s.updated_at if s else None,
                title=s.title if s else None, cwd=s.cwd if s else None,
                created_at=s.created_at if s else None, model=s.model if s else None,
                message_count=s.message_count if s else None, parent_id=s.parent_id if s else None,
                hidden=s.hidden if s else False,
            ))
        record = _File(version=_VERSION, harness=self._harness, entries=tuple(entries))
        with contextlib.suppress(OSError):
            write_json_atomic(self._path, _converter.unstructure(record))
            self._dirty = False

    def _load(self, path: Path) -> None:
        data = read_json(path, max_bytes=_MAX_CACHE_FILE)
        if data is None:
            return
        try:
            record = structure(_converter, data, _File)
        except BoundaryError:
            return
        if record.version != _VERSION or record.harness != self._harness:
            return
        for entry in record.entries:
            session = None
            if entry.native_id is not None and entry.updated_at is not None:
                try:
                    session = HarnessSession(
                        harness=self._harness, native_id=entry.native_id,
                        updated_at=entry.updated_at, title=entry.title, cwd=entry.cwd,
                        created_at=entry.created_at, model=entry.model,
                        message_count=entry.message_count, parent_id=entry.parent_id,
                        store_path=entry.path, hidden=entry.hidden,
                    )
                except (ValueError, TypeError):
                    continue  # an entry this version cannot represent is re-parsed
            self._entries[entry.path] = ((entry.size, entry.mtime_ns, entry.inode), session)
