"""Answers of a harness's own listing command, kept across processes with proof they hold.

Some harnesses' history is reachable only through their own command, and the
command is slow (seconds: a runtime booting, a project opened). Each CLI run
is a new process, so the in-memory :class:`~clanker.sessions.witness.ScanMemo`
never helps them. :class:`AnswerCache` keeps a provider's last few answers on
disk, each under a **key** (everything that shaped the answer besides files:
the directory the command ran in, the binary's identity, the environment that
selects the store) and with the **states** of the files the answer depends on
(device, inode, size, modification and change time, or absent), looked at
through the environment's :class:`~clanker.environment.HostFiles`. An answer
is handed back only while every one of those files still looks the same.

The provider decides what the key and the files are; this module only keeps
them, reads them back strictly (the boundary converter: exact types, no extra
keys) and bounds them. The disk copy is a cache: unreadable, foreign, corrupt
or oversized means empty, and the next answer replaces it.

Timestamps have a granularity: a file changed again within the same tick as
its recorded time would look unchanged. :func:`settled` says whether states
are old enough to vouch for themselves (see :data:`FINE_SETTLE_NS`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

from attrs import field, frozen

from clanker._logging import get_logger
from clanker.converters import BoundaryError, structure
from clanker.environment import HostFiles
from clanker.environment.witness import SETTLE_NS
from clanker.ids import HarnessId
from clanker.sessions.types import HarnessSession
from clanker.storage import read_json, write_json_atomic

__all__ = [
    "FINE_SETTLE_NS",
    "MAX_ANSWER_SESSIONS",
    "Answer",
    "AnswerCache",
    "FileState",
    "answers_path",
    "look",
    "settled",
]

log = get_logger(__name__)

_VERSION: Final = 1
_MAX_FILE: Final = 16 * 1024 * 1024
_CAPACITY: Final = 8
_MAX_KEY: Final = 32
_MAX_FILES: Final = 32
MAX_ANSWER_SESSIONS: Final = 8192
"""The most sessions one kept answer may hold (a larger one is not kept)."""

FINE_SETTLE_NS: Final = 100_000_000
"""How old the newest recorded time must be when times carry sub-second parts.

Local Linux file systems stamp times from a clock that ticks every 1-10 ms;
a tenth of a second is well past any tick. Times that are whole seconds (FAT,
HFS+, ext3) get the two seconds of :data:`~clanker.environment.witness.SETTLE_NS`.
"""


@frozen
class FileState:
    """One file as it looked: ``identity`` is (device, inode, size, mtime ns,
    ctime ns), or ``None`` when it could not be looked at (missing, say)."""

    path: str
    identity: tuple[int, int, int, int, int] | None


def _identity(stat: os.stat_result | None) -> tuple[int, int, int, int, int] | None:
    if stat is None:
        return None
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def look(files: HostFiles, paths: Iterable[str]) -> tuple[FileState, ...]:
    """Each of ``paths`` as it looks now (through links), through the host's files.

    Blocking: call it from offloaded work.
    """
    return tuple(FileState(path, _identity(files.stat(path))) for path in paths)


def settled(states: Sequence[FileState], *, now_ns: int | None = None) -> int:
    """Nanoseconds to wait before ``states`` can vouch for themselves; 0 when they can.

    A file whose newest time lies within one timestamp tick of now could be
    changed again in the same tick without its times moving; once the tick is
    over, any change shows.
    """
    present = [s.identity for s in states if s.identity is not None]
    if not present:
        return 0
    now = time.time_ns() if now_ns is None else now_ns
    coarse = all(i[3] % 1_000_000_000 == 0 and i[4] % 1_000_000_000 == 0 for i in present)
    margin = SETTLE_NS if coarse else FINE_SETTLE_NS
    newest = max(max(i[3], i[4]) for i in present)
    return max(0, newest + margin - now)


@frozen(kw_only=True)
class Answer:
    """A listing as the provider parsed it: every session, newest first, and its skips."""

    sessions: tuple[HarnessSession, ...]
    skipped: int = field(default=0)

    @skipped.validator
    def _count(self, _: object, value: int) -> None:
        if value < 0:
            raise ValueError("skipped: must be a count")


def answers_path(cache_dir: Path | None, store: str) -> Path | None:
    """Where ``store``'s kept answers live under ``cache_dir`` (``None``: in memory)."""
    return None if cache_dir is None else cache_dir / "sessions" / f"{store}.answers.json"


