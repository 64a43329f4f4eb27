"""Scanning a directory tree of session files, bounded and incremental.

Providers say where their files are and how to summarize one; this module
walks (:func:`find_files`, the local :class:`~clanker.environment.HostFiles`
walk), bounds, caches and counts (:func:`scan_files`, through whatever host
files the context hands it). A walk never follows a symbolic link (neither a
linked directory nor a linked file), so discovery cannot leave the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, cast

from clanker._logging import get_logger
from clanker.environment.files import (
    DEFAULT_HEAD_BYTES,
    DEFAULT_TAIL_BYTES,
    MAX_ENTRIES,
    Candidate,
    FileSample,
    find_files,
)
from clanker.environment.witness import Witness
from clanker.sessions.cache import MISS
from clanker.sessions.capability import SessionsContext
from clanker.sessions.sniffing import Sniff, sniffed_or_sample
from clanker.sessions.types import HarnessSession, NoSession, SessionScan, placed

if TYPE_CHECKING:
    # The pool (threads, subprocess) is loaded by the first scan: importing a
    # provider's module to ask where its store is needs none of it.
    from clanker.sessions.pool import Outcome

__all__ = ["MAX_ENTRIES", "Candidate", "Summarize", "find_files", "scan_files"]

log = get_logger(__name__)

Summarize = Callable[[FileSample], HarnessSession | NoSession | None]
"""Summarize one file: its session, ``None`` when it is not one (a counted skip),
:data:`~clanker.sessions.types.EMPTY` when the harness wrote no conversation into it
yet, or :data:`~clanker.sessions.types.FOREIGN` when it is another harness's (in a
directory the two share): neither listed, nor a skip, nor found by id."""


def scan_files(
    context: SessionsContext,
    candidates: Iterable[Candidate],
    summarize: Summarize,
    *,
    cut: bool = False,
    head_bytes: int = DEFAULT_HEAD_BYTES,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
    witness: Witness | None = None,
    reading: str = "",
    sniff: Sniff | None = None,
) -> SessionScan:
    """Summarize the newest ``context.limit`` candidates, reusing cached summaries.

    A file that cannot be read or is not a session is a counted skip, and so
    are a file whose path is not UTF-8 text and each directory the walk could not
    list (``witness.unreadable``); a file
    that holds no conversation yet (:data:`~clanker.sessions.types.EMPTY`) is
    not: it is left out without a word, and so is another harness's file
    (:data:`~clanker.sessions.types.FOREIGN`). The
    discovery order is newest file first. A file that could not be read makes
    ``witness`` unable to vouch for this scan: the next one tries it again.
    ``reading`` names whatever besides a file's bytes its summary depends on
    (for ``summarize`` closing over where other harnesses read): a summary kept
    under another reading is not reused. ``sniff`` decides files from their first
    bytes where it can (:mod:`clanker.sessions.sniffing`), so that a file another
    harness owns costs no whole sample; on this machine only (a host's samples come
    in rounds, and a second read would be a second round).
    """
    context.cache.bind(reading)
    ordered = sorted(candidates, key=lambda c: (-c.stat.st_mtime_ns, c.path))
    truncated = cut or len(ordered) > context.limit
    sessions: list[HarnessSession] = []
    # Directories the walk could not list count as skips too: their sessions are missing.
    unlisted = 0 if witness is None else witness.unreadable
    skipped = unlisted
    chosen = [candidate for candidate in ordered[: context.limit] if _named(candidate.path)]
    # A name of bytes no UTF-8 decodes cannot be listed, kept in the cache or printed.
    skipped += min(len(ordered), context.limit) - len(chosen)
    cached = [context.cache.lookup(candidate.path, candidate.stat) for candidate in chosen]
    misses = [order for order, found in enumerate(cached) if found is MISS]
    if sniff is not None and not _local(context):
        sniff = None
    read = _read_many(context, chosen, misses, summarize, head_bytes, tail_bytes, sniff)
    del misses
    missed = 0  # the misses met so far: the next one's outcome is read[missed]
    # Equal directories and models, one string each (a store has few of either).
    shared: dict[str | None, str | None] = {}
    for order, candidate in enumerate(chosen):
        key = candidate.path
        # Taken out of `cached` and `read` as it is used: the summary is in the cache
        # now, and a placed copy below replaces it there (the two lists would keep every
        # replaced summary alive until the scan returns).
        session = found = cached[order]
        cached[order] = None
        if found is MISS:
            if read is not None:
                outcome, read[missed] = read[missed], None
                missed += 1
            else:
                outcome = _read_one(context, candidate, summarize, head_bytes, tail_bytes,
                                    sniff)
            if isinstance(outcome, OSError):
                # Not remembered: a file that cannot be read now (permissions,
                # an I/O error) may be readable next time without changing.
                log.debug("skipping %s: %s", key, type(outcome).__name__)
                if witness is not None:
                    witness.usable = False
                skipped += 1
                continue
            session = outcome
            context.cache.store(key, candidate.stat, session)
        if session is None or isinstance(session, NoSession):
            # EMPTY, FOREIGN: nothing to list or resume, and nothing unreadable either.
            skipped += session is None
            continue
        session = cast(HarnessSession, session)
        if context.native_id is None and session.hidden:
            continue  # left out on purpose: neither listed nor a skip
        if context.native_id is not None and session.native_id != context.native_id:
            continue
        if (session.harness, session.store_path, session.order) != (context.harness, key, order):
            session = placed(session, context.harness, key, order, shared)
            # Kept in memory so an unchanged store costs no copies on the next scan.
            context.cache.refresh(key, session)
        sessions.append(session)
    if not context.scopes and context.native_id is None and not truncated and not unlisted:
        # Only a complete walk of the whole store proves a file is gone.
        context.cache.forget_unseen()
    context.cache.save()
    return SessionScan(sessions=sessions, skipped=skipped, truncated=truncated)


def _named(path: str) -> bool:
    """Whether ``path`` is text: a walk spells a name of other bytes with surrogates."""
    if path.isascii():
        return True
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _local(context: SessionsContext) -> bool:
    """Whether the context's files are this machine's."""
    from clanker.environment.local import LocalFiles

    return type(context.files) is LocalFiles


def _read_one(context: SessionsContext, candidate: Candidate, summarize: Summarize,
              head_bytes: int, tail_bytes: int, sniff: Sniff | None) -> Outcome:
    """One file's summary through the context's host files, or why it cannot be read."""
    def read(head: int, tail: int) -> FileSample:
        return context.files.sample(candidate.path, head_bytes=head, tail_bytes=tail,
                                    stat=candidate.stat)

    try:
        sample = sniffed_or_sample(read, sniff, head_bytes, tail_bytes)
    except OSError as exc:
        return exc
    except (ValueError, OverflowError) as exc:  # a time no datetime can hold
        log.debug("skipping %s: %s", candidate.path, type(exc).__name__)
        return None
    return sample if isinstance(sample, NoSession) else _summarize(sample, summarize)


def _read_many(context: SessionsContext, chosen: list[Candidate], misses: list[int],
               summarize: Summarize, head_bytes: int, tail_bytes: int,
               sniff: Sniff | None) -> list[Outcome] | None:
    """The outcomes of the misses (their places in ``chosen``), in order, read on two
    cores (:mod:`clanker.sessions.pool`) when there are enough of them on this machine,
    each session already placed; ``None``: read them one by one."""
    from clanker.sessions import pool

    if len(misses) < pool.MIN_FILES or not _local(context):
        return None
    jobs = [(chosen[order].path, chosen[order].stat, order) for order in misses]
    return pool.summarize_files(summarize, jobs, context.harness, head_bytes=head_bytes,
                                tail_bytes=tail_bytes, local_files=True, sniff=sniff)


def _summarize(sample: FileSample, summarize: Summarize) -> HarnessSession | NoSession | None:
    try:
        return summarize(sample)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        # A shape the parser did not expect: a counted skip, remembered as one.
        log.debug("skipping %s: %s", sample.path, type(exc).__name__)
        return None
