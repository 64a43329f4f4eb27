"""The deck's seen watermark: per terminal, the highest revision the person has seen.

The only state the deck keeps that the grid does not have. It lives in one
small JSON file in clanker's state directory, shared by every deck of the user,
so it survives a restart of the deck and two decks open at once agree:

- a write is a merge under a lock (``<file>.lock``): read the file afresh, keep
  the higher revision of each terminal, replace the file atomically. Two decks
  marking at once both keep their marks, and a deck holding an older picture
  never lowers a newer mark;
- a reader notices another deck's write with one ``stat`` (the atomic replace
  gives the file a new inode, time and size) and only then reads it.

It never reaches the grid: seeing a completion never changes an agent's lifecycle.
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from clanker.locking import LockTimeoutError, UnsafeLockError, exclusive
from clanker.storage import write_json_atomic

__all__ = ["SeenMarks"]

_MAX_MARKS: Final = 4096
_MAX_FILE: Final = 1024 * 1024
_LOCK_WAIT: Final = 5.0

_Stamp = tuple[int, int, int, int]


def _stamp(status: os.stat_result) -> _Stamp:
    return status.st_dev, status.st_ino, status.st_mtime_ns, status.st_size


class SeenMarks:
    """Seen watermarks, read from and saved to ``path``.

    A missing or unreadable file is an empty watermark (nothing seen): the
    deck then shows every completion, which loses nothing. A save that cannot
    take the lock or write keeps the mark in memory; the next one writes it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = path.with_name(path.name + ".lock")
        # The file last read, held open: its inode cannot be reused by a later
        # write while it is held, so "same inode, time and size" means unchanged.
        self._held: weakref.finalize[[int], SeenMarks] | None = None
        self._stamp: _Stamp | None = None
        self._marks: dict[str, int] = {}
        self.refresh()
        # Terminals this deck may forget once they are no longer live: the file's
        # at start (the grid knew them before this deck subscribed), then those it
        # was last shown live. A mark another deck just made for an agent this deck
        # has not shown yet is never among them.
        self._forgettable: set[str] = set(self._marks)

    def _read(self) -> dict[str, int]:
        """Open the file afresh, hold it, and return its marks."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._stamp = None
            return {}
        if self._held is not None:
            self._held()  # closes the one held before
        self._held = weakref.finalize(self, os.close, fd)
        try:
            self._stamp = _stamp(os.fstat(fd))
            with os.fdopen(os.dup(fd), "rb") as handle:
                data = json.loads(handle.read(_MAX_FILE))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items()
                if isinstance(k, str) and type(v) is int and v > 0}

    def _merge(self, marks: Mapping[str, int]) -> bool:
        rose = False
        for terminal, revision in marks.items():
            if revision > self._marks.get(terminal, 0):
                self._marks[terminal] = revision
                rose = True
        return rose

    def refresh(self) -> bool:
        """Take up what another deck saved if the file changed since it was last read
        (one ``stat`` when it did not); say whether any mark rose. Marks only rise."""
        try:
            now: _Stamp | None = _stamp(os.stat(self.path))
        except OSError:
            now = None
        if now == self._stamp:
            return False
        return self._merge(self._read())

    @property
    def marks(self) -> Mapping[str, int]:
        return dict(self._marks)

    def mark(self, terminal: str, revision: int, *, live: Iterable[str] = ()) -> bool:
        """Record that ``terminal`` was seen up to ``revision`` and save it; with
        ``live`` (the agents shown now), forget the retired ones. Say whether
        anything changed."""
        if revision <= self._marks.get(terminal, 0):
            return False
        self._marks[terminal] = revision
        keep = set(live)
        gone: set[str] = set()
        if keep:
            gone = self._forgettable - keep - {terminal}
            self._forgettable = keep | {terminal}
        self._save(gone)
        return True

    def _save(self, gone: set[str]) -> None:
        try:
            with exclusive(self._lock, timeout=_LOCK_WAIT):
                self._merge(self._read())
                for terminal in gone:
                    self._marks.pop(terminal, None)
                if len(self._marks) > _MAX_MARKS:  # bounded: the oldest ids are dropped first
                    self._marks = dict(list(self._marks.items())[-_MAX_MARKS:])
                write_json_atomic(self.path, self._marks, fsync=False)
                self._read()  # hold what was just written: nothing new to take up
        except (LockTimeoutError, UnsafeLockError, OSError):
            return  # kept in memory; the next mark merges it into the file
