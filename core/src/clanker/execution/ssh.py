"""Run bounded commands on an SSH host through the system OpenSSH client.

The ``ssh`` client is a local child like any other (same spawn, same reaper,
same caps and deadline); what changes is the command line and three rules:

* The remote command is one string that three shells read in turn: the
  user's login shell (any shell: the string is single-quoted words only),
  ``/bin/sh`` (which reports the process id, changes directory and starts the
  next), and ``$SHELL -l`` (so ``PATH`` is what a login shell sets up there),
  which ``exec``\\ s the program. Every word is single-quoted at every level,
  so any argument without NUL reaches the program byte for byte.
* ``ssh`` exits 255 for its own failures and when the remote program died of
  a signal: both are ``transport-failure``, as is the local client's death by
  a signal. Every other status is the program's own result, 127 included,
  except where the program was never found: the login shell hands the program
  to one more ``/bin/sh``, which looks it up on the login ``PATH`` first
  (``command -v``) and, when it is not there, prints a marker and exits 127.
  That is ``binary-unavailable``, as a missing program is on this machine.
* Killing the local client would leave the remote program running (a channel
  without a terminal gets no hang-up). So the remote ``/bin/sh`` first writes
  its process id on stderr, then ``exec``\\ s (the id stays the program's, and
  sshd made it a session leader); a timeout, a cap or a cancellation ends that
  process group on the host, through the same connection, before the local
  client is stopped.

Nothing of the local environment is forwarded: the ``ssh`` client runs with
only what it needs itself (``HOME``, ``PATH``, the user's names, the agent
socket, the Kerberos cache), so a ``SendEnv`` (Debian's default sends
``LANG`` and ``LC_*``) finds nothing to send; no agent or X11 forwarding.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution.local import _decode, _feed, _settle
from clanker.execution.process import Child, read_capped, release, spawn, terminate
from clanker.execution.request import MAX_TIMEOUT, CommandRequest, CommandResult
from clanker.execution.session import CommandSession, DisposedOnExit, SessionExit

__all__ = [
    "SSH_TRANSPORT_EXIT",
    "SshTransport",
    "interactive_command",
    "remote_command",
    "sh_quote",
    "validate_target",
]

SSH_TRANSPORT_EXIT: Final = 255
CONNECT_TIMEOUT: Final = 10
_PERSIST_SECONDS: Final = 60
_PID_MARKER: Final = b"clanker-remote-pid "
_NO_CWD_MARKER: Final = b"clanker-remote-no-cwd"
_MISSING_MARKER: Final = b"clanker-remote-not-found"
_NOT_FOUND_EXIT: Final = 127
# What the remote side may print before the marker (a chatty profile): bounded.
_PREAMBLE_MAX: Final = 16 * 1024
_KILL_TIMEOUT: Final = 10.0
# sshd's MaxSessions (10 by default) bounds the channels of one connection: what
# clanker starts stays under it, with room for the commands that end programs.
MAX_CHANNELS: Final = 6
# An OpenSSH destination: [user@]host[:port] or ssh://..., or a Host alias.
# Never an option, never whitespace or a control character.
_TARGET: Final = re.compile(r"[A-Za-z0-9_.@:\[\]%/+=~-]{1,255}")

_CLIENT_ENV: Final = ("HOME", "PATH", "USER", "LOGNAME", "SSH_AUTH_SOCK", "KRB5CCNAME",
                      "XDG_RUNTIME_DIR", "TMPDIR")

def client_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of ``environ`` the local ``ssh`` client needs (and nothing it could forward)."""
    return {name: environ[name] for name in _CLIENT_ENV if name in environ}


def validate_target(target: str) -> str:
    """Return ``target`` if ``ssh`` can only read it as a destination, else raise ``ValueError``."""
    if not isinstance(target, str) or _TARGET.fullmatch(target) is None or target.startswith("-"):
        raise ValueError(f"{target!r} is not an SSH destination (user@host or a Host alias)")
    return target


def sh_quote(word: str) -> str:
    """Quote ``word`` as one POSIX shell word: single quotes, each ``'`` as ``'\\''``."""
    return "'" + word.replace("'", "'\\''") + "'"


