"""The shared sessions service: every provider's history, matched to a workspace.

Nothing here knows a harness. Providers run concurrently, each isolated: one
failing store is reported beside the others' sessions, never instead of them,
and a scan with any failure is never taken for a complete one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, cast

from attrs import evolve

from clanker._logging import get_logger
from clanker.environment import Environment
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.registry import HarnessProvider
from clanker.sessions.answers import AnswerCache, answers_path
from clanker.sessions.cache import SummaryCache
from clanker.sessions.capability import DEFAULT_STORE_LIMIT, NeedsEventLoop, SessionsContext
from clanker.sessions.listing import ProviderScan, SessionListing, Shortfall, ShortfallReason
from clanker.sessions.scope import in_scope, workspace_scopes
from clanker.sessions.types import HarnessSession, SessionScan
from clanker.sessions.witness import ScanMemo

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from clanker.execution import CommandExecutor

__all__ = ["Homes", "ProviderScan", "SessionListing", "SessionService", "Shortfall",
           "ShortfallReason"]

log = get_logger(__name__)


Homes: TypeAlias = Callable[[HarnessProvider], Sequence[tuple[str | None, Mapping[str, str]]]]
"""Where one provider's history is: ``(account, environment additions)`` for its own
home (``None``, no additions) and each managed account's (its home variable)."""


_Store: TypeAlias = tuple[HarnessProvider, str | None, Mapping[str, str]]
"""One store: its provider, its account (``None``: the harness's own home) and the
environment additions that reach it."""


def _own_home(provider: HarnessProvider) -> Sequence[tuple[str | None, Mapping[str, str]]]:
    return ((None, {}),)


