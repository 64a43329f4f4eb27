"""The grid's own files (log, lock) and the log's directory, opened so that an odd
file there can neither hang the grid nor lead it elsewhere.

A file is opened with ``O_NOFOLLOW`` (a final symbolic link is refused, never
followed) and ``O_NONBLOCK`` (opening a FIFO never waits for its other end),
then checked with ``fstat`` on what was actually opened: anything but a regular
file of ours is refused with a :class:`~clanker.grid.errors.GridPathError`
naming the path and what is there.
"""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

from clanker.grid.errors import GridPathError
from clanker.storage import file_kind

__all__ = ["describe", "ensure_directory", "open_regular"]



def describe(path: Path) -> str:
    """What is at ``path`` itself (a link is not followed), for a message."""
    try:
        return file_kind(os.lstat(path).st_mode)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"


def open_regular(path: Path, flags: int, mode: int = 0o600) -> int:
    """Open the regular file ``path`` of ours with ``flags``; return a blocking descriptor.

    Raises :class:`FileNotFoundError` when it is missing (without ``O_CREAT``)
    and :class:`~clanker.grid.errors.GridPathError` for anything else that is
    not a regular file of ours.
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except FileNotFoundError:
        if flags & os.O_CREAT:
            raise GridPathError(f"{path} cannot be created (its directory is missing)") \
                from None
        raise
    except OSError as exc:
        found = describe(path)
        if found == "a regular file":
            raise GridPathError(f"{path} cannot be opened ({exc.strerror})") from None
        raise GridPathError(f"{path} is {found}; the grid needs a regular file there") \
            from None
    try:
        _check_opened(path, fd)
        # The check is done: reads and writes may block like any file's.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_opened(path: Path, fd: int) -> None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise GridPathError(
            f"{path} is {file_kind(info.st_mode)}; the grid needs a regular file there")
    if info.st_uid != os.geteuid():
        raise GridPathError(f"{path} belongs to another user")


def ensure_directory(path: Path) -> None:
    """Create ``path`` (and its parents, 0700) unless it is a directory already.

    A link to a directory is used like the directory (as for any directory a
    user may have moved); anything else is a
    :class:`~clanker.grid.errors.GridPathError` naming it.
    """
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except FileExistsError:
        raise GridPathError(f"{path} is {describe(path)}; the grid needs a directory there") \
            from None
    except OSError as exc:
        raise GridPathError(f"{path} cannot be created ({exc.strerror})") from None
