"""The launch attachment that wires a harness's native events to the grid.

For one launch it makes sure the grid runs, registers the terminal there
(the grid answers with a fresh credential and keeps only its digest), creates a
launch-owned 0700 directory holding the hook command and the per-terminal
bridge state, and asks the provider to wire its hooks, plugin or extension to
them. The raw credential goes into the child environment and nowhere else.

It is an optional step: a grid that cannot start, or a provider that finds the
user owns the configuration it would need, leaves an ordinary launch.

A launch on an SSH host gets :class:`RemoteAttentionAttachment` instead: the
same registration and provider, the resources installed on the host, and the
events carried back on the host's terminal stream (see its docstring).
"""

from __future__ import annotations

import os
import shlex
import stat
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Protocol, TypeVar

from clanker._logging import get_logger
from clanker.attention.capability import (
    CREDENTIAL_VARIABLE,
    TRANSPORT_VARIABLE,
    AttachmentContext,
    AttachmentPlan,
    AttentionCapability,
    Declined,
)
from clanker.environment import HostFiles
from clanker.execution import CommandExecutor, CommandRequest, CommandResult
from clanker.launch.attachments import LaunchState, PreparedAttachment
from clanker.launch.scratch import (
    LAUNCHER_FILE,
    private_directory,
    remove_directory,
    sweep_orphans,
)
from clanker.paths import ClankerPaths, clanker_paths

if TYPE_CHECKING:
    from clanker.environment.remote_resources import HostPlugin, RemoteResources, Resource
    from clanker.environment.ssh import TerminalObserver
    from clanker.grid.client import GridClient, Registration
    from clanker.hosts import Host
    from clanker.launch.readopt import ReadoptionHandle

_T = TypeVar("_T")

__all__ = ["CREDENTIAL_FILE", "CREDENTIAL_VARIABLE", "HOOK_SCRIPT", "HOST_PLUGIN",
           "LAUNCHER_FILE",
           "SOCKET_VARIABLE", "SSH_ATTENTION", "TERMINAL_VARIABLE", "TOKEN_VARIABLE",
           "TRANSPORT_VARIABLE", "AttentionAttachment", "AttentionHost",
           "RemoteAttentionAttachment", "host_paths", "remote_credential",
           "remote_hook_command", "sweep_orphans", "write_hook_command"]

log = get_logger(__name__)

TOKEN_VARIABLE = "CLANKER_ATTENTION_TOKEN"  # noqa: S105 - a variable's name
"""Where the child finds its terminal's credential (present only when attention attached)."""
TERMINAL_VARIABLE = "CLANKER_ATTENTION_TERMINAL"
SOCKET_VARIABLE = "CLANKER_ATTENTION_SOCKET"

HOOK_SCRIPT = Path(__file__).resolve().parent.parent / "attention" / "hook.py"
"""The hook bridge: standard library only, so it starts as fast as Python can."""

def write_hook_command(directory: Path) -> Path:
    """Write ``directory/hook``, the executable a harness hook runs.

    ``-I -S``: no user site, no site-packages, no ``PYTHON*`` variables: the
    bridge sees the standard library and the one interpreter it loads by path.
    """
    path = directory / "hook"
    script = (
        "#!/bin/sh\n"
        f"exec {shlex.quote(sys.executable)} -I -S {shlex.quote(str(HOOK_SCRIPT))} \"$@\"\n"
    )
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
    with os.fdopen(descriptor, "w") as file:
        file.write(script)
    return path


