"""Composing a coder session: the agent command, its environment, its process,
the client, the ladder and the transcript.

The agent is a harness's ACP server (its ``acp`` capability) or any command
that speaks ACP (``--agent-command``). Either way its environment is built by
the launch path (this machine's variables, ``PWD``, the account's home for a
harness; clanker's own credentials stripped when it starts), then that
agent's stored secrets (:mod:`clanker.acp.secrets`) are added, and every value
clanker injected is registered with the transcript's redactor.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from attrs import frozen

from clanker.acp.capability import AcpServer
from clanker.acp.errors import CoderError, CoderFailure
from clanker.acp.transcript import Redactor, Transcript, read_transcript, transcript_path
from clanker.acp.wire import INITIALIZE_TIMEOUT, encode, initialize_request
from clanker.errors import ErrorKind, HarnessCapabilityError

if TYPE_CHECKING:
    # What the agent's spawn does not need is imported once it runs (the
    # ``initialize`` frame goes first): the configuration's parser, the launch
    # path (and the registry, with every plugin) unless a harness is chosen.
    from collections.abc import Callable
    from datetime import timedelta

    # The transport (asyncio) too, so that a harness's server can be started early
    # (:meth:`CoderService.start_early`) before asyncio is imported.
    from clanker.acp.cleanup import CoderCleanup
    from clanker.acp.client import AcpClient, Ask, EventSink
    from clanker.acp.secrets import AgentSecrets
    from clanker.environment import Environment
    from clanker.launch.service import LaunchService
    from clanker.paths import ClankerPaths
    from clanker.registry import HarnessProvider

__all__ = ["CoderOptions", "CoderService", "parse_agent_command"]

_LOGS_KEPT: Final = 20
TRANSCRIPTS_KEPT: Final = 500
"""The retention bound: beyond it, the least recently written transcripts go."""


def parse_agent_command(raw: str) -> tuple[str, ...]:
    """Split ``--agent-command "CMD ARGS"`` as a POSIX shell would (no expansion).

    Raises :class:`ValueError` for an empty command or one whose executable is
    a path (it is looked up on ``PATH``, like every harness executable)."""
    try:
        argv = tuple(shlex.split(raw))
    except ValueError as exc:
        raise ValueError(f"agent command: {exc}") from None
    if not argv:
        raise ValueError("agent command: empty")
    AcpServer(argv=argv)  # the same rules as a plugin's server command
    return argv


@frozen(kw_only=True)
class CoderOptions:
    """What a coder session asks for."""

    cwd: str
    interactive: bool = False
    """Whether a person can be asked (``ask`` is then called for asking rules)."""
    approve: frozenset[str] = frozenset()
    """Tool kinds approved without asking (``--approve``)."""
    account: str | None = None
    initialize_timeout: float = INITIALIZE_TIMEOUT
    attention: bool = False
    """Register the session with the grid (``clanker status`` lists it)."""


@frozen(kw_only=True)
class _Agent:
    argv: tuple[str, ...]
    env: dict[str, str]
    name: str
    injected: tuple[str, ...]
    """Every value clanker put into ``env`` (secrets to redact)."""
    session_meta: Mapping[str, Any]
    planned: bool = False
    """A harness's server whose environment is the host's and its own variables alone
    (no stored secret, no account's home): a spawn plan can be kept for it."""


def _written(path: Path) -> float:
    try:
        return path.lstat().st_mtime
    except FileNotFoundError:
        return 0.0


class CoderService:
    """Opens coder sessions in one environment."""

    def __init__(self, *, environment: Environment, paths: ClankerPaths,
                 launch: LaunchService | Callable[[], LaunchService]) -> None:
        self._environment = environment
        self._launch_or_factory = launch
        self._paths = paths
        self._config = paths.config
        self.directory = paths.state / "coder"
        """Where transcripts (``<session>.jsonl``) and agent stderr logs live (0700)."""

    @property
    def _launch(self) -> LaunchService:
        """The launch path (made on first use: an ``--agent-command`` never needs it)."""
        from clanker.launch.service import LaunchService

        if not isinstance(self._launch_or_factory, LaunchService):
            self._launch_or_factory = self._launch_or_factory()
        return self._launch_or_factory

    def server(self, provider: HarnessProvider) -> AcpServer:
        """``provider``'s ACP server command; ``unsupported`` when it has none."""
        if provider.acp is None:
            raise HarnessCapabilityError(ErrorKind.UNSUPPORTED, "ACP", harness=provider.id)
        server: AcpServer = provider.acp.server()
        return server

    async def open(self, *, harness: HarnessProvider | None, agent_command: Sequence[str] | None,
                   options: CoderOptions, on_event: EventSink, ask: Ask | None = None,
                   meanwhile: Callable[[], object] | None = None) -> AcpClient:
        """Start the agent and ``initialize`` it; return the client (call
        :meth:`AcpClient.new_session` or :meth:`AcpClient.resume` next, and
        always :meth:`AcpClient.close`).

        The agent is started, and ``initialize`` written to it, before anything
        else is loaded: the configured ladder (``[coder.approvals]``) is read,
        and ``meanwhile`` called, while the agent starts. A configuration error
        still fails the open (the agent is stopped).

        Raises ``binary-unavailable`` (with the install line, for an adapter that
        is not installed), ``timeout`` (no answer to ``initialize`` in time),
        ``command-failed`` (it exited first) and ``unsupported``.
        """
        agent = self._agent(harness, agent_command, options, on_event)
        argv, env, name = agent.argv, agent.env, agent.name
        self._prepare_directory()
        redactor = Redactor(agent.injected)
        transcript = Transcript(self.directory, redactor)
        log = self.directory / f"agent-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
        from clanker.acp.transport import AgentProcess

        try:
            # ``initialize`` goes with the start: it waits in the pipe while the agent starts.
            process = await AgentProcess.start(argv, env, options.cwd, log, redactor.data,
                                               first_line=encode(initialize_request()))
        except BaseException:
            transcript.close()
            raise
        from clanker.acp.client import AcpClient
        from clanker.acp.policy import Policy

        def configure() -> None:
            # Before the answer to ``initialize`` is read, so before any permission
            # request can be: no request is ever decided by another ladder.
            client.policy = Policy(workspace=options.cwd, interactive=options.interactive,
                                   table=self._table(), approved=options.approve)
            if meanwhile is not None:
                meanwhile()

        # The ladder's defaults until the configured one is read (no request comes
        # before ``session/new``, and that waits for ``initialize``).
        client = AcpClient(process, policy=Policy(workspace=options.cwd,
                                                  interactive=options.interactive,
                                                  approved=options.approve),
                           transcript=transcript, on_event=on_event, ask=ask, harness=name,
                           session_meta=agent.session_meta)
        try:
            await client.start(timeout=options.initialize_timeout, meanwhile=configure)
        except BaseException:
            await client.close()
            raise
        if agent.planned and harness is not None:
            self._keep_plan(harness, agent, options)
        return client

    def _keep_plan(self, harness: HarnessProvider, agent: _Agent, options: CoderOptions) -> None:
        """Keep the spawn plan of the server just started (:mod:`clanker.acp.plan`), for
        the next run's early start; only for this machine's own environment (the one
        the early start builds), and never an error: it is a cache."""
        from clanker.acp import plan
        from clanker.envvars import host_environ
        from clanker.procstart import child_env, find_executable

        if self._environment.environ != host_environ(os.environ):
            return
        path = plan.plan_path(str(self._paths.cache), str(harness.id))
        executable = find_executable(agent.argv[0], child_env(agent.env, {}, options.cwd))
        if path is None or executable is None:
            return
        package = type(harness.acp).__module__.split(".")[0]
        kept = plan.build(harness=str(harness.id), account=options.account, argv=agent.argv,
                          env=agent.env, cwd=options.cwd, environ=os.environ,
                          executable=executable, modules=plan.loaded_modules([package]),
                          files=[str(self._paths.state / "accounts.json"),
                                 str(self._config / "config.toml")])
        if kept is not None:
            with contextlib.suppress(OSError):
                plan.write(path, kept)

    def _agent(self, harness: HarnessProvider | None, agent_command: Sequence[str] | None,
               options: CoderOptions, on_event: EventSink) -> _Agent:
        """The agent's argv and environment, as they are started (see the module)."""
        if (harness is None) == (agent_command is None):
            raise ValueError("open: a harness or an agent command, not both")
        if harness is not None:
            server = self.server(harness)
            env, injected = self._launch.child_environment(harness, options.cwd, server.env,
                                                           account=options.account)
            argv, name, hint = server.argv, str(harness.id), server.install_hint
            meta = server.session_meta
        else:
            assert agent_command is not None
            argv = parse_agent_command(shlex.join(agent_command))
            env, injected = {**self._environment.environ, "PWD": options.cwd}, {}
            name, hint, meta = argv[0], None, {}
        if self._environment.files.which(argv[0], env.get("PATH")) is None:
            detail = f"{argv[0]}; install it with: {hint}" if hint else argv[0]
            raise HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE, detail, harness=name)
        secrets = self._agent_secrets(name, injected, on_event)
        env.update(secrets)
        planned = harness is not None and not secrets and injected == dict(server.env)
        return _Agent(argv=tuple(argv), env=env, name=name,
                      injected=(*injected.values(), *secrets.values()), session_meta=meta,
                      planned=planned)

    def start_early(self, harness: HarnessProvider, options: CoderOptions) -> bool:
        """Start ``harness``'s ACP server now and write ``initialize`` to it, without
        asyncio (:mod:`clanker.acp.early`), for the next :meth:`open` of this very
        agent in this process to take; return whether it was started.

        Nothing is started where something would be said first (a notice about
        its secrets) or a secret is stored for it (the credential store is read
        once, by :meth:`open`). Raises what :meth:`open` raises before a start."""
        from clanker.acp import early

        notices: list[dict[str, Any]] = []
        if self.secrets.names(str(harness.id)):
            return False
        agent = self._agent(harness, None, options, notices.append)
        return not notices and early.hold(agent.argv, agent.env, options.cwd)

    @contextlib.asynccontextmanager
    async def session(self, *, harness: HarnessProvider | None,
                      agent_command: Sequence[str] | None, options: CoderOptions,
                      on_event: EventSink, ask: Ask | None = None,
                      resume: str | None = None) -> AsyncIterator[AcpClient]:
        """:meth:`open`, then a new session in ``options.cwd`` (or ``resume`` it:
        ``session/resume``, else ``session/load``, else ``resume-failed``); the
        agent is stopped when the block ends."""
        attention = None
        meanwhile = None
        if options.attention:
            from clanker.acp.attention import CoderAttention

            name = harness.id if harness is not None else "coder"
            attention = CoderAttention(self._paths, str(name), options.cwd)
            reporter = attention

            def meanwhile() -> None:  # the grid is reached while the agent starts
                reporter.start()
                if reporter.notice is not None:
                    on_event({"event": "notice", "text": reporter.notice})

            def both(event: dict[str, Any]) -> None:
                reporter(event)
                on_event(event)

            sink: EventSink = both
        else:
            sink = on_event
        try:
            client = await self.open(harness=harness, agent_command=agent_command,
                                     options=options, on_event=sink, ask=ask,
                                     meanwhile=meanwhile)
            try:
                if resume is None:
                    await client.new_session(options.cwd)
                else:
                    await client.resume(resume, options.cwd)
                yield client
            finally:
                await client.close()
                self._prune()
        finally:
            if attention is not None:
                attention.close()

    @property
    def secrets(self) -> AgentSecrets:
        """The agent secrets (values in the OS credential store, names in the state)."""
        from clanker.acp.secrets import AgentSecrets

        return AgentSecrets(self._paths.state / "coder-secrets.json")

    def reserved_names(self, provider: HarnessProvider | None) -> frozenset[str]:
        """The variables the launch path sets for ``provider``'s server (a secret cannot
        be one)."""
        if provider is None or provider.acp is None:
            return frozenset()
        return frozenset(self.server(provider).env)

    def _agent_secrets(self, agent: str, injected: dict[str, str],
                       on_event: EventSink) -> dict[str, str]:
        """``agent``'s stored secrets, except the variables this run already has (set
        by the person for the invocation, or by the launch path, which wins)."""
        from clanker.acp.secrets import check_agent

        try:
            check_agent(agent)
        except ValueError:
            return {}  # no secret can be stored under such a name
        try:
            found, missing = self.secrets.values(agent, skip=set(self._environment.environ)
                                                 | set(injected))
        except ValueError as exc:  # an unusable index: the session goes on without them
            on_event({"event": "notice", "text": f"no agent secrets injected: {exc}"})
            return {}
        for name in missing:
            on_event({"event": "notice", "text": f"secret {name} of {agent} is no longer in "
                      "the credential store (clanker coder secret set to store it again)"})
        return found

    def clean(self, *, older_than: timedelta | None, keep: int | None,
              dry_run: bool) -> CoderCleanup:
        """Remove transcripts and agent logs by the rule (see :mod:`clanker.acp.cleanup`)."""
        from clanker.acp.cleanup import clean_coder_files

        return clean_coder_files(self.directory, older_than=older_than, keep=keep,
                                 dry_run=dry_run)

    def _table(self) -> dict[str, str]:
        """``[coder.approvals]`` of the configuration (raises ``ConfigError``)."""
        from clanker.config import load_settings

        return dict(load_settings(self._config).coder.approvals)

    def _prune(self) -> None:
        """Once a session is written: keep the :data:`TRANSCRIPTS_KEPT` newest (after
        it, never before, so the session being resumed is never the one removed)."""
        transcripts = sorted(self.directory.glob("*.jsonl"), key=_written)
        for old in transcripts[:-TRANSCRIPTS_KEPT]:
            old.unlink(missing_ok=True)

    def _prepare_directory(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        logs = sorted(self.directory.glob("agent-*.log"))
        for old in logs[:-_LOGS_KEPT]:  # bounded: the newest logs only
            old.unlink(missing_ok=True)


    def records(self, session_id: str) -> list[dict[str, Any]]:
        """The transcript of ``session_id`` (a torn last line skipped); ``no-transcript``
        when there is none."""
        try:
            path = transcript_path(self.directory, session_id)
            return list(read_transcript(path))
        except (ValueError, FileNotFoundError):
            raise CoderError(CoderFailure.NO_TRANSCRIPT,
                             f"no coder transcript {session_id!r} in {self.directory}") from None
