"""Bounded reading of session files: a head, a tail, never the whole file.

Session transcripts grow without limit (tool output, images, instructions),
so a parser sees at most ``head_bytes`` from the start and ``tail_bytes``
from the end. Lines cut by a bound are dropped, never half-parsed.
"""

from __future__ import annotations

import errno
import os
import queue
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from stat import S_ISREG
from typing import TYPE_CHECKING, Any, Final

from attrs import frozen

if TYPE_CHECKING:
    from os import _ScandirIterator as ScandirIterator

from clanker.environment.lines import LineRegion, decode_object
from clanker.environment.witness import FileStat, Witness, file_stat

__all__ = [
    "DEFAULT_HEAD_BYTES",
    "DEFAULT_TAIL_BYTES",
    "MAX_ENTRIES",
    "MAX_OPEN_FILES",
    "Candidate",
    "FileSample",
    "confined",
    "find_files",
    "head_and_tail",
    "read_sample",
]

DEFAULT_HEAD_BYTES: Final = 64 * 1024
DEFAULT_TAIL_BYTES: Final = 16 * 1024
MAX_OPEN_FILES: Final = 16

# At most MAX_OPEN_FILES samples are read at once, whatever the threads: a read takes a
# token and gives it back. A queue of tokens rather than a semaphore: its `get` and
# `put` are C, a semaphore's acquire and release Python (a microsecond a file).
_tokens: Final[queue.SimpleQueue[None]] = queue.SimpleQueue()
for _ in range(MAX_OPEN_FILES):
    _tokens.put(None)


@frozen(kw_only=True)
class FileSample:
    """The bounded view of one file that a parser gets."""

    path: Path
    size: int
    mtime: datetime
    head: bytes
    tail: bytes  # empty when the head already reached the end

    @property
    def whole(self) -> bool:
        """Whether the head is the entire file."""
        return len(self.head) >= self.size and not self.tail

    def head_lines(self) -> list[bytes]:
        """Complete lines at the start (a line cut by the bound is dropped)."""
        return _lines(head_and_tail(self)[0])

    def tail_lines(self) -> list[bytes]:
        """Complete lines at the end; the first is dropped, as it may be cut by the bound.

        When nothing was read past the head, the head's lines are the newest there are.
        """
        return _lines(head_and_tail(self)[1])

    def head_objects(self) -> Iterator[dict[str, Any]]:
        """JSON objects among the head lines, in order; anything else is passed over."""
        return _objects(self.head_lines())

    def tail_objects(self) -> Iterator[dict[str, Any]]:
        """JSON objects among the tail lines, last first."""
        return _objects(reversed(self.tail_lines()))


def head_and_tail(sample: FileSample, *, start: int = 0) -> tuple[LineRegion, LineRegion]:
    """The complete lines of the head (from byte ``start``, a line start) and of the tail.

    The head ends at its last newline unless it is the whole file. The tail's
    first line is always dropped: it may be cut by the bound (losing one whole
    line when the cut falls on a boundary is the price). When nothing was read
    past the head (the file is whole, or shrank), the tail *is* the head: the
    same object, so a line decoded through one is decoded for both, and
    ``tail is head`` says there is only one region.
    """
    # Written out rather than through FileSample.whole: this runs once per file
    # of every listing.
    buf, tail = sample.head, sample.tail
    hi = len(buf) if not tail and len(buf) >= sample.size else buf.rfind(b"\n") + 1
    head = LineRegion(buf, min(start, hi), hi)
    if not tail:
        return head, head
    newline = tail.find(b"\n")
    return head, LineRegion(tail, len(tail) if newline < 0 else newline + 1, len(tail))


def _lines(region: LineRegion) -> list[bytes]:
    buf = region.buf
    return [buf[start:end] for start, end in region.spans()]


