"""Run one command so that its whole tree ends with it (Linux; standard library only).

clanker starts every harness command on Linux as::

    python -I -S _reaper.py REPORT_FD PARENT_PID GRACE EXECUTABLE [ARG...]

This process (the reaper) is a child subreaper (``PR_SET_CHILD_SUBREAPER``):
whatever the command leaves behind, a background job in its process group,
a daemon that called ``setsid`` and forked again, is re-parented here when
its own parent exits, instead of to init, where nobody could find it. The
attribute belongs to this process alone, not to clanker's, which is why it is
a process of its own.

The reaper starts the command (same process group, same descriptors), says on
``REPORT_FD`` whether it started (``ok``, or ``errno:N``), lets go of its own
copies of stdin, stdout and stderr, so that the pipes end when the command's
tree does, and waits. When the command exits, or when the reaper is asked to
stop (SIGTERM, SIGHUP, SIGINT, or clanker's death: ``PR_SET_PDEATHSIG``), it
ends everything that is left: SIGTERM to its process group and to every
orphan it adopted, ``GRACE`` seconds to go, then SIGKILL, round after round,
until it has no child left. Then it exits as the command did (the same
status, or the same signal), so clanker sees the command's own result.

What is out of reach: a process started on the command's behalf by someone
else (a service manager, a D-Bus activation), and one that survives SIGKILL
(uninterruptible sleep); the latter the reaper waits for. Where this script
cannot run (not Linux, no ``prctl``), clanker falls back to ending the
process group (see ``process.py``).
"""

# ruff: noqa: SIM105 - contextlib.suppress would cost every command its import

from __future__ import annotations

import ctypes
import os
import resource
import sys
import time

# Every command pays for this start-up: no typing, no contextlib, and the C
# signal module rather than `signal` (whose enums cost more than the rest).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    from types import FrameType
    from typing import Final, NoReturn
else:
    import _signal as signal

_PR_SET_PDEATHSIG: Final = 1
_PR_SET_CHILD_SUBREAPER: Final = 36
_POLL: Final = 0.01
_MAX_ROUNDS: Final = 256
_MAX_PROC_ENTRIES: Final = 1 << 20
_MAX_ENVIRON: Final = 16 * 1024 * 1024
_STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class _Stop(Exception):
    """Raised by the first stop signal while the reaper waits for the command."""


class _Waiting:
    """Whether a stop signal may still interrupt the wait (it may, once)."""

    now = False


def _on_stop(signum: int, frame: FrameType | None) -> None:
    if _Waiting.now:  # later signals, and signals during the clean-up, change nothing
        _Waiting.now = False
        raise _Stop


def _report(fd: int, word: bytes) -> None:
    try:
        os.write(fd, word)
    except OSError:
        pass


def _environment() -> dict[bytes, bytes]:
    """The environment this process was given, exactly.

    Python's start-up may coerce a C locale into ``LC_CTYPE`` in its own
    environment; the kernel's copy of what ``execve`` received has no such
    addition.
    """
    try:
        with open("/proc/self/environ", "rb") as handle:
            raw = handle.read(_MAX_ENVIRON + 1)
    except OSError:
        return dict(os.environb)
    if len(raw) > _MAX_ENVIRON:
        return dict(os.environb)
    environ: dict[bytes, bytes] = {}
    for entry in raw.split(b"\0"):
        name, equals, value = entry.partition(b"=")
        if equals and name:
            environ[name] = value
    return environ


def _become_subreaper(parent: int) -> bool:
    """Adopt the command's orphans, and stop when clanker dies; say whether that worked."""
    if not os.path.isdir("/proc/self"):
        return False  # orphans could be adopted but not found
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return False
    if prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return False
    prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # clanker died before the death signal was armed
        os._exit(1)
    return True


def _children() -> list[int]:
    """This process's children, from ``/proc/<pid>/stat`` (``pid (comm) state ppid ...``)."""
    me = os.getpid()
    found: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for name in entries[:_MAX_PROC_ENTRIES]:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read(4096)
        except OSError:
            continue  # gone already, or not ours to read
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and fields[1] == str(me).encode():
            found.append(int(name))
    return found


