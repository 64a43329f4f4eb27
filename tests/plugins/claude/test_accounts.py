"""Claude Code's accounts capability, against `claude auth` 2.1.197 and 2.1.332
(tests/fixtures/claude/accounts: live captures without a credential, and with a
FAKE claude.ai login written by hand into a throwaway home; see its README)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import clanker_claude
from clanker.accounts.capability import AccountContext, AccountIdentity, SignedIn
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import (
    MAX_TIMEOUT,
    CommandExecutor,
    CommandRequest,
    CommandResult,
    LocalTransport,
    SessionExecutor,
)
from clanker.testing import FailingExecutor, ScriptedExecutor
from clanker.testing.doubles import script_double
from clanker_claude.accounts import ClaudeAccounts, parse_status

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "claude" / "accounts"
VERSIONS = ("v2.1.197", "v2.1.332")
HOME = "/home/dev/.local/share/clanker/accounts/claude/acct_00000000000000000000000000000001"
ENV = {"CLAUDE_CONFIG_DIR": HOME, "ANTHROPIC_API_KEY": "", "CLAUDE_CODE_OAUTH_TOKEN": ""}
PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def exits(version: str) -> dict[str, int]:
    pairs = (line.split() for line in fixture(f"{version}-exit.txt").splitlines())
    return {name: int(code) for name, code in pairs}


def status(version: str, name: str) -> CommandResult:
    code = exits(version)[f"status-{name}"]
    return CommandResult(fixture(f"{version}-status-{name}.json"), "", code)


def context(executor: object, home: str = HOME) -> AccountContext:
    return AccountContext(
        home=home, environment={"CLAUDE_CONFIG_DIR": home},
        executor=cast(CommandExecutor, executor),
        sessions=cast(SessionExecutor, FailingExecutor(HarnessCapabilityError(
            ErrorKind.UNSUPPORTED, "claude accounts never open a session"))),
    )


def failure(run: Callable[[], object]) -> HarnessCapabilityError:
    with pytest.raises(HarnessCapabilityError) as caught:
        run()
    return caught.value


# -- auth status --------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_signed_out_status_is_no(version: str) -> None:
    for name in ("signed-out", "after-logout"):
        assert exits(version)[f"status-{name}"] == 1  # signed out exits 1, stdout decides
        assert parse_status(status(version, name)).signed_in is SignedIn.NO


@pytest.mark.parametrize("version", VERSIONS)
def test_a_claude_ai_login_is_yes_with_its_identity(version: str) -> None:
    check = parse_status(status(version, "fake-claudeai"))
    assert check.signed_in is SignedIn.YES
    assert check.identity == AccountIdentity(email="dev@example.com", plan="pro")


@pytest.mark.parametrize("version", VERSIONS)
def test_an_api_key_answering_instead_of_the_home_is_no_managed_account(version: str) -> None:
    # 2.1.197 even says authMethod "claude.ai" (with apiKeySource and email null).
    error = failure(lambda: parse_status(status(version, "api-key-env")))
    assert error.kind is ErrorKind.UNSUPPORTED


@pytest.mark.parametrize(("stdout", "code", "kind"), [
    ('{"loggedIn": false, "authMethod": "none"}', 0, ErrorKind.PARSE_FAILURE),
    ('{"loggedIn": true, "authMethod": "claude.ai"}', 1, ErrorKind.PARSE_FAILURE),
    ('{"loggedIn": "false", "authMethod": "none"}', 1, ErrorKind.PARSE_FAILURE),
    ('{"loggedIn": false}', 1, ErrorKind.PARSE_FAILURE),
    ("Not logged in. Run claude auth login to authenticate.\n", 1, ErrorKind.PARSE_FAILURE),
    ("[]", 1, ErrorKind.PARSE_FAILURE),
    ("", 1, ErrorKind.PARSE_FAILURE),
    ('{"loggedIn": false, "authMethod": "none"}', 2, ErrorKind.COMMAND_FAILED),
    ('{"loggedIn": true, "authMethod": "oauth_token"}', 0, ErrorKind.UNSUPPORTED),
    ('{"loggedIn": true, "authMethod": "third_party"}', 0, ErrorKind.UNSUPPORTED),
])
def test_status_that_cannot_be_trusted_is_a_typed_failure(
    stdout: str, code: int, kind: ErrorKind
) -> None:
    assert failure(lambda: parse_status(CommandResult(stdout, "", code))).kind is kind


@pytest.mark.parametrize("fields", [
    {"email": None, "subscriptionType": None},
    {"email": "a\u0007b", "subscriptionType": "x" * 400},
    {},
])
def test_identity_fields_are_kept_only_when_they_are_plain_text(fields: dict[str, object]) -> None:
    body = json.dumps({"loggedIn": True, "authMethod": "claude.ai", **fields})
    check = parse_status(CommandResult(body, "", 0))
    assert check == parse_status(CommandResult(body, "", 0))
    assert check.signed_in is SignedIn.YES and check.identity == AccountIdentity()


@PROPERTY
@given(stdout=st.one_of(st.text(max_size=80), st.from_regex(r'\{"loggedIn": ?(true|false|1|null)'
                                                             r'(, ?"authMethod": ?"[a-z._]*")?'
                                                             r'(, ?"apiKeySource": ?"x")?\}',
                                                             fullmatch=True)),
       code=st.integers(-2, 3))
def test_any_status_output_is_an_answer_or_a_typed_failure(stdout: str, code: int) -> None:
    try:
        check = parse_status(CommandResult(stdout, "", code))
    except HarnessCapabilityError:
        return
    assert check.signed_in in (SignedIn.YES, SignedIn.NO)


# -- the flows, over a scripted executor ---------------------------------------------------


def answering(version: str, login: CommandResult | None = None,
              after: str = "fake-claudeai", logout_exit: int = 0) -> ScriptedExecutor:
    """Each command answered with what that version printed for it."""
    def respond(request: CommandRequest) -> CommandResult:
        verb = request.args[1]
        if verb == "login":
            return login or CommandResult(fixture(f"{version}-login.stdout.txt")
                                          + "Login successful.\n", "", 0)
        if verb == "logout":
            return CommandResult(fixture(f"{version}-logout-fake-claudeai.stdout.txt"), "",
                                 logout_exit)
        return status(version, after)
    return ScriptedExecutor(respond)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_completed_sign_in_is_verified_by_status_and_shows_nothing(version: str) -> None:
    executor = answering(version)
    shown: list[str] = []
    identity = asyncio.run(ClaudeAccounts().authenticate(context(executor), shown.append))
    assert identity == AccountIdentity(email="dev@example.com", plan="pro")
    # The printed URL is the manual flow's (its page hands out a code to paste back): never shown.
    assert shown == []
    assert [r.argv for r in executor.requests] == [
        ("claude", "auth", "login", "--claudeai"), ("claude", "auth", "status", "--json")]
    for request in executor.requests:
        assert dict(request.env) == ENV and request.stdin is None
    login, status = executor.requests
    assert login.attended and login.timeout == 300  # it waits for the person
    assert not status.attended and 0 < status.timeout <= MAX_TIMEOUT


def test_a_login_that_ends_without_a_sign_in_is_unauthenticated() -> None:
    # SIGINT ends `auth login` with exit 0: only status tells.
    login = CommandResult(fixture("v2.1.197-login.stdout.txt"), "", 0)
    executor = answering("v2.1.197", login=login, after="signed-out")
    error = failure(lambda: asyncio.run(ClaudeAccounts().authenticate(context(executor),
                                                                      lambda _: None)))
    assert error.kind is ErrorKind.UNAUTHENTICATED


def test_a_failed_login_is_unauthenticated_and_its_output_stays_out_of_the_error() -> None:
    login = CommandResult("", "Login failed: dev@example.com token exchange 400\n", 1)
    executor = answering("v2.1.197", login=login)
    error = failure(lambda: asyncio.run(ClaudeAccounts().authenticate(context(executor),
                                                                      lambda _: None)))
    assert error.kind is ErrorKind.UNAUTHENTICATED
    assert "dev@example.com" not in str(error)
    assert len(executor.requests) == 1


@pytest.mark.parametrize("version", VERSIONS)
def test_verify_and_sign_out_answer_from_status(version: str) -> None:
    signed_in = answering(version)
    assert asyncio.run(ClaudeAccounts().verify(context(signed_in))).signed_in is SignedIn.YES
    signed_out = answering(version, after="after-logout")
    check = asyncio.run(ClaudeAccounts().sign_out(context(signed_out)))
    assert check.signed_in is SignedIn.NO
    assert [r.argv[2] for r in signed_out.requests] == ["logout", "status"]


def test_a_failed_logout_raises_and_proves_nothing() -> None:
    executor = answering("v2.1.197", after="after-logout", logout_exit=1)
    error = failure(lambda: asyncio.run(ClaudeAccounts().sign_out(context(executor))))
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert len(executor.requests) == 1


def test_an_environment_that_does_not_point_at_the_home_is_refused() -> None:
    executor = answering("v2.1.197")
    bad = AccountContext(home=HOME, environment={"CLAUDE_CONFIG_DIR": "/home/dev/.claude"},
                         executor=cast(CommandExecutor, executor),
                         sessions=cast(SessionExecutor, None))
    assert failure(lambda: asyncio.run(ClaudeAccounts().verify(bad))).kind \
        is ErrorKind.NOT_CONFIGURED
    assert executor.requests == []


# -- through the real LocalTransport, against a protocol-faithful double -----------------------

DOUBLE = '''
"""A stand-in for `claude auth` (Claude Code 2.1.197) replaying captured output.

