"""The clanker library: one object that tools import, and that the CLI is a thin layer over.

:class:`Clanker` is the composition root. It builds every service from one
:class:`~clanker.environment.Environment` (this machine unless you pass
another), one plugin :class:`~clanker.registry.Registry` (the installed
plugins unless you pass another) and clanker's own directories::

    import asyncio
    from clanker.api import Clanker

    async def main() -> None:
        async with Clanker() as clanker:
            listing = await clanker.sessions(workspace="/home/me/project")
            for session in listing.sessions[:5]:
                print(session.key, session.title)

    asyncio.run(main())

Everything that talks to a harness is a coroutine; launching a harness in
the user's terminal (:meth:`Clanker.launch`) and the grid calls are plain
functions. Failures are :class:`~clanker.errors.HarnessCapabilityError` with
a ``kind`` (``docs/exit-codes.md``) unless a method says otherwise.
``docs/library.md`` is the guide.
"""

from __future__ import annotations

import os
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    # Deferred imports keep `import clanker.api` cheap: a tool that only asks
    # the grid which agents run never loads a plugin.
    from datetime import timedelta
    from pathlib import Path

    from clanker.accounts.service import AccountService
    from clanker.acp.cleanup import CoderCleanup
    from clanker.acp.client import AcpClient, Ask
    from clanker.acp.service import CoderService
    from clanker.bridge.cmd import BridgeClient
    from clanker.bridge.declaration import HostCapability
    from clanker.checkouts.service import CheckoutService
    from clanker.checkouts.types import (
        CompletionResult,
        CreationResult,
        PrunePlan,
        WorktreeListing,
    )
    from clanker.commit.message import Style
    from clanker.commit.service import CommitProposal, CommitService
    from clanker.descriptor import SessionOperation
    from clanker.environment import Environment
    from clanker.environment.ssh import SshEnvironment
    from clanker.grid.client import GridClient
    from clanker.grid.daemon import GridStatus
    from clanker.grid.protocol import ExplainReply, SessionsReply, StreamEvent, TerminalEntry
    from clanker.hosts import Host, HostCheck, HostOutcome, HostStore
    from clanker.installation import Installation
    from clanker.launch.attachments import Report
    from clanker.launch.relayed import RelayedLaunch
    from clanker.launch.request import LaunchRequest
    from clanker.launch.service import LaunchOptions, LaunchService, PreparedLaunch
    from clanker.models.service import ModelService
    from clanker.models.types import ModelCatalog
    from clanker.paths import ClankerPaths
    from clanker.registry import HarnessProvider, Registry
    from clanker.sessions.selection import Selection
    from clanker.sessions.service import SessionListing, SessionService
    from clanker.sessions.types import HarnessSession
    from clanker.tmux.control import Tmux
    from clanker.tmux.handoff import TmuxTerminal, TmuxWindow
    from clanker.usage.service import UsageEntry, UsageService

__all__ = ["Clanker"]

T = TypeVar("T")


