"""Managed accounts: the one owner of ids, homes, records, selection and flows.

Shared code here never names a harness or its home variable: the provider's
``accounts`` capability says which variable points the harness at a home and
speaks the harness's sign-in protocol; this service decides everything else.

* **The default account** is a projection, never stored: it sets no variable
  (an inherited one stays exactly as the person has it), creates nothing and
  cannot be removed. A person who never adds an account sees nothing else.
* **Adding** creates an owned home, runs the provider's sign-in (at most four
  at once in one process, one per account, 5 minutes at most), and keeps a
  record only once the provider returned, i.e. verified the account. A sign-in
  that fails or is cancelled after the harness ran deletes the home only once
  the provider proved it signed out; otherwise the account is kept as
  ``needs-auth``, to reconnect or remove.
* **Removing** proves sign-out, deletes the verified home, then saves the
  registry without the account; a failure at any step keeps the id, record
  and selection.
* **Managed accounts are local**: another environment reports them unsupported
  and keeps its own authentication.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Final

from attrs import evolve, frozen

from clanker._logging import get_logger
from clanker.accounts.capability import (
    AccountCheck,
    AccountContext,
    AccountIdentity,
    AccountsCapability,
    SignedIn,
)
from clanker.accounts.homes import AccountHomes, UnsafeHomeError, is_account_id, new_account_id
from clanker.accounts.store import (
    AccountRecord,
    AccountState,
    AccountStatus,
    AccountStore,
    AccountStoreError,
    check_label,
    now,
)
from clanker.descriptor import Transport
from clanker.environment import Environment
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.ids import HarnessId
from clanker.paths import ClankerPaths
from clanker.registry import HarnessProvider, Registry

__all__ = [
    "DEFAULT",
    "FLOW_LIMIT",
    "SIGN_IN_TIMEOUT",
    "AccountBinding",
    "AccountEntry",
    "AccountError",
    "AccountService",
]

log = get_logger(__name__)

DEFAULT: Final = "default"
"""The default account's name: the harness's own home, as the person has it."""
SIGN_IN_TIMEOUT: Final = 300.0
FLOW_LIMIT: Final = 4
_CLEANUP_TIMEOUT: Final = 60.0


class AccountError(Exception):
    """A refused account operation, with one fixed sentence for the person."""


@frozen(kw_only=True)
class AccountEntry:
    """One account of one harness, as listed: the default one or a managed one."""

    harness: HarnessId
    record: AccountRecord | None
    """``None``: the default account."""
    selected: bool

    @property
    def id(self) -> str:
        return DEFAULT if self.record is None else self.record.id

    @property
    def name(self) -> str:
        return DEFAULT if self.record is None else self.record.name


@frozen(kw_only=True)
class AccountBinding:
    """What one launch (or probe) of a harness runs under."""

    harness: HarnessId
    record: AccountRecord | None
    """``None``: the default account (nothing is changed)."""
    env: Mapping[str, str]
    """The environment additions (none for the default account)."""


class AccountService:
    """Managed accounts of the harnesses that have the capability, in one environment."""

    def __init__(self, *, registry: Registry, environment: Environment, paths: ClankerPaths,
                 homes: AccountHomes | None = None, store: AccountStore | None = None) -> None:
        self._registry = registry
        self._environment = environment
        self._homes = homes or AccountHomes(paths.state / "accounts")
        self._store = store or AccountStore(paths.state / "accounts.json")
        self._flows: set[str] = set()

    # -- reading ---------------------------------------------------------------------------

    @property
    def managed_supported(self) -> bool:
        """Managed accounts exist on this machine only (another environment keeps its own
        authentication)."""
        return self._environment.transport is Transport.LOCAL

    def harnesses(self) -> tuple[HarnessProvider, ...]:
        return tuple(p for p in self._registry.providers.values() if p.accounts is not None)

    def state(self) -> AccountState:
        if not self.managed_supported:
            return AccountState()
        return self._store.load()

    def listing(self, harness: HarnessId | str | None = None) -> tuple[AccountEntry, ...]:
        """Every account of each harness with the capability (or of ``harness``): the
        default one first, then the managed ones in the order they were added."""
        state = self.state()
        entries: list[AccountEntry] = []
        for provider in self.harnesses():
            if harness is not None and provider.id != harness:
                continue
            chosen = state.selected(self._environment.name, provider.id)
            entries.append(AccountEntry(harness=provider.id, record=None, selected=chosen is None))
            entries += [AccountEntry(harness=provider.id, record=record,
                                     selected=chosen is not None and chosen.id == record.id)
                        for record in sorted(state.accounts, key=lambda r: r.created_at)
                        if record.harness == provider.id]
        return tuple(entries)

    def find(self, account: str, harness: HarnessId | str | None = None) -> AccountRecord:
        """The managed account named ``account``: its id, or its label or email when that
        names one account only (of ``harness``, when given)."""
        records = [r for r in self.state().accounts if harness is None or r.harness == harness]
        if is_account_id(account):
            found = [r for r in records if r.id == account]
        else:
            found = [r for r in records if r.label == account] or \
                    [r for r in records if r.email == account]
        if not found:
            raise AccountError(f"no managed account is called {account!r}"
                               " (`clanker accounts` lists them)")
        if len(found) > 1:
            raise AccountError(f"{len(found)} accounts are called {account!r}: name one by "
                               "its id (`clanker accounts` lists them)")
        return found[0]

    def binding(self, harness: HarnessId | str, account: str | None = None) -> AccountBinding:
        """What a launch of ``harness`` runs under: ``account`` (a name, an id, or
        ``default``), else the selected one. A managed account whose home cannot be
        proven safe, or that needs signing in again, is refused, never replaced by
        another."""
        provider = self._provider(harness)
        if account == DEFAULT or provider.accounts is None or not self.managed_supported:
            if account not in (None, DEFAULT):
                raise AccountError(self._unsupported(provider))
            return AccountBinding(harness=provider.id, record=None, env={})
        record = (self.find(account, provider.id) if account is not None
                  else self.state().selected(self._environment.name, provider.id))
        if record is None:
            return AccountBinding(harness=provider.id, record=None, env={})
        if record.status is AccountStatus.NEEDS_AUTH:
            raise AccountError(f"the account {record.name!r} needs signing in again "
                               f"(`clanker accounts reconnect {record.id}`)")
        home = self._verified(record)
        return AccountBinding(harness=provider.id, record=record,
                              env={provider.accounts.home_variable: str(home)})

    def homes(self, provider: HarnessProvider) -> tuple[tuple[str | None, Mapping[str, str]], ...]:
        """Where ``provider``'s history is: its own home (``None``), then each managed
        account's verified home with the variable that points the harness at it (an
        account whose home cannot be proven safe is left out, never read)."""
        own: tuple[tuple[str | None, Mapping[str, str]], ...] = ((None, {}),)
        if provider.accounts is None or not self.managed_supported:
            return own
        variable = provider.accounts.home_variable
        found = list(own)
        try:
            records = self.state().accounts
        except AccountStoreError as exc:
            log.warning("accounts: managed histories are not read: %s", exc)
            return own
        for record in records:
            if record.harness != provider.id:
                continue
            try:
                home = self._homes.verify(record.harness, record.id)
            except UnsafeHomeError as exc:
                log.info("accounts: %s's history is not read: %s", record.id, exc.reason)
                continue
            found.append((record.id, {variable: str(home)}))
        return tuple(found)

    # -- changing --------------------------------------------------------------------------

    def select(self, harness: HarnessId | str, account: str) -> AccountEntry:
        """Make ``account`` (or ``default``) the one future launches of ``harness`` use."""
        provider = self._provider(harness)
        self._require_managed(provider)
        chosen = None if account == DEFAULT else self.find(account, provider.id)
        self._store.change(lambda s: s.with_selection(
            self._environment.name, provider.id, None if chosen is None else chosen.id))
        return AccountEntry(harness=provider.id, record=chosen, selected=True)

    def rename(self, account: str, label: str | None) -> AccountRecord:
        record = self.find(account)
        check_label(label)
        renamed = evolve(record, label=label)
        self._store.change(lambda s: s.relabelled(record.id, renamed.label))
        return renamed

    async def add(self, harness: HarnessId | str, *, label: str | None = None,
                  show_url: Callable[[str], None]) -> AccountRecord:
        """Sign a new account in through the harness and keep it (see the module)."""
        import asyncio  # here: building the service (a launch) does not need it

        provider = self._provider(harness)
        accounts = self._require_managed(provider)
        check_label(label)  # a bad label is refused before anything is created
        account_id = new_account_id()
        with self._flow(account_id):
            home = self._homes.create(provider.id, account_id)
            context = self._context(accounts, str(home))
            try:
                async with asyncio.timeout(SIGN_IN_TIMEOUT):
                    identity = await accounts.authenticate(context, show_url)
            except BaseException as failure:
                await self._after_failed_sign_in(provider, accounts, account_id, label, failure)
                raise
            record = AccountRecord(id=account_id, harness=provider.id, label=label,
                                   created_at=now(), email=identity.email, plan=identity.plan,
                                   status=AccountStatus.CONNECTED)
            try:
                self._store.change(lambda s: s.with_account(record))
            except BaseException:
                await self._discard(accounts, provider.id, account_id)
                raise
            return record

    async def reconnect(self, account: str, *, show_url: Callable[[str], None]
                        ) -> AccountRecord:
        """Sign an existing account in again, in its own home (never rolled back)."""
        import asyncio  # here: building the service (a launch) does not need it

        record = self.find(account)
        accounts = self._managed(record)
        with self._flow(record.id):
            home = self._homes.create(record.harness, record.id)
            async with asyncio.timeout(SIGN_IN_TIMEOUT):
                identity = await accounts.authenticate(self._context(accounts, str(home)),
                                                       show_url)
            updated = _reported(record, identity, AccountStatus.CONNECTED)
            self._store.change(lambda s: s.with_account(updated))
            return updated

    async def verify(self, account: str) -> AccountRecord:
        """Ask the harness who is signed in and keep the answer's status."""
        record = self.find(account)
        accounts = self._managed(record)
        check = await accounts.verify(self._context(accounts, str(self._verified(record))))
        status = (AccountStatus.CONNECTED if check.signed_in is SignedIn.YES
                  else AccountStatus.NEEDS_AUTH)
        updated = _reported(record, check.identity, status)
        if updated != record:
            self._store.change(lambda s: s.with_account(updated))
        return updated

    async def remove(self, account: str) -> AccountRecord:
        """Prove sign-out, delete the verified home, then forget the account."""
        record = self.find(account)
        accounts = self._managed(record)
        with self._flow(record.id):
            home = self._homes.create(record.harness, record.id)  # a retry may need it back
            check = await accounts.sign_out(self._context(accounts, str(home)))
            if check.signed_in is not SignedIn.NO:
                raise AccountError(f"the harness did not confirm that {record.name!r} is "
                                   "signed out, so it was kept")
            try:
                self._homes.remove(record.harness, record.id)
            except (UnsafeHomeError, OSError) as exc:
                raise AccountError(f"the account's home could not be removed ({exc}); the "
                                   "account was kept") from None
            self._store.change(lambda s: s.without_account(record.id))
            return record

    def recover_orphans(self) -> tuple[AccountRecord, ...]:
        """Keep, as ``needs-auth``, every verified home with content and no record (an add
        cut off after its harness wrote there): to reconnect or remove, never lost."""
        if not self.managed_supported:
            return ()
        known = {r.id for r in self.state().accounts}
        capable = {p.id for p in self.harnesses()}
        found: list[AccountRecord] = []
        for harness, account_id in self._homes.homes():
            if account_id in known or harness not in capable or account_id in self._flows:
                continue
            try:
                if not self._homes.has_content(harness, account_id):
                    continue
            except (UnsafeHomeError, OSError):
                continue
            found.append(AccountRecord(id=account_id, harness=harness, created_at=now(),
                                       status=AccountStatus.NEEDS_AUTH))
        if found:
            def keep(state: AccountState) -> AccountState:
                for record in found:
                    if state.get(record.id) is None:
                        state = state.with_account(record)
                return state
            self._store.change(keep)
        return tuple(found)

    # -- helpers ---------------------------------------------------------------------------

    def _provider(self, harness: HarnessId | str) -> HarnessProvider:
        from clanker.ids import parse_harness_id

        return self._registry.get_provider(parse_harness_id(harness))

    def _unsupported(self, provider: HarnessProvider) -> str:
        if provider.accounts is None:
            return f"{provider.descriptor.display_name} has no managed accounts"
        return (f"managed accounts are not available on {self._environment.name}; it keeps "
                "its own sign-in")

    def _require_managed(self, provider: HarnessProvider) -> AccountsCapability:
        if provider.accounts is None or not self.managed_supported:
            raise AccountError(self._unsupported(provider))
        return provider.accounts

    def _managed(self, record: AccountRecord) -> AccountsCapability:
        """The managed-accounts capability of ``record``'s harness (see
        :meth:`_require_managed`)."""
        return self._require_managed(self._provider(record.harness))

    def _verified(self, record: AccountRecord) -> Path:
        try:
            return self._homes.verify(record.harness, record.id)
        except UnsafeHomeError as exc:
            raise AccountError(f"the account {record.name!r} cannot be used: {exc.reason}") \
                from None

    def _context(self, accounts: AccountsCapability, home: str) -> AccountContext:
        sessions = self._environment.session_executor
        if sessions is None:
            raise HarnessCapabilityError(ErrorKind.UNSUPPORTED, "stdio sessions")
        from clanker.environment.bound import BoundExecutor, BoundSessionExecutor

        bound = {accounts.home_variable: home}
        return AccountContext(home=home, environment={**self._environment.environ, **bound},
                              executor=BoundExecutor(self._environment.executor, bound),
                              sessions=BoundSessionExecutor(sessions, bound))

    @contextlib.contextmanager
    def _flow(self, account_id: str) -> Iterator[None]:
        if account_id in self._flows:
            raise AccountError("a sign-in for this account is already running")
        if len(self._flows) >= FLOW_LIMIT:
            raise AccountError(f"at most {FLOW_LIMIT} account operations run at once")
        self._flows.add(account_id)
        try:
            yield
        finally:
            self._flows.discard(account_id)

    async def _after_failed_sign_in(self, provider: HarnessProvider,
                                    accounts: AccountsCapability, account_id: str,
                                    label: str | None, failure: BaseException) -> None:
        """A sign-in that did not complete: delete the home once proven signed out (or
        untouched), else keep the account as needs-auth."""
        if await self._discard(accounts, provider.id, account_id):
            return
        log.info("accounts: a %s sign-in did not complete (%s); its home is kept",
                 provider.id, type(failure).__name__)
        record = AccountRecord(id=account_id, harness=provider.id, label=label,
                               created_at=now(), status=AccountStatus.NEEDS_AUTH)
        with contextlib.suppress(Exception):
            self._store.change(lambda s: s.with_account(record))

    async def _discard(self, accounts: AccountsCapability, harness: HarnessId,
                       account_id: str) -> bool:
        """Delete a home that holds nothing, or whose sign-out the harness proved; say
        whether it is gone. Runs to the end even when the caller was cancelled."""
        import asyncio  # here: building the service (a launch) does not need it

        try:
            if not self._homes.has_content(harness, account_id):
                self._homes.remove(harness, account_id)
                return True
            home = str(self._homes.verify(harness, account_id))
            check: AccountCheck = await asyncio.wait_for(
                asyncio.shield(accounts.sign_out(self._context(accounts, home))),
                _CLEANUP_TIMEOUT)
            if check.signed_in is SignedIn.NO:
                self._homes.remove(harness, account_id)
                return True
        except (Exception, asyncio.CancelledError):
            log.info("accounts: sign-out of an unfinished account was not proven")
        return False


def _reported(record: AccountRecord, identity: AccountIdentity, status: AccountStatus
              ) -> AccountRecord:
    """``record`` with what the harness now reports: its plan and status, and, when it
    names another email than the one the account was added with, the flag (the email
    and label stay: an account is never relabelled behind the person's back)."""
    changed = (identity.email is not None and record.email is not None
               and identity.email.casefold() != record.email.casefold())
    return evolve(record, status=status, email=record.email or identity.email,
                  plan=identity.plan or record.plan,
                  identity_changed=record.identity_changed or changed)