class _AttentionStep:
    """What attention on this machine and on an SSH host share: the launch's facts, and
    the terminal's registration with this machine's grid."""

    name = "attention"
    optional = True

    def __init__(
        self,
        harness: str,
        capability: AttentionCapability,
        *,
        cwd: str,
        run: Callable[[CommandRequest], CommandResult],
        user_flags: tuple[str, ...],
        trusted_root_session_id: str | None,
        paths: ClankerPaths | None,
        account: str | None,
    ) -> None:
        self._harness = harness
        self._capability = capability
        self._cwd = cwd
        self._run = run
        self._user_flags = user_flags
        self._trusted_root = (
            trusted_root_session_id if capability.resume_preserves_session_id else None
        )
        self._paths = paths
        self._account = account

    def _register(self, client: GridClient, tmux_pane: str | None) -> Registration:
        """Register the launch's terminal (this process is its launcher)."""
        return client.register(
            harness=self._harness, workspace=self._cwd, cwd=self._cwd,
            launcher_pid=os.getpid(), trusted_root_session_id=self._trusted_root,
            account=self._account, tmux_pane=tmux_pane)


class AttentionAttachment(_AttentionStep):
    """Attention for one launch of one harness (an optional attachment step)."""

    def __init__(
        self,
        harness: str,
        capability: AttentionCapability,
        *,
        cwd: str,
        files: HostFiles,
        run: Callable[[CommandRequest], CommandResult],
        user_flags: tuple[str, ...] = (),
        trusted_root_session_id: str | None = None,
        paths: ClankerPaths | None = None,
        on_registered: Callable[[GridClient, Registration], None] | None = None,
        account: str | None = None,
        readoption: ReadoptionHandle | None = None,
    ) -> None:
        """``on_registered`` hears of the terminal once the grid has registered it (the
        bridge step shares it); ``account`` names the managed account it runs under;
        ``readoption`` is told how to re-present the terminal to a next grid."""
        super().__init__(harness, capability, cwd=cwd, run=run, user_flags=user_flags,
                         trusted_root_session_id=trusted_root_session_id, paths=paths,
                         account=account)
        self._files = files
        self._on_registered = on_registered
        self._readoption = readoption

    def prepare(self, state: LaunchState) -> PreparedAttachment | None:
        # Deferred: the grid client is only needed by launches that attach.
        from clanker.grid.client import GridClient
        from clanker.grid.daemon import ensure_running

        paths = self._paths or clanker_paths()
        socket = ensure_running(paths)
        client = GridClient(socket)
        # The harness runs the hook command put here.
        private_dir = private_directory(paths, self._harness)
        registration: Registration | None = None
        try:
            state_dir = private_dir / "state"
            state_dir.mkdir(mode=0o700)
            pane = _tmux_pane(state.env)
            registration = self._register(client, pane)
            if self._readoption is not None:
                from clanker.launch.readopt import Readoption

                # The same facts again, so a next grid sees the same conversation.
                self._readoption.terminal(Readoption(
                    paths=paths, socket=socket, registration=registration,
                    harness=self._harness, workspace=self._cwd, cwd=self._cwd,
                    launcher_pid=os.getpid(), trusted_root_session_id=self._trusted_root,
                    account=self._account, tmux_pane=pane))
            if self._on_registered is not None:
                self._on_registered(client, registration)
            env = {
                "CLANKER_ATTENTION_COMMAND": str(write_hook_command(private_dir)),
                SOCKET_VARIABLE: str(socket),
                TERMINAL_VARIABLE: registration.terminal,
                TOKEN_VARIABLE: registration.token,
                "CLANKER_ATTENTION_STATE": str(state_dir),
            }
            if self._capability.interpreter is not None:
                env["CLANKER_ATTENTION_INTERPRETER"] = str(self._capability.interpreter)
            plan = self._capability.prepare(AttachmentContext(
                argv=state.argv,
                env={**state.env, **env},
                cwd=self._cwd,
                private_dir=private_dir,
                user_flags=self._user_flags,
                files=self._files,
                run=self._run,
            ))
            released = False

            def dispose() -> None:
                nonlocal released
                if not released:
                    released = True
                    _release(client, registration, private_dir)

            if isinstance(plan, Declined):
                # The agent still runs and is still listed, as one whose attention is
                # unavailable; the harness gets no credential it would not use.
                log.info("attention: declined for %s: %s", self._harness, plan.reason)
                client.decline(registration.terminal, registration.token, plan.reason)
                if self._readoption is not None:
                    self._readoption.decline(plan.reason)
                return PreparedAttachment(dispose=dispose, notice=plan.reason)
            # Inside the guard: a plan the attachment refuses must release everything too.
            return PreparedAttachment(dispose=dispose, argv=plan.argv, env={**env, **plan.env},
                                      notice=plan.notice)
        except BaseException:
            _release(client, registration, private_dir)
            raise


