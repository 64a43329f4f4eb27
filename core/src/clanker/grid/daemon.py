"""The per-user grid daemon: one instance, a private socket, started on demand.

Layout (``clanker_paths()``; ``CLANKER_HOME`` moves all of it)::

    <runtime>/grid/            0700, ours: anything else is refused
    <runtime>/grid/grid.sock   the socket (0600)
    <runtime>/grid/grid.lock   held with an exclusive flock by the running daemon
    <state>/grid.log           the daemon's log (0600, rotated at 1 MiB, one previous kept)
    <state>/pending-moves/     0700: the after-turn moves scheduled, one 0600 file each,
                               reloaded by the next daemon (:mod:`~clanker.grid.pending`)

The log and the lock are opened without following a final symlink and without
waiting on a FIFO, and must be regular files (:mod:`~clanker.grid.files`):
anything else there is a :class:`~clanker.grid.errors.GridPathError` naming it.

A single instance is a lock, not a guess: the daemon takes an exclusive
``flock`` on ``grid.lock`` before it touches the socket, and the kernel drops
it when the daemon dies. A second daemon finds the lock held and leaves.

:func:`start` spawns ``python -m clanker.grid.daemon`` in a new session (it
forks once more, so the daemon is nobody's child), with stdin on ``/dev/null``
and stdout and stderr on the log file, and waits (bounded) until the daemon
says it listens and ``hello`` answers. :func:`ensure_running` is the call for
library code and ``clanker launch``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import resource
import select
import signal
import stat
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

from attrs import frozen

from clanker._logging import get_logger
from clanker.checkouts.types import TRANSACTION_TIMEOUT
from clanker.envvars import strip_credentials
from clanker.grid.errors import (
    GridError,
    GridPathError,
    GridStartError,
    GridUnavailableError,
)
from clanker.grid.files import ensure_directory, open_regular
from clanker.grid.socketpath import check_socket_path
from clanker.paths import ClankerPaths, clanker_paths, runtime_directory

if TYPE_CHECKING:
    from clanker.grid.protocol import HelloReply

# The client (and with it the wire protocol) is imported where a grid is asked
# something: with no grid running, `clanker status` never needs it.

__all__ = [
    "START_TIMEOUT",
    "STOP_TIMEOUT",
    "GridLocation",
    "GridStatus",
    "check_socket",
    "ensure_running",
    "grid_location",
    "main",
    "secure_directory",
    "start",
    "status",
    "stop",
    "stopped_on_request",
]

START_TIMEOUT: Final = 3.0
STOP_TIMEOUT: Final = TRANSACTION_TIMEOUT + 3.0
"""A grid that stops lets a checkout transaction under way finish first, for at most
its bound; ``stop`` waits that long and then the usual few seconds."""
HELLO_TIMEOUT: Final = 1.0
DESCRIPTORS: Final = 8192
"""The open-file limit the daemon asks for (within the hard limit): one per terminal
watched and one per connection."""
_READY: Final = b"ready\n"
_BUSY: Final = b"busy\n"

log = get_logger(__name__)


@frozen(kw_only=True)
class GridLocation:
    """Where one user's grid lives."""

    directory: Path
    socket: Path
    lock: Path
    log: Path

    @property
    def stopped(self) -> Path:
        """Present while the last grid ended because :func:`stop` asked it to."""
        return self.directory / "stopped"


@frozen(kw_only=True)
class GridStatus:
    """What :func:`status` found. ``pid`` and the rest are ``None`` when it is not running."""

    running: bool
    location: GridLocation
    pid: int | None = None
    version: str | None = None
    started_at: datetime | None = None
    terminals: int | None = None


def grid_location(paths: ClankerPaths | None = None) -> GridLocation:
    """Return the grid's paths (nothing is created or checked)."""
    paths = paths or clanker_paths()
    socket = paths.grid_socket
    return GridLocation(directory=socket.parent, socket=socket,
                        lock=socket.parent / "grid.lock", log=paths.state / "grid.log")


def secure_directory(directory: Path, *, create: bool = True) -> bool:
    """Make sure ``directory`` is a real directory of ours with mode 0700.

    Creates it so when ``create`` (its parents too, 0700). Returns whether it
    exists; raises :class:`~clanker.grid.errors.GridPathError` when it is a
    symlink or not a directory, belongs to another user, or has another mode
    (clanker never loosens or tightens a directory it did not create).
    """
    if create:
        directory.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
        else:
            os.chmod(directory, 0o700)  # the umask may have taken bits away
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        if create:
            raise
        return False
    if not stat.S_ISDIR(info.st_mode):
        raise GridPathError(f"{directory} is not a directory")
    if info.st_uid != os.geteuid():
        raise GridPathError(f"{directory} belongs to another user")
    mode = stat.S_IMODE(info.st_mode)
    if mode != 0o700:
        raise GridPathError(f"{directory} has mode {mode:04o}; the grid needs 0700")
    return True