def remote_command(request: CommandRequest) -> str:
    """The one string ``ssh`` hands the remote login shell for ``request``."""
    words = ["exec"]
    if request.env:
        words += ["env", "--", *(f"{name}={value}" for name, value in request.env.items())]
    words += request.argv
    program = " ".join(sh_quote(word) for word in words)
    if "PATH" not in request.env:  # else `env` looks it up on a PATH the lookup would not see
        missing = _MISSING_MARKER.decode()
        program = "exec /bin/sh -c " + sh_quote(
            f"command -v {sh_quote(request.command)} >/dev/null 2>&1"
            f" || {{ echo {missing} >&2; exit {_NOT_FOUND_EXIT}; }}; {program}")
    steps = []
    if request.cwd is not None:
        no_cwd = _NO_CWD_MARKER.decode()
        steps.append(f"cd -- {sh_quote(request.cwd)} 2>/dev/null"
                     f" || {{ echo {no_cwd} >&2; exit 1; }}")
    steps.append(f"printf '{_PID_MARKER.decode()}%s\\n' \"$$\" >&2")
    steps.append(f'exec "${{SHELL:-/bin/sh}}" -l -c {sh_quote(program)}')
    return "exec /bin/sh -c " + sh_quote("; ".join(steps))


def interactive_command(argv: tuple[str, ...], env: dict[str, str], unset: tuple[str, ...],
                        cwd: str) -> str:
    """The string ``ssh -t`` hands the remote login shell to run ``argv`` in ``cwd``
    in the terminal: ``env`` added to, and ``unset`` removed from, the login
    environment. No pid marker: the terminal is the person's."""
    words = ["exec"]
    if env or unset:
        words.append("env")
        for name in unset:
            words += ["-u", name]
        words += ["--", *(f"{name}={value}" for name, value in env.items())]
    words += argv
    program = " ".join(sh_quote(word) for word in words)
    steps = [f"cd -- {sh_quote(cwd)} || exit 1",
             f'exec "${{SHELL:-/bin/sh}}" -l -c {sh_quote(program)}']
    return "exec /bin/sh -c " + sh_quote("; ".join(steps))


def _not_found(exit_code: int, stderr: bytes) -> bool:
    """Whether the remote lookup found no such program (its marker is the last line)."""
    return exit_code == _NOT_FOUND_EXIT and stderr.endswith(_MISSING_MARKER + b"\n")


def _unavailable(command: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE, f"{command} (not on the host)")


def _transport_detail(stderr: bytes, code: int) -> str:
    """A safe summary of why ``ssh`` failed: the known causes by name, never its raw text."""
    text = stderr.decode("utf-8", errors="replace").lower()
    for phrase, detail in (
        ("host key verification failed", "host key verification failed"),
        ("remote host identification has changed", "the host key changed"),
        ("could not resolve hostname", "the host name does not resolve"),
        ("connection timed out", "the connection timed out"),
        ("connection refused", "the connection was refused"),
        ("no route to host", "no route to the host"),
        ("permission denied", "authentication was refused"),
        ("too many authentication failures", "authentication was refused"),
        ("connection closed", "the connection was closed"),
    ):
        if phrase in text:
            return detail
    if code < 0:
        return f"ssh ended by signal {-code}"
    return f"ssh exited {code}"


def _transport_failure(target: str, stderr: bytes, code: int) -> HarnessCapabilityError:
    return HarnessCapabilityError(ErrorKind.TRANSPORT_FAILURE,
                                  f"{target}: {_transport_detail(stderr, code)}")


async def _read_preamble(child: Child) -> tuple[bytes, int | None]:
    """Read stderr up to the remote pid marker: return what came before it and the pid
    (``None`` when stderr ended first: the program never started).

    What the host prints before the marker (a login shell's startup files) is
    bounded: past 16 KiB, or in one longer line, the command fails.
    """
    too_much = HarnessCapabilityError(
        ErrorKind.COMMAND_FAILED,
        f"the host printed over {_PREAMBLE_MAX} bytes before the program started")
    before = bytearray()
    while True:
        try:
            line = await child.stderr.readline()
        except ValueError:  # one line longer than the stream's own limit
            raise too_much from None
        if len(before) + len(line) > _PREAMBLE_MAX:
            raise too_much
        if not line:
            return bytes(before), None
        if line.startswith(_PID_MARKER):
            number = line[len(_PID_MARKER):].strip()
            return bytes(before), int(number) if number.isdigit() else None
        if line.rstrip(b"\n") == _NO_CWD_MARKER:
            raise HarnessCapabilityError(ErrorKind.COMMAND_FAILED,
                                         "its directory does not exist on the host")
        before += line


