"""The one launch path: plan, attach, run, dispose.

:class:`LaunchService` turns a :class:`~clanker.launch.request.LaunchRequest`
into a running harness. It asks the provider for the exact command
(:func:`~clanker.launch.planning.plan_launch`), checks that the executable is
there before anything is acquired, composes the attachment steps from what the
provider implements and what the launch asks for (attention, and the agent
bridge when it is asked for or configured, with the harness's own channels
for it: its MCP client and its instructions), and runs the result through the
environment. Fresh launches, resumes and forks, in the
foreground or handed to another runner (a tmux pane, say), all go through
:meth:`LaunchService.prepare`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING

import attrs
from attrs import frozen

from clanker.descriptor import Transport
from clanker.environment import Environment
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, CommandResult
from clanker.launch.attachments import (
    Attachments,
    AttachmentStep,
    LaunchState,
    PreparedAttachment,
    Report,
    prepare_attachments,
)
from clanker.launch.blocking import blocking as _blocking
from clanker.launch.planning import plan_launch
from clanker.launch.request import LaunchOperation, LaunchRequest
from clanker.paths import ClankerPaths
from clanker.registry import HarnessProvider

if TYPE_CHECKING:
    from clanker.accounts.service import AccountService
    from clanker.launch.readopt import Readoption, ReadoptionHandle
    from clanker.launch.relayed import RelayedLaunch

__all__ = ["LaunchOptions", "LaunchService", "PreparedLaunch"]


@frozen(kw_only=True)
class LaunchOptions:
    """What a launch asks for beyond the command itself."""

    attention: bool = True
    """Report the agent's state to the grid (when the harness can)."""
    trusted_session_id: str | None = None
    """A session id clanker re-found in trusted storage (``clanker resume``): the
    attention broker may bind it before the harness's first event."""
    bridge: bool | None = None
    """Hand the agent a bridge credential, so it can ask the host to do things
    (``clanker cmd``). ``None``: as clanker's configuration says for this harness
    (``[bridge] harnesses``), off unless it is listed. Local launches only."""
    grants: tuple[str, ...] | None = None
    """The capability names the bridge credential carries (``None``: the ones clanker
    ships, :data:`clanker.bridge.shipped.SHIPPED_NAMES`)."""
    account: str | None = None
    """The managed account to run under (its label, email or id; ``default`` for the
    harness's own home). ``None``: the one selected for this harness (the default
    account unless one was selected). Only for harnesses with managed accounts."""


class PreparedLaunch:
    """A launch with its attachments acquired: the exact argv, environment and
    directory to run, and what to release afterwards.

    Use it as a context manager (or call :meth:`dispose`): disposal is
    idempotent and never raises. ``failed`` names the optional attachments
    that could not be prepared (the launch goes on without them).
    """

    def __init__(self, provider: HarnessProvider, cwd: str, attachments: Attachments,
                 base_env: Mapping[str, str] | None = None,
                 readoption: ReadoptionHandle | None = None) -> None:
        self.provider = provider
        self.cwd = cwd
        self._attachments = attachments
        self._base_env = dict(base_env) if base_env is not None else None
        self._readoption = readoption

    @property
    def readoption(self) -> Readoption | None:
        """How to re-present this launch's terminal to a next grid (``None``: attention
        did not register one), for :mod:`clanker.launch.readopt`."""
        return None if self._readoption is None else self._readoption.value

    @property
    def base_env(self) -> dict[str, str]:
        """The launch plan's environment before any attachment (no credential of
        clanker's): what a helper of the same harness runs with (a native relocation)."""
        if self._base_env is None:
            return self.env
        return dict(self._base_env)

    @property
    def argv(self) -> tuple[str, ...]:
        return self._attachments.state.argv

    @property
    def env(self) -> dict[str, str]:
        """The complete child environment (it may hold launch credentials: pass it
        to the child only, never print or store it)."""
        return dict(self._attachments.state.env)

    @property
    def failed(self) -> tuple[str, ...]:
        return self._attachments.failed_optional

    @property
    def notices(self) -> tuple[str, ...]:
        """What the person should read before the harness starts, one sentence each
        (``attention: <why it is unavailable>``, say)."""
        return self._attachments.notices

    def dispose(self) -> None:
        self._attachments.dispose()

    def __enter__(self) -> PreparedLaunch:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.dispose()

    def __repr__(self) -> str:  # never the environment: it may hold a credential
        return f"PreparedLaunch({self.provider.id!r}, argv={self.argv!r}, cwd={self.cwd!r})"