def check_socket(path: Path) -> bool:
    """Say whether a socket exists at ``path``; refuse one that is not ours or not private."""
    check_socket_path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(info.st_mode):
        raise GridPathError(f"{path} is not a socket")
    if info.st_uid != os.geteuid():
        raise GridPathError(f"{path} belongs to another user")
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise GridPathError(f"{path} is open to other users")
    return True


def _hello(location: GridLocation) -> HelloReply | None:
    """The running grid's hello, or ``None`` when none answers."""
    if not check_socket(location.socket):
        return None
    try:
        from clanker.grid.client import GridClient

        return GridClient(location.socket, timeout=HELLO_TIMEOUT).hello()
    except GridUnavailableError:
        return None


def _found(location: GridLocation, hello: HelloReply) -> GridStatus:
    return GridStatus(running=True, location=location, pid=hello.pid, version=hello.version,
                      started_at=hello.started_at, terminals=hello.terminals)


def status(paths: ClankerPaths | None = None) -> GridStatus:
    """Say whether the grid runs, without starting it or creating anything."""
    location = grid_location(paths)
    check_socket_path(location.socket)
    if not secure_directory(location.directory, create=False):
        return GridStatus(running=False, location=location)
    hello = _hello(location)
    return GridStatus(running=False, location=location) if hello is None else _found(
        location, hello)


def ensure_running(paths: ClankerPaths | None = None) -> Path:
    """Return the socket path of a running grid, starting the daemon if needed.

    Raises :class:`~clanker.grid.errors.GridError` (a subclass says why) when
    the grid cannot run: an unsafe directory, a socket path that is too long,
    or a daemon that did not come up within :data:`START_TIMEOUT` seconds.
    """
    return start(paths).location.socket


def start(paths: ClankerPaths | None = None, *, timeout: float = START_TIMEOUT) -> GridStatus:
    """Start the daemon unless one answers; return the running grid's status."""
    paths = paths or clanker_paths()
    paths = paths or clanker_paths()
    location = grid_location(paths)
    check_socket_path(location.socket)
    # The runtime directory made 0700 and checked as ours before anything is
    # created inside it (its /tmp fallback base included).
    runtime_directory(paths, create=True)
    secure_directory(location.directory)
    hello = _hello(location)
    if hello is not None:
        return _found(location, hello)
    _lock_held(location.lock)  # refuses a lock path that is not a regular file
    deadline = time.monotonic() + timeout
    word = _spawn(paths, location, deadline)
    while True:
        hello = _hello(location)
        if hello is not None:
            return _found(location, hello)
        if word not in (_READY, _BUSY) or time.monotonic() >= deadline:
            raise GridStartError(f"the grid did not start; its log is {location.log}")
        time.sleep(0.05)  # another daemon holds the lock and is still starting


def _open_log(path: Path) -> int:
    """The log, for the daemon's stdout and stderr until it opens the log itself."""
    ensure_directory(path.parent)
    return open_regular(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)


def _spawn(paths: ClankerPaths, location: GridLocation, deadline: float) -> bytes:
    """Run the daemon detached; return what it reported (``ready``, ``busy`` or nothing)."""
    read_end, write_end = os.pipe()
    try:
        log_fd = _open_log(location.log)
        try:
            argv = [sys.executable, "-m", "clanker.grid.daemon", "--runtime", str(paths.runtime),
                    "--state", str(paths.state), "--ready-fd", str(write_end), "--log"]
            process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd,
                pass_fds=(write_end,), start_new_session=True, cwd="/",
                env=strip_credentials(os.environ),
            )
        finally:
            os.close(log_fd)
        os.close(write_end)
        write_end = -1
        try:
            # The first process forks the daemon and leaves at once.
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise GridStartError(
                f"the grid did not start; its log is {location.log}") from None
        return _read_word(read_end, deadline)
    finally:
        os.close(read_end)
        if write_end != -1:
            os.close(write_end)


def _read_word(fd: int, deadline: float) -> bytes:
    received = b""
    while b"\n" not in received and len(received) < 64:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        readable, _, _ = select.select([fd], [], [], remaining)
        if not readable:
            break
        chunk = os.read(fd, 64)
        if not chunk:
            break
        received += chunk
    return received


def stop(paths: ClankerPaths | None = None, *, timeout: float = STOP_TIMEOUT) -> bool:
    """Ask a running grid to shut down and wait until it has; say whether one ran."""
    location = grid_location(paths)
    check_socket_path(location.socket)
    if not secure_directory(location.directory, create=False):
        return False
    hello = _hello(location)
    if hello is None:
        if _lock_held(location.lock):
            raise GridError(f"a grid holds {location.lock} but does not answer; "
                            f"its log is {location.log}")
        return False
    # Before the grid ends: its launches must not start the next one (see
    # :func:`stopped_on_request`); the next grid started on purpose removes it.
    os.close(open_regular(location.stopped, os.O_WRONLY | os.O_CREAT))
    try:
        from clanker.grid.client import GridClient

        GridClient(location.socket, timeout=HELLO_TIMEOUT).shutdown()
    except GridUnavailableError:
        return False  # it went away on its own
    deadline = time.monotonic() + timeout
    while _lock_held(location.lock):
        if time.monotonic() >= deadline:
            raise GridError(f"the grid (pid {hello.pid}) did not stop in time")
        time.sleep(0.02)
    return True