class SshTransport:
    """Both execution forms on one SSH host, sharing one ControlMaster connection.

    ``control_dir`` must be a short private directory (the socket path limit
    is about 100 bytes); ``config_file`` replaces ``~/.ssh/config`` (``ssh -F``).
    ``base_env`` is the local environment ``ssh`` is started from.
    """

    def __init__(
        self,
        target: str,
        *,
        control_dir: Path,
        config_file: Path | None = None,
        base_env: Mapping[str, str] | None = None,
    ) -> None:
        self.target = validate_target(target)
        self._config_file = config_file
        self._control = control_dir / "%C"
        self._base_env = client_environ(os.environ if base_env is None else base_env)
        self._master_lock = asyncio.Lock()
        self._slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        self._master_checked = False
        self.connections = 0
        """How many times this transport opened a connection of its own (a master)."""
        self.executions = 0
        """How many remote programs it started (both forms; ending one is not counted)."""

    def __repr__(self) -> str:
        return f"SshTransport({self.target!r})"

    # -- the command line ---------------------------------------------------

    def _ssh_args(self, *, control_master: str = "no") -> list[str]:
        args = [] if self._config_file is None else ["-F", str(self._config_file)]
        args += [
            "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
            "-o", "ServerAliveInterval=15",
            "-o", "ServerAliveCountMax=4",
            "-o", f"ControlMaster={control_master}",
            "-o", f"ControlPath={self._control}",
            "-o", "ForwardAgent=no",
            "-o", "ForwardX11=no",
            "-o", "ClearAllForwardings=yes",
            "-o", "PermitLocalCommand=no",
            "-o", "RequestTTY=no",
            "-o", "LogLevel=ERROR",
            "-T",
        ]
        return args

    def _client_request(self, request: CommandRequest, remote: str,
                        *, stdin: bytes | None) -> CommandRequest:
        return CommandRequest(
            command="ssh",
            args=(*self._ssh_args(), "--", self.target, remote),
            stdin=stdin,
            timeout=request.timeout,
            inference=request.inference,
            attended=request.attended,
            max_output_bytes=request.max_output_bytes,
        )

    def interactive_argv(self, remote: str) -> list[str]:
        """The local ``ssh -t`` command line running ``remote`` in the person's terminal:
        the same options and ControlMaster as every other command, with a terminal
        on the host when this one is a terminal."""
        args = self._ssh_args()
        args[args.index("RequestTTY=no")] = "RequestTTY=yes"
        args[args.index("-T")] = "-t"
        return [self._client(), *args, "--", self.target, remote]

    def interactive_environ(self, term: str | None) -> dict[str, str]:
        """The local environment of an interactive ``ssh``: what it needs itself, and
        ``TERM`` (which goes with the terminal request, as for any ``ssh -t``)."""
        env = dict(self._base_env)
        if term:
            env["TERM"] = term
        return env

    # -- the shared connection ---------------------------------------------

    async def ensure_connected(self, timeout: float = MAX_TIMEOUT) -> None:
        """Make sure the host's ControlMaster is up (once per transport), starting it
        if needed within ``timeout`` seconds; raise ``transport-failure`` when the
        host cannot be reached."""
        async with self._master_lock:
            if self._master_checked:
                return
            await asyncio.to_thread(self._start_master, timeout)
            self._master_checked = True

    def _start_master(self, timeout: float) -> None:
        try:
            self._start_master_within(timeout)
        except subprocess.TimeoutExpired as exc:
            raise HarnessCapabilityError(ErrorKind.TRANSPORT_FAILURE,
                                         f"{self.target}: the connection timed out") from exc

    def _start_master_within(self, timeout: float) -> None:
        check = subprocess.run(
            [self._client(), *self._ssh_args(), "-O", "check", "--", self.target],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=self._base_env, timeout=timeout, check=False,
        )
        if check.returncode == 0:
            return
        # The master forks into the background and keeps the descriptors it was
        # given: stderr goes to a file, so nothing here waits for the master's end.
        with tempfile.TemporaryFile() as errors:
            started = subprocess.run(
                [self._client(), *self._ssh_args(control_master="yes"),
                 "-o", f"ControlPersist={_PERSIST_SECONDS}", "-f", "-N", "--", self.target],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors,
                env=self._base_env, timeout=timeout, check=False, start_new_session=True,
            )
            errors.seek(0)
            text = errors.read(_PREAMBLE_MAX)
        if started.returncode != 0:
            raise _transport_failure(self.target, text, started.returncode)
        self.connections += 1

    def _client(self) -> str:
        """The local ``ssh`` client's path, or ``binary-unavailable``."""
        found = shutil.which("ssh", path=self._base_env.get("PATH", os.defpath))
        if found is None:
            raise HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE, "ssh (OpenSSH client)")
        return found

    def close(self) -> None:
        """Stop the host's ControlMaster (``ssh -O exit``); idempotent."""
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                [self._client(), *self._ssh_args(), "-O", "exit", "--", self.target],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=self._base_env, timeout=MAX_TIMEOUT, check=False,
            )
        self._master_checked = False

    def _channels(self) -> asyncio.Semaphore:
        """The channel slots of the running loop (a semaphore belongs to one loop)."""
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:
            self._slots = (loop, asyncio.Semaphore(MAX_CHANNELS))
        return self._slots[1]

    # -- ending a remote program -------------------------------------------

    async def _kill_remote(self, pid: int | None) -> None:
        """End the remote program's process group: TERM, a second, then KILL."""
        if pid is None or pid <= 1:
            return
        # `kill -SIG -PID` (no `--`: dash's kill does not take it) signals the group.
        group = f"-{pid}"
        script = (f"kill -TERM {group} 2>/dev/null || exit 0; "
                  f"kill -0 {group} 2>/dev/null || exit 0; sleep 1; "
                  f"kill -KILL {group} 2>/dev/null; exit 0")
        request = CommandRequest(command="ssh", args=(*self._ssh_args(), "--", self.target,
                                                      "exec /bin/sh -c " + sh_quote(script)),
                                 timeout=_KILL_TIMEOUT)
        from clanker.execution.local import LocalTransport

        with contextlib.suppress(HarnessCapabilityError):
            await asyncio.shield(LocalTransport(self._base_env).run(request))

    async def _stop(self, child: Child, pid: int | None) -> None:
        try:
            await self._kill_remote(pid)
        finally:
            await terminate(child)

    async def _started(self, child: Child, request: CommandRequest) -> tuple[bytes, int]:
        """Wait for the remote program's pid marker: return what stderr held before
        it and the pid, or raise why the program never started."""
        preamble, pid = await _read_preamble(child)
        if pid is not None:
            return preamble, pid
        code = await child.exited()
        await release(child, [])
        if code == SSH_TRANSPORT_EXIT or code < 0:
            raise _transport_failure(self.target, preamble, code)
        raise HarnessCapabilityError(ErrorKind.COMMAND_FAILED,
                                     f"{request.command}: it did not start on the host")

    # -- one-shot ----------------------------------------------------------

    async def run(self, request: CommandRequest) -> CommandResult:
        """Run ``request`` on the host to completion (see :meth:`LocalTransport.run`).

        Raises ``transport-failure`` when ``ssh`` exits 255 or dies of a signal,
        ``binary-unavailable`` when the host has no such program, and the local
        transport's errors otherwise; on a timeout, an output cap
        or a cancellation the remote program is ended too.
        """
        # One deadline for all of it: connecting, waiting for a channel, running.
        deadline = asyncio.get_running_loop().time() + request.timeout
        timeout = HarnessCapabilityError(ErrorKind.TIMEOUT,
                                         f"{request.command} after {request.timeout:g}s")
        slots = await self._channel(request, deadline, timeout)
        try:
            return await self._run(request, deadline, timeout)
        finally:
            slots.release()

    async def _channel(self, request: CommandRequest, deadline: float,
                       timeout: HarnessCapabilityError) -> asyncio.Semaphore:
        """Connect (if needed) and take a channel slot, both before ``deadline``."""
        slots = self._channels()
        try:
            async with asyncio.timeout_at(deadline):
                await self.ensure_connected(request.timeout)
                await slots.acquire()
        except TimeoutError as exc:
            raise timeout from exc
        return slots

    async def _run(self, request: CommandRequest, deadline: float,
                   timeout: HarnessCapabilityError) -> CommandResult:
        self.executions += 1
        cap = request.max_output_bytes
        client = self._client_request(request, remote_command(request), stdin=request.stdin)
        try:
            async with asyncio.timeout_at(deadline):
                child = await spawn(client, self._base_env, stdin_pipe=request.stdin is not None)
        except TimeoutError as exc:
            raise timeout from exc
        pid: int | None = None
        tasks: list[asyncio.Future[Any]] = []
        try:
            async with asyncio.timeout_at(deadline):
                preamble, pid = await self._started(child, request)
                readers = [
                    asyncio.ensure_future(read_capped(child.stdout, cap, "stdout")),
                    asyncio.ensure_future(read_capped(child.stderr, cap - len(preamble), "stderr")),
                ]
                tasks = [*readers, asyncio.ensure_future(_feed(child, request.stdin))]
                exit_code = await _settle(child, readers)
                out, err = (reader.result() for reader in readers)
        except TimeoutError as exc:
            await self._stop(child, pid)
            raise timeout from exc
        except BaseException:
            await self._stop(child, pid)
            raise
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if exit_code == SSH_TRANSPORT_EXIT or exit_code < 0:
            raise _transport_failure(self.target, err, exit_code)
        if _not_found(exit_code, err):
            raise _unavailable(request.command)
        return CommandResult(_decode(out), _decode(preamble + err), exit_code)

    # -- stdio sessions ----------------------------------------------------

    async def open(self, request: CommandRequest) -> SshSession:
        """Start ``request`` on the host as a line-oriented stdio session."""
        if request.stdin is not None:
            raise ValueError("stdin: a session writes its input with write_line()")
        deadline = asyncio.get_running_loop().time() + request.timeout
        timeout = HarnessCapabilityError(
            ErrorKind.TIMEOUT, f"{request.command}: session over {request.timeout:g}s")
        slots = await self._channel(request, deadline, timeout)
        try:
            return await self._open(request, slots, deadline, timeout)
        except BaseException:
            slots.release()
            raise

    async def _open(self, request: CommandRequest, slots: asyncio.Semaphore, deadline: float,
                    timeout: HarnessCapabilityError) -> SshSession:
        self.executions += 1
        client = self._client_request(request, remote_command(request), stdin=None)
        pid: int | None = None
        child: Child | None = None
        try:
            async with asyncio.timeout_at(deadline):
                child = await spawn(client, self._base_env, stdin_pipe=True)
                _, pid = await self._started(child, request)
        except TimeoutError as exc:
            if child is not None:
                await self._stop(child, pid)
            raise timeout from exc
        except BaseException:
            if child is not None:
                await self._stop(child, pid)
            raise
        return SshSession(self, child, pid, CommandSession(child, request), slots,
                          command=request.command)


