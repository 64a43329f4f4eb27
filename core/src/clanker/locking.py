"""Exclusive locks on clanker's own files: one way to take them, everywhere.

:func:`exclusive` holds an ``flock`` on a lock file (through ``filelock``; the
kernel drops it when the holding process dies, so nothing stale is left to
clean) for at most a bounded wait: ``timeout=0`` is a single try. On top of
what ``filelock`` does, the lock file is clanker's own and nothing else:

- its directory is created private (0700) and the file 0600 (an older, wider
  one is made 0600 once it is held);
- a symbolic link at the lock path is never followed, and a FIFO, socket,
  device or directory there never blocks: each is refused, as is a file
  another user owns, with :class:`UnsafeLockError` (checked before the lock
  is taken and again, on the open descriptor, once it is held);
- a wait that runs out raises :class:`LockTimeoutError`, which names the lock
  file and the wait.

Every other lock in clanker's own files goes through here; the hook's event
append and the grid daemon's single-instance lock keep their own (a hot path
and a lock with other semantics).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.storage import UnusableFileError, not_regular, open_failure

__all__ = ["LockTimeoutError", "UnsafeLockError", "exclusive"]



class LockTimeoutError(HarnessCapabilityError):
    """Another process held the lock for the whole wait (kind ``timeout``, exit 8).

    ``path`` is the lock file, ``timeout`` the wait in seconds (0: a single try).
    """

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        super().__init__(ErrorKind.TIMEOUT)

    @property
    def message(self) -> str:
        if self.timeout == 0:
            return f"the lock {self.path} is already held"
        return (f"the lock {self.path} was held for the whole "
                f"{self.timeout:g} s wait")

    def with_harness(self, harness: str) -> HarnessCapabilityError:
        return self  # a lock is clanker's own, never a harness's

    def __repr__(self) -> str:
        return f"LockTimeoutError({str(self.path)!r}, {self.timeout!r})"


class UnsafeLockError(UnusableFileError):
    """Something other than clanker's own regular file is at the lock path, or it
    cannot be opened; the message names it and says why. Nothing was locked."""


def _refusal(info: os.stat_result) -> str | None:
    """Why a file with ``info`` is not a lock file clanker may use, or ``None``."""
    if (reason := not_regular(info.st_mode)) is not None:
        return reason
    if info.st_uid != os.geteuid():
        return f"belongs to uid {info.st_uid}, not to this user ({os.geteuid()})"
    return None


def _check_descriptor(path: Path) -> Callable[[int], None]:
    def check(fd: int) -> None:
        # The path was checked before the open; this catches a swap in between.
        info = os.fstat(fd)
        if (reason := _refusal(info)) is not None:
            raise UnsafeLockError(path, reason)
        if info.st_mode & 0o077:  # a lock file left by an older clanker, or a wide umask
            os.fchmod(fd, 0o600)

    return check


@contextlib.contextmanager
def exclusive(path: Path, *, timeout: float) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` for the ``with`` block.

    Waits at most ``timeout`` seconds (finite) for another holder (``0``: one
    try) and then raises :class:`LockTimeoutError`; raises :class:`UnsafeLockError`
    when the path is a link, not a regular file, another user's, or cannot be
    created or opened. The file is left in place on release (waiters share
    its inode), so a lock path is never reused for anything else.
    """
    if not (timeout >= 0 and math.isfinite(timeout)):
        raise ValueError(f"timeout: a finite number of seconds, 0 or more (got {timeout!r})")
    from filelock import FileLock, Timeout

    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        info: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        info = None
    except FileExistsError as exc:  # from mkdir: a parent is there, and not a directory
        raise UnsafeLockError(path, "is below something that is not a directory") from exc
    except OSError as exc:
        raise UnsafeLockError(path, open_failure(exc)) from exc
    if info is not None and (reason := _refusal(info)) is not None:
        raise UnsafeLockError(path, reason)
    lock = FileLock(
        path, timeout=timeout, mode=0o600, blocking=timeout > 0,
        fallback_to_soft=False, preserve_lock_file=True,
        on_acquired=_check_descriptor(path),
    )
    try:
        lock.acquire()
    except Timeout:
        raise LockTimeoutError(path, timeout) from None
    except OSError as exc:
        raise UnsafeLockError(path, open_failure(exc)) from exc
    try:
        yield
    finally:
        lock.release()