def _objects(lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    for line in lines:
        value = decode_object(line)
        if value is not None:
            yield value


def read_sample(
    path: Path,
    *,
    head_bytes: int = DEFAULT_HEAD_BYTES,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
    stat: os.stat_result | FileStat | None = None,
) -> FileSample:
    """Read the head and tail of ``path`` (a regular file, not followed through a link).

    Raises :class:`OSError` when it cannot be read, or is no longer a regular
    file (replaced by a FIFO since the walk, say: opened without blocking, then
    checked); callers count that as a skip.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    _tokens.get()
    try:
        fd = os.open(path, flags)
        try:
            opened = os.fstat(fd)
            if not S_ISREG(opened.st_mode):
                raise OSError(errno.EINVAL, "not a regular file", str(path))
            info: os.stat_result | FileStat = opened if stat is None else stat
            head = os.pread(fd, head_bytes, 0)
            tail = b""
            if info.st_size > head_bytes:
                start = max(info.st_size - tail_bytes, head_bytes)
                tail = os.pread(fd, info.st_size - start, start)
        finally:
            os.close(fd)
    finally:
        _tokens.put(None)
    mtime = datetime.fromtimestamp(info.st_mtime, UTC)
    return FileSample(path=path, size=info.st_size, mtime=mtime, head=head, tail=tail)


def confined(path: str | Path, roots: tuple[Path, ...]) -> bool:
    """Say whether ``path`` resolves, without escaping through links, inside a root.

    Both sides are resolved (``..`` and symlinks), so a link inside a store
    that points outside it is refused, and so is any ``..`` traversal.
    """
    try:
        resolved = Path(path).resolve(strict=True)
    except (OSError, RuntimeError):
        return False
    if not resolved.is_file():
        return False
    for root in roots:
        try:
            real_root = root.resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if resolved.is_relative_to(real_root):
            return True
    return False


MAX_ENTRIES: Final = 200_000
"""Directory entries one walk may visit before it stops (and says it was cut)."""

@frozen
class Candidate:
    """A file found by a walk. The path stays a string and the stat a
    :class:`~clanker.environment.witness.FileStat`: a scan makes thousands."""

    path: str
    stat: FileStat


def _listing(
    directory: str | Path, level: int, witness: Witness | None
) -> ScandirIterator[str] | None:
    """``os.scandir(directory)``, or ``None`` when it is gone or (below the root) unreadable."""
    if witness is not None:
        witness.path(directory)  # before listing: a change after it shows
    try:
        return os.scandir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        if level == 0:
            raise  # the store itself cannot be read: the provider says so
        # One project directory clanker may not read must not hide the rest.
        if witness is not None:
            witness.unreadable_directory(directory)
        return None


def find_files(
    root: Path,
    *,
    depth: int,
    accept_file: Callable[[str], bool],
    accept_dir: Callable[[int, str], bool] = lambda level, name: True,
    max_entries: int = MAX_ENTRIES,
    witness: Witness | None = None,
) -> tuple[list[Candidate], bool]:
    """Return regular files exactly ``depth`` directories below ``root``.

    ``accept_dir(level, name)`` prunes directories (level 0 is directly under
    ``root``), ``accept_file(name)`` picks files. Links are never followed. The
    second value says the walk stopped at ``max_entries``. A missing root is
    an empty store; an unreadable root raises :class:`OSError`, and an
    unreadable directory below it is passed over and counted in ``witness``.
    ``witness`` records every directory listed and every file found, so the
    same walk can later be proved unchanged without walking.
    """
    found: list[Candidate] = []
    visited = 0
    frontier: list[tuple[str | Path, int]] = [(root, 0)]
    # Two loops, one per kind of level, and the cheap name test first: this
    # loop runs once per file of every store on every listing.
    while frontier:
        directory, level = frontier.pop()
        entries = _listing(directory, level, witness)
        if entries is None:
            continue
        with entries:
            if level < depth:
                for entry in entries:
                    visited += 1
                    if visited > max_entries:
                        return found, True
                    if entry.is_dir(follow_symlinks=False) and accept_dir(level, entry.name):
                        frontier.append((entry.path, level + 1))
                continue
            for entry in entries:
                visited += 1
                if visited > max_entries:
                    return found, True
                if accept_file(entry.name) and entry.is_file(follow_symlinks=False):
                    try:
                        stat = file_stat(entry.stat(follow_symlinks=False))
                    except OSError:
                        continue  # vanished while we looked
                    found.append(Candidate(entry.path, stat))
                    if witness is not None:
                        witness.file(entry.path, stat)
    return found, False