class SshSession(DisposedOnExit):
    """A :class:`CommandSession` whose program runs on an SSH host.

    The same API; ``wait`` turns ``ssh``'s 255 (or its death by a signal) into
    ``transport-failure`` and a program the host does not have into
    ``binary-unavailable``, and ``dispose`` ends the remote program when the
    local client did not see it exit, and gives its channel slot back.
    """

    def __init__(self, transport: SshTransport, child: Child, pid: int,
                 session: CommandSession, slots: asyncio.Semaphore, *, command: str) -> None:
        self._slots: asyncio.Semaphore | None = slots
        self._command = command
        self._transport = transport
        self._child = child
        self._pid = pid
        self._session = session

    async def write_line(self, line: str) -> None:
        await self._session.write_line(line)

    async def read_line(self) -> str | None:
        return await self._session.read_line()

    async def close_input(self) -> None:
        await self._session.close_input()

    async def wait(self) -> SessionExit:
        result = await self._session.wait()
        if result.exit_code == SSH_TRANSPORT_EXIT or result.exit_code < 0:
            raise _transport_failure(self._transport.target, result.stderr.encode(),
                                     result.exit_code)
        if _not_found(result.exit_code, result.stderr.encode()):
            raise _unavailable(self._command)
        return result

    async def dispose(self) -> None:
        if self._slots is None:
            return  # disposed already
        code = self._child.returncode
        try:
            if code is None or code < 0:  # the remote program's end was not seen
                await self._transport._kill_remote(self._pid)
        finally:
            try:
                await self._session.dispose()
            finally:
                if self._slots is not None:
                    self._slots.release()
                    self._slots = None