def _checked_key(key: Mapping[str, str]) -> dict[str, str]:
    if len(key) > _MAX_KEY or not all(isinstance(k, str) and isinstance(v, str)
                                      for k, v in key.items()):
        raise ValueError("key: at most 32 string values")
    return dict(key)


class AnswerCache:
    """One provider's last few answers, each with its key and file states.

    ``path`` is where the disk copy lives; ``None`` keeps them in memory only
    (a library that keeps its service gets the same answers without a file).
    At most eight answers, the most recently kept first; a new answer under
    the same key replaces the old one. Loaded on first use: call it from
    offloaded work, like :func:`look`.
    """

    def __init__(self, harness: HarnessId, path: Path | None) -> None:
        self._harness = harness
        self._path = path
        self._entries: list[tuple[dict[str, str], tuple[FileState, ...], Answer]] | None = None
        self._lock = threading.Lock()

    def kept_keys(self) -> tuple[dict[str, str], ...]:
        """The keys of the answers kept, most recently kept first (copies)."""
        with self._lock:
            return tuple(dict(key) for key, _, _ in self._loaded())

    def recall(self, key: Mapping[str, str], files: HostFiles) -> Answer | None:
        """The answer kept under ``key`` if every file it depends on looks the same now."""
        with self._lock:
            found = next(((states, answer) for kept, states, answer in self._loaded()
                          if kept == key), None)
        if found is None:
            return None
        states, answer = found
        return answer if look(files, (s.path for s in states)) == states else None

    def keep(self, key: Mapping[str, str], states: Sequence[FileState], answer: Answer) -> None:
        """Keep ``answer`` under ``key``, proved by ``states`` (taken after the answer was
        made, once :func:`settled`). Too large an answer is not kept; a failed write
        costs the next process a listing, nothing more.

        Other answers keep their own states: a command that writes to a store
        they share disproves them, and they are not carried over to the new
        states, since a change made elsewhere while the command ran would then
        never show.
        """
        if len(answer.sessions) > MAX_ANSWER_SESSIONS or len(states) > _MAX_FILES:
            return
        entry = (_checked_key(key), tuple(states), answer)
        with self._lock:
            kept = [e for e in self._loaded() if e[0] != entry[0]]
            self._entries = [entry, *kept][:_CAPACITY]
            entries = list(self._entries)
        if self._path is None:
            return
        from clanker.sessions import answers_disk as disk

        document = disk.document(self._harness, _VERSION, (
            (key, tuple(disk.File(s.path, s.identity) for s in states), answer.sessions,
             answer.skipped) for key, states, answer in entries))
        with contextlib.suppress(OSError, ValueError):
            write_json_atomic(self._path, disk.converter().unstructure(document),
                              fsync=False)  # a kept answer is re-derived when lost

    def _loaded(self) -> list[tuple[dict[str, str], tuple[FileState, ...], Answer]]:
        if self._entries is None:
            self._entries = []
            if self._path is not None:
                try:
                    self._entries = self._load(self._path)
                except Exception as exc:  # a cache is never a reason to fail: start afresh
                    log.debug("sessions answers %s discarded: %s", self._path,
                              type(exc).__name__)
        return self._entries

    def _load(self, path: Path) -> list[tuple[dict[str, str], tuple[FileState, ...], Answer]]:
        data = read_json(path, max_bytes=_MAX_FILE)
        if data is None:
            return []
        from clanker.sessions import answers_disk as disk

        try:
            document = structure(disk.converter(), data, disk.Document)
        except BoundaryError:
            return []
        if document.version != _VERSION or document.harness != self._harness:
            return []
        entries = []
        for entry in document.entries[:_CAPACITY]:
            if len(entry.sessions) > MAX_ANSWER_SESSIONS or len(entry.files) > _MAX_FILES:
                return []
            # HarnessSession's validators run here: one bad row discards the file.
            sessions = tuple(disk.session(self._harness, s) for s in entry.sessions)
            states = tuple(FileState(f.path, f.identity) for f in entry.files)
            entries.append((_checked_key(entry.key), states,
                            Answer(sessions=sessions, skipped=entry.skipped)))
        return entries
