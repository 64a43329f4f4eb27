"""Starting and stopping child processes: the part both execution forms share.

Every command starts in a new session, so in a process group of its own, and
on Linux under a per-command reaper (``_reaper.py``): a child subreaper that
adopts whatever the command leaves behind, even a daemon that called
``setsid``, and ends all of it when the command ends. Elsewhere what can be
reached is the process group; a child that left it is out of reach, and after
the command exits clanker stops waiting for such a child's copy of the pipes.

The command's exit is watched on its own (a pidfd, or a thread where there is
none), not through the pipes: ``asyncio``'s ``Process.wait()`` returns only once
every pipe has reached EOF, so one background child holding stdout turned an
instant answer into a timeout. Nor is the process started with
``asyncio.create_subprocess_exec``: on Python 3.11, cancelling it while it
connects the pipes can hang for good (CPython gh-103847), and one failing task
among gathered ones is enough to do that. Here the process is started with
``subprocess.Popen`` on the loop's thread (as asyncio does), and its pipes are
connected with ``connect_read_pipe`` / ``connect_write_pipe``, which clean up
after themselves when cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import IO, Any, Final

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution.request import CommandRequest
from clanker.procstart import GRACE_SECONDS, child_env, compose_env, find_executable, write_first
from clanker.procstart import start as start_process

__all__ = ["GRACE_SECONDS", "Child", "adopt", "compose_env", "read_capped", "resolve_executable",
           "spawn", "terminate"]

# How much longer than its own grace the reaper may take to end a tree before
# clanker kills the group itself (which would orphan what left it).
_REAPER_MARGIN: Final = 2.0
_POLL: Final = 0.02
_READ_CHUNK: Final = 64 * 1024
_REPORT_MAX: Final = 64


def resolve_executable(command: str, env: Mapping[str, str]) -> str:
    """Find ``command`` on the child's PATH or raise ``binary-unavailable``."""
    found = find_executable(command, env)
    if found is None:
        raise HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE, command)
    return found


