"""Scaffolding for a file-backed sessions capability's tests.

A summarizer sees a :class:`~clanker.environment.files.FileSample`, the bounded
head and tail of one file. :func:`sample_of_bytes` makes the sample a file of
given bytes would give, without the file, so property tests can feed a
summarizer anything; :func:`check_session_types` is what they assert of each
session it makes::

    @given(st.binary(), st.integers(16, 4096), st.integers(16, 4096))
    def test_arbitrary_bytes_never_raise(data, head, tail):
        found = summarize(sample_of_bytes(data, head_bytes=head, tail_bytes=tail))
        check_session_types(found, "zed")

:func:`check_unchanged_store_is_remembered` checks that a provider answers a
second listing of an unchanged store from its memo and notices a change.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from clanker.environment.files import DEFAULT_HEAD_BYTES, DEFAULT_TAIL_BYTES, FileSample
from clanker.sessions.capability import SessionsCapability, SessionsContext
from clanker.sessions.types import EMPTY, HarnessSession, NoSession
from clanker.sessions.witness import ScanMemo

__all__ = [
    "SAMPLE_MTIME",
    "check_session_types",
    "check_unchanged_store_is_remembered",
    "sample_of_bytes",
]

_SETTLE_NS: Final = 10_000_000
_PAUSE: Final = 0.03
"""Longer than the settling time and than the timestamp tick of the file systems tests
run on (ext4, tmpfs, btrfs, xfs: nanoseconds, at worst a 10 ms clock tick). A file
system with one- or two-second times (FAT, HFS+) would need longer pauses."""

SAMPLE_MTIME = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
"""The modification time a sample gets unless told otherwise: later than any record."""


def sample_of_bytes(
    data: bytes,
    *,
    head_bytes: int = DEFAULT_HEAD_BYTES,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
    path: Path = Path("/x.jsonl"),
    mtime: datetime = SAMPLE_MTIME,
) -> FileSample:
    """What :func:`~clanker.environment.files.read_sample` would see of a file at
    ``path`` holding ``data``, with the same bounds, without a file."""
    tail = b""
    if len(data) > head_bytes:
        tail = data[max(len(data) - tail_bytes, head_bytes):]
    return FileSample(path=path, size=len(data), mtime=mtime, head=data[:head_bytes], tail=tail)


def check_session_types(found: HarnessSession | NoSession | None, harness: str) -> None:
    """Assert that what a summarizer returned is what the types promise and survives
    the service: ``None`` (a skip), :data:`~clanker.stores.EMPTY` (no conversation
    yet), or a session of ``harness`` with a non-blank id,
    aware times, non-empty texts, a printable title of at most 200 characters, an
    absolute ``cwd`` without NUL, a count that is not negative, and texts that encode
    as UTF-8 (the disk cache and the terminal can hold them)."""
    if found is None or found is EMPTY:
        return
    assert isinstance(found, HarnessSession)
    assert found.harness == harness
    assert isinstance(found.native_id, str) and found.native_id.strip()
    assert isinstance(found.updated_at, datetime) and found.updated_at.tzinfo is not None
    assert found.created_at is None or (
        isinstance(found.created_at, datetime) and found.created_at.tzinfo is not None)
    for text in (found.title, found.model, found.parent_id):
        assert text is None or (isinstance(text, str) and text)
    assert found.title is None or (len(found.title) <= 200 and found.title.isprintable())
    assert found.cwd is not None and found.cwd.startswith("/") and "\x00" not in found.cwd
    assert found.message_count is None or (
        isinstance(found.message_count, int) and found.message_count >= 0)
    for text in (found.native_id, found.cwd, found.title, found.model, found.parent_id):
        if text is not None:
            text.encode("utf-8")
    os.path.realpath(found.cwd)  # what the service does with it


def check_unchanged_store_is_remembered(
    capability: SessionsCapability,
    context: Callable[[ScanMemo | None], SessionsContext],
    change: Callable[[], None],
) -> None:
    """Assert that listing an unchanged store again returns the remembered answer
    itself (nothing walked or parsed), and that after ``change()`` (an edit of
    anything the provider reads) it no longer does: the new answer shows the
    change and equals what a provider without a memo finds.

    ``context(memo)`` makes a fresh request context over the store; the store
    must be fully written before the call.
    """
    memo = ScanMemo(settle_ns=_SETTLE_NS)  # the real two seconds would make tests wait
    time.sleep(_PAUSE)
    first = asyncio.run(capability.discover(context(memo)))
    assert first.error is None
    assert asyncio.run(capability.discover(context(memo))) is first
    time.sleep(_PAUSE)
    change()
    time.sleep(_PAUSE)
    after = asyncio.run(capability.discover(context(memo)))
    assert after is not first
    assert after.sessions != first.sessions, "the change did not show in the listing"
    assert after.sessions == asyncio.run(capability.discover(context(None))).sessions