def _release(client: GridClient, registration: Registration | None, private_dir: Path) -> None:
    """Retire the terminal (revoking its credential) and remove the launch's files.

    Never raises: a grid that is gone has retired everything already, and the
    grid also retires a terminal whose launcher died.
    """
    if registration is not None:
        try:
            client.retire(registration.terminal, registration.token)
        except Exception:
            log.debug("attention: the grid did not confirm retirement")
    remove_directory(private_dir)


def _tmux_pane(env: Mapping[str, str]) -> str | None:
    """The tmux pane the launch runs in, as tmux set it; ``None`` outside tmux or when
    the variable is not a pane id (the grid would refuse the whole registration)."""
    from clanker.grid.protocol import is_tmux_pane

    pane = env.get("TMUX_PANE") if env.get("TMUX") else None
    return pane if is_tmux_pane(pane) else None


# -- on an SSH host ---------------------------------------------------------------------------

HOST_PLUGIN = "host_plugin"
"""The method an :class:`AttentionCapability` whose harness reads hooks only from a
persistent plugin directory provides for SSH launches: ``host_plugin(home)`` returns
the :class:`~clanker.environment.remote_resources.HostPlugin` to keep installed in
the host's ``home`` (inert without a launch's credentials). Its ``prepare`` sees
:data:`TRANSPORT_VARIABLE` ``=tty`` there and leaves this machine's files alone."""

SSH_ATTENTION = "runs_over_ssh"
"""The attribute an :class:`AttentionCapability` sets to ``True`` when its ``prepare``
writes only in the context's private directory and reads the user's configuration
only through the context's ``files`` and ``run``, so it can wire a launch on an SSH
host. Without it, attention is left out of a launch on a host, with one notice.
On a host ``prepare`` runs in rounds (each pass sees more of the host's files): a
command it runs may depend on what up to a scan's
:data:`~clanker.environment.ssh_scan.MAX_ROUNDS` rounds of reads found, and runs
once however many passes ask for it."""


class AttentionHost(Protocol):
    """What :class:`RemoteAttentionAttachment` needs of the SSH environment it runs over."""

    @property
    def host(self) -> Host: ...

    @property
    def environ(self) -> Mapping[str, str]: ...

    @property
    def executor(self) -> CommandExecutor: ...

    @property
    def files(self) -> HostFiles: ...

    async def gather(self, work: Callable[[], Awaitable[_T]], *, rounds: int | None = None
                     ) -> _T: ...

    def observe_terminal(self, observer: TerminalObserver | None) -> None: ...


def remote_hook_command(directory: str, interpreter: str, terminal: str, token: str) -> bytes:
    """The hook command of a launch on a host: it sets the bridge's variables itself
    (the terminal's credential among them, which so never crosses in a command line,
    where every user of either machine could read it) and runs ``hook.py`` in
    ``directory`` with the host's ``python3`` (``-B``: no bytecode is written beside
    it, so cleanup finds only what was installed). ``interpreter`` is the file name
    of the provider's interpreter there."""
    from clanker.environment.remote_resources import HOST_PYTHON

    quote = shlex.quote
    variables = {
        "CLANKER_ATTENTION_TRANSPORT": "tty",
        "CLANKER_ATTENTION_INTERPRETER": f"{directory}/{interpreter}",
        TERMINAL_VARIABLE: terminal,
        TOKEN_VARIABLE: token,
        "CLANKER_ATTENTION_STATE": f"{directory}/state",
    }
    lines = ["#!/bin/sh", "# clanker: this launch's attention hook (removed when it ends)"]
    lines += [f"{name}={quote(value)}; export {name}" for name, value in variables.items()]
    lines += [f"unset {SOCKET_VARIABLE}",
              f'exec {HOST_PYTHON} -I -S -B {quote(directory + "/hook.py")} "$@"', ""]
    return "\n".join(lines).encode("utf-8")