class Clanker:
    """Every clanker capability, wired once.

    ``environment`` is where harnesses run (default: this machine, with this
    process's environment variables); ``registry`` the plugins (default: the
    installed ones, loaded on first use); ``paths`` clanker's own directories
    (default: ``CLANKER_HOME`` or the platform's). Services are built on first
    use and kept: one object answers a warm session listing from memory.
    Close it (``async with`` or :meth:`aclose`) to end probes still running.
    ``ssh_config_file`` replaces ``~/.ssh/config`` for SSH hosts (``ssh -F``;
    default: the person's own OpenSSH configuration).
    """

    def __init__(
        self,
        *,
        environment: Environment | None = None,
        registry: Registry | None = None,
        paths: ClankerPaths | None = None,
        ssh_config_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self._environment = environment
        # Only then can a grid read the same stores: it sees this process's environment.
        self._as_this_process = environment is None and registry is None
        self._registry = registry
        self._paths = paths
        self._ssh_config_file = ssh_config_file
        self._owned_host: SshEnvironment | None = None
        self._sessions: SessionService | None = None
        self._models: ModelService | None = None
        self._usage: UsageService | None = None
        self._accounts: AccountService | None = None
        self._launch: LaunchService | None = None
        self._checkouts: CheckoutService | None = None

    # -- composition ---------------------------------------------------------

    @property
    def environment(self) -> Environment:
        if self._environment is None:
            from clanker.environment.local import LocalEnvironment

            self._environment = LocalEnvironment()
        return self._environment

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            from clanker.registry import get_registry

            self._registry = get_registry()
        return self._registry

    @property
    def paths(self) -> ClankerPaths:
        if self._paths is None:
            from clanker.paths import clanker_paths

            self._paths = clanker_paths()
        return self._paths

    def _session_service(self) -> SessionService:
        if self._sessions is None:
            from clanker.sessions.service import SessionService

            self._sessions = SessionService(
                environment=self.environment,
                cache_dir=self.environment.cache_dir(self.paths.cache),
                homes=self._session_homes)
        return self._sessions

    def _model_service(self) -> ModelService:
        if self._models is None:
            from clanker.models.service import ModelService

            self._models = ModelService(environment=self.environment, cache_dir=self.paths.cache)
        return self._models

    def _usage_service(self) -> UsageService:
        if self._usage is None:
            from clanker.usage.service import UsageService
            from clanker.usage.store import UsageStore

            self._usage = UsageService(environment=self.environment,
                                       store=UsageStore(self.paths.cache))
        return self._usage

    def _local_only(self, what: str, reason: str) -> None:
        """Refuse ``what`` on an SSH host: ``unsupported``, saying why it stays local."""
        from clanker.descriptor import Transport

        if self.environment.transport is not Transport.LOCAL:
            from clanker.errors import ErrorKind, HarnessCapabilityError

            raise HarnessCapabilityError(ErrorKind.UNSUPPORTED,
                                         f"{what} is not available for SSH hosts: {reason}")

    def _launch_service(self) -> LaunchService:
        if self._launch is None:
            from clanker.launch.service import LaunchService

            self._launch = LaunchService(environment=self.environment, paths=self.paths,
                                         accounts=self.accounts)
        return self._launch

    @property
    def accounts(self) -> AccountService:
        """Managed accounts (:class:`~clanker.accounts.service.AccountService`): list,
        add (signing in through the harness), select, rename, reconnect, remove. A
        person who never adds one has only each harness's default account."""
        if self._accounts is None:
            from clanker.accounts.service import AccountService
            from clanker.accounts.store import AccountStore

            self._accounts = AccountService(registry=self.registry,
                                            environment=self.environment, paths=self.paths,
                                            store=AccountStore(self._accounts_file))
        return self._accounts

    @property
    def _accounts_file(self) -> Path:
        return self.paths.state / "accounts.json"

    def _session_homes(self, provider: HarnessProvider
                       ) -> tuple[tuple[str | None, Mapping[str, str]], ...]:
        """Where ``provider``'s history is (:meth:`AccountService.homes`). With no
        accounts file there is no managed account, so only the harness's own home,
        and the accounts service (``hashlib``, ``secrets``, the store) is not loaded
        for it: ``clanker sessions`` of a person who never added one stays lean. A
        file that is there, readable or not, is the service's to judge."""
        if self._accounts is None and not os.path.lexists(self._accounts_file):
            return ((None, {}),)
        return self.accounts.homes(provider)

    async def aclose(self) -> None:
        """Cancel usage probes still in flight (each child is reaped); stop the SSH
        connection of a :meth:`on_host` object."""
        try:
            if self._usage is not None:
                await self._usage.close()
        finally:
            if self._owned_host is not None:
                self._owned_host.close()

    async def __aenter__(self) -> Clanker:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- harnesses -----------------------------------------------------------

    def harness(self, harness: HarnessProvider | str) -> HarnessProvider:
        """Return the provider of a harness id.

        Raises :class:`~clanker.registry.UnknownHarnessError` (a
        :class:`LookupError` listing the known ids) for anything that is not
        exactly a loaded id: an untrusted string never falls through to
        another harness.
        """
        from clanker.registry import HarnessProvider, UnknownHarnessError

        if isinstance(harness, HarnessProvider):
            return harness
        provider = self.registry.find_provider(harness)
        if provider is None:
            raise UnknownHarnessError(str(harness), self.registry.ids())
        return provider

    def harnesses(self) -> tuple[HarnessProvider, ...]:
        """Every loaded harness, by id."""
        return tuple(self.registry.providers.values())

    def _chosen(self, harnesses: Iterable[HarnessProvider | str] | None) -> list[HarnessProvider]:
        return list(self.harnesses()) if harnesses is None else [self.harness(h) for h in harnesses]

    async def installations(
        self, harnesses: Iterable[HarnessProvider | str] | None = None
    ) -> list[Installation]:
        """Where each harness's executable is and which version it reports."""
        from clanker.installation import probe_installations

        return await probe_installations(self._chosen(harnesses), self.environment)

    # -- SSH hosts -----------------------------------------------------------

    def _host_store(self) -> HostStore:
        from clanker.hosts import HostStore

        return HostStore(self.paths.config)

    def hosts(self) -> list[Host]:
        """The registered SSH hosts, by name. Raises :class:`~clanker.hosts.HostError`
        (a :class:`ValueError`) when the hosts file cannot be used."""
        return self._host_store().list()

    def add_host(self, name: str, target: str) -> Host:
        """Register ``target`` (an OpenSSH destination: ``user@box`` or a ``~/.ssh/config``
        alias) as ``name``. Nothing is contacted. Raises :class:`~clanker.hosts.HostError`
        for a malformed or taken name or a target ``ssh`` could read as an option."""
        return self._host_store().add(name, target)

    def remove_host(self, name: str) -> Host:
        """Forget a host (:class:`~clanker.hosts.HostError` when unknown)."""
        return self._host_store().remove(name)

    async def connect_host(self, name: str) -> SshEnvironment:
        """The registered host ``name`` as a connected
        :class:`~clanker.environment.ssh.SshEnvironment` (close it when done).

        Raises :class:`~clanker.hosts.HostError` for an unknown name and
        ``transport-failure`` when the host cannot be reached.
        """
        from pathlib import Path

        from clanker.environment.ssh import SshEnvironment, control_directory
        from clanker.paths import UnsafeRuntimeDirectoryError, runtime_directory

        host = self._host_store().get(name)
        config = None if self._ssh_config_file is None else Path(self._ssh_config_file)
        try:
            runtime: Path | None = runtime_directory(self.paths, create=True)
        except UnsafeRuntimeDirectoryError:
            runtime = None  # control_directory has a private place of its own
        environment = SshEnvironment(host, control_dir=control_directory(runtime),
                                     config_file=config)
        try:
            await environment.connect()
        except BaseException:
            environment.close()
            raise
        return environment

    async def on_host(self, name: str) -> Clanker:
        """A :class:`Clanker` whose harnesses are those of the SSH host ``name``:
        the same registry and directories; caches are kept per host. Close it."""
        environment = await self.connect_host(name)
        remote = Clanker(environment=environment, registry=self.registry, paths=self.paths,
                         ssh_config_file=self._ssh_config_file)
        remote._owned_host = environment
        return remote

    async def check_host(self, name: str) -> HostCheck:
        """Reach ``name`` and find every harness there (one batched lookup) and its version.

        A host that cannot be reached or used is a result (``error``), not an
        exception; an unknown name raises :class:`~clanker.hosts.HostError`.
        """
        from clanker.errors import HarnessCapabilityError
        from clanker.hosts import HostCheck
        from clanker.installation import probe_installations

        host = self._host_store().get(name)
        try:
            environment = await self.connect_host(name)
        except HarnessCapabilityError as exc:
            return HostCheck(host=host, error=exc)
        try:
            found = await probe_installations(list(self.harnesses()), environment)
        except HarnessCapabilityError as exc:
            return HostCheck(host=host, error=exc)
        finally:
            environment.close()
        return HostCheck(host=host, error=None, installations=tuple(found))

    async def each_host(self, work: Callable[[Clanker], Awaitable[T]]
                        ) -> list[HostOutcome[T]]:
        """Run ``work`` here and on every registered host, concurrently; one
        :class:`~clanker.hosts.HostOutcome` each (this machine first, then by name).

        A host that cannot be reached, or whose ``work`` raises a
        :class:`~clanker.errors.HarnessCapabilityError`, has that as its
        ``error``: the others' answers stand beside it.
        """
        import asyncio

        from clanker.errors import HarnessCapabilityError
        from clanker.hosts import HostOutcome

        async def on(name: str | None) -> HostOutcome[T]:
            try:
                if name is None:
                    return HostOutcome(host=None, value=await work(self))
                async with await self.on_host(name) as remote:
                    return HostOutcome(host=name, value=await work(remote))
            except HarnessCapabilityError as exc:
                return HostOutcome(host=name, error=exc)

        names: list[str | None] = [None, *(host.name for host in self.hosts())]
        return list(await asyncio.gather(*(on(name) for name in names)))

    # -- models --------------------------------------------------------------

    async def models(self, harness: HarnessProvider | str, *, refresh: bool = False
                     ) -> ModelCatalog:
        """The models a harness accepts, from its own listing (cached for its TTL).

        A failed listing is not raised: the catalog carries the last good list
        or the fallback, and its ``failure``. Raises ``unsupported`` for a
        harness without a models capability.
        """
        return await self._model_service().catalog(self.harness(harness), refresh=refresh)

    # -- sessions ------------------------------------------------------------

    async def sessions(
        self,
        *,
        workspace: str | os.PathLike[str] | None,
        harnesses: Iterable[HarnessProvider | str] | None = None,
        limit: int | None = None,
        grid: bool = True,
    ) -> SessionListing:
        """Past conversations of every harness (or ``harnesses``) for ``workspace``,
        newest first; ``workspace=None`` lists every directory.

        ``limit`` bounds the sessions read per harness store (default 512). A
        failing store is reported in ``listing.scans`` beside the others,
        never instead of them. When a grid already runs (none is started for
        this) and this object reads this machine as this process sees it (no
        ``environment`` or ``registry`` given), the grid's watched index answers
        (the same listing, its scans without their sessions); anything it cannot
        answer is listed here. ``grid=False`` always lists here.
        """
        from clanker.sessions.capability import DEFAULT_STORE_LIMIT

        where = None if workspace is None else os.path.abspath(workspace)
        chosen = self._chosen(harnesses)
        bound = limit or DEFAULT_STORE_LIMIT
        # No socket where the grid puts it: no grid runs, and neither the grid's
        # modules nor a thread to ask it are needed (`_grid_sessions` says None).
        if grid and self._as_this_process and self._grid_may_run():
            import asyncio

            listing = await asyncio.to_thread(self._grid_sessions, where, chosen, bound)
            if listing is not None:
                return listing
        service = self._session_service()
        return await self.environment.gather(
            lambda: service.discover(chosen, workspace=where, limit=bound))

    def empty_sessions(
        self,
        *,
        workspace: str | os.PathLike[str] | None,
        harnesses: Iterable[HarnessProvider | str] | None = None,
    ) -> SessionListing | None:
        """What :meth:`sessions` would answer when it is provably empty without a scan,
        else ``None``: this machine as this process sees it, no grid running, no
        managed account, every chosen harness's store roots missing or empty, and
        each harness without roots finishing its own listing at once, empty or
        for want of a command that is not installed
        (:func:`clanker.sessions.empty.empty_listing`). Synchronous: it starts no
        event loop."""
        if not self._as_this_process or self._accounts is not None \
                or os.path.lexists(self._accounts_file) or self._grid_may_run():
            return None
        from clanker.descriptor import Transport
        from clanker.sessions.empty import empty_listing

        environment = self.environment
        if environment.transport is not Transport.LOCAL:
            return None
        search = environment.environ.get("PATH", os.defpath)
        where = None if workspace is None else os.path.abspath(workspace)
        return empty_listing(self._chosen(harnesses), environment=environment, workspace=where,
                             cache_dir=environment.cache_dir(self.paths.cache),
                             locate=lambda command: environment.files.which(command, search))

    def sessions_now(
        self,
        *,
        workspace: str | os.PathLike[str] | None,
        harnesses: Iterable[HarnessProvider | str] | None = None,
        limit: int | None = None,
    ) -> SessionListing | None:
        """What :meth:`sessions` would answer, when this thread can list it without an
        event loop, else ``None`` (then await :meth:`sessions`). Synchronous.

        That is so on this machine when no grid runs (its index would answer) and
        every chosen store is read from files alone: no harness command to run, no
        git to find the workspace's worktrees (so ``workspace=None``, in practice), no
        file to wait for. Over empty stores it is :meth:`empty_sessions`'s answer;
        otherwise the same scans :meth:`sessions` runs, on this thread (a large
        store still takes a second core, as there)."""
        found = self.empty_sessions(workspace=workspace, harnesses=harnesses)
        if found is not None:
            return found
        from clanker.descriptor import Transport
        from clanker.sessions.capability import DEFAULT_STORE_LIMIT

        if self.environment.transport is not Transport.LOCAL \
                or (self._as_this_process and self._grid_may_run()):
            return None
        where = None if workspace is None else os.path.abspath(workspace)
        return self._session_service().discover_now(
            self._chosen(harnesses), workspace=where, limit=limit or DEFAULT_STORE_LIMIT)

    def _grid_may_run(self) -> bool:
        """``False`` only when nothing is where the grid's socket would be: then no
        grid runs and :meth:`_grid_sessions` would answer ``None``. A runtime
        directory that cannot be used is left for it to judge."""
        from clanker.grid.errors import GridError

        try:
            return os.path.lexists(self.paths.grid_socket)
        except GridError:
            return True

    def _grid_sessions(self, workspace: str | None, chosen: list[HarnessProvider],
                       limit: int) -> SessionListing | None:
        """The running grid's answer, or ``None`` (no grid, or it could not answer)."""
        from clanker.envvars import strip_credentials
        from clanker.grid.errors import GridError

        try:
            from clanker.grid import daemon

            # Asked at once rather than after a `hello`: the socket's checks are the
            # same, and a grid that is not running refuses the connection.
            location = daemon.grid_location(self.paths)
            if not daemon.secure_directory(location.directory, create=False) \
                    or not daemon.check_socket(location.socket):
                return None
            from clanker.grid.client import GridClient
            from clanker.grid.protocol import SessionsRequest

            # Without what each shell sets for itself: the grid keeps one index per
            # environment, and a listing from another directory is the same question.
            environ = {name: value for name, value in strip_credentials(os.environ).items()
                       if name not in _SHELL_VARIABLES}
            request = SessionsRequest(environ=environ,
                                      workspace=workspace, limit=limit,
                                      harnesses=[p.id for p in chosen])
            reply, sessions = GridClient(location.socket,
                                         timeout=GRID_SESSIONS_TIMEOUT).sessions(request)
        except (GridError, ValueError):
            # ValueError: an environment the protocol cannot carry. Listed here instead.
            return None
        return _listing(reply, sessions)

    async def find_session(
        self,
        key: str,
        *,
        workspace: str | os.PathLike[str],
        operation: SessionOperation | None = None,
        recreate_worktree: bool = False,
    ) -> Selection:
        """Re-find ``HARNESS:ID`` in its harness's own store and say where it may run.

        ``workspace`` is where the caller is. When the session's own directory
        is gone and was a worktree clanker can attribute, a harness that
        continues elsewhere runs in that worktree's main checkout (else in
        ``workspace``), with ``selection.notice`` saying so; any other harness
        raises :class:`~clanker.sessions.selection.DirectoryGoneError`, whose
        ``removed`` says whether ``recreate_worktree`` would check the
        worktree's branch out again at its own path (only clanker's own
        worktrees, only while the branch exists). Raises
        :class:`~clanker.sessions.selection.InvalidSelectionError` (malformed
        or unknown), :class:`~clanker.sessions.selection.SessionNotFoundError`,
        ``unsupported`` when ``operation`` is not offered, and
        :class:`~clanker.checkouts.types.CheckoutError` when a requested
        recreation is refused.
        """
        from clanker.descriptor import Transport
        from clanker.sessions.selection import resolve_selection

        if self.environment.transport is not Transport.LOCAL:
            if recreate_worktree:
                self._local_only("recreating a worktree",
                                 "isolated checkouts are recorded on this machine")
            return await self._find_on_host(key, workspace=str(workspace), operation=operation)
        return await resolve_selection(
            self._session_service(), self.registry, key, operation=operation,
            workspace=os.path.abspath(workspace), checkouts=self._checkout_service(),
            recreate_worktree=recreate_worktree)

    async def _find_on_host(self, key: str, *, workspace: str,
                            operation: SessionOperation | None) -> Selection:
        """:meth:`find_session` on an SSH host: re-found by the host scan, its reads in
        bounded rounds (an answer of a round that still read files is not final)."""
        from clanker.sessions.selection import resolve_selection

        async def work() -> Selection | Exception:
            try:
                return await resolve_selection(
                    self._session_service(), self.registry, key, operation=operation,
                    workspace=workspace, scoped=False)
            except Exception as exc:  # raised once the rounds are done
                return exc

        from clanker.environment.ssh_scan import MAX_ROUNDS

        # A scan's rounds, and one for checking what was found (its file, its directory);
        # a search, so a walk too large for one answer goes on over the older files.
        found = await self.environment.gather(work, rounds=MAX_ROUNDS + 1, complete=True)
        if isinstance(found, Exception):
            raise found
        return found

    async def resumption(
        self, key: str, *, workspace: str | os.PathLike[str],
        operation: SessionOperation | None = None, model: str | None = None,
        user_flags: tuple[str, ...] = (), attention: bool = True, bridge: bool | None = None,
        recreate_worktree: bool = False,
    ) -> tuple[HarnessProvider, LaunchRequest, LaunchOptions, str | None]:
        """What :meth:`launch` needs to continue ``HARNESS:ID`` (``operation``: resume,
        the default, or fork): the provider, the request, the options and a notice
        to show (``None``: none). The session is re-found first (see
        :meth:`find_session` for the errors and ``recreate_worktree``); a resume
        binds its very id for attention, and it continues under the account whose
        home holds it."""
        from clanker.descriptor import SessionOperation
        from clanker.launch.request import LaunchOperation, LaunchRequest, SessionTarget
        from clanker.launch.service import LaunchOptions

        chosen = operation or SessionOperation.RESUME
        found = await self.find_session(key, operation=chosen, workspace=workspace,
                                        recreate_worktree=recreate_worktree)
        launch_operation = LaunchOperation(chosen.value)
        request = LaunchRequest(
            operation=launch_operation, transport=self.environment.transport, model=model,
            user_flags=user_flags,
            session=SessionTarget(native_id=found.session.native_id,
                                  store_path=found.session.store_path),
            cwd=found.launch_cwd)
        # Only a resume continues the very session that was re-found; a fork's id is new.
        trusted = found.session.native_id if launch_operation is LaunchOperation.RESUME else None
        options = LaunchOptions(attention=attention, trusted_session_id=trusted, bridge=bridge,
                                account=found.session.account or "default")
        return found.provider, request, options, found.notice

    # -- usage ---------------------------------------------------------------

    def _usage_capable(self, harnesses: Iterable[HarnessProvider | str] | None
                       ) -> list[HarnessProvider]:
        if harnesses is None:
            return [p for p in self.harnesses() if p.usage is not None]
        return self._chosen(harnesses)

    async def usage_as_completed(
        self, harnesses: Iterable[HarnessProvider | str] | None = None, *, refresh: bool = False
    ) -> AsyncIterator[UsageEntry]:
        """Yield each harness's usage as soon as its probe answers.

        Without ``harnesses``, every harness with a usage capability. Each
        probe runs within the harness's own refresh policy and hard limits;
        ``refresh`` asks again now where they allow it.
        """
        import asyncio

        service = self._usage_service()
        reads = [service.read(p, force=refresh, account=account, env=env)
                 for p in self._usage_capable(harnesses)
                 for account, env in self._usage_homes(p)]
        for done in asyncio.as_completed(reads):
            yield await done

    def _usage_homes(self, provider: HarnessProvider
                     ) -> list[tuple[str | None, Mapping[str, str]]]:
        """The sign-ins to read ``provider``'s usage under: its own, or, once it has
        managed accounts, each of them too, the selected one first."""
        homes = list(self.accounts.homes(provider))
        if len(homes) > 1:
            selected = next((e.id for e in self.accounts.listing(provider.id) if e.selected),
                            None)
            homes.sort(key=lambda home: (home[0] or "default") != selected)
        return homes

    async def usage(
        self, harnesses: Iterable[HarnessProvider | str] | None = None, *, refresh: bool = False
    ) -> list[UsageEntry]:
        """Every harness's usage, in harness order (see :meth:`usage_as_completed`): one
        entry per sign-in for a harness with managed accounts, the selected one first."""
        chosen = self._usage_capable(harnesses)
        order: dict[tuple[str, str | None], int] = {}
        for provider in chosen:
            for account, _ in self._usage_homes(provider):
                order[(provider.id, account)] = len(order)
        entries = [entry async for entry in self.usage_as_completed(chosen, refresh=refresh)]
        return sorted(entries, key=lambda entry: order.get((entry.harness, entry.account),
                                                            len(order)))

    # -- commit messages -----------------------------------------------------

    def _commit_service(self) -> CommitService:
        self._local_only("commit messages", "they read this machine's git work tree")
        from clanker.commit.service import CommitService

        return CommitService(executor=self.environment.executor,
                             lock_dir=self.paths.state / "locks")

    async def commit_message(
        self,
        harness: HarnessProvider | str,
        repository: str | os.PathLike[str],
        *,
        model: str | None = None,
        style: Style | None = None,
    ) -> CommitProposal:
        """A checked commit message for everything uncommitted in ``repository``.

        Nothing in the repository changes. Raises the git context errors of
        :mod:`clanker.commit.gitcontext`, :class:`~clanker.commit.service.RepositoryBusyError`,
        :class:`~clanker.commit.service.InvalidModelError` and the harness's typed failures.
        """
        from clanker.commit.message import Style

        return await self._commit_service().propose(
            self.harness(harness), os.path.abspath(repository), model=model,
            style=style or Style.PLAIN)

    def commit(self, proposal: CommitProposal) -> int:
        """Stage everything and commit with ``proposal``'s message; return git's status.

        Runs in the foreground without a time bound (the repository's own
        commit hooks may take their time and talk to the terminal).
        """
        from clanker.commit.service import commit_change

        self._local_only("committing", "it runs git in this machine's work tree")
        return commit_change(proposal.change.root, proposal.message.text,
                             self.environment.environ)

    # -- launch --------------------------------------------------------------

    def prepare_launch(
        self,
        harness: HarnessProvider | str,
        request: LaunchRequest,
        options: LaunchOptions | None = None,
        *,
        report: Report | None = None,
    ) -> PreparedLaunch:
        """Plan a launch and acquire its attachments, for a caller that runs it itself.

        Use the result as a context manager: leaving it releases the
        attachments (the grid retires the agent). See
        :meth:`~clanker.launch.service.LaunchService.prepare` for the errors.
        """
        from clanker.launch.service import LaunchOptions

        self._launch_checked(options)
        return self._launch_service().prepare(
            self.harness(harness), request, options or LaunchOptions(), report=report)

    def _launch_checked(self, options: LaunchOptions | None) -> None:
        """Refuse what a launch asks for that stays on this machine (on an SSH host)."""
        if options is not None and options.bridge:
            self._local_only("the agent bridge",
                             "its endpoint and credentials live on this machine only")

    def relay_launch(
        self, harness: HarnessProvider | str, request: LaunchRequest,
        options: LaunchOptions | None = None, *, stdin_fd: int = 0, stdout_fd: int = 1,
    ) -> RelayedLaunch:
        """Start a launch under the PTY relay, relaying ``stdin_fd`` and ``stdout_fd``,
        so its conversation can be moved to another checkout while it runs
        (:meth:`~clanker.launch.relayed.RelayedLaunch.move`); :meth:`launch` does this
        itself for a launch that can be moved.

        Only a launch that :func:`~clanker.launch.relayed.relays` (a harness that
        declares how it moves, with its bridge and attention attached); anything else raises
        ``unsupported`` after releasing what it acquired. Call ``run()`` on the result:
        it relays until the child ends and releases the attachments.
        """
        from clanker.errors import ErrorKind, HarnessCapabilityError
        from clanker.launch.relayed import relays
        from clanker.launch.service import LaunchOptions

        provider = self.harness(harness)
        options = options or LaunchOptions()
        launch = self.prepare_launch(provider, request, options)
        try:
            if not relays(provider, launch):
                raise HarnessCapabilityError(
                    ErrorKind.UNSUPPORTED,
                    "this launch cannot be moved (it needs a harness that declares how it "
                    "moves, with its bridge and attention attached)", harness=provider.id)
            return self._launch_service().relay(provider, options, launch,
                                                stdin_fd=stdin_fd, stdout_fd=stdout_fd)
        except BaseException:
            launch.dispose()
            raise

    @overload
    def launch(
        self, harness: HarnessProvider | str, request: LaunchRequest,
        options: LaunchOptions | None = None, *, report: Report | None = None,
        notify: Callable[[str], None] | None = None, terminal: None = None,
    ) -> int: ...

    @overload
    def launch(
        self, harness: HarnessProvider | str, request: LaunchRequest,
        options: LaunchOptions | None = None, *, report: Report | None = None,
        notify: Callable[[str], None] | None = None, terminal: TmuxTerminal,
    ) -> TmuxWindow: ...

    def launch(
        self,
        harness: HarnessProvider | str,
        request: LaunchRequest,
        options: LaunchOptions | None = None,
        *,
        report: Report | None = None,
        notify: Callable[[str], None] | None = None,
        terminal: TmuxTerminal | None = None,
    ) -> int | TmuxWindow:
        """Run a harness in this terminal with its attachments; return its exit status.

        ``report(step, phase)`` hears of an optional attachment that failed and
        ``notify(sentence)`` of each notice (why attention is unavailable, say),
        before the harness starts. Call it from the main thread (it forwards
        signals to the harness).

        With ``terminal`` (a :class:`~clanker.tmux.handoff.TmuxTerminal`) the launch
        runs instead in a new window of that tmux session, as the ordinary
        foreground launch of this interpreter with this process's environment
        (``report`` and ``notify`` then print in that window); this returns the
        :class:`~clanker.tmux.handoff.TmuxWindow` once tmux has opened it. Only
        for this machine's environment, the installed plugins and clanker's
        directories as this environment names them. Raises
        :class:`~clanker.tmux.control.TmuxUnavailableError` (exit 45) and
        :class:`~clanker.tmux.control.TmuxError` (exit 46).
        """
        from clanker.launch.service import LaunchOptions

        if terminal is not None:
            return self._hand_off(self.harness(harness), request, options or LaunchOptions(),
                                  terminal)
        self._launch_checked(options)
        return self._launch_service().run(
            self.harness(harness), request, options or LaunchOptions(), report=report,
            notify=notify)

    def _hand_off(self, provider: HarnessProvider, request: LaunchRequest,
                  options: LaunchOptions, terminal: TmuxTerminal) -> TmuxWindow:
        from clanker.descriptor import Transport
        from clanker.errors import ErrorKind, HarnessCapabilityError
        from clanker.launch.planning import plan_launch
        from clanker.tmux.handoff import hand_off

        if self.environment.transport is not Transport.LOCAL:
            raise HarnessCapabilityError(ErrorKind.UNSUPPORTED, "tmux launches run locally",
                                         harness=provider.id)
        # An impossible launch is refused here, where the caller reads it, not in the window.
        plan = plan_launch(provider, request)
        environ = self.environment.environ
        if self.environment.files.which(plan.argv[0], environ.get("PATH")) is None:
            raise HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE, plan.argv[0],
                                         harness=provider.id)
        return hand_off(provider.id, request, options, terminal=terminal,
                        state_dir=self.paths.state, environ=environ)

    def tmux(self, *, socket_name: str | None = None) -> Tmux:
        """The tmux server launches are handed to (:class:`~clanker.tmux.control.Tmux`):
        the one this process runs inside, else ``socket_name``'s (``tmux -L``), else
        tmux's default. ``unavailable()`` says why tmux cannot be used;
        ``jump(pane)`` brings an agent's pane (``TerminalEntry.tmux_pane``) forward."""
        from clanker.tmux.control import Tmux

        return Tmux(self.environment.environ, socket_name=socket_name)

    # -- coder (ACP client) ----------------------------------------------------

    def coder(
        self,
        harness: HarnessProvider | str | None = None,
        *,
        agent_command: Sequence[str] | None = None,
        cwd: str | os.PathLike[str],
        interactive: bool = False,
        approve: Iterable[str] = (),
        on_event: Callable[[dict[str, Any]], None] | None = None,
        ask: Ask | None = None,
        resume: str | None = None,
        account: str | None = None,
        attention: bool = False,
    ) -> AbstractAsyncContextManager[AcpClient]:
        """Drive an ACP agent: a harness's ACP server, or ``agent_command`` (argv of
        any ACP agent, its executable looked up on ``PATH``).

        Use as ``async with clanker.coder(harness, cwd=repo) as coder:`` and
        ``await coder.prompt("...")`` (the stop reason). Permission requests are
        answered by the approval ladder (:mod:`clanker.acp.policy`): with
        ``interactive`` the ones that ask call ``ask(request, decision)``,
        otherwise they are refused unless ``approve`` names their tool kind.
        ``on_event`` hears every update, approval and turn event in order; the
        transcript is written under clanker's state directory. ``resume``
        continues a session (never silently a new one). With ``attention`` the session
        is a grid terminal (``agents()`` lists it: working, needs input, done). Raises
        :class:`~clanker.errors.HarnessCapabilityError` for a start that fails
        and :class:`~clanker.acp.errors.CoderError` for a turn or resume.
        """
        from clanker.acp.service import CoderOptions

        options = CoderOptions(cwd=os.path.abspath(cwd), interactive=interactive,
                               approve=frozenset(approve), account=account,
                               attention=attention)
        provider = None if harness is None else self.harness(harness)
        return self._coder_service().session(
            harness=provider, agent_command=agent_command, options=options,
            on_event=on_event or (lambda _: None), ask=ask, resume=resume)

    def start_coder_early(self, harness: HarnessProvider | str, *,
                          cwd: str | os.PathLike[str], account: str | None = None) -> bool:
        """Start ``harness``'s ACP server now, and write ``initialize`` to it, for the
        next :meth:`coder` of this very agent (same harness, directory and account)
        in this process to take over instead of starting its own: the agent starts
        while the caller loads the rest. Returns whether it was started (not for an
        agent with stored secrets). An agent never taken is stopped at exit. Raises
        what :meth:`coder` raises before its start.

        Without a registry of its own, and before the process-wide one is loaded
        (or overridden: then that one is used), only ``harness``'s plugin is loaded
        for this (``Registry.from_entry_points(only=...)``: the same validation;
        the others' imports are what the early start must not wait for), nothing
        made for it is kept (a later call builds the full registry as always),
        and managed accounts are read only where they can apply (see
        :meth:`_early_launch`)."""
        from clanker.acp.service import CoderOptions, CoderService
        from clanker.registry import Registry, loaded_registry

        options = CoderOptions(cwd=os.path.abspath(cwd), account=account)
        if self._registry is None and isinstance(harness, str) and loaded_registry() is None:
            provider = Registry.from_entry_points(only=harness).find_provider(harness)
            if provider is not None:  # else the full registry's own refusal, below
                service = CoderService(environment=self.environment, paths=self.paths,
                                       launch=lambda: self._early_launch(provider, account))
                return service.start_early(provider, options)
        return self._coder_service().start_early(self.harness(harness), options)

    def _early_launch(self, provider: HarnessProvider, account: str | None) -> LaunchService:
        """The launch path for :meth:`start_coder_early`'s one harness: without managed
        accounts where none can apply (the harness has no ``accounts`` capability
        and the default one is asked for, so the binding adds nothing: the same
        environment without importing the account store), else with them over a
        registry of that harness alone."""
        from clanker.launch.service import LaunchService

        accounts = None
        if provider.accounts is not None or account not in (None, "default"):
            from clanker.accounts.service import AccountService
            from clanker.registry import Registry

            accounts = AccountService(registry=Registry({provider.id: provider}),
                                      environment=self.environment, paths=self.paths)
        return LaunchService(environment=self.environment, paths=self.paths, accounts=accounts)

    async def coder_sessions(
        self,
        harness: HarnessProvider | str | None = None,
        *,
        agent_command: Sequence[str] | None = None,
        cwd: str | os.PathLike[str],
        account: str | None = None,
    ) -> list[dict[str, Any]]:
        """The agent's own sessions for ``cwd`` (``session/list``, its first page, as
        the agent describes them: ``sessionId``, ``title``, ``updatedAt``...). Raises
        ``unsupported`` when the agent does not offer the listing."""
        from clanker.acp.service import CoderOptions

        options = CoderOptions(cwd=os.path.abspath(cwd), account=account)
        provider = None if harness is None else self.harness(harness)
        client = await self._coder_service().open(
            harness=provider, agent_command=agent_command, options=options,
            on_event=lambda _: None)
        try:
            return await client.list_sessions(options.cwd)
        finally:
            await client.close()

    def coder_transcript(self, session_id: str) -> list[dict[str, Any]]:
        """The records of a coder session's transcript, oldest first (``dir``: ``out``,
        ``in`` or ``clanker``; ``frame``; ``t``), secrets already redacted. Raises
        :class:`~clanker.acp.errors.CoderError` ``no-transcript``."""
        return self._coder_service().records(session_id)

    def clean_coder(self, *, older_than: timedelta | None = None, keep: int | None = None,
                    dry_run: bool = False) -> CoderCleanup:
        """Remove coder transcripts and agent stderr logs by a rule: last written more
        than ``older_than`` ago, and/or beyond the ``keep`` newest of each (both: a
        file must match each). Only clanker's own coder files are candidates (their
        names, regular files, no links, in the private coder directory). With
        ``dry_run`` nothing is removed; the result lists what would be. Raises
        :class:`ValueError` for no rule, or a directory that is not safe to clean."""
        return self._coder_service().clean(older_than=older_than, keep=keep, dry_run=dry_run)

    def coder_secrets(self, agent: str) -> list[str]:
        """The names of the secrets stored for ``agent`` (a harness id, or an
        ``agent_command``'s executable name); never their values."""
        return self._coder_service().secrets.names(agent)

    def set_coder_secret(self, agent: str, name: str, value: str) -> None:
        """Store ``value`` in the OS credential store (``keyring``) as ``agent``'s
        variable ``name``: :meth:`coder` puts it into that agent's environment only
        (and redacts it), unless the variable is already set for the run. Raises
        :class:`ValueError` for a name that cannot be such a variable (``CLANKER_*``,
        one the launch path sets), :class:`~clanker.acp.errors.CoderError`
        ``no-keyring`` where there is no credential store, and
        :class:`~clanker.locking.LockTimeoutError` when another process keeps the
        index of names locked for 30 s."""
        service = self._coder_service()
        provider = self.registry.find_provider(agent)
        service.secrets.set(agent, name, value, reserved=service.reserved_names(provider))

    def remove_coder_secret(self, agent: str, name: str) -> bool:
        """Remove ``agent``'s secret ``name`` from the store and the index; whether it
        was stored."""
        return self._coder_service().secrets.remove(agent, name)

    def _coder_service(self) -> CoderService:
        from clanker.acp.service import CoderService

        return CoderService(environment=self.environment, paths=self.paths,
                            launch=self._launch_service)  # made when a harness needs it

    # -- isolated checkouts (git worktrees) -----------------------------------

    def _checkout_service(self) -> CheckoutService:
        self._local_only("isolated worktrees",
                         "their transactions are recorded and checked on this machine")
        if self._checkouts is None:
            from clanker.checkouts.service import CheckoutService

            self._checkouts = CheckoutService(environment=self.environment,
                                              state_dir=self.paths.state,
                                              occupants=self._agents_in)
        return self._checkouts

    async def create_worktree(
        self,
        repository: str | os.PathLike[str],
        branch: str,
        *,
        base: str | None = None,
    ) -> CreationResult:
        """Create a worktree on the new ``branch``, from ``base`` (default: the main
        checkout's ``HEAD``), at ``<repo>-worktrees/<name>-<hash>``.

        ``repository`` is any directory of the repository. Ignored files that
        ``.worktreeinclude`` names are copied in. Asking again for a branch
        clanker created, whose worktree is still there and where no agent
        works, answers with that worktree (``created`` is ``False``). Raises
        :class:`~clanker.checkouts.types.CheckoutError` (its ``reason`` says
        which refusal).
        """
        return await self._checkout_service().create(os.path.abspath(repository), branch,
                                                     base=base)

    async def worktrees(self, repository: str | os.PathLike[str], *, inspect: bool = True
                        ) -> WorktreeListing:
        """Every worktree of the repository: the ones git lists (the main checkout
        first) and the ones clanker created that git no longer lists, each with
        its branch, whether clanker created it, its dirtiness (``inspect``) and
        the agents the grid says work there."""
        from attrs import evolve

        listing = await self._checkout_service().list(os.path.abspath(repository),
                                                      inspect=inspect)
        agents = await self._grid_agents()
        if not agents:
            return listing
        from clanker.checkouts.types import WorktreeAgent

        owners: dict[str, list[WorktreeAgent]] = {}
        for entry in agents:
            home = _deepest([w.path for w in listing.worktrees if w.listed], entry.location)
            if home is not None:
                owners.setdefault(home, []).append(WorktreeAgent(
                    terminal=entry.terminal, harness=entry.harness, attention=entry.attention))
        return evolve(listing, worktrees=tuple(
            evolve(w, agents=tuple(owners.get(w.path, ()))) if w.listed else w
            for w in listing.worktrees))

    async def complete_worktree(
        self,
        repository: str | os.PathLike[str],
        *,
        path: str | os.PathLike[str] | None = None,
        branch: str | None = None,
        delete_branch: bool = False,
        discard_ignored: bool = False,
    ) -> CompletionResult:
        """Remove a worktree clanker created: the one at ``path``, on ``branch``, or
        (neither) the one ``repository`` is in.

        Strict: changes block (status ``dirty``), ignored files alone block
        (``ignored-only``) unless ``discard_ignored`` (the whole checkout then
        goes to the Trash). Nothing is removed while an agent works there.
        ``delete_branch`` deletes the branch with ``git branch -d`` only.
        Raises :class:`~clanker.checkouts.types.CheckoutError`.
        """
        return await self._checkout_service().complete(
            os.path.abspath(repository), path=None if path is None else os.path.abspath(path),
            branch=branch, delete_branch=delete_branch, discard_ignored=discard_ignored)

    async def prune_worktrees(self, repository: str | os.PathLike[str], *,
                              apply: bool = False) -> PrunePlan:
        """Which worktrees clanker created are merged into the main checkout's
        ``HEAD`` and clean (or already gone); with ``apply``, complete each and
        delete its branch (``git branch -d``). Without ``apply`` nothing changes."""
        return await self._checkout_service().prune(os.path.abspath(repository), apply=apply)

    async def _grid_agents(self) -> list[TerminalEntry]:
        import asyncio

        from clanker.grid.errors import GridPathError

        try:
            return await asyncio.to_thread(self.agents)
        except GridPathError:
            return []  # no grid can run from an unusable directory: no agent is known

    async def _agents_in(self, path: str) -> list[str]:
        inside = path.rstrip(os.sep) + os.sep
        return [entry.terminal for entry in await self._grid_agents()
                if (entry.location + os.sep).startswith(inside)]

    # -- the grid and attention ----------------------------------------------

    def grid_status(self) -> GridStatus:
        """Whether the grid runs, and where (never starts it)."""
        from clanker.grid import daemon

        return daemon.status(self.paths)

    def start_grid(self) -> GridStatus:
        """Start the grid unless it already runs."""
        from clanker.grid import daemon

        found = daemon.status(self.paths)
        return found if found.running else daemon.start(self.paths)

    def stop_grid(self) -> bool:
        """Stop the grid; say whether one was running."""
        from clanker.grid import daemon

        return daemon.stop(self.paths)

    def agents(self, *, host: str | None = None) -> list[TerminalEntry]:
        """Every launched agent the grid knows, with its attention; empty when no grid runs.

        ``host`` keeps only the agents launched on that registered SSH host (``launch
        --host``); an unknown name raises :class:`~clanker.hosts.HostError`.
        """
        from clanker.grid.client import GridClient
        from clanker.grid.errors import GridUnavailableError

        if host is not None:
            self._host_store().get(host)
        found = self.grid_status()
        if not found.running:
            return []
        try:
            entries = GridClient(found.location.socket).list_terminals()
        except GridUnavailableError:
            return []  # it stopped in between: nothing runs
        if host is None:
            return entries
        from clanker.grid.remote import HostIndex
        from clanker.paths import runtime_directory

        index = HostIndex(runtime_directory(self.paths, create=False) / "hosts")
        on_host = index.terminals(host, (entry.terminal for entry in entries))
        return [entry for entry in entries if entry.terminal in on_host]

    @staticmethod
    def attention_seen(entry: TerminalEntry, seen_revision: int) -> str:
        """``entry``'s attention for a viewer whose seen-watermark for it is
        ``seen_revision`` (the highest revision it acknowledged; 0: none): a
        completion reads ``done`` only while it is newer. Seeing never changes
        lifecycle; ``unavailable`` (a launch without attention) stays as it is."""
        if entry.attention == "unavailable":
            return entry.attention
        from clanker.attention.broker import Revision
        from clanker.attention.presentation import derive_attention

        return derive_attention(Revision.from_json(entry.revision), seen_revision).value

    def stop_agent(self, terminal: str) -> bool:
        """Ask one agent's launcher to end it (SIGTERM, which the launcher forwards to
        the harness, then the grid retires it as any exit); say whether it was live."""
        import signal

        entry = next((e for e in self.agents() if e.terminal == terminal), None)
        if entry is None:
            return False
        try:
            os.kill(entry.launcher_pid, signal.SIGTERM)
        except ProcessLookupError:
            return False
        return True

    def explain_agent(self, terminal: str) -> ExplainReply:
        """Why one agent is in its state (safe metadata only)."""
        return self._grid_client().explain(terminal)

    def watch_agents(self, *, notifications: bool = False
                     ) -> Generator[StreamEvent, None, None]:
        """Every agent's current revision, then each change as it happens; with
        ``notifications``, also each message an agent sends the person
        (``clanker_notify``: events of kind ``notification``).

        Close the iterator to stop (``contextlib.closing``). Raises
        :class:`~clanker.grid.errors.GridUnavailableError` when no grid runs.
        """
        return self._grid_client().subscribe(notifications=notifications)

    # -- the capability plane (agent -> host) ---------------------------------

    def host_capabilities(self) -> tuple[HostCapability, ...]:
        """What an agent may ask the host to do: the capabilities clanker ships, each
        declared once (its ``input`` is both the advertised JSON Schema and the
        parser), in name order. A launch with ``LaunchOptions(bridge=True)`` is
        granted these unless ``grants`` names fewer."""
        from clanker.bridge.shipped import SHIPPED

        return tuple(sorted(SHIPPED, key=lambda capability: capability.name))

    def host_commands(self, environ: Mapping[str, str] | None = None) -> BridgeClient:
        """The capability plane as the agent whose environment is ``environ`` sees it
        (default: this process's): ``capabilities()``, ``describe(name)``,
        ``run(name, arguments)``, one grid request each, exactly what ``clanker
        cmd`` sends.

        The credential and the grid's socket come from ``environ``
        (``CLANKER_BRIDGE_TOKEN``, ``CLANKER_BRIDGE_SOCKET``: a launch with the
        bridge puts them in the child's environment, ``PreparedLaunch.env``).
        Raises, as every call does, :class:`~clanker.bridge.cmd.CommandError`
        (``kind``, a safe ``message``, the ``exit_code`` of ``clanker cmd``).
        """
        from clanker.bridge.cmd import BridgeClient

        return BridgeClient.from_environ(os.environ if environ is None else environ)

    def _grid_client(self) -> GridClient:
        from clanker.grid.client import GridClient
        from clanker.grid.errors import GridUnavailableError

        found = self.grid_status()
        if not found.running:
            raise GridUnavailableError(
                "the grid is not running (start it with `clanker grid start`)")
        return GridClient(found.location.socket)


