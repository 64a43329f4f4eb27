"""An SSH host as an :class:`~clanker.environment.Environment`.

Commands run through :class:`~clanker.execution.ssh.SshTransport` (one
ControlMaster per host). :meth:`SshEnvironment.connect` opens the connection
and reads the host's environment as a login shell there sets it up, in one
execution, so that providers see the remote ``HOME`` and ``PATH``, never the
local ones. Nothing ever falls back to this machine: a host that cannot be
reached is a ``transport-failure``.

A host's files (the :class:`~clanker.environment.HostFiles` seam) are read
by :class:`~clanker.environment.ssh_scan.RemoteFiles` within
:meth:`SshEnvironment.gather`: a whole scan of the host's session stores
costs at most :data:`~clanker.environment.ssh_scan.MAX_ROUNDS` executions.

A launch with attention (:class:`~clanker.launch.attention.RemoteAttentionAttachment`)
hands :meth:`SshEnvironment.observe_terminal` an observer of the host's
terminal stream: :meth:`SshEnvironment.run_interactive` then runs ``ssh -t``
on a PTY this launcher owns (:class:`~clanker.environment.pty_relay.PtyRelay`)
and every byte the host sends passes through the observer, which takes the
hook bridge's attention frames out, before it reaches the person's terminal.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Final, Protocol, TypeVar

from clanker.descriptor import Transport
from clanker.environment.ssh_scan import MAX_ROUNDS, RemoteFiles, ScanExecutor
from clanker.envvars import strip_credentials
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest
from clanker.execution.ssh import SshTransport
from clanker.hosts import Host

_T = TypeVar("_T")

__all__ = ["SshEnvironment", "TerminalObserver", "control_directory"]

# Prints each command's path (or nothing) on its own line, in order: one execution.
_LOCATE: Final = 'for c do p=$(command -v "$c" 2>/dev/null) || p=; printf "%s\\n" "$p"; done'
_MAX_ENVIRON: Final = 256 * 1024
# Socket paths hold about 100 bytes; %C is 40 and ssh adds a 17-byte suffix while binding.
_MAX_CONTROL_DIR: Final = 40


def control_directory(runtime: Path | None) -> Path:
    """A private (0700, ours, not a link) directory for the ControlMaster sockets:
    ``<runtime>/ssh`` when short enough, else ``clanker-<uid>-ssh`` in the temporary
    directory (``/tmp``)."""
    candidate = runtime / "ssh" if runtime is not None else None
    if candidate is None or len(str(candidate)) > _MAX_CONTROL_DIR:
        candidate = Path(tempfile.gettempdir()) / f"clanker-{os.getuid()}-ssh"
    with contextlib.suppress(FileExistsError):
        os.mkdir(candidate, 0o700)
    info = os.lstat(candidate)
    if not os.path.isdir(candidate) or os.path.islink(candidate) or info.st_uid != os.getuid() \
            or info.st_mode & 0o077:
        raise HarnessCapabilityError(
            ErrorKind.TRANSPORT_FAILURE,
            f"{candidate} is not a private directory of yours: clanker will not put its "
            "SSH sockets there")
    return candidate


class TerminalObserver(Protocol):
    """Sees the host's terminal stream before the person's terminal does."""

    def feed(self, data: bytes) -> bytes:
        """Take ``data`` (the next bytes from the host); return what is shown."""
        ...

    def flush(self) -> bytes:
        """The stream ended: return what is still to be shown."""
        ...


class SshEnvironment:
    """Harnesses on an SSH host: remote processes over the system ``ssh`` client.

    Call :meth:`connect` before handing it to a service (it reads the host's
    environment), and :meth:`close` when done (it stops the ControlMaster).
    ``config_file`` replaces ``~/.ssh/config`` (``ssh -F``); a person's hosts
    need none: their own OpenSSH configuration applies.
    """

    transport = Transport.SSH

    def __init__(
        self,
        host: Host,
        *,
        control_dir: Path,
        config_file: Path | None = None,
        local_environ: Mapping[str, str] | None = None,
    ) -> None:
        self.host = host
        self._transport = SshTransport(host.target, control_dir=control_dir,
                                       config_file=config_file, base_env=local_environ)
        self._environ: dict[str, str] = {}
        self._stripped: tuple[str, ...] = ()
        self._files = RemoteFiles(self._transport)
        self._observer: TerminalObserver | None = None

    def __repr__(self) -> str:
        return f"SshEnvironment({self.host.name!r})"

    @property
    def name(self) -> str:
        return f"ssh-{self.host.name}"

    @property
    def executor(self) -> ScanExecutor:
        """The host's executor; within :meth:`gather` a repeated request runs once."""
        return self._files.executor

    @property
    def session_executor(self) -> SshTransport:
        return self._transport

    @property
    def files(self) -> RemoteFiles:
        return self._files

    async def gather(self, work: Callable[[], Awaitable[_T]], *, rounds: int | None = None,
                     complete: bool = False) -> _T:
        """Run ``work``, a scan that reads the host's files, in bounded rounds
        (see :meth:`~clanker.environment.ssh_scan.RemoteFiles.gather`)."""
        return await self._files.gather(work, rounds=rounds or MAX_ROUNDS, complete=complete)

    def cache_dir(self, root: Path) -> Path:
        return root / "hosts" / self.name

    def canonical_path(self, path: str) -> str:
        # The host's links are not this machine's to resolve: taken as written.
        return posixpath.normpath(path)

    @property
    def environ(self) -> Mapping[str, str]:
        """The host's login environment (empty until :meth:`connect`), credentials removed."""
        return self._environ

    async def connect(self) -> None:
        """Reach the host and read its login environment (one execution).

        Raises ``transport-failure`` when the host cannot be reached (unknown
        name, refused, host key mismatch, authentication refused).
        """
        result = await self._transport.run(CommandRequest(
            command="env", max_output_bytes=_MAX_ENVIRON))
        result.require_success()
        environ: dict[str, str] = {}
        for line in result.stdout.splitlines():
            name, sep, value = line.partition("=")
            if sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                environ[name] = value
        self._environ = strip_credentials(environ)
        self._stripped = tuple(sorted(set(environ) - set(self._environ)))

    async def locate(self, commands: Iterable[str]) -> dict[str, str | None]:
        """Find each command on the host's login ``PATH``: one ``command -v`` execution."""
        names = sorted(set(commands))
        for name in names:
            CommandRequest(command=name)  # a bare command name, or ValueError
        if not names:
            return {}
        result = await self._transport.run(CommandRequest(
            command="sh", args=("-c", _LOCATE, "locate", *names)))
        result.require_success()
        lines = result.stdout.split("\n")
        found: dict[str, str | None] = {}
        for index, name in enumerate(names):
            path = lines[index] if index < len(lines) else ""
            found[name] = path if path.startswith("/") else None  # not a builtin or alias
        return found

    def observe_terminal(self, observer: TerminalObserver | None) -> None:
        """Pass the host's terminal stream of the next :meth:`run_interactive` through
        ``observer`` (``None``: hand ``ssh`` the person's terminal itself)."""
        self._observer = observer

    def run_interactive(self, argv: tuple[str, ...], env: Mapping[str, str], cwd: str) -> int:
        """Run ``argv`` on the host in this terminal (``ssh -t`` through the host's
        ControlMaster) in the host directory ``cwd``; return its exit status.

        ``env`` is the complete child environment, built from the host's login
        environment: only what differs from that is sent (and what it lacks is
        unset there), never a variable of this machine. Raises
        ``command-failed`` when ``cwd`` is not a directory on the host and
        ``transport-failure`` when the host cannot be reached or ``ssh`` exits 255.
        """
        import asyncio

        from clanker.environment.foreground import run_foreground
        from clanker.execution.ssh import SSH_TRANSPORT_EXIT, interactive_command

        # One short execution first: the connection is up, and a directory that is
        # not there is a typed failure rather than an exit status of the harness.
        asyncio.run(self._transport.run(CommandRequest(command="true", cwd=cwd)))
        added = {name: value for name, value in env.items()
                 if self._environ.get(name) != value}
        unset = tuple(name for name in (*self._environ, *self._stripped) if name not in env)
        remote = interactive_command(argv, added, unset, cwd)
        client = tuple(self._transport.interactive_argv(remote))
        environ = self._transport.interactive_environ(os.environ.get("TERM"))
        observer = self._observer
        if observer is None:
            status = run_foreground(client, environ, None)
        else:
            status = _observed(client, environ, observer)
        if status == SSH_TRANSPORT_EXIT:
            raise HarnessCapabilityError(
                ErrorKind.TRANSPORT_FAILURE,
                f"{self.host.name}: ssh exited {SSH_TRANSPORT_EXIT} (the connection failed or "
                "was lost, or the harness itself exited 255)")
        return status

    def close(self) -> None:
        """Stop the host's ControlMaster connection."""
        self._transport.close()


def _observed(client: tuple[str, ...], environ: Mapping[str, str],
              observer: TerminalObserver) -> int:
    """Run ``client`` (``ssh -t``) on a PTY of ours, relayed to the person's terminal
    (stdin and stdout) through ``observer``; return its exit status."""
    from clanker.environment.pty_relay import PtyChild, PtyRelay, run_in_pty, terminal_size

    child = PtyChild.spawn(client, environ, None, terminal_size(0))
    relay = PtyRelay(child, stdin_fd=0, stdout_fd=1, output_filter=observer.feed)
    try:
        return run_in_pty(relay, tty_fd=0)
    finally:
        relay.close()
        rest = memoryview(observer.flush())
        with contextlib.suppress(OSError):
            while rest:
                rest = rest[os.write(1, rest):]