class Child:
    """One started command: its pipes, its exit and the tree it leads.

    ``exited()`` resolves when the command (or its reaper) exits, whatever
    still holds the pipes; :func:`release` and :func:`terminate` end the rest.
    """

    def __init__(self, process: subprocess.Popen[bytes], *, reaper: bool) -> None:
        self.pid = process.pid
        self._process = process
        self._reaper = reaper
        self._loop = asyncio.get_running_loop()
        self._exit: asyncio.Future[int] = self._loop.create_future()
        self._transports: list[asyncio.BaseTransport] = []
        self._connected: set[int] = set()
        self._group_gone = False
        self.stdin: asyncio.StreamWriter | None = None
        self.first_input_at: float | None = None
        """When :func:`spawn` wrote its ``first_input`` (``None``: nothing was written)."""
        self.stdout = asyncio.StreamReader(limit=_READ_CHUNK, loop=self._loop)
        self.stderr = asyncio.StreamReader(limit=_READ_CHUNK, loop=self._loop)
        self._watch()

    # -- exit ------------------------------------------------------------

    def _watch(self) -> None:
        pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            pidfd = os.pidfd_open(self.pid)
        if pidfd is not None:
            try:
                self._loop.add_reader(pidfd, self._pidfd_ready, pidfd)
                return
            except (NotImplementedError, OSError, ValueError):
                os.close(pidfd)
        loop, pid = self._loop, self.pid

        def wait() -> None:
            code = _wait_blocking(pid)
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._exited, code)

        threading.Thread(target=wait, name=f"clanker-wait-{pid}", daemon=True).start()

    def _pidfd_ready(self, pidfd: int) -> None:
        self._loop.remove_reader(pidfd)
        os.close(pidfd)
        self._exited(_wait_blocking(self.pid))  # readable: it has exited, this does not block

    def _exited(self, code: int) -> None:
        self._process.returncode = code  # so that Popen never takes it for running
        if not self._exit.done():
            self._exit.set_result(code)

    @property
    def returncode(self) -> int | None:
        return self._exit.result() if self._exit.done() else None

    async def exited(self) -> int:
        """Wait for the command to exit (cancelling the wait leaves the watch in place)."""
        return await asyncio.shield(self._exit)

    async def _wait_exit(self, timeout: float) -> bool:
        done, _ = await asyncio.wait({self._exit}, timeout=timeout)
        return bool(done)

    # -- pipes -----------------------------------------------------------

    async def connect(self) -> None:
        """Attach the pipes to the loop (cancellation-safe: ``close`` releases the rest)."""
        loop, process = self._loop, self._process
        if process.stdin is not None:
            writer_protocol = asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop),
                                                           loop=loop)
            writer, _ = await loop.connect_write_pipe(lambda: writer_protocol, process.stdin)
            self._adopt(process.stdin, writer)
            self.stdin = asyncio.StreamWriter(writer, writer_protocol, None, loop)
        for pipe, reader in ((process.stdout, self.stdout), (process.stderr, self.stderr)):
            assert pipe is not None

            def protocol(reader: asyncio.StreamReader = reader) -> asyncio.StreamReaderProtocol:
                return asyncio.StreamReaderProtocol(reader, loop=loop)

            transport, _ = await loop.connect_read_pipe(protocol, pipe)
            self._adopt(pipe, transport)

    def _adopt(self, pipe: IO[bytes], transport: asyncio.BaseTransport) -> None:
        self._transports.append(transport)
        self._connected.add(id(pipe))

    def close(self) -> None:
        """Close our ends of the pipes (idempotent): a reader still waiting sees EOF,
        and what it read stands."""
        for transport in self._transports:
            transport.close()
        process = self._process
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None and id(pipe) not in self._connected:
                pipe.close()

    # -- the tree --------------------------------------------------------

    def signal_tree(self, signum: int) -> None:
        """Send ``signum`` to the command's process group (the reaper passes it on)."""
        if self._group_gone:
            return  # its id may belong to someone else by now
        try:
            os.killpg(self.pid, signum)
        except ProcessLookupError:
            self._group_gone = True
        except PermissionError:
            pass  # a member that changed its credentials; the rest got it

    def _group_alive(self) -> bool:
        self.signal_tree(0)
        return not self._group_gone

    async def end_leftovers(self, grace: float) -> None:
        """After the command's exit: end what it left in its process group.

        Under the reaper there is nothing left unless the reaper itself was
        killed; elsewhere the group is what can be reached (SIGTERM, ``grace``
        seconds, SIGKILL).
        """
        if self._reaper and self.returncode != -signal.SIGKILL:
            return
        if not self._group_alive():
            return
        if grace > 0:
            self.signal_tree(signal.SIGTERM)
            deadline = self._loop.time() + grace
            while self._loop.time() < deadline:
                await asyncio.sleep(_POLL)
                if not self._group_alive():
                    return
        self.signal_tree(signal.SIGKILL)

    @property
    def stop_grace(self) -> float:
        """How long a stopped command gets before its group is killed."""
        return GRACE_SECONDS + _REAPER_MARGIN if self._reaper else GRACE_SECONDS


def _wait_blocking(pid: int) -> int:
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return 255  # reaped by someone else (a foreign SIGCHLD handler): status unknown
    return os.waitstatus_to_exitcode(status)


async def release(child: Child, readers: Sequence[asyncio.Future[Any]]) -> None:
    """The command has exited: end what it left, give ``readers`` a grace to drain
    what the pipes still hold, then close the pipes so that they finish."""
    await child.end_leftovers(GRACE_SECONDS)
    pending = [reader for reader in readers if not reader.done()]
    if pending:
        _, pending_set = await asyncio.wait(pending, timeout=GRACE_SECONDS)
        pending = list(pending_set)
    child.close()  # a descendant out of reach may hold a pipe; stop waiting for it
    if pending:
        await asyncio.wait(pending, timeout=GRACE_SECONDS)


async def terminate(child: Child) -> None:
    """Stop the command's whole tree (SIGTERM, then SIGKILL after a grace period) and reap.

    Safe on a command that already exited, safe to repeat, and safe to call
    while the calling task is being cancelled: cancelled again, it kills at once.
    """
    try:
        if child.returncode is None:
            child.signal_tree(signal.SIGTERM)
            if not await child._wait_exit(child.stop_grace):
                child.signal_tree(signal.SIGKILL)
                await child._wait_exit(GRACE_SECONDS)
        await child.end_leftovers(0)
    except BaseException:
        child.signal_tree(signal.SIGKILL)
        raise
    finally:
        child.close()


