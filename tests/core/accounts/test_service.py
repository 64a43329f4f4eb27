"""The accounts service with a provider that speaks the contract: the default account
changes nothing; a managed account lives in a home clanker owns, is kept only once
signed in, and is forgotten only once signed out; nothing unsafe is ever used."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from clanker.accounts.capability import AccountCheck, AccountContext, AccountIdentity, SignedIn
from clanker.accounts.homes import AccountHomes, UnsafeHomeError
from clanker.accounts.service import DEFAULT, AccountError, AccountService
from clanker.accounts.store import AccountStatus, AccountStore, AccountStoreError
from clanker.environment.local import LocalEnvironment
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.ids import HarnessId
from clanker.paths import ClankerPaths
from tests.helpers import fake_agent_registry

HARNESS = HarnessId("fake-agent")
VARIABLE = "FAKE_ACCOUNT_HOME"


class Provider:
    """The provider side of the contract, as a harness's would behave: sign-in writes a
    credential file into the home it is pointed at; sign-out removes it."""

    home_variable = VARIABLE

    def __init__(self) -> None:
        self.outcome: Callable[[AccountContext], None] | None = None
        self.sign_out_answer: SignedIn | None = SignedIn.NO
        self.calls: list[tuple[str, str]] = []

    async def authenticate(self, context: AccountContext, show_url: Callable[[str], None]
                           ) -> AccountIdentity:
        assert context.environment[self.home_variable] == context.home
        self.calls.append(("authenticate", context.home))
        show_url("https://sign-in.example/?code=1")
        Path(context.home, "credentials").write_text("secret")
        if self.outcome is not None:
            self.outcome(context)
        return AccountIdentity(email="person@example.com", plan="pro")

    async def verify(self, context: AccountContext) -> AccountCheck:
        signed = Path(context.home, "credentials").exists()
        return AccountCheck(signed_in=SignedIn.YES if signed else SignedIn.NO,
                            identity=AccountIdentity(email="person@example.com"))

    async def sign_out(self, context: AccountContext) -> AccountCheck:
        self.calls.append(("sign_out", context.home))
        if self.sign_out_answer is None:
            raise HarnessCapabilityError(ErrorKind.COMMAND_FAILED, "logout")
        if self.sign_out_answer is SignedIn.NO:
            Path(context.home, "credentials").unlink(missing_ok=True)
        return AccountCheck(signed_in=self.sign_out_answer)


def service_for(tmp_path: Path, provider: Provider) -> AccountService:
    registry = fake_agent_registry(accounts=provider)
    paths = ClankerPaths(config=tmp_path / "c", cache=tmp_path / "k", state=tmp_path / "s",
                         runtime=tmp_path / "r")
    return AccountService(registry=registry, environment=LocalEnvironment({}), paths=paths)


@pytest.fixture
def provider() -> Provider:
    return Provider()


@pytest.fixture
def service(tmp_path: Path, provider: Provider) -> AccountService:
    return service_for(tmp_path, provider)


def add(service: AccountService, label: str | None = "work") -> tuple[object, list[str]]:
    shown: list[str] = []
    record = asyncio.run(service.add(HARNESS, label=label, show_url=shown.append))
    return record, shown


def test_the_default_account_changes_nothing_and_creates_nothing(
    service: AccountService, tmp_path: Path
) -> None:
    [entry] = service.listing()
    assert (entry.id, entry.name, entry.selected, entry.record) == (DEFAULT, DEFAULT, True, None)
    binding = service.binding(HARNESS)
    assert binding.record is None and dict(binding.env) == {}
    assert service.binding(HARNESS, DEFAULT).env == {}
    assert not (tmp_path / "s").exists()


def test_an_added_account_is_kept_signed_in_in_its_own_home(
    service: AccountService, provider: Provider, tmp_path: Path
) -> None:
    record, shown = add(service)
    assert shown == ["https://sign-in.example/?code=1"]
    assert record.status is AccountStatus.CONNECTED  # type: ignore[attr-defined]
    assert (record.email, record.plan, record.label) == (  # type: ignore[attr-defined]
        "person@example.com", "pro", "work")
    home = tmp_path / "s" / "accounts" / "fake-agent" / record.id  # type: ignore[attr-defined]
    assert provider.calls == [("authenticate", str(home))]
    assert home.stat().st_mode & 0o777 == 0o700
    # Listed beside the default, which stays selected until the person chooses.
    assert [(e.id, e.selected) for e in service.listing()] == [
        (DEFAULT, True), (record.id, False)]  # type: ignore[attr-defined]
    assert service.binding(HARNESS).env == {}
    assert service.binding(HARNESS, "work").env == {VARIABLE: str(home)}
    service.select(HARNESS, "work")
    assert service.binding(HARNESS).env == {VARIABLE: str(home)}
    service.select(HARNESS, DEFAULT)
    assert service.binding(HARNESS).env == {}
    # Nothing the harness said is kept: no URL, no credential.
    kept = (tmp_path / "s" / "accounts.json").read_text()
    assert "sign-in.example" not in kept and "secret" not in kept


def test_removal_proves_sign_out_then_deletes_then_forgets(
    service: AccountService, provider: Provider
) -> None:
    record, _ = add(service)
    service.select(HARNESS, record.id)  # type: ignore[attr-defined]
    home = Path(service.binding(HARNESS).env[VARIABLE])
    provider.sign_out_answer = SignedIn.YES
    with pytest.raises(AccountError, match="did not confirm"):
        asyncio.run(service.remove("work"))
    assert home.is_dir() and service.binding(HARNESS).record == record
    provider.sign_out_answer = None
    with pytest.raises(HarnessCapabilityError):
        asyncio.run(service.remove("work"))
    assert home.is_dir() and service.state().get(record.id) is not None  # type: ignore[attr-defined]
    provider.sign_out_answer = SignedIn.NO
    asyncio.run(service.remove("work"))
    assert not home.exists()
    assert [e.id for e in service.listing()] == [DEFAULT]
    assert service.binding(HARNESS).env == {}  # the selection fell back to the default


def test_a_sign_in_cut_off_after_the_harness_wrote_is_cleaned_up_only_when_proven(
    service: AccountService, provider: Provider, tmp_path: Path
) -> None:
    def cancelled(_: AccountContext) -> None:
        raise asyncio.CancelledError

    provider.outcome = cancelled
    with pytest.raises(asyncio.CancelledError):
        add(service)
    assert [call for call, _ in provider.calls] == ["authenticate", "sign_out"]
    assert list((tmp_path / "s" / "accounts" / "fake-agent").iterdir()) == []
    assert [e.id for e in service.listing()] == [DEFAULT]
    # Sign-out not proven: the account is kept, to reconnect or remove, and refused.
    provider.sign_out_answer = None
    with pytest.raises(asyncio.CancelledError):
        add(service, label="home")
    [_, kept] = service.listing()
    assert kept.record is not None and kept.record.status is AccountStatus.NEEDS_AUTH
    assert kept.record.label == "home"
    with pytest.raises(AccountError, match="needs signing in again"):
        service.binding(HARNESS, "home")
    provider.outcome = None
    reconnected = asyncio.run(service.reconnect("home", show_url=lambda url: None))
    assert reconnected.status is AccountStatus.CONNECTED and reconnected.id == kept.record.id


def test_a_sign_in_that_failed_before_the_harness_wrote_leaves_nothing(
    service: AccountService, provider: Provider, tmp_path: Path
) -> None:
    async def refused(context: AccountContext, show_url: Callable[[str], None]
                      ) -> AccountIdentity:
        raise HarnessCapabilityError(ErrorKind.UNAUTHENTICATED, "sign-in")

    provider.authenticate = refused  # type: ignore[method-assign]
    with pytest.raises(HarnessCapabilityError):
        add(service)
    assert provider.calls == []  # nothing to sign out of
    assert list((tmp_path / "s" / "accounts" / "fake-agent").iterdir()) == []


def test_a_home_that_is_a_link_is_never_used_nor_removed(
    service: AccountService, provider: Provider, tmp_path: Path
) -> None:
    record, _ = add(service)
    home = tmp_path / "s" / "accounts" / "fake-agent" / record.id  # type: ignore[attr-defined]
    elsewhere = tmp_path / "elsewhere"
    home.rename(elsewhere)
    home.symlink_to(elsewhere)
    with pytest.raises(AccountError, match="symbolic link"):
        service.binding(HARNESS, "work")
    with pytest.raises(Exception, match="symbolic link"):
        asyncio.run(service.remove("work"))
    assert elsewhere.is_dir() and (elsewhere / "credentials").exists()
    assert service.state().get(record.id) is not None  # type: ignore[attr-defined]


def test_names_resolve_to_one_account_or_say_why_not(service: AccountService) -> None:
    first, _ = add(service, label="same")
    second, _ = add(service, label="same")
    with pytest.raises(AccountError, match="2 accounts are called 'same'"):
        service.find("same")
    assert service.find(first.id) == first  # type: ignore[attr-defined]
    with pytest.raises(AccountError, match="no managed account is called 'nobody'"):
        service.find("nobody")
    renamed = service.rename(second.id, "other")  # type: ignore[attr-defined]
    assert service.find("other") == renamed
    with pytest.raises(ValueError, match="label"):
        service.rename("other", "x" * 65)
    assert service.find("other").label == "other"


def test_an_interrupted_add_found_later_is_kept_as_needs_auth(
    service: AccountService, tmp_path: Path
) -> None:
    homes = AccountHomes(tmp_path / "s" / "accounts")
    orphan = homes.create(HARNESS, "acct_" + "a" * 32)
    (orphan / "credentials").write_text("x")
    homes.create(HARNESS, "acct_" + "b" * 32)  # empty: nothing to keep
    [found] = service.recover_orphans()
    assert (found.id, found.status) == ("acct_" + "a" * 32, AccountStatus.NEEDS_AUTH)
    assert service.recover_orphans() == ()
    assert [e.id for e in service.listing()] == [DEFAULT, found.id]


def test_a_damaged_registry_is_reported_and_left_as_it_is(
    service: AccountService, tmp_path: Path
) -> None:
    add(service)
    path = tmp_path / "s" / "accounts.json"
    damaged = path.read_text()[:-5]
    path.write_text(damaged)
    with pytest.raises(AccountStoreError, match="damaged"):
        service.listing()
    with pytest.raises(AccountStoreError):
        service.select(HARNESS, DEFAULT)
    assert path.read_text() == damaged


def test_records_of_another_environment_never_resolve_here(
    service: AccountService, tmp_path: Path
) -> None:
    record, _ = add(service)
    path = tmp_path / "s" / "accounts.json"
    document = json.loads(path.read_text())
    document["accounts"][0]["environment"] = "ssh:host"
    path.write_text(json.dumps(document))
    assert [e.id for e in service.listing()] == [DEFAULT]
    with pytest.raises(AccountError):
        service.binding(HARNESS, record.id)  # type: ignore[attr-defined]


def test_a_failed_save_after_sign_in_signs_out_and_removes_the_home(
    service: AccountService, provider: Provider, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: AccountStore, step: object) -> object:
        raise AccountStoreError()

    monkeypatch.setattr(AccountStore, "change", broken)
    with pytest.raises(AccountStoreError, match="could not be saved"):
        add(service)
    assert [call for call, _ in provider.calls] == ["authenticate", "sign_out"]
    assert list((tmp_path / "s" / "accounts" / "fake-agent").iterdir()) == []


def test_operations_on_one_account_do_not_overlap(service: AccountService,
                                                  provider: Provider) -> None:
    record, _ = add(service)
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow(context: AccountContext, show_url: Callable[[str], None]
                   ) -> AccountIdentity:
        started.set()
        await release.wait()
        return AccountIdentity()

    provider.authenticate = slow  # type: ignore[method-assign]

    async def both() -> None:
        first = asyncio.ensure_future(service.reconnect("work", show_url=lambda url: None))
        await started.wait()
        with pytest.raises(AccountError, match="already running"):
            await service.remove("work")
        release.set()
        await first

    asyncio.run(both())
    assert service.find(record.id).status is AccountStatus.CONNECTED  # type: ignore[attr-defined]


def test_homes_are_only_ever_inside_the_owned_root(tmp_path: Path) -> None:
    homes = AccountHomes(tmp_path / "accounts")
    for bad in ("acct_" + "A" * 32, "acct_../../x", "../acct_" + "0" * 32, "default"):
        with pytest.raises(ValueError):
            homes.path(HARNESS, bad)
    with pytest.raises(ValueError):
        homes.path(HarnessId("../x"), "acct_" + "0" * 32)
    home = homes.create(HARNESS, "acct_" + "0" * 32)
    os.chmod(home, 0o755)
    with pytest.raises(Exception, match="open to other users"):
        homes.verify(HARNESS, "acct_" + "0" * 32)


def test_another_identity_is_flagged_never_relabelled(
    service: AccountService, provider: Provider
) -> None:
    add(service)
    checked = asyncio.run(service.verify("work"))
    assert (checked.status, checked.identity_changed) == (AccountStatus.CONNECTED, False)

    async def someone_else(context: AccountContext) -> AccountCheck:
        return AccountCheck(signed_in=SignedIn.YES,
                            identity=AccountIdentity(email="Other@Example.com"))

    provider.verify = someone_else  # type: ignore[method-assign]
    flagged = asyncio.run(service.verify("work"))
    assert flagged.identity_changed and flagged.email == "person@example.com"
    assert flagged.label == "work" and service.find("work").identity_changed
    same = asyncio.run(service.reconnect("work", show_url=lambda url: None))
    assert same.identity_changed  # once flagged, it stays until the person removes it


@pytest.mark.parametrize("attack", ["root", "harness", "home", "file", "native"])
def test_a_chain_that_is_not_clanker_s_own_is_refused_and_nothing_is_deleted(
    service: AccountService, tmp_path: Path, attack: str
) -> None:
    record, _ = add(service)
    root = tmp_path / "s" / "accounts"
    home = root / "fake-agent" / record.id  # type: ignore[attr-defined]
    native = tmp_path / "native-home"  # the harness's own home, say ~/.codex
    native.mkdir()
    (native / "auth").write_text("the person's own sign-in")
    if attack in ("root", "harness"):
        moved = root if attack == "root" else root / "fake-agent"
        target = tmp_path / f"moved-{attack}"
        moved.rename(target)
        moved.symlink_to(target)  # the same content, reached through a link
    elif attack == "home":  # a link to another home inside the root: not this account's
        other = root / "fake-agent" / ("acct_" + "f" * 32)
        home.rename(other)
        home.symlink_to(other)
    elif attack == "file":
        shutil.rmtree(home)
        home.write_text("not a directory")
    else:  # the home replaced by a link to the harness's own home
        shutil.rmtree(home)
        os.symlink(native, home)
    with pytest.raises(AccountError):
        service.binding(HARNESS, "work")
    with pytest.raises((AccountError, UnsafeHomeError)):
        asyncio.run(service.remove("work"))
    assert (native / "auth").read_text() == "the person's own sign-in"
    assert service.state().get(record.id) is not None  # type: ignore[attr-defined]
    assert [h for _, h in service.homes(service.harnesses()[0])] == [{}]  # never read