def _deepest(paths: list[str], location: str) -> str | None:
    """The longest of ``paths`` that is ``location`` or contains it."""
    inside = [p for p in paths if (location + os.sep).startswith(p.rstrip(os.sep) + os.sep)]
    return max(inside, key=len, default=None)


_SHELL_VARIABLES = frozenset({"PWD", "OLDPWD", "SHLVL", "_"})

GRID_SESSIONS_TIMEOUT = 120.0
"""How long a listing waits for the grid's whole answer (a cold index of tens of
thousands of sessions takes seconds) before it lists by itself."""


def _listing(reply: SessionsReply, sessions: list[HarnessSession]) -> SessionListing:
    """A ``sessions`` answer of the grid as the listing it stands for."""
    from clanker.errors import ErrorKind, HarnessCapabilityError
    from clanker.sessions.service import ProviderScan, SessionListing
    from clanker.sessions.types import SessionScan

    scans = []
    for report in reply.scans:
        error = None
        if report.error_kind is not None:
            error = HarnessCapabilityError(ErrorKind(report.error_kind), report.error_detail,
                                           harness=report.harness)
        scans.append(ProviderScan(harness=report.harness, account=report.account,
                                  scan=SessionScan(skipped=report.skipped,
                                                   truncated=report.truncated,
                                                   partial=report.partial, error=error)))
    return SessionListing(sessions=tuple(sessions), scans=tuple(scans))