def _reap(leader: int, status: list[int | None]) -> bool:
    """Reap every child that has exited; say whether any child is left."""
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        if pid == leader:
            status[0] = code


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except OSError:
        pass  # gone already


def _end_tree(leader: int, grace: float, status: list[int | None]) -> None:
    """End everything the command left: SIGTERM, ``grace`` seconds, then SIGKILL."""
    if not _reap(leader, status):
        return  # no child: nothing was left (a descendant's ancestor would be ours)
    try:
        os.killpg(0, signal.SIGTERM)  # our group: the reaper ignores it from now on
    except OSError:
        pass
    for pid in _children():
        _signal(pid, signal.SIGTERM)  # adopted orphans, in sessions of their own
    deadline = time.monotonic() + grace
    while _reap(leader, status):
        if time.monotonic() >= deadline:
            break
        time.sleep(_POLL)
    for _ in range(_MAX_ROUNDS):
        if not _reap(leader, status):
            return
        # Killing a child hands its own children to us; the next round ends those.
        victims = _children()
        for pid in victims:
            _signal(pid, signal.SIGKILL)
        for pid in victims:
            try:
                _, code = os.waitpid(pid, 0)
            except ChildProcessError:
                continue  # reaped above
            if pid == leader:
                status[0] = code
        if not victims:
            time.sleep(_POLL)


def _exit_as(status: int | None) -> NoReturn:
    """Exit with the command's status, or die of the signal that ended it."""
    if status is None:
        os._exit(128 + signal.SIGTERM)
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        try:
            # Dying of SIGSEGV or SIGABRT ourselves must not leave a core of the reaper.
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (ValueError, OSError):
            pass
        try:
            signal.signal(signum, signal.SIG_DFL)  # refused for SIGKILL and SIGSTOP
        except (ValueError, OSError):
            pass
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
            os.kill(os.getpid(), signum)
        except (ValueError, OSError):
            pass
        os._exit(128 + signum)  # a signal that does not end a process
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _detach_stdio() -> None:
    """Drop our copies of stdin, stdout and stderr: the pipes are the command's now."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def main(argv: list[str]) -> NoReturn:
    report, parent, grace = int(argv[1]), int(argv[2]), float(argv[3])
    command = argv[4:]
    os.set_inheritable(report, False)  # the command never sees it
    environ = _environment()
    if not _become_subreaper(parent):
        # No subreaper here: be the command itself, and let clanker end its group.
        for signum in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(signum, signal.SIG_DFL)  # Python ignores them; execve would keep that
        _report(report, b"exec")
        try:
            os.execve(command[0], command, environ)  # noqa: S606 - argv validated by clanker
        except OSError as exc:
            _report(report, f" errno:{exc.errno}".encode())
        os._exit(127)
    status: list[int | None] = [None]
    # Stop signals wait until the leader's pid is known: a stop must still end it.
    # The command gets the mask and dispositions it would have had without us, but
    # for SIGPIPE and SIGXFSZ, which Python ignores and which it gets as defaults.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        leader = os.posix_spawn(command[0], command, environ, setsigmask=mask,
                                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
    except OSError as exc:
        _report(report, f"errno:{exc.errno}".encode())
        os._exit(127)
    for signum in _STOP_SIGNALS:
        signal.signal(signum, _on_stop)
    _Waiting.now = True
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        _report(report, b"ok")
        os.close(report)
        _detach_stdio()
        while True:
            pid, code = os.waitpid(-1, 0)  # reaps adopted orphans as they exit, too
            if pid == leader:
                _Waiting.now = False
                status[0] = code
                break
    except _Stop:
        pass
    _Waiting.now = False
    for signum in _STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    _end_tree(leader, grace, status)
    _exit_as(status[0])


if __name__ == "__main__":
    main(sys.argv)