def stopped_on_request(paths: ClankerPaths | None = None) -> bool:
    """Whether no grid runs because ``clanker grid stop`` (:func:`stop`) ended the
    last one (or is ending it): a launch whose grid went away then leaves it
    stopped. The next grid started removes the mark."""
    return grid_location(paths).stopped.exists()


def _lock_held(path: Path) -> bool:
    """Say whether a daemon holds the lock (probed with a shared, non-blocking lock)."""
    try:
        fd = open_regular(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock we got
    return False


# ------------------------------------------------------------ the daemon itself


class _Ready:
    """The descriptor the starter waits on: one word, then closed (exactly once)."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    def report(self, word: bytes = b"") -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            if word:
                os.write(fd, word)
        with contextlib.suppress(OSError):
            os.close(fd)


def serve(location: GridLocation, *, ready_fd: int | None = None) -> int:
    """Run the grid in this process until it is asked to stop; return an exit status.

    Exits 0 (after reporting ``busy``) when another daemon holds the lock.
    ``ready_fd`` is always closed, with ``ready`` written once the socket listens.
    """
    ready = _Ready(ready_fd)
    try:
        return _serve(location, ready)
    finally:
        ready.report()


def _serve(location: GridLocation, ready: _Ready) -> int:
    import asyncio  # only the daemon itself runs a loop; `clanker status` never does

    from clanker.grid.server import Grid  # the broker is only needed here

    secure_directory(location.directory)
    lock_fd = open_regular(location.lock, os.O_RDWR | os.O_CREAT)
    try:
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("another grid holds %s; leaving", location.lock)
            ready.report(_BUSY)
            return 0
        os.ftruncate(lock_fd, 0)
        os.write(lock_fd, f"{os.getpid()}\n".encode())
        with contextlib.suppress(FileNotFoundError):
            location.stopped.unlink()

        _raise_descriptor_limit()

        async def run() -> None:
            # The log lives in clanker's state directory, where checkouts keep their records.
            grid = Grid(location.socket, state_dir=location.log.parent)
            await grid.start()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.add_signal_handler(signum, grid.request_stop)
            ready.report(_READY)
            try:
                await grid.wait_stopped()
            finally:
                await grid.stop()

        asyncio.run(run())
        return 0
    finally:
        # The socket is gone before the lock is released: a successor never
        # removes a socket that a live daemon still serves.
        os.close(lock_fd)


def _raise_descriptor_limit() -> None:
    """Ask for :data:`DESCRIPTORS` open files: a soft limit of 1024 is common, and
    running out would stall accepting connections."""
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = DESCRIPTORS if hard == resource.RLIM_INFINITY else min(DESCRIPTORS, hard)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _configure_logging(log_file: Path | None) -> None:
    """Log to ``log_file`` (bounded, see :mod:`~clanker.grid.logfile`), else to stderr."""
    import logging  # the daemon's own, not every module's that finds where it runs

    level = logging.DEBUG if os.environ.get("CLANKER_DEBUG") else logging.INFO
    handler: logging.Handler
    if log_file is None:
        handler = logging.StreamHandler(sys.stderr)
    else:
        from clanker.grid.logfile import open_log

        handler = open_log(log_file, capture_output=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])


def main(argv: list[str] | None = None) -> int:
    """``python -m clanker.grid.daemon``: detach, then serve (see :func:`serve`)."""
    parser = argparse.ArgumentParser(prog="python -m clanker.grid.daemon")
    parser.add_argument("--runtime", type=Path, help="the runtime directory root")
    parser.add_argument("--state", type=Path, help="the state directory root")
    parser.add_argument("--ready-fd", type=int, help="report ready/busy on this descriptor")
    parser.add_argument("--foreground", action="store_true", help="do not fork")
    parser.add_argument("--log", action="store_true",
                        help="log to <state>/grid.log (bounded) instead of stderr")
    args = parser.parse_args(argv)
    paths = clanker_paths()
    if args.runtime is not None and args.state is not None:
        paths = ClankerPaths(config=paths.config, cache=paths.cache, state=args.state,
                             runtime=args.runtime)
    if not args.foreground and os.fork() != 0:
        os._exit(0)  # the starter reaps this one; the daemon is nobody's child
    location = grid_location(paths)
    try:
        _configure_logging(location.log if args.log else None)
    except GridError as exc:
        print(f"the grid cannot log: {exc}", file=sys.stderr)
        return 1
    try:
        return serve(location, ready_fd=args.ready_fd)
    except GridError as exc:
        log.error("the grid cannot run: %s", exc)
        return 1
    except Exception as exc:
        log.error("the grid failed: %s", type(exc).__name__)
        return 1


if __name__ == "__main__":
    sys.exit(main())
