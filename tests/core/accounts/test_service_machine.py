"""The accounts service under any sequence of adds, cancelled adds, removals, selections,
reconnects and interruptions, against a provider speaking the contract: a record exists
only for a verified sign-in or a kept home, nothing outside the owned root is ever
removed, and a selection always names an existing account or the default."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from clanker.accounts.capability import AccountContext, SignedIn
from clanker.accounts.homes import new_account_id
from clanker.accounts.service import DEFAULT, AccountError, AccountService
from clanker.accounts.store import AccountStatus
from clanker.errors import HarnessCapabilityError
from tests.core.accounts.test_service import HARNESS, Provider, service_for


class Accounts(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.base = Path(tempfile.mkdtemp(prefix="acct-machine-"))
        self.outside = self.base / "outside"
        self.outside.mkdir()
        (self.outside / "keep").write_text("the person's own")
        self.provider = Provider()
        self.service: AccountService = service_for(self.base, self.provider)
        self.root = self.base / "s" / "accounts" / str(HARNESS)

    def teardown(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

    def _ids(self) -> list[str]:
        """In the order they were kept: ids are random, so rules draw an index."""
        return [r.id for r in self.service.state().accounts]

    def _pick(self, data: st.DataObject, ids: list[str]) -> str:
        return ids[data.draw(st.integers(0, len(ids) - 1))]

    @rule(label=st.sampled_from([None, "work", "home"]))
    def add(self, label: str | None) -> None:
        self.provider.outcome = None
        record = asyncio.run(self.service.add(HARNESS, label=label, show_url=lambda url: None))
        assert record.status is AccountStatus.CONNECTED

    @rule(proven=st.booleans())
    def cancelled_add(self, proven: bool) -> None:
        def cancel(_: AccountContext) -> None:
            raise asyncio.CancelledError

        self.provider.outcome = cancel
        self.provider.sign_out_answer = SignedIn.NO if proven else None
        before = set(self._ids())
        try:
            asyncio.run(self.service.add(HARNESS, show_url=lambda url: None))
        except asyncio.CancelledError:
            pass
        finally:
            self.provider.outcome = None
            self.provider.sign_out_answer = SignedIn.NO
        added = set(self._ids()) - before
        if proven:
            assert added == set()
        else:
            [kept] = added
            assert self.service.state().get(kept).status is AccountStatus.NEEDS_AUTH  # type: ignore[union-attr]

    @precondition(lambda self: self._ids())
    @rule(data=st.data(), answer=st.sampled_from([SignedIn.NO, SignedIn.YES, None]))
    def remove(self, data: st.DataObject, answer: SignedIn | None) -> None:
        chosen = self._pick(data, self._ids())
        self.provider.sign_out_answer = answer
        try:
            asyncio.run(self.service.remove(chosen))
        except (AccountError, HarnessCapabilityError):
            assert answer is not SignedIn.NO
            assert chosen in self._ids() and (self.root / chosen).is_dir()
        else:
            assert answer is SignedIn.NO
            assert chosen not in self._ids() and not (self.root / chosen).exists()
        finally:
            self.provider.sign_out_answer = SignedIn.NO

    @rule(data=st.data())
    def select(self, data: st.DataObject) -> None:
        chosen = self._pick(data, [DEFAULT, *self._ids()])
        self.service.select(HARNESS, chosen)

    @precondition(lambda self: self._ids())
    @rule(data=st.data())
    def reconnect(self, data: st.DataObject) -> None:
        chosen = self._pick(data, self._ids())
        record = asyncio.run(self.service.reconnect(chosen, show_url=lambda url: None))
        assert record.status is AccountStatus.CONNECTED

    @rule(content=st.booleans())
    def interrupted_before_the_record(self, content: bool) -> None:
        """A process killed after the harness wrote into a new home, before the record."""
        home = self.service._homes.create(HARNESS, new_account_id())
        if content:
            (home / "credentials").write_text("x")
        kept = {r.id for r in self.service.recover_orphans()}
        assert (home.name in kept) is content

    @invariant()
    def records_are_verified_or_kept_homes(self) -> None:
        for record in self.service.state().accounts:
            home = self.root / record.id
            assert home.is_dir() and not home.is_symlink()
            if record.status is AccountStatus.CONNECTED:
                assert (home / "credentials").exists()

    @invariant()
    def nothing_outside_the_root_is_touched(self) -> None:
        assert (self.outside / "keep").read_text() == "the person's own"

    @invariant()
    def the_selection_names_an_account_or_the_default(self) -> None:
        entries = self.service.listing()
        [selected] = [e for e in entries if e.selected]
        assert selected.id == DEFAULT or selected.id in self._ids()


TestAccounts = Accounts.TestCase
TestAccounts.settings = settings(max_examples=40, stateful_step_count=15, deadline=None)