def _say(notice: str) -> None:
    """One line for the person while the harness owns the terminal (``\\r``: it may be
    in raw mode)."""
    import sys

    with contextlib.suppress(OSError, ValueError):
        print(f"\r\nclanker: {notice}\r", file=sys.stderr, flush=True)


class _Omitted:
    """A step this environment cannot carry: it only says so, in one notice."""

    optional = True

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self._reason = reason

    def prepare(self, state: LaunchState) -> PreparedAttachment:
        return PreparedAttachment(dispose=lambda: None, notice=self._reason)


class LaunchService:
    """Launches harnesses in one environment."""

    def __init__(self, *, environment: Environment, paths: ClankerPaths,
                 accounts: AccountService | None = None) -> None:
        """``accounts`` resolves a launch's account (without it every launch runs under
        the harness's own home, and asking for another account is refused)."""
        self.environment = environment
        self._paths = paths
        self._accounts = accounts

    def prepare(
        self,
        provider: HarnessProvider,
        request: LaunchRequest,
        options: LaunchOptions = LaunchOptions(),
        *,
        report: Report | None = None,
    ) -> PreparedLaunch:
        """Plan ``request``, check its executable, and acquire its attachments.

        Raises ``unsupported`` (the harness cannot do this operation over this
        environment), ``binary-unavailable`` (checked before anything is
        acquired, so a harness that is not installed starts no grid),
        :class:`~clanker.launch.planning.InvalidSessionIdError`,
        :class:`~clanker.config.ConfigError` (``bridge=None`` reads the
        configuration), :class:`~clanker.accounts.service.AccountError` (the
        account asked for, or selected, cannot be used: never replaced by
        another), and a required attachment's error.
        ``report(step, phase)`` hears of an optional one that failed.
        """
        if request.cwd is None:
            raise ValueError("cwd: a launch needs its directory")
        if request.transport is not self.environment.transport:
            raise ValueError("transport: the request is for another environment")
        plan = plan_launch(provider, request)
        account_env, account = self._account(provider, request, options)
        # PWD as a shell would set it: several harnesses read $PWD, not getcwd(). The
        # account's home variable has the last word, and attention and the bridge see it.
        env = {**self.environment.environ, "PWD": request.cwd, **plan.env, **account_env}
        if self.environment.transport is Transport.LOCAL:
            found = self.environment.files.which(plan.argv[0], env.get("PATH"))
        else:  # a host's files are read in rounds: its login PATH in one lookup
            found = _blocking(self.environment.locate([plan.argv[0]])).get(plan.argv[0])
        if found is None:
            raise HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE, plan.argv[0],
                                         harness=provider.id)
        base = LaunchState(argv=plan.argv, env=env)
        from clanker.launch.readopt import ReadoptionHandle  # a launch's, not a plan's

        readoption = ReadoptionHandle()
        steps = self._steps(provider, request, options, account, readoption)
        attachments = (prepare_attachments(base, steps) if report is None
                       else prepare_attachments(base, steps, report=report))
        return PreparedLaunch(provider, request.cwd, attachments, base_env=env,
                              readoption=readoption)

    def run(
        self,
        provider: HarnessProvider,
        request: LaunchRequest,
        options: LaunchOptions = LaunchOptions(),
        *,
        report: Report | None = None,
        notify: Callable[[str], None] | None = None,
    ) -> int:
        """Prepare, run in the user's terminal, dispose; return the harness's exit status.

        ``notify`` hears each of :attr:`PreparedLaunch.notices` before the harness starts.
        """
        with self.prepare(provider, request, options, report=report) as launch:
            if notify is not None:
                for notice in launch.notices:
                    notify(notice)
            if provider.checkout_rehome is not None:
                from clanker.launch.relayed import relays

                if relays(provider, launch):
                    return self.relay(provider, options, launch).run(tty_fd=0)
            readoption = launch.readoption
            if readoption is None or self.environment.transport is not Transport.LOCAL:
                return self.environment.run_interactive(launch.argv, launch.env, launch.cwd)
            from clanker.launch.readopt import GridWatch

            with GridWatch(readoption, _say):
                return self.environment.run_interactive(launch.argv, launch.env, launch.cwd)

    def relay(self, provider: HarnessProvider, options: LaunchOptions,
              launch: PreparedLaunch, *, stdin_fd: int = 0, stdout_fd: int = 1
              ) -> RelayedLaunch:
        """Start ``launch`` under the PTY relay on ``stdin_fd`` and ``stdout_fd``, so it
        can be moved to another checkout (:meth:`RelayedLaunch.move`); the relayed
        launch owns ``launch`` from now on (it releases it when it ends)."""
        from clanker.launch.relayed import RelayedLaunch

        def prepare(request: LaunchRequest) -> PreparedLaunch:
            session = request.session.native_id if request.session is not None else None
            return self.prepare(provider, request,
                                attrs.evolve(options, trusted_session_id=session))

        return RelayedLaunch(provider, launch, prepare, stdin_fd=stdin_fd, stdout_fd=stdout_fd)

    def child_environment(self, provider: HarnessProvider, cwd: str,
                          additions: Mapping[str, str], *, account: str | None = None
                          ) -> tuple[dict[str, str], dict[str, str]]:
        """The environment a launch path builds for a child of ``provider`` that is
        not a launch (an ACP server): this environment's variables, ``PWD``,
        ``additions`` and the account's home. Returns it and what clanker itself
        injected (``additions`` and the account's variables: secrets to redact)."""
        account_env, _ = self._account(provider, LaunchRequest(cwd=cwd),
                                       LaunchOptions(account=account))
        injected = {**additions, **account_env}
        return {**self.environment.environ, "PWD": cwd, **injected}, injected

    def _account(self, provider: HarnessProvider, request: LaunchRequest,
                 options: LaunchOptions) -> tuple[Mapping[str, str], str | None]:
        """The account's environment additions and its name (``None``: the default)."""
        if self._accounts is None:
            if options.account not in (None, "default"):
                from clanker.accounts.service import AccountError

                raise AccountError("this launch has no managed accounts to choose from")
            return {}, None
        account = options.account
        if account is None and request.operation is not LaunchOperation.FRESH:
            # A session is read from the harness's own home (sessions carry no account
            # yet), so it continues under the default account, whatever is selected.
            account = "default"
        binding = self._accounts.binding(provider.id, account)
        return binding.env, None if binding.record is None else binding.record.name

    def wants_bridge(self, provider: HarnessProvider, options: LaunchOptions) -> bool:
        """Whether a launch with ``options`` gets the bridge: asked for, or configured
        for this harness; never over a transport other than this machine's."""
        if self.environment.transport is not Transport.LOCAL:
            return False
        if options.bridge is not None:
            return options.bridge
        from clanker.config import load_settings

        return provider.id in load_settings(self._paths.config).bridge.harnesses

    def _steps(
        self, provider: HarnessProvider, request: LaunchRequest, options: LaunchOptions,
        account: str | None, readoption: ReadoptionHandle,
    ) -> list[AttachmentStep]:
        steps: list[AttachmentStep] = []
        assert request.cwd is not None
        bridge = self.wants_bridge(provider, options)
        handle = None
        if bridge:
            from clanker.launch.bridge import TerminalHandle

            handle = TerminalHandle()
        attention = options.attention and provider.attention is not None
        if attention and self.environment.transport is not Transport.LOCAL:
            attention = False
            steps.append(self._remote_attention(provider, request, options, account))
        if self.environment.transport is not Transport.LOCAL and options.bridge is None:
            from clanker.config import load_settings

            if provider.id in load_settings(self._paths.config).bridge.harnesses:
                # Configured for this harness, but a host has no bridge: said, not silent.
                steps.append(_Omitted("bridge", "not attached: the agent bridge is not "
                                      "available for SSH hosts (config.toml turns it on "
                                      "for this harness)"))
        if attention and provider.attention is not None:
            from clanker.launch.attention import AttentionAttachment

            steps.append(AttentionAttachment(
                provider.id, provider.attention, cwd=request.cwd, files=self.environment.files,
                run=self._run_command, user_flags=request.user_flags,
                trusted_root_session_id=options.trusted_session_id, paths=self._paths,
                on_registered=handle.offer if handle is not None else None, account=account,
                readoption=readoption,
            ))
        if handle is not None:
            from clanker.bridge.shipped import SHIPPED_NAMES
            from clanker.launch.bridge import BridgeAttachment

            reason = ("this launch runs without attention (it was asked for none)"
                      if not options.attention else
                      "this harness reports no attention to clanker")
            grants = options.grants or SHIPPED_NAMES
            if options.grants is None and attention and provider.checkout_rehome is not None:
                from clanker.bridge.isolated import CHECKOUT_NAMES

                grants = (*grants, *CHECKOUT_NAMES)  # hot-replaced or moved after its turn
            steps.append(BridgeAttachment(
                provider.id, cwd=request.cwd, grants=grants,
                handle=handle, without_attention=reason, paths=self._paths, account=account,
                readoption=readoption,
            ))
            steps += self._harness_steps(provider, request, grants)
        return steps

    def _remote_attention(self, provider: HarnessProvider, request: LaunchRequest,
                          options: LaunchOptions, account: str | None) -> AttachmentStep:
        """Attention on a host: through the host's terminal stream when the provider's
        attention runs on a host (:data:`~clanker.launch.attention.SSH_ATTENTION`) and
        the environment can observe that stream; otherwise left out, with one notice."""
        from clanker.launch.attention import SSH_ATTENTION, RemoteAttentionAttachment

        capability = provider.attention
        assert capability is not None
        assert request.cwd is not None
        if (getattr(capability, SSH_ATTENTION, False) is not True
                or not hasattr(self.environment, "observe_terminal")):
            return _Omitted("attention", "not available for SSH hosts yet for this harness "
                            "(its events cannot reach this machine's grid from a host)")
        return RemoteAttentionAttachment(
            provider.id, capability, cwd=request.cwd,
            environment=self.environment,  # type: ignore[arg-type]
            run=self._run_command, user_flags=request.user_flags,
            trusted_root_session_id=options.trusted_session_id, paths=self._paths,
            account=account)

    def _harness_steps(
        self, provider: HarnessProvider, request: LaunchRequest, grants: tuple[str, ...]
    ) -> list[AttachmentStep]:
        """The harness's own channels for the bridge: its MCP client, its instructions."""
        if provider.agent_bridge is None and provider.guidance is None:
            return []
        from clanker.launch.harness_bridge import (
            GuidanceAttachment,
            HarnessChannel,
            McpAttachment,
        )

        assert request.cwd is not None
        channel = HarnessChannel(provider.id, cwd=request.cwd, files=self.environment.files,
                                 run=self._run_command, user_flags=request.user_flags,
                                 paths=self._paths)
        steps: list[AttachmentStep] = []
        if provider.agent_bridge is not None:
            steps.append(McpAttachment(provider.agent_bridge, channel))
        if provider.guidance is not None:
            steps.append(GuidanceAttachment(provider.guidance, channel, grants))
        return steps

    def _run_command(self, request: CommandRequest) -> CommandResult:
        return _blocking(self.environment.executor.run(request))
