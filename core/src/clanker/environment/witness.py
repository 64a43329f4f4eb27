"""Proof that what a scan read is unchanged since.

A second listing of an unchanged store should cost one ``stat`` per file, not
a walk, a sort and thousands of cache lookups. A :class:`Witness` records the
identity of everything a scan read (every directory it listed, every file it
chose, every path it found missing); while all of them still look the same,
the scan's answer still holds and :class:`ScanMemo` hands it back.

Why this is sound: a file that is appended, rewritten or replaced changes its
size, modification time, change time or inode; a file created, removed or
renamed changes its directory's times. One gap remains, the same one git
calls "racy": timestamps have a granularity, so a directory changed in the
same tick as it was listed can look unchanged afterwards. An input whose
times are that recent (a directory, an index database) makes the witness
unusable, and the next listing walks again.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Final, NamedTuple

__all__ = ["SETTLE_NS", "FileStat", "Witness", "file_stat", "seconds"]

SETTLE_NS: Final = 2_000_000_000
"""How old a directory's last change must be before its listing can be trusted.

Two seconds covers the coarsest common timestamps (FAT's, some network file
systems') as well as Linux's clock tick.
"""


def seconds(ns: int) -> float:
    """A time in nanoseconds as ``os.stat`` makes its float (seconds + nanoseconds *
    1e-9): the very float ``st_mtime`` is, whoever computes it."""
    whole, rest = divmod(ns, 10**9)
    return whole + rest * 1e-9


class FileStat(NamedTuple):
    """What a walk keeps of a file's ``lstat``: what proves it unchanged (its identity,
    size and times, in :meth:`Witness.holds`'s order) and what a sample needs.

    A listing holds one per file of every store, through the scan, the summary cache
    and the witness together: an ``os.stat_result`` with the numbers it makes is
    some 600 bytes, this one shares its five and adds about 80."""

    st_dev: int
    st_ino: int
    st_size: int
    st_mtime_ns: int
    st_ctime_ns: int

    @property
    def st_mtime(self) -> float:
        return seconds(self.st_mtime_ns)


def file_stat(stat: os.stat_result | FileStat) -> FileStat:
    """``stat``'s :class:`FileStat`."""
    if type(stat) is FileStat:
        return stat
    return FileStat(stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


class Witness:
    """What one scan read, and how each thing looked when it was read."""

    def __init__(self, *, settle_ns: int | None = None) -> None:
        settle = SETTLE_NS if settle_ns is None else settle_ns
        self._settled_before = time.time_ns() - settle
        self._inputs: list[tuple[str, FileStat]] = []  # checked through links
        # Chosen by a walk, never links: each file's path and the FileStat the walk
        # kept (the same tuple the scan holds: a listing records thousands).
        self._files: list[tuple[str, FileStat]] = []
        self._absent: list[str] = []
        self.usable = True
        self.unreadable = 0
        """Directories a walk could not list: counted as skips, and tried again next time."""
        """False when something was too fresh to trust, or could not be read."""

    def path(self, path: str | Path) -> None:
        """Record an input before it is read: a directory before it is listed, a
        config file, an index. Looked at through links, as reading it goes; a
        missing one is recorded as missing.

        Anything changed too recently to trust (see the module's note: a
        directory, or a database rewritten in place at the same size) makes
        the witness unusable, and so does an input that cannot be looked at.
        """
        try:
            stat = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            self._absent.append(os.fspath(path))
            return
        except OSError:
            self.usable = False
            return
        if max(stat.st_mtime_ns, stat.st_ctime_ns) > self._settled_before:
            self.usable = False
        self._inputs.append((os.fspath(path), file_stat(stat)))

    def unreadable_directory(self, path: str | Path) -> None:
        """Record a directory a walk could not list (its sessions are not in the answer)."""
        self.unreadable += 1
        self.usable = False

    def file(self, path: str, stat: os.stat_result | FileStat) -> None:
        """Record a session file a walk chose, with the ``lstat`` it was chosen by.

        These are not held to the settling rule: harnesses append to their
        transcripts, which always moves the size, and the newest one is being
        written whenever an agent works, so settling would turn the memo off
        just when listings are frequent. A same-size rewrite within one
        timestamp tick of the scan would go unseen, by the per-file summary
        cache as well.
        """
        self._files.append((path, file_stat(stat)))

    def recorded(self) -> tuple[list[str], list[str]]:
        """What was recorded: the inputs (directories listed, files read through
        links), then the files a walk chose and the paths found missing."""
        return ([path for path, _ in self._inputs],
                [entry[0] for entry in self._files] + self._absent)

    def seal(self) -> None:
        """Order the checks so a store in use fails fast: files newest first.

        The file an agent is writing to is almost always the newest, and a
        check that stops at it costs one stat instead of thousands.
        """
        self._files.sort(key=lambda entry: entry[1].st_mtime_ns, reverse=True)

    def holds(self) -> bool:
        """Say whether everything recorded still looks as it did."""
        # This is the whole cost of a warm listing: one stat per entry, so the
        # loops stay bare (no helper calls). Inputs first: a new session shows
        # in its directory, and there are few of them.
        stat, lstat = os.stat, os.lstat
        try:
            for path, seen in self._inputs:
                now = stat(path)
                if (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns,
                        now.st_ctime_ns) != seen:
                    return False
            for path, seen_file in self._files:
                now = lstat(path)
                if (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns,
                        now.st_ctime_ns) != seen_file:
                    return False
        except OSError:
            return False
        for path in self._absent:
            try:
                stat(path)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError:
                pass
            return False
        return True