CREDENTIAL_FILE = "credential"
"""The credential file's name in a launch directory on a host (see :func:`remote_credential`)."""


def remote_credential(terminal: str, token: str) -> bytes:
    """The credential file of a launch on a host whose provider's extension delivers
    itself: installed 0600 in the launch directory and named by
    :data:`CREDENTIAL_VARIABLE`, so the token is in neither a command line nor the
    host's process environment."""
    import json

    return json.dumps({"v": 1, "terminal": terminal, "token": token},
                      separators=(",", ":")).encode("ascii")


_Written = tuple[str, Path, bool, "str | None"]
"""What a provider left in its staging directory: ``(path below it, local path,
executable, the target of a link or None)``."""


def _staged(directory: Path) -> list[_Written]:
    """Every regular file and symbolic link below ``directory`` (directories are
    walked, never followed; any other type is refused). A link's target must be
    absolute: it names a path of the host's, which is neither followed nor read."""
    written: list[_Written] = []
    pending = [directory]
    while pending:
        current = pending.pop()
        for path in sorted(current.iterdir()):
            info = path.lstat()
            name = path.relative_to(directory).as_posix()
            if stat.S_ISDIR(info.st_mode):
                pending.append(path)
            elif stat.S_ISREG(info.st_mode):
                written.append((name, path, bool(info.st_mode & 0o100), None))
            elif stat.S_ISLNK(info.st_mode) and (target := os.readlink(path)).startswith("/"):
                written.append((name, path, False, target))
            else:
                raise ValueError("attention: a provider may leave only files, directories "
                                 "and absolute links for a host")
    return sorted(written)


def host_paths(value: str, staged: Path, directory: str) -> str:
    """``value`` (an argument or variable a provider planned) with every path into the
    local staging directory ``staged`` turned into the host's ``directory``: as a
    ``file://`` URI (percent-encoded, as :meth:`Path.as_uri` writes it), inside a JSON
    string, and plain. Raises ``ValueError`` when a form of ``staged`` is left (the
    harness on the host would be handed a path of this machine)."""
    import json

    host = PurePosixPath(directory)
    forms = [(staged.as_uri(), host.as_uri()),
             (json.dumps(str(staged))[1:-1], json.dumps(directory)[1:-1]),
             (str(staged), directory)]
    for local, remote in forms:
        value = value.replace(local, remote)
    if any(local in value for local, _ in forms):
        raise ValueError("attention: a path to the staging directory was not mapped to the host")
    return value


