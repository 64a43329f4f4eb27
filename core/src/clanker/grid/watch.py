"""Directory watches for the grid's session index (inotify, through watchdog).

A :class:`DirectoryWatch` holds one inotify instance (watchdog's ``InotifyFD``:
one reader thread, watches added and removed as needed) and counts, per
watched directory, the events that could change what a scan read there. An
answer that recorded the counters of every directory it depends on is still
current while none of them moved, the watch did not overflow or fail since,
and every event queued before the question has been read: :meth:`barrier`
proves that last part by touching a file of its own and waiting for that
event (inotify keeps one instance's events in order).

What counts as a dependency (see :func:`interests`): every directory a scan
listed (any entry in it), and for every path it read, each component's name in
its parent, up to ``/``, so a rename or replacement anywhere along the way
shows. A directory reached through a symbolic link, or on a file system whose
changes may not raise events here (a network mount, say), cannot be watched
soundly: an answer that depends on one is proven the old way, by ``stat``.

Only the grid imports this module: watchdog costs about 75 ms to import.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import tempfile
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final, cast

from attrs import frozen

from clanker._logging import get_logger

if TYPE_CHECKING:
    from watchdog.observers.inotify_c import WatchDescriptor

__all__ = ["ALL", "MAX_WATCHES", "DirectoryWatch", "Proof", "interests"]

log = get_logger(__name__)

MAX_WATCHES: Final = 65_536
"""The most directories one grid watches; past it an answer is proven by ``stat``."""
BARRIER_TIMEOUT: Final = 2.0
"""How long :meth:`DirectoryWatch.barrier` waits for its own event before it
says the watch cannot be proven current."""
ALL: Final = None
"""An interest in every entry of a directory (the other interests name entries)."""

_WATCHED_FILESYSTEMS: Final = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "f2fs", "zfs", "bcachefs", "overlay",
})
"""Local file systems, where every change made on this machine raises its event."""

Interests = dict[str, frozenset[str] | None]
"""Per directory: the entry names whose events matter, or :data:`ALL`."""


def interests(listed: Iterable[str], read: Iterable[str]) -> Interests:
    """The directories an answer depends on: ``listed`` ones wholly, and for each
    path listed or ``read`` its name in its parent, and so on up to ``/``."""
    found: dict[str, set[str] | None] = {os.path.normpath(d): ALL for d in listed}
    for path in (*list(found), *read):
        current = os.path.normpath(path)
        while True:
            parent, name = os.path.split(current)
            if not name:
                break
            if parent in found:
                wanted = found[parent]
                # A listed parent walks its own chain; a known name was walked from here.
                if wanted is ALL or name in wanted:
                    break
                wanted.add(name)
            else:
                found[parent] = {name}
            current = parent
    return {d: None if names is None else frozenset(names) for d, names in found.items()}


def _inode(directory: str) -> tuple[int, int] | None:
    try:
        found = os.lstat(directory)
    except OSError:
        return None
    return found.st_dev, found.st_ino


class _Mounts:
    """Mount points and their types, longest first, read again whenever the kernel
    says the table changed (``/proc/self/mounts`` polls ``POLLPRI`` then): a file
    system mounted over a watched directory raises no event in it."""

    def __init__(self) -> None:
        self._file = open("/proc/self/mounts", encoding="utf-8")  # noqa: SIM115 (kept open)
        self._poll = select.poll()
        self._poll.register(self._file, select.POLLPRI | select.POLLERR)
        self.table = self._read()

    def changed(self) -> bool:
        """Say whether the table changed since it was last read (and read it again)."""
        if not self._poll.poll(0):
            return False
        self.table = self._read()
        return True

    def close(self) -> None:
        self._file.close()

    def _read(self) -> list[tuple[str, str]]:
        self._file.seek(0)
        found = []
        for line in self._file.read().splitlines():
            fields = line.split()
            if len(fields) >= 3:
                point = fields[1].replace("\\040", " ").replace("\\011", "\t")
                found.append((point, fields[2]))
        return sorted(found, key=lambda m: len(m[0]), reverse=True)


@frozen
class Proof:
    """The counters of an answer's directories when it was proven, and the epoch."""

    epoch: int
    counters: dict[str, int]