class SessionService:
    """Discovers sessions through the registry's providers.

    Three caches: per-file summaries (also on disk, so a new process parses
    only what changed); in memory, each provider's recent answers with proof
    of what they read (so an unchanged store costs a stat per file); and, for
    a provider that lists through its harness's own command, its answers on
    disk with the states of the files they depend on (so a new process need
    not run the command again while nothing changed).
    """

    def __init__(self, *, environment: Environment, cache_dir: Path | None,
                 homes: Homes = _own_home, memos: Callable[[], ScanMemo] = ScanMemo,
                 canonical_path: Callable[[str], str] | None = None) -> None:
        """``homes`` says where each provider's history is (default: the harness's own
        home only); each is read as a store of its own, and its sessions carry its
        account. ``memos`` makes each store's memo of recent answers (a running grid
        passes one its watch proves current, :mod:`clanker.sessions.index`), and
        ``canonical_path`` resolves a session's directory (default: the
        environment's :meth:`~clanker.environment.Environment.canonical_path`; the
        grid's remembers what its watch proves unchanged)."""
        self.environment = environment
        self._cache_dir = cache_dir
        self._homes = homes
        self._new_memo = memos
        self._canonical = canonical_path or environment.canonical_path
        self._caches: dict[str, SummaryCache] = {}
        self._memos: dict[str, ScanMemo] = {}
        self._answers: dict[str, AnswerCache] = {}
        self._pool: ThreadPoolExecutor | None = None

    async def discover(
        self,
        providers: Sequence[HarnessProvider],
        *,
        workspace: str | None,
        limit: int = DEFAULT_STORE_LIMIT,
    ) -> SessionListing:
        """List sessions of ``providers`` in ``workspace`` (``None``: everywhere)."""
        scopes = await workspace_scopes(workspace, self.environment.executor) if workspace else ()
        return await self._collect(providers, scopes=scopes, native_id=None, limit=limit)

    async def find(
        self, provider: HarnessProvider, native_id: str, *, workspace: str | None = None
    ) -> HarnessSession | None:
        """Re-find one session in ``provider``'s own store, whatever its directory.

        ``workspace`` is where the caller is: a harness that lists one project
        at a time looks there; it never filters. Raises the provider's typed
        error when any of its stores cannot be read, also when another store
        holds the session: a selection is never launched on the strength of a
        failed scan. Raises ``output-limit`` when a store was read only in part
        (too large to search completely) and the session was not in that part.
        """
        scopes = await workspace_scopes(workspace, self.environment.executor) if workspace else ()
        listing = await self._collect([provider], scopes=scopes, native_id=native_id,
                                      limit=DEFAULT_STORE_LIMIT)
        matches = [s for s in listing.sessions if s.native_id == native_id]
        failed = [r.scan.error for r in listing.scans if r.scan.error is not None]
        if failed:
            # Even beside a match: the store that failed may record the same id with
            # other launch evidence, and a selection must be the only one.
            raise failed[0]
        if len(matches) > 1:
            raise HarnessCapabilityError(
                ErrorKind.STORAGE_CHANGED, f"session {native_id} is recorded more than once",
                harness=provider.id,
            )
        if not matches and any(r.scan.truncated for r in listing.scans):
            # A store read in part may hold it in the part not read: never "not found".
            raise HarnessCapabilityError(
                ErrorKind.OUTPUT_LIMIT,
                f"the store is too large to search completely for session {native_id}",
                harness=provider.id,
            )
        return matches[0] if matches else None

    def _stores(self, providers: Sequence[HarnessProvider]) -> list[_Store]:
        """Every store of ``providers`` that can list sessions, in listing order."""
        return [(p, account, env) for p in providers if p.sessions is not None
                for account, env in self._homes(p)]

    async def _collect(
        self,
        providers: Sequence[HarnessProvider],
        *,
        scopes: tuple[str, ...],
        native_id: str | None,
        limit: int,
    ) -> SessionListing:
        import asyncio

        stores = self._stores(providers)
        tasks = [asyncio.ensure_future(self._scan(p, account, env, scopes=scopes,
                                                  native_id=native_id, limit=limit))
                 for p, account, env in stores]
        try:
            scans = await asyncio.gather(*tasks)
        except BaseException:
            # gather leaves the others running: stop them here, each reaping its
            # commands, rather than leave them to asyncio.run's final cancellation.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return self._listing(stores, scans, scopes=scopes, native_id=native_id)

    def discover_now(
        self,
        providers: Sequence[HarnessProvider],
        *,
        workspace: str | None,
        limit: int = DEFAULT_STORE_LIMIT,
    ) -> SessionListing | None:
        """:meth:`discover`'s listing when it needs no event loop, else ``None``.

        Every store is read on this thread, its offloaded work run at once
        (:mod:`clanker.sessions.inline`); a store whose provider would run a command
        (the workspace's worktrees are found with git) or wait for a file to settle
        needs the loop, and then nothing is answered here: the caller lists with
        :meth:`discover`, whose scans find what these ones read in the caches. A
        provider failing in any other way than with its typed error or an unreadable
        store is also left to :meth:`discover`, which reports it.
        """
        from clanker.sessions.inline import finish

        scopes: tuple[str, ...] = ()
        stores = self._stores(providers)
        scans: list[SessionScan] = []
        try:
            if workspace:
                scopes = finish(workspace_scopes(workspace, self._lookup_only()))
            for provider, account, env in stores:
                capability = provider.sessions
                assert capability is not None
                context = self._context(provider, account, env, scopes=scopes, native_id=None,
                                        limit=limit, inline=True)
                try:
                    scans.append(finish(capability.discover(context)))
                except (HarnessCapabilityError, OSError) as exc:
                    scans.append(self._failed(provider, exc))
        except NeedsEventLoop:
            return None
        except Exception as exc:  # discover reports it, as it always has
            log.debug("sessions listed with the event loop: %s", type(exc).__name__)
            return None
        return self._listing(stores, scans, scopes=scopes, native_id=None)

    def _listing(self, stores: Sequence[_Store], scans: Sequence[SessionScan], *,
                 scopes: tuple[str, ...], native_id: str | None) -> SessionListing:
        """The stores' scans as one listing: placed, matched to ``scopes``, newest first."""
        rank: dict[str, int] = {}  # each provider's place in the listing order
        for provider, _, _ in stores:
            rank.setdefault(provider.id, len(rank))
        memo: dict[str, str] = {}
        resolve = self._canonical
        filtering = bool(scopes) and native_id is None
        sessions: list[HarnessSession] = []
        for (provider, account, _), scan in zip(stores, scans, strict=True):
            harness = provider.id
            for session in scan.sessions:
                if session.hidden and native_id is None:
                    continue  # a provider that lists without scan_files may still mark some
                cwd = session.cwd
                if cwd is not None:
                    cwd = memo.get(cwd) or memo.setdefault(cwd, resolve(cwd))
                # A session that recorded no directory cannot be excluded: it is
                # listed everywhere rather than silently lost.
                if filtering and cwd is not None and not in_scope(cwd, scopes):
                    continue
                placed = session
                if session.harness != harness or session.cwd != cwd \
                        or session.account != account:
                    placed = evolve(session, harness=harness, cwd=cwd, account=account)
                sessions.append(placed)
        # Newest first, then provider and discovery order. Descending on the
        # negated tie-breakers rather than ascending on a negated timestamp:
        # comparing datetimes directly is the cheaper key (no float per session).
        sessions.sort(key=lambda s: (s.updated_at, -rank[s.harness], -s.order), reverse=True)
        return SessionListing(
            sessions=tuple(sessions),
            scans=tuple(ProviderScan(harness=p.id, scan=s, account=account)
                        for (p, account, _), s in zip(stores, scans, strict=True)),
        )

    async def _scan(
        self,
        provider: HarnessProvider,
        account: str | None,
        env: Mapping[str, str],
        *,
        scopes: tuple[str, ...],
        native_id: str | None,
        limit: int,
    ) -> SessionScan:
        capability = provider.sessions
        assert capability is not None
        try:
            return await capability.discover(self._context(
                provider, account, env, scopes=scopes, native_id=native_id, limit=limit))
        except (HarnessCapabilityError, OSError) as exc:
            return self._failed(provider, exc)
        except Exception as exc:  # one provider's bug must not hide the others' sessions
            log.warning("sessions provider %s failed: %s", provider.id, type(exc).__name__)
            return SessionScan(error=HarnessCapabilityError(
                ErrorKind.PARSE_FAILURE, "the history could not be read", harness=provider.id,
                cause=exc,
            ))

    def _context(self, provider: HarnessProvider, account: str | None,
                 env: Mapping[str, str], *, scopes: tuple[str, ...], native_id: str | None,
                 limit: int, inline: bool = False) -> SessionsContext:
        """What ``provider``'s scan of ``account``'s store is handed; ``inline``: for a
        scan driven without an event loop (:meth:`discover_now`)."""
        environment = self.environment
        executor = self._lookup_only() if inline else environment.executor
        if env:  # a managed account's home: the harness's own commands run under it too
            from clanker.environment.bound import BoundExecutor

            executor = BoundExecutor(executor, env)
        return SessionsContext(
            harness=provider.id, executor=executor, files=environment.files,
            environ={**environment.environ, **env} if env else environment.environ,
            cache=self._cache(provider, account), scopes=scopes, native_id=native_id,
            limit=limit, scan_executor=None if inline else self._scans(),
            memo=self._memo(provider, account),
            answers=self._answer_cache(provider, account), inline=inline,
        )

    def _lookup_only(self) -> CommandExecutor:
        """The executor of an inline scan (:class:`~clanker.sessions.inline.LookupOnly`):
        commands are looked up on the environment's ``PATH``, as its executor would."""
        from clanker.sessions.inline import LookupOnly

        environment = self.environment
        search = environment.environ.get("PATH", os.defpath)
        return cast("CommandExecutor", LookupOnly(
            lambda command: environment.files.which(command, search)))

    def _scans(self) -> ThreadPoolExecutor:
        """The thread the scans' offloaded work runs on, made with the first scan that
        offloads (an inline listing has none, and so imports neither the pool nor the
        logging it loads)."""
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            # One worker: scans are Python-bound and hold the interpreter lock;
            # several threads only trade it back and forth.
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clanker-sessions")
        return self._pool

    @staticmethod
    def _failed(provider: HarnessProvider, exc: HarnessCapabilityError | OSError
                ) -> SessionScan:
        """A scan that ended in ``provider``'s typed error, or in a store it could not read
        (its files' errors are skips)."""
        if isinstance(exc, HarnessCapabilityError):
            return SessionScan(error=exc.with_harness(provider.id))
        return SessionScan(error=HarnessCapabilityError(
            ErrorKind.NOT_CONFIGURED,
            f"the history store cannot be read: {exc.strerror or type(exc).__name__}",
            harness=provider.id, cause=exc,
        ))

    def store_environ(self, provider: HarnessProvider, account: str | None
                      ) -> Mapping[str, str]:
        """The environment ``provider`` reads ``account``'s history with (``None``: its
        own home's), or the host's when that account is not among its homes now."""
        for candidate, env in self._homes(provider):
            if candidate == account:
                return {**self.environment.environ, **env}
        return self.environment.environ

    @staticmethod
    def _store(provider: HarnessProvider, account: str | None) -> str:
        return provider.id if account is None else f"{provider.id}.{account}"

    def _cache(self, provider: HarnessProvider, account: str | None) -> SummaryCache:
        store = self._store(provider, account)
        cache = self._caches.get(store)
        if cache is None:
            path = None if self._cache_dir is None else (
                self._cache_dir / "sessions" / f"{store}.json"
            )
            cache = self._caches[store] = SummaryCache(provider.id, path)
        return cache

    def _answer_cache(self, provider: HarnessProvider, account: str | None) -> AnswerCache:
        store = self._store(provider, account)
        answers = self._answers.get(store)
        if answers is None:
            answers = self._answers[store] = AnswerCache(
                provider.id, answers_path(self._cache_dir, store))
        return answers

    def _memo(self, provider: HarnessProvider, account: str | None) -> ScanMemo:
        store = self._store(provider, account)
        memo = self._memos.get(store)
        if memo is None:
            memo = self._memos[store] = self._new_memo()
        return memo