class RemoteAttentionAttachment(_AttentionStep):
    """Attention for one launch on an SSH host (an optional attachment step).

    The terminal is registered with this machine's grid as for a local launch.
    The provider prepares the launch as it does locally, except that it reads the
    host's files and writes into a local staging directory; what it wrote, the
    hook bridge, the wire schema, its interpreter and the hook command are then
    installed in one execution on the host
    (:class:`~clanker.environment.remote_resources.RemoteResources`), and paths
    to the staging directory in its argv and environment become the host's
    (:func:`host_paths`). The hook bridge there delivers as OSC frames on its
    terminal, which :class:`~clanker.attention.frames.FrameExtractor` takes out
    of the host's terminal stream and :class:`~clanker.grid.remote.RemoteDelivery`
    hands to the grid, for this terminal and credential only.

    A provider without an interpreter (its extension runs inside the harness and
    delivers itself: OpenCode, Pi, Oh My Pi) gets no hook bridge on the host:
    instead :data:`TRANSPORT_VARIABLE` ``=tty`` and :data:`CREDENTIAL_VARIABLE`
    naming the launch's credential file there, and its extension writes the same
    frames to its own terminal.

    A provider whose harness reads hooks only from a persistent plugin directory
    (:data:`HOST_PLUGIN`: Antigravity) has that plugin installed or refreshed on the
    host in the same execution; when its place there is the user's, nothing is
    written and the launch goes on without attention, as for any ``Declined``.
    """

    def __init__(
        self,
        harness: str,
        capability: AttentionCapability,
        *,
        cwd: str,
        environment: AttentionHost,
        run: Callable[[CommandRequest], CommandResult],
        user_flags: tuple[str, ...] = (),
        trusted_root_session_id: str | None = None,
        paths: ClankerPaths | None = None,
        account: str | None = None,
    ) -> None:
        super().__init__(harness, capability, cwd=cwd, run=run, user_flags=user_flags,
                         trusted_root_session_id=trusted_root_session_id, paths=paths,
                         account=account)
        self._interpreter: Path | None = capability.interpreter
        self._host = environment

    def prepare(self, state: LaunchState) -> PreparedAttachment | None:
        from clanker.attention.frames import FrameExtractor
        from clanker.environment.remote_resources import RemoteResources
        from clanker.grid.client import GridClient
        from clanker.grid.daemon import ensure_running
        from clanker.grid.remote import HostIndex, RemoteDelivery, machine_identity
        from clanker.paths import runtime_directory

        paths = self._paths or clanker_paths()
        resources = RemoteResources(self._host.executor, self._host.environ.get("HOME", ""))
        launch, directory = resources.new_directory()
        client = GridClient(ensure_running(paths))
        index = HostIndex(runtime_directory(paths, create=True) / "hosts")
        staging = private_directory(paths, self._harness)
        registration: Registration | None = None
        installed = False
        released = False
        extractor: FrameExtractor | None = None

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self._host.observe_terminal(None)
            if extractor is not None and extractor.dropped:
                log.info("attention: %d frame(s) on the host's terminal were dropped "
                         "(malformed, oversized, or not this launch's)", extractor.dropped)
            if installed:
                self._clean(resources, launch)
            if registration is not None:
                index.forget(registration.terminal)
            _release(client, registration, staging)

        try:
            registration = self._register(client, _tmux_pane(state.env))
            index.record(registration.terminal, self._host.host.name, launch)
            env = self._route(directory)
            staged, written, plan = self._plan(state, env, staging)
            if isinstance(plan, Declined):
                log.info("attention: declined for %s on a host: %s", self._harness, plan.reason)
                client.decline(registration.terminal, registration.token, plan.reason)
                return PreparedAttachment(dispose=release, notice=plan.reason)
            files = self._resources(directory, registration, written)
            unowned = self._install(resources, launch, files, machine_identity(paths.state),
                                    index.running_launches(self._host.host.name))
            if unowned is not None:  # the user's own directory where the plugin belongs
                client.decline(registration.terminal, registration.token, unowned)
                return PreparedAttachment(dispose=release, notice=unowned)
            installed = True
            extractor = FrameExtractor(
                RemoteDelivery(client, registration.terminal, registration.token))
            self._host.observe_terminal(extractor)

            def on_host(value: str) -> str:
                return host_paths(value, staged, directory)

            argv = None if plan.argv is None else tuple(on_host(word) for word in plan.argv)
            added = {name: on_host(value) for name, value in plan.env.items()}
            return PreparedAttachment(dispose=release, argv=argv, env={**env, **added},
                                      notice=plan.notice)
        except BaseException:
            release()
            raise

    def _install(self, resources: RemoteResources, launch: str, files: list[Resource],
                 owner: str, keep: Iterable[str]) -> str | None:
        """Install the launch's resources (and the provider's persistent plugin) on the
        host; the reason attention is unavailable when the plugin's place there is the
        user's (nothing was written then), else ``None``."""
        from clanker.attention.hook import STATE_FILES
        from clanker.environment.remote_resources import UnownedPlugin
        from clanker.launch.blocking import blocking as _blocking

        try:
            _blocking(resources.install(launch, files, owner=owner, keep=keep,
                                        state_files=STATE_FILES, plugin=self._host_plugin()))
        except UnownedPlugin as unowned:
            return unowned.detail or "the host's plugin directory is not clanker's"
        return None

    def _host_plugin(self) -> HostPlugin | None:
        """The provider's persistent plugin for the host (:data:`HOST_PLUGIN`), or ``None``."""
        plugin = getattr(self._capability, HOST_PLUGIN, None)
        if plugin is None:
            return None
        found: HostPlugin = plugin(self._host.environ.get("HOME", ""))
        return found

    def _route(self, directory: str) -> dict[str, str]:
        """How the harness on the host reaches the hook bridge there, or, for a provider
        without an interpreter, where its extension finds the terminal transport."""
        if self._interpreter is None:
            return {TRANSPORT_VARIABLE: "tty",
                    CREDENTIAL_VARIABLE: f"{directory}/{CREDENTIAL_FILE}"}
        return {"CLANKER_ATTENTION_COMMAND": f"{directory}/hook",
                "CLANKER_ATTENTION_INTERPRETER": f"{directory}/{self._interpreter.name}"}

    def _resources(self, directory: str, registration: Registration,
                   written: list[_Written]) -> list[Resource]:
        """What the launch directory on the host holds: the hook bridge with its
        interpreter and hook command (or only the credential file, for an extension
        that delivers itself), then what the provider wrote."""
        from clanker.environment.remote_resources import Resource

        interpreter = self._interpreter
        if interpreter is None:
            files = [Resource(CREDENTIAL_FILE, remote_credential(
                registration.terminal, registration.token))]
        else:
            files = [
                Resource("hook", remote_hook_command(
                    directory, interpreter.name, registration.terminal,
                    registration.token), executable=True),
                Resource("hook.py", HOOK_SCRIPT.read_bytes()),
                Resource("wire.py", HOOK_SCRIPT.with_name("wire.py").read_bytes()),
                Resource(interpreter.name, interpreter.read_bytes()),
            ]
        return files + [
            Resource(name, b"", link=target) if target is not None
            else Resource(name, path.read_bytes(), executable=executable)
            for name, path, executable, target in written]

    def _plan(self, state: LaunchState, env: Mapping[str, str], staging: Path
              ) -> tuple[Path, list[_Written], AttachmentPlan | Declined]:
        """Run the provider's ``prepare`` against the host's files (in bounded rounds,
        each pass in a fresh staging directory); return the last pass's directory, what
        it wrote there (:func:`_staged`) and its answer.

        A scan's rounds and one more: within the rounds a command is run only when a
        pass before the last asks for it, and a provider may run one that its reads
        chose (Hermes's interpreter, named by the shebang of the launcher it found on
        the host's PATH: two rounds of reads, then the execution)."""
        from clanker.environment.ssh_scan import MAX_ROUNDS
        from clanker.launch.blocking import blocking as _blocking

        passes = 0

        async def work() -> tuple[Path, AttachmentPlan | Declined]:
            nonlocal passes
            passes += 1
            directory = staging / f"pass-{passes}"
            directory.mkdir(mode=0o700)
            return directory, self._capability.prepare(AttachmentContext(
                argv=state.argv, env={**state.env, **env, TRANSPORT_VARIABLE: "tty"},
                cwd=self._cwd,
                private_dir=directory, user_flags=self._user_flags, files=self._host.files,
                run=self._run))

        directory, plan = _blocking(self._host.gather(work, rounds=MAX_ROUNDS + 1))
        return directory, _staged(directory), plan

    def _clean(self, resources: RemoteResources, launch: str) -> None:
        from clanker.attention.hook import STATE_FILES
        from clanker.launch.blocking import blocking as _blocking

        try:
            done = _blocking(resources.cleanup(launch, STATE_FILES))
        except Exception:
            log.warning("attention: the host's launch directory could not be removed")
            return
        if not done.complete:
            log.warning("attention: files that are not clanker's were left in the host's "
                        "launch directory (%d unknown, %d refused)", len(done.unknown),
                        len(done.refused))