def _start_failure(
    request: CommandRequest, code: int | None, cause: BaseException | None = None
) -> HarnessCapabilityError:
    command = request.command
    if code == errno.ENOENT and request.cwd and not os.path.isdir(request.cwd):
        return HarnessCapabilityError(ErrorKind.COMMAND_FAILED, command, cause=cause)
    if code == errno.ENOENT:  # it vanished after the lookup, or its interpreter is missing
        return HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE, command, cause=cause)
    if code in (errno.EACCES, errno.EPERM):
        return HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE, f"{command} is not executable",
                                      cause=cause)
    reason = os.strerror(code) if code is not None else "no report"
    return HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE,
                                  f"{command} could not be started: {reason}", cause=cause)


async def _read_report(fd: int) -> bytes:
    """Read the reaper's word on ``fd`` until it closes it (then close ours)."""
    loop = asyncio.get_running_loop()
    os.set_blocking(fd, False)
    done: asyncio.Future[None] = loop.create_future()
    received = bytearray()

    def readable() -> None:
        try:
            chunk = os.read(fd, _REPORT_MAX)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk and len(received) < _REPORT_MAX:
            received.extend(chunk)
        elif not done.done():
            done.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await done
    finally:
        loop.remove_reader(fd)
        os.close(fd)
    return bytes(received)


def _report_failure(word: bytes) -> int | None:
    """``None`` when the reaper started the command, else the errno it reported (0: none)."""
    if b"errno:" in word:
        number = word.rpartition(b"errno:")[2].strip()
        return int(number) if number.isdigit() else 0
    return None if word in (b"ok", b"exec") else 0


async def spawn(
    request: CommandRequest, base_env: Mapping[str, str], *, stdin_pipe: bool,
    first_input: bytes | None = None,
) -> Child:
    """Start ``request`` with piped output, in a new session (under the reaper on Linux).

    ``first_input`` (with ``stdin_pipe``) is written to the command's stdin as
    soon as the process exists, before the reaper's report is awaited: a
    protocol's first frame waits in the pipe while the command starts, and
    :attr:`Child.first_input_at` says when it was written (``None``: it could
    not be). It must fit in the pipe (a few KiB).

    Raises ``binary-unavailable`` when it cannot be executed, ``command-failed``
    when its directory is missing. Cancelled, it stops what it started.
    """
    env = child_env(base_env, request.env, request.cwd)
    executable = resolve_executable(request.command, env)
    try:
        process, report_read = start_process([executable, *request.args], env, request.cwd,
                                             stdin_pipe=stdin_pipe)
    except OSError as exc:
        raise _start_failure(request, exc.errno, exc) from exc
    written = write_first(process, first_input) if first_input and stdin_pipe else None
    return await adopt(request, process, report_read, first_input_at=written)


async def adopt(request: CommandRequest, process: subprocess.Popen[bytes], report_read: int,
                *, first_input_at: float | None = None) -> Child:
    """Take charge of ``process``, started for ``request`` by
    :func:`clanker.procstart.start` (``report_read``: its reaper's report pipe,
    ``-1`` without one, closed here): connect its pipes and wait for the
    reaper's word that the command started.

    Raises as :func:`spawn` does; on any failure (or cancellation) the process's
    tree is stopped."""
    try:
        child = Child(process, reaper=report_read >= 0)
        child.first_input_at = first_input_at
        try:
            await child.connect()
            if report_read >= 0:
                fd, report_read = report_read, -1
                failure = _report_failure(await _read_report(fd))
                if failure is not None:
                    raise _start_failure(request, failure or None)
        except BaseException:
            await terminate(child)
            raise
        return child
    finally:
        if report_read >= 0:
            os.close(report_read)


async def read_capped(stream: asyncio.StreamReader, cap: int, which: str) -> bytes:
    """Read ``stream`` to EOF, raising ``output-limit`` past ``cap`` bytes."""
    chunks: list[bytes] = []
    total = 0
    while chunk := await stream.read(_READ_CHUNK):
        total += len(chunk)
        if total > cap:
            raise HarnessCapabilityError(ErrorKind.OUTPUT_LIMIT, f"{which} over {cap} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