class DirectoryWatch:
    """Per-directory change counters kept by inotify; see the module notes."""

    def __init__(self, *, max_watches: int = MAX_WATCHES) -> None:
        from watchdog.observers.inotify_c import CallbackId, InotifyConstants, InotifyFD, Mask

        self._constants = InotifyConstants
        self._mask = Mask(InotifyConstants.IN_MODIFY | InotifyConstants.IN_ATTRIB
                      | InotifyConstants.IN_CLOSE_WRITE | InotifyConstants.IN_MOVED_FROM
                      | InotifyConstants.IN_MOVED_TO | InotifyConstants.IN_CREATE
                      | InotifyConstants.IN_DELETE | InotifyConstants.IN_DELETE_SELF
                      | InotifyConstants.IN_MOVE_SELF | InotifyConstants.IN_DONT_FOLLOW
                      | InotifyConstants.IN_ONLYDIR)
        self._id = CallbackId(id(self))
        self._max = max_watches
        self._lock = threading.Lock()
        self._wanted: dict[str, frozenset[str] | None] = {}
        self._wd: dict[str, tuple[int, tuple[int, int] | None]] = {}
        self._path_of: dict[int, str] = {}
        self._counts: dict[str, int] = {}
        self._epoch = 0
        """Moves on an overflow or a failed barrier: every earlier proof is void."""
        self.held = 0
        """How many answers a proof vouched for (for tests and benchmarks)."""
        self._mounts = _Mounts()
        self._sentinel_dir = tempfile.mkdtemp(prefix="clanker-watch-")
        self._sentinel = os.path.join(self._sentinel_dir, "barrier")
        self._seen_barrier = 0
        self._barrier_wait = threading.Condition(self._lock)
        self._fd = InotifyFD()  # its own instance and reader thread, never the shared one
        self._fd.daemon = True
        self._fd.start()
        self._barrier_wd = self._fd.add_callback(
            os.fsencode(self._sentinel_dir), self._mask, self, self._id)
        if self._barrier_wd == -1:
            raise OSError(errno.EACCES, "cannot watch the barrier directory")

    # --------------------------------------------------------------- questions

    @property
    def epoch(self) -> int:
        return self._epoch

    def prove(self, listed: Iterable[str], read: Iterable[str]) -> Proof | None:
        """Watch what an answer that ``listed`` and ``read`` these paths depends on and
        return the proof to check it by (:meth:`still`), or ``None`` when some of it
        cannot be watched soundly. Check the answer once more (by ``stat``) *after*
        this: a change made before the watches existed raised no event."""
        wanted = interests(listed, read)
        with self._lock:
            epoch = self._epoch
            for directory, names in wanted.items():
                if not self._watch(directory, names):
                    return None
            return Proof(epoch, {d: self._counts.get(d, 0) for d in wanted})

    def still(self, proof: Proof) -> bool:
        """Say whether no event touched the directories of ``proof`` since it was made
        (and none was lost); call :meth:`barrier` first, once per question."""
        counts = self._counts
        held = proof.epoch == self._epoch and all(
            counts.get(d, 0) == c for d, c in proof.counters.items())
        self.held += held
        return held

    def barrier(self, timeout: float = BARRIER_TIMEOUT) -> bool:
        """Wait until every event queued before this call has been counted; ``False``
        when the watch's own event did not come in time (then nothing is proven)."""
        with self._lock:
            target = self._seen_barrier + 1
            remounted = self._mounts.changed()
        if remounted:
            self.overflowed()
        try:
            with open(self._sentinel, "ab"):
                pass
            os.utime(self._sentinel)
        except OSError:
            return False
        with self._barrier_wait:
            return self._barrier_wait.wait_for(lambda: self._seen_barrier >= target, timeout)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._fd.stop()
        self._mounts.close()
        with contextlib.suppress(OSError):
            os.unlink(self._sentinel)
        with contextlib.suppress(OSError):
            os.rmdir(self._sentinel_dir)

    def overflowed(self) -> None:
        """Void every proof (the kernel dropped events, or a watch failed)."""
        with self._lock:
            self._epoch += 1
        log.warning("session index: events may be lost; every store is checked again")

    # ---------------------------------------------------- watchdog's callbacks

    def on_event(self, event: object) -> None:
        wd, mask, name = event.wd, event.mask, event.name  # type: ignore[attr-defined]
        constants = self._constants
        with self._lock:
            if wd == self._barrier_wd:
                self._seen_barrier += 1
                self._barrier_wait.notify_all()
                return
            directory = self._path_of.get(wd)
            if directory is None:
                return
            entry = os.fsdecode(name)
            names = self._wanted.get(directory)
            self_event = not name or mask & (constants.IN_DELETE_SELF | constants.IN_MOVE_SELF)
            if self_event or names is ALL or entry in names:
                self._counts[directory] = self._counts.get(directory, 0) + 1

    def on_watch_deleted(self, wd: int) -> None:
        with self._lock:
            directory = self._path_of.pop(wd, None)
            if directory is not None:
                self._wd.pop(directory, None)
                self._wanted.pop(directory, None)
                # A later watch of the same path starts afresh, never at an old count.
                self._counts[directory] = self._counts.get(directory, 0) + 1

    def on_queue_overflow(self) -> None:
        self.overflowed()

    # --------------------------------------------------------------- internals

    def _watch(self, directory: str, names: frozenset[str] | None) -> bool:  # noqa: PLR0911
        """Watch ``directory`` for ``names`` (merged with earlier interests); the lock
        is held. A directory that does not exist needs no watch: its creation shows
        in its parent, which is watched for its name."""
        known = self._wanted.get(directory, frozenset())
        held = self._wd.get(directory)
        if held is not None:
            # The watch follows its inode: a directory moved away and another put in
            # its place is a different one, watched afresh.
            if _inode(directory) == held[1]:
                if known is not ALL and (names is ALL or not names <= known):
                    self._wanted[directory] = ALL if names is ALL else known | names
                return True
            self._drop(held[0])
        if len(self._wd) >= self._max:
            return False
        try:
            if os.path.realpath(directory) != directory:
                return False  # a link on the way: its target may change unseen
        except OSError:
            return False
        if not self._local(directory):
            return False
        before = _inode(directory)
        if before is None:
            return True  # not there: its parent is watched for its name
        self._wanted[directory] = names
        try:
            wd = self._fd.add_callback(os.fsencode(directory), self._mask, self, self._id)
        except OSError as exc:
            self._wanted.pop(directory, None)
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return True
            log.info("session index: cannot watch a directory (%s)", errno.errorcode.get(
                exc.errno or 0, type(exc).__name__))
            return False
        # -1: watchdog passes EACCES over silently. A known descriptor: the same
        # directory under another path (a bind mount), whose events name only one.
        if wd == -1 or wd in self._path_of or _inode(directory) != before:
            self._wanted.pop(directory, None)
            if wd != -1 and wd not in self._path_of:
                self._fd.remove_callbacks([(wd, self._id)])
            return False
        self._wd[directory] = (wd, before)
        self._path_of[wd] = directory
        return True

    def _drop(self, wd: int) -> None:
        directory = self._path_of.pop(wd, None)
        if directory is not None:
            self._wd.pop(directory, None)
            self._wanted.pop(directory, None)
            self._counts[directory] = self._counts.get(directory, 0) + 1
        with contextlib.suppress(Exception):
            self._fd.remove_callbacks([(cast("WatchDescriptor", wd), self._id)])

    def _local(self, directory: str) -> bool:
        for point, kind in self._mounts.table:
            if directory == point or directory.startswith(point.rstrip("/") + "/"):
                return kind in _WATCHED_FILESYSTEMS
        return False
