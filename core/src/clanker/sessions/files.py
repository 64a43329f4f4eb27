"""Bounded reading of session files: a head, a tail, never the whole file.

Session transcripts grow without limit (tool output, images, instructions),
so a parser sees at most ``head_bytes`` from the start and ``tail_bytes``
from the end. Lines cut by a bound are dropped, never half-parsed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from attrs import frozen

from clanker.sessions.lines import LineRegion, decode_object, head_and_tail

__all__ = [
    "DEFAULT_HEAD_BYTES",
    "DEFAULT_TAIL_BYTES",
    "MAX_OPEN_FILES",
    "FileSample",
    "confined",
    "parse_timestamp",
    "read_sample",
]

DEFAULT_HEAD_BYTES: Final = 64 * 1024
DEFAULT_TAIL_BYTES: Final = 16 * 1024
MAX_OPEN_FILES: Final = 16

_open_files = threading.BoundedSemaphore(MAX_OPEN_FILES)


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
    stat: os.stat_result | None = None,
) -> FileSample:
    """Read the head and tail of ``path`` (a regular file, not followed through a link).

    Raises :class:`OSError` when it cannot be read; callers count that as a skip.
    """
    with _open_files:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        try:
            info = os.fstat(fd) if stat is None else stat
            head = os.pread(fd, head_bytes, 0)
            tail = b""
            if info.st_size > head_bytes:
                start = max(info.st_size - tail_bytes, head_bytes)
                tail = os.pread(fd, info.st_size - start, start)
        finally:
            os.close(fd)
    mtime = datetime.fromtimestamp(info.st_mtime, UTC)
    return FileSample(path=path, size=info.st_size, mtime=mtime, head=head, tail=tail)


def parse_timestamp(value: object) -> datetime | None:
    """Read an ISO 8601 string (``Z`` allowed) or epoch seconds/milliseconds as UTC.

    Returns ``None`` for anything else, including naive timestamps, which
    would otherwise be read in the wrong zone.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            # Milliseconds since 1973; an integer too large for a float overflows here.
            seconds = value / 1000 if value > 10**11 else value
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
            return parsed.astimezone(UTC) if parsed.tzinfo is not None else None
        except (ValueError, OverflowError):  # Overflow: year 1 in a zone east of UTC
            return None
    return None


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
