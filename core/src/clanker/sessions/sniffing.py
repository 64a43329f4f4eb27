"""Telling a session file from its first bytes, before its whole sample is read.

Where two harnesses share a directory, most files there may be the other's, and
their first line says so. A provider that can tell such a file from its first
:data:`SNIFF_BYTES` hands :func:`~clanker.sessions.filestore.scan_files` a
:data:`Sniff`, and such a file costs a read of those bytes instead of a whole sample.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from clanker.environment.files import FileSample
from clanker.sessions.types import NoSession

__all__ = ["SNIFF_BYTES", "Sniff", "sniffed_or_sample"]

Sniff = Callable[[FileSample], NoSession | None]
"""Decide a file from a sample of its first :data:`SNIFF_BYTES` alone (no tail) when
they are enough: a :class:`~clanker.sessions.types.NoSession` (another harness's file,
say) is its outcome; ``None`` reads the whole sample for the summarizer. It must never
decide otherwise than the summarizer would from the whole sample."""

SNIFF_BYTES: Final = 4096
"""What a :data:`Sniff` is shown of a file: a header line and then some."""


def sniffed_or_sample(read: Callable[[int, int], FileSample], sniff: Sniff | None,
                      head_bytes: int, tail_bytes: int) -> NoSession | FileSample:
    """What ``sniff`` decides from the first bytes ``read(head, tail)`` gives, else the
    file's sample of ``head_bytes`` and ``tail_bytes`` for its summarizer. A file the
    first read took whole (and the sample's head would too) is not read again."""
    if sniff is not None:
        first = read(SNIFF_BYTES, 0)
        decided = sniff(first)
        if decided is not None:
            return decided
        if first.whole and first.size <= head_bytes:
            return first  # the sample a second read would make
    return read(head_bytes, tail_bytes)