`auth status --json` prints $FAKE_CLAUDE_DIR/<version>-status-<state>.json and
exits as captured (0 signed in, 1 signed out); the state is "signed-out"
until a login completes and again after a logout ("fake-claudeai" in between),
kept in $FAKE_CLAUDE_STATE. `auth login --claudeai` prints the captured login
output, appends "login started" to $FAKE_CLAUDE_LOG and, as the real one,
waits; on SIGTERM it appends "SIGTERM" and exits 143. $FAKE_CLAUDE_MODE=complete
makes it finish at once instead ("Login successful.", exit 0, signed in).
`auth logout` prints the captured line and exits 0, signed out.
"""
import os, signal, sys, time

fixtures, version = os.environ["FAKE_CLAUDE_DIR"], "v2.1.197"
state_file, log = os.environ["FAKE_CLAUDE_STATE"], os.environ["FAKE_CLAUDE_LOG"]
state = open(state_file).read() if os.path.exists(state_file) else "signed-out"
def note(text):
    with open(log, "a") as f:
        f.write(text + "\\n")
def show(name):
    sys.stdout.write(open(os.path.join(fixtures, f"{version}-{name}")).read())
    sys.stdout.flush()
verb = sys.argv[2]
if verb == "status":
    show(f"status-{state}.json")
    sys.exit(0 if state == "fake-claudeai" else 1)
if verb == "logout":
    open(state_file, "w").write("signed-out")
    show("logout-signed-out.stdout.txt")
    sys.exit(0)
def on_term(signum, frame):
    note("SIGTERM")
    sys.exit(143)
signal.signal(signal.SIGTERM, on_term)
show("login.stdout.txt")
note("login started")
if os.environ.get("FAKE_CLAUDE_MODE") == "complete":
    open(state_file, "w").write("fake-claudeai")
    print("Login successful.", flush=True)
    sys.exit(0)
while True:
    time.sleep(1)
'''


def real_double(tmp_path: Path, **settings: str) -> tuple[LocalTransport, Path]:
    return script_double(tmp_path, "claude", DOUBLE, dir=str(FIXTURES),
                         state=str(tmp_path / "state"), **settings)


def ended_by_sigterm(log: Path) -> bool:
    # The whole process group is signalled, and may be again while it exits: one or more.
    first, *rest = log.read_text().splitlines()
    return first == "login started" and set(rest) == {"SIGTERM"}


def test_the_double_signs_in_and_out_through_the_real_transport(tmp_path: Path) -> None:
    transport, _ = real_double(tmp_path, mode="complete")
    accounts = ClaudeAccounts()
    assert asyncio.run(accounts.verify(context(transport))).signed_in is SignedIn.NO
    shown: list[str] = []
    identity = asyncio.run(accounts.authenticate(context(transport), shown.append))
    assert identity.email == "dev@example.com" and shown == []
    assert asyncio.run(accounts.sign_out(context(transport))).signed_in is SignedIn.NO


def test_a_cancelled_sign_in_ends_the_cli_with_sigterm(tmp_path: Path) -> None:
    transport, log = real_double(tmp_path)

    async def scenario() -> None:
        task = asyncio.create_task(ClaudeAccounts().authenticate(context(transport),
                                                                 lambda _: None))
        while "login started" not in log.read_text():  # the CLI is waiting for the browser
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert ended_by_sigterm(log)


def test_a_sign_in_nobody_completes_times_out(tmp_path: Path) -> None:
    transport, log = real_double(tmp_path)
    error = failure(lambda: asyncio.run(ClaudeAccounts(sign_in_timeout=1.5).authenticate(
        context(transport), lambda _: None)))
    assert error.kind is ErrorKind.TIMEOUT
    assert ended_by_sigterm(log)


def test_a_missing_claude_is_binary_unavailable(tmp_path: Path) -> None:
    transport = LocalTransport({"PATH": str(tmp_path)})
    error = failure(lambda: asyncio.run(ClaudeAccounts().verify(context(transport))))
    assert error.kind is ErrorKind.BINARY_UNAVAILABLE


# -- registration --------------------------------------------------------------------------


def test_the_plugin_registers_the_accounts_capability() -> None:
    accounts = clanker_claude.plugin.clanker_accounts()
    assert isinstance(accounts, ClaudeAccounts)
    assert accounts.home_variable == "CLAUDE_CONFIG_DIR"


# -- the real CLI, when it is installed (never signs in: the sign-in is cancelled) ----------


def real_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AccountContext:
    monkeypatch.setenv("BROWSER", "true")  # the CLI opens a "browser" that does nothing
    home = tmp_path / "acct"
    home.mkdir()
    return context(LocalTransport({**os.environ, "HOME": str(tmp_path)}), home=str(home))


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("claude") is None, reason="claude is not installed")
def test_real_auth_signed_out_verify_sign_out_and_a_cancelled_sign_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = real_context(tmp_path, monkeypatch)
    accounts = ClaudeAccounts()
    assert asyncio.run(accounts.verify(account)).signed_in is SignedIn.NO
    assert asyncio.run(accounts.sign_out(account)).signed_in is SignedIn.NO

    async def cancelled() -> None:
        task = asyncio.create_task(accounts.authenticate(account, lambda _: None))
        await asyncio.sleep(3)  # long enough for the CLI to wait for the browser
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    assert asyncio.run(accounts.verify(account)).signed_in is SignedIn.NO
