"""Codex's accounts capability, against `codex app-server` 0.171.0 (tests/fixtures/codex/accounts).

The fixtures are live captures without a credential (a sign-in started and
cancelled, a sign-in ended by another one, signed-out reads and logouts, a
logout of a FAKE ChatGPT login), plus one built file: a completed sign-in,
the live start answer followed by a synthesized ``account/login/completed``
(the schema's shape, the live failure's fields) and the ``account/read``
captured with a FAKE ChatGPT login. See the fixtures' README.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import clanker_codex
from clanker.accounts.capability import AccountContext, AccountIdentity, SignedIn
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import (
    CommandExecutor,
    CommandRequest,
    LocalTransport,
    SessionExecutor,
    SessionExit,
)
from clanker.testing import FailingExecutor
from clanker.testing.doubles import script_double
from clanker_codex.accounts import (
    CodexAccounts,
    account_check,
    is_web_url,
)
from clanker_codex.appserver import Connection

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "codex" / "accounts"
USAGE = FIXTURES.parent / "usage"
HOME = "/home/dev/.local/share/clanker/accounts/codex/acct_00000000000000000000000000000001"
PROPERTY = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def lines(name: str, directory: Path = FIXTURES) -> list[str]:
    return (directory / name).read_text().splitlines()


def messages(name: str, directory: Path = FIXTURES) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines(name, directory)]


def is_response(message: dict[str, Any]) -> bool:
    return "method" not in message and "id" in message


class ReplaySession:
    """A stand-in for a `codex app-server` session that replays a captured stdout.

    For each request written it releases the captured lines up to and including
    the answer with the same id, then the notifications that follow it (so an
    ``account/login/completed`` the server sends unasked arrives unasked); a
    client notification (``initialized``) releases nothing. Reading waits for a
    line, as a pipe does; it reports EOF once the input is closed, or
    (``ends``) once the script is exhausted or a line released was replaced
    (``replace``), as a server that exits on its own.
    Every call is recorded in ``events``, in order.
    """

    def __init__(self, captured: Iterable[str], *, exit_code: int = 0, ends: bool = False,
                 replace: Callable[[str], str] | None = None) -> None:
        self._script = list(captured)
        self._ends = ends
        self._replace = replace or (lambda line: line)
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._exit = SessionExit("", exit_code)
        self.written: list[dict[str, Any]] = []
        self.events: list[str] = []

    def _put(self, line: str) -> bool:
        replaced = self._replace(line)
        self._queue.put_nowait(replaced)
        return replaced != line

    def _release(self, request_id: object) -> None:
        altered = False
        while self._script:
            line = self._script.pop(0)
            altered |= self._put(line)
            message = json.loads(line)
            if is_response(message) and message["id"] == request_id:
                break
        while self._script and not is_response(json.loads(self._script[0])):
            altered |= self._put(self._script.pop(0))
        # A server that said something else than its script stops there (where a
        # live one would be cut off by the session's deadline).
        if self._ends and (altered or not self._script):
            self._queue.put_nowait(None)

    async def write_line(self, line: str) -> None:
        message = json.loads(line)
        self.written.append(message)
        self.events.append(f"write {message['method']}")
        if "id" in message:
            self._release(message["id"])

    async def read_line(self) -> str | None:
        return await self._queue.get()

    async def close_input(self) -> None:
        self.events.append("close")
        self._queue.put_nowait(None)

    async def wait(self) -> SessionExit:
        self.events.append("wait")
        return self._exit

    async def dispose(self) -> None:
        self.events.append("dispose")
        self._queue.put_nowait(None)

    async def __aenter__(self) -> ReplaySession:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.dispose()


class Sessions:
    """Opens one :class:`ReplaySession` per request, remembering both."""

    def __init__(self, *sessions: ReplaySession) -> None:
        self._sessions = list(sessions)
        self.opened: list[ReplaySession] = []
        self.requests: list[CommandRequest] = []

    async def open(self, request: CommandRequest) -> ReplaySession:
        self.requests.append(request)
        session = self._sessions.pop(0)
        self.opened.append(session)
        return session


def context(sessions: object, home: str = HOME, **environment: str) -> AccountContext:
    return AccountContext(
        home=home,
        environment={"CODEX_HOME": home, **environment},
        executor=cast(CommandExecutor, FailingExecutor(HarnessCapabilityError(
            ErrorKind.UNSUPPORTED, "codex accounts never run one-shot commands"))),
        sessions=cast(SessionExecutor, sessions),
    )


def replay(name: str, **options: Any) -> tuple[Sessions, ReplaySession]:
    session = ReplaySession(lines(name), **options)
    return Sessions(session), session


def failure(run: Callable[[], object]) -> HarnessCapabilityError:
    with pytest.raises(HarnessCapabilityError) as caught:
        run()
    return caught.value


def sign_in(sessions: object, shown: list[str] | None = None,
            accounts: CodexAccounts | None = None) -> AccountIdentity:
    sink = [] if shown is None else shown
    return asyncio.run((accounts or CodexAccounts()).authenticate(context(sessions), sink.append))


# -- sign in ------------------------------------------------------------------------------


def test_a_completed_sign_in_speaks_the_exchange_and_returns_the_identity() -> None:
    sessions, session = replay("built-login-completed-out.jsonl")
    shown: list[str] = []
    identity = sign_in(sessions, shown)
    assert identity == AccountIdentity(email="dev@example.com", plan="pro")
    [start] = [m for m in messages("built-login-completed-out.jsonl") if m.get("id") == 2]
    assert shown == [start["result"]["authUrl"]]
    assert session.written == messages("built-login-completed-in.jsonl")
    assert session.events[-3:] == ["close", "wait", "dispose"]


def test_the_server_runs_under_the_accounts_home_only() -> None:
    sessions, _ = replay("built-login-completed-out.jsonl")
    sign_in(sessions)
    [request] = sessions.requests
    assert request.argv == ("codex", "app-server")
    assert dict(request.env) == {"CODEX_HOME": HOME}
    # A sign-in waits for the person: attended, within the service's 5 minutes.
    assert request.attended and request.timeout == 300


def test_an_environment_that_does_not_point_at_the_home_is_refused() -> None:
    sessions, _ = replay("built-login-completed-out.jsonl")
    bad = AccountContext(home=HOME, environment={"CODEX_HOME": "/home/dev/.codex"},
                         executor=cast(CommandExecutor, None),
                         sessions=cast(SessionExecutor, sessions))
    error = failure(lambda: asyncio.run(CodexAccounts().verify(bad)))
    assert error.kind is ErrorKind.NOT_CONFIGURED
    assert sessions.opened == []


def test_cancelling_the_sign_in_sends_codexs_cancel_before_the_process_is_reaped() -> None:
    sessions, session = replay("app-server-login-cancel-out.jsonl")

    async def scenario() -> None:
        shown = asyncio.Event()
        task = asyncio.create_task(CodexAccounts().authenticate(
            context(sessions), lambda _: shown.set()))
        await shown.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert session.written == messages("app-server-login-cancel-in.jsonl")
    assert session.events.index("write account/login/cancel") < session.events.index("dispose")
    assert "close" not in session.events  # nothing claims a clean end


def test_a_sign_in_ended_by_another_one_is_unauthenticated_without_a_cancel() -> None:
    # Live: a second app-server starting a ChatGPT login took 127.0.0.1:1455 over.
    sessions, session = replay("app-server-login-superseded-out.jsonl")
    error = failure(lambda: sign_in(sessions))
    assert error.kind is ErrorKind.UNAUTHENTICATED
    assert session.written == messages("app-server-login-superseded-in.jsonl")
    assert "Login cancelled" not in str(error)


def built_with(replacements: dict[int, dict[str, Any]]) -> list[str]:
    """The built completed sign-in, with some captured lines (by index) replaced."""
    captured = messages("built-login-completed-out.jsonl")
    for index, message in replacements.items():
        captured[index] = message
    return [json.dumps(m) for m in captured]


START, COMPLETED, READ = 3, 4, 6


def start_answer(**result: object) -> dict[str, Any]:
    answer = messages("built-login-completed-out.jsonl")[START]
    answer["result"].update(result)
    return answer


@pytest.mark.parametrize("url", [
    "javascript:alert(1)", "file:///etc/passwd", "data:text/html,hi", "ftp://example.com/",
    "", "https://", "http:///path", "https://exa mple.com/", "https://example.com/\nnext",
    "https://example.com/\x1b[2J", "//example.com/x", "auth.openai.com/oauth", None, 42,
    ["https://example.com"], "https://" + "a" * 9000 + ".com/",
])
def test_a_sign_in_url_that_is_not_http_is_never_shown_and_the_login_is_cancelled(
    url: object
) -> None:
    session = ReplaySession(built_with({START: start_answer(authUrl=url)}))
    shown: list[str] = []
    error = failure(lambda: sign_in(Sessions(session), shown))
    assert error.kind is ErrorKind.PARSE_FAILURE
    assert shown == []
    assert session.written[-1]["method"] == "account/login/cancel"


@pytest.mark.parametrize("result", [
    {"type": "apiKey"}, {"type": "chatgptDeviceCode", "loginId": "x", "userCode": "A",
                         "verificationUrl": "https://example.com"},
    {"type": "chatgpt", "authUrl": "https://example.com"},
    {"type": "chatgpt", "loginId": "", "authUrl": "https://example.com"},
])
def test_a_start_answer_that_is_no_chatgpt_login_is_a_parse_failure(
    result: dict[str, Any]
) -> None:
    answer = {"id": 2, "result": result}
    session = ReplaySession(built_with({START: answer}))
    assert failure(lambda: sign_in(Sessions(session))).kind is ErrorKind.PARSE_FAILURE


def test_a_start_error_is_command_failed_with_only_its_code() -> None:
    answer = {"id": 2, "error": {"code": -32600, "message": "dev@example.com said no"}}
    error = failure(lambda: sign_in(Sessions(ReplaySession(built_with({START: answer})))))
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert "dev@example.com" not in str(error)


def test_a_completion_for_another_login_is_not_ours() -> None:
    # Another login's completion is skipped; ours never comes; the server then ends.
    other = messages("built-login-completed-out.jsonl")[COMPLETED]
    other["params"]["loginId"] = "00000000-0000-4000-8000-000000000999"
    session = ReplaySession(built_with({COMPLETED: other})[:READ - 1], ends=True)
    error = failure(lambda: sign_in(Sessions(session)))
    assert error.kind is ErrorKind.COMMAND_FAILED  # the server ended before answering


@pytest.mark.parametrize("params", [
    {"loginId": "00000000-0000-4000-8000-000000000001", "success": False,
     "error": "Login server error: Login was not completed"},
    {"loginId": "00000000-0000-4000-8000-000000000001", "success": "true"},
    {"loginId": "00000000-0000-4000-8000-000000000001"},
])
def test_a_completion_that_is_not_a_success_is_unauthenticated(params: dict[str, Any]) -> None:
    completed = {"method": "account/login/completed", "params": params}
    error = failure(lambda: sign_in(Sessions(ReplaySession(built_with({COMPLETED: completed})))))
    assert error.kind is ErrorKind.UNAUTHENTICATED


@pytest.mark.parametrize(("account", "kind"), [
    (None, ErrorKind.UNAUTHENTICATED),
    ({"type": "apiKey"}, ErrorKind.UNSUPPORTED),
])
def test_only_a_chatgpt_account_after_the_sign_in_counts(
    account: object, kind: ErrorKind
) -> None:
    read = {"id": 3, "result": {"account": account, "requiresOpenaiAuth": True}}
    error = failure(lambda: sign_in(Sessions(ReplaySession(built_with({READ: read})))))
    assert error.kind is kind


def test_a_sign_in_counts_only_once_the_server_exited_cleanly() -> None:
    session = ReplaySession(lines("built-login-completed-out.jsonl"), exit_code=1)
    assert failure(lambda: sign_in(Sessions(session))).kind is ErrorKind.COMMAND_FAILED


def test_a_failing_show_url_still_cancels_the_login() -> None:
    session = ReplaySession(lines("app-server-login-cancel-out.jsonl"))

    def broken(_: str) -> None:
        raise RuntimeError("no terminal")

    with pytest.raises(RuntimeError):
        asyncio.run(CodexAccounts().authenticate(context(Sessions(session)), broken))
    assert session.written[-1]["method"] == "account/login/cancel"


# -- verify and sign out --------------------------------------------------------------------


def test_verify_signed_out_is_no() -> None:
    sessions, session = replay("app-server-read-signed-out-out.jsonl")
    check = asyncio.run(CodexAccounts().verify(context(sessions)))
    assert check.signed_in is SignedIn.NO
    assert check.identity == AccountIdentity()
    assert session.written == messages("app-server-read-signed-out-in.jsonl")


def test_verify_that_cannot_find_out_raises_and_is_never_signed_out() -> None:
    # Live: a (FAKE) ChatGPT login with no reachable backend: -32603.
    sessions, _ = replay("app-server-read-fake-chatgpt-offline-out.jsonl")
    error = failure(lambda: asyncio.run(CodexAccounts().verify(context(sessions))))
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert "routing" not in str(error)


@pytest.mark.parametrize("name", ["app-server-logout-signed-out-out.jsonl",
                                  "app-server-logout-fake-chatgpt-out.jsonl"])
def test_sign_out_is_proven_by_the_read_after_logout(name: str) -> None:
    sessions, session = replay(name)
    check = asyncio.run(CodexAccounts().sign_out(context(sessions)))
    assert check.signed_in is SignedIn.NO
    assert session.written == messages(name.replace("-out.", "-in."))


def test_a_logout_that_leaves_an_account_is_reported_as_such() -> None:
    captured = messages("app-server-logout-signed-out-out.jsonl")
    captured[-1] = {"id": 3, "result": {"account": {"type": "chatgpt", "email": "dev@example.com",
                                                     "planType": "plus"},
                                        "requiresOpenaiAuth": True}}
    session = ReplaySession([json.dumps(m) for m in captured])
    check = asyncio.run(CodexAccounts().sign_out(context(Sessions(session))))
    assert check.signed_in is SignedIn.YES


def test_a_failed_logout_raises() -> None:
    captured = messages("app-server-logout-signed-out-out.jsonl")
    captured[3] = {"id": 2, "error": {"code": -32603, "message": "keyring locked"}}
    session = ReplaySession([json.dumps(m) for m in captured])
    error = failure(lambda: asyncio.run(CodexAccounts().sign_out(context(Sessions(session)))))
    assert error.kind is ErrorKind.COMMAND_FAILED


def read_answer(name: str) -> dict[str, Any]:
    [found] = [m for m in messages(name, USAGE) if m.get("id") == 2 and is_response(m)]
    return found


@pytest.mark.parametrize(("name", "expected"), [
    ("app-server-chatgpt-out.jsonl", (SignedIn.YES, "dev@example.com", "pro")),
    ("app-server-chatgpt-unknown-plan-out.jsonl", (SignedIn.YES, "dev@example.com", "pro")),
    ("app-server-signed-out-out.jsonl", (SignedIn.NO, None, None)),
    ("app-server-no-openai-auth-out.jsonl", (SignedIn.NO, None, None)),
])
def test_account_read_answers_captured_for_usage(name: str, expected: tuple[Any, ...]) -> None:
    check = account_check(read_answer(name))
    assert (check.signed_in, check.identity.email, check.identity.plan) == expected


@pytest.mark.parametrize("name", ["app-server-api-key-out.jsonl",
                                  "app-server-amazon-bedrock-out.jsonl",
                                  "app-server-gcp-out.jsonl"])
def test_credentials_that_are_not_a_chatgpt_account_are_no_managed_account(name: str) -> None:
    assert failure(lambda: account_check(read_answer(name))).kind is ErrorKind.UNSUPPORTED


@pytest.mark.parametrize("account", [
    {"type": "chatgpt", "email": "dev@example.com", "planType": "unknown"},
    {"type": "chatgpt", "email": None, "planType": None},
    {"type": "chatgpt", "email": "a\nb", "planType": "x" * 400},
    {"type": "chatgpt"},
])
def test_identity_fields_are_kept_only_when_they_are_plain_text(account: dict[str, Any]) -> None:
    check = account_check({"id": 2, "result": {"account": account}})
    assert check.signed_in is SignedIn.YES
    assert check.identity == AccountIdentity(
        email="dev@example.com" if account.get("email") == "dev@example.com" else None)


@pytest.mark.parametrize("response", [
    {"id": 2, "result": {}}, {"id": 2, "result": None}, {"id": 2, "result": {"account": 3}},
    {"id": 2, "result": {"account": {}}}, {"id": 2, "result": {"account": {"type": 1}}},
    {"id": 2},
])
def test_malformed_account_reads_are_parse_failures(response: dict[str, Any]) -> None:
    assert failure(lambda: account_check(response)).kind is ErrorKind.PARSE_FAILURE


# -- the connection's read pump ------------------------------------------------------------


def test_the_pump_skips_server_requests_and_strays_and_keeps_notifications_for_their_waiter(
) -> None:
    captured = [
        {"id": 1, "result": {}},
        {"id": 7, "method": "item/tool/requestUserInput", "params": {}},  # never answered
        {"id": 99, "result": {"stray": True}},  # a response to nothing we asked
        {"method": "account/updated", "params": {}},
        {"id": 2, "result": {"second": True}},
        {"method": "account/login/completed", "params": {"loginId": "x", "success": True}},
    ]
    session = ReplaySession([json.dumps(m) for m in captured])

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Connection(session) as connection:
            await connection.initialize()
            second = await connection.request("account/read", {"refreshToken": False})
            note = await connection.notification(
                lambda m: m.get("method") == "account/login/completed")
            return second, note

    second, note = asyncio.run(scenario())
    assert second == {"id": 2, "result": {"second": True}}
    assert note["params"]["loginId"] == "x"
    assert [m["method"] for m in session.written] == ["initialize", "initialized", "account/read"]


def test_the_end_of_output_fails_every_waiter() -> None:
    session = ReplaySession([json.dumps({"id": 1, "result": {}})])

    async def scenario() -> None:
        async with Connection(session) as connection:
            await connection.initialize()
            await session.close_input()  # the server ends
            await connection.notification(lambda _: True)

    assert failure(lambda: asyncio.run(scenario())).kind is ErrorKind.COMMAND_FAILED


def test_unread_notifications_are_bounded() -> None:
    note = json.dumps({"method": "configWarning", "params": {}})
    session = ReplaySession([json.dumps({"id": 1, "result": {}}), *[note] * 2100])

    async def scenario() -> None:
        async with Connection(session) as connection:
            await connection.initialize()
            await connection.notification(lambda m: m.get("method") == "never")

    assert failure(lambda: asyncio.run(scenario())).kind is ErrorKind.PARSE_FAILURE


# -- properties ----------------------------------------------------------------------------

JUNK_LINES = st.one_of(
    st.text(max_size=40),
    st.builds(json.dumps, st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda inner: st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["id", "method", "params", "result", "error",
                                           "account", "loginId", "success", "type"]),
                          inner, max_size=4),
        max_leaves=8)),
)
FLOWS = {
    "sign-in": ("built-login-completed-out.jsonl", "authenticate"),
    "verify": ("app-server-read-signed-out-out.jsonl", "verify"),
    "sign-out": ("app-server-logout-fake-chatgpt-out.jsonl", "sign_out"),
}


async def run_flow(method: str, sessions: object) -> object:
    accounts = CodexAccounts()
    if method == "authenticate":
        return await accounts.authenticate(context(sessions), lambda _: None)
    return await getattr(accounts, method)(context(sessions))


@PROPERTY
@given(flow=st.sampled_from(sorted(FLOWS)), data=st.data())
def test_junk_in_place_of_any_line_never_raises_anything_but_a_typed_failure(
    flow: str, data: st.DataObject
) -> None:
    name, method = FLOWS[flow]
    captured = lines(name)
    index = data.draw(st.integers(0, len(captured) - 1))
    junk = data.draw(JUNK_LINES)
    # The junk keeps the replaced line's place: it is released when that line would be.
    session = ReplaySession(captured, ends=True,
                            replace=lambda line: junk if line == captured[index] else line)
    with contextlib.suppress(HarnessCapabilityError):
        asyncio.run(run_flow(method, Sessions(session)))


@PROPERTY
@given(st.text(max_size=60))
def test_only_http_and_https_urls_are_ever_fit_to_show(text: str) -> None:
    if is_web_url(text):
        assert text.lower().startswith(("http://", "https://"))
        assert text.isprintable() and " " not in text


# -- through the real LocalTransport, against a protocol-faithful double -----------------------

DOUBLE = '''
"""A stand-in for `codex app-server` (codex-cli 0.171.0) replaying a captured exchange.

For each request read on stdin it prints the captured lines of
$FAKE_CODEX_CAPTURE up to and including the answer with the same id, then the
notifications that follow it (an account/login/completed the server sends
unasked); client notifications get nothing. Every line read is appended to
$FAKE_CODEX_LOG as it arrives, so the log shows what reached a live server.
At EOF on stdin it exits with $FAKE_CODEX_EXIT (default 0).
$FAKE_CODEX_MODE=silent reads requests and never answers.
"""
import json, os, sys

pending = open(os.environ["FAKE_CODEX_CAPTURE"]).read().splitlines()
log = open(os.environ["FAKE_CODEX_LOG"], "a")
silent = os.environ.get("FAKE_CODEX_MODE") == "silent"
def response(line):
    message = json.loads(line)
    return "method" not in message and "id" in message
for raw in sys.stdin:
    log.write(raw)
    log.flush()
    request = json.loads(raw)
    if "id" not in request or silent:
        continue
    while pending:
        line = pending.pop(0)
        print(line, flush=True)
        if response(line) and json.loads(line)["id"] == request["id"]:
            break
    while pending and not response(pending[0]):
        print(pending.pop(0), flush=True)
sys.exit(int(os.environ.get("FAKE_CODEX_EXIT", "0")))
'''


def real_double(tmp_path: Path, capture: str, **settings: str) -> tuple[LocalTransport, Path]:
    return script_double(tmp_path, "codex", DOUBLE, capture=str(FIXTURES / capture), **settings)


def logged(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_the_double_completes_a_sign_in_through_the_real_transport(tmp_path: Path) -> None:
    transport, log = real_double(tmp_path, "built-login-completed-out.jsonl")
    identity = sign_in(transport)
    assert identity.email == "dev@example.com"
    assert logged(log) == messages("built-login-completed-in.jsonl")


def test_a_cancelled_sign_in_reaches_the_live_server_before_it_ends(tmp_path: Path) -> None:
    transport, log = real_double(tmp_path, "app-server-login-cancel-out.jsonl")

    async def scenario() -> None:
        shown = asyncio.Event()
        task = asyncio.create_task(CodexAccounts().authenticate(
            context(transport), lambda _: shown.set()))
        await shown.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert logged(log) == messages("app-server-login-cancel-in.jsonl")


@pytest.mark.parametrize(("capture", "method", "signed_in"), [
    ("app-server-read-signed-out-out.jsonl", "verify", SignedIn.NO),
    ("app-server-logout-fake-chatgpt-out.jsonl", "sign_out", SignedIn.NO),
])
def test_the_double_verifies_and_signs_out_through_the_real_transport(
    tmp_path: Path, capture: str, method: str, signed_in: SignedIn
) -> None:
    transport, _ = real_double(tmp_path, capture)
    check = asyncio.run(getattr(CodexAccounts(), method)(context(transport)))
    assert check.signed_in is signed_in


def test_a_failed_exit_after_a_good_answer_is_command_failed(tmp_path: Path) -> None:
    transport, _ = real_double(tmp_path, "app-server-read-signed-out-out.jsonl", exit="3")
    error = failure(lambda: asyncio.run(CodexAccounts().verify(context(transport))))
    assert error.kind is ErrorKind.COMMAND_FAILED


def test_a_server_that_never_answers_times_out(tmp_path: Path) -> None:
    transport, _ = real_double(tmp_path, "app-server-read-signed-out-out.jsonl", mode="silent")
    error = failure(lambda: asyncio.run(CodexAccounts(timeout=1.5).verify(context(transport))))
    assert error.kind is ErrorKind.TIMEOUT


def test_a_sign_in_nobody_completes_times_out(tmp_path: Path) -> None:
    # The cancel capture answers the start and then waits, like a server whose
    # person never opens the URL.
    transport, log = real_double(tmp_path, "app-server-login-cancel-out.jsonl")
    accounts = CodexAccounts(sign_in_timeout=1.5)
    error = failure(lambda: sign_in(transport, accounts=accounts))
    assert error.kind is ErrorKind.TIMEOUT
    assert [m["method"] for m in logged(log)][:3] == ["initialize", "initialized",
                                                      "account/login/start"]


def test_a_missing_codex_is_binary_unavailable(tmp_path: Path) -> None:
    transport = LocalTransport({"PATH": str(tmp_path)})
    error = failure(lambda: asyncio.run(CodexAccounts().verify(context(transport))))
    assert error.kind is ErrorKind.BINARY_UNAVAILABLE


# -- registration --------------------------------------------------------------------------


def test_the_plugin_registers_the_accounts_capability() -> None:
    accounts = clanker_codex.plugin.clanker_accounts()
    assert isinstance(accounts, CodexAccounts)
    assert accounts.home_variable == "CODEX_HOME"


# -- the real CLI, when it is installed (never signs in: the sign-in is cancelled) ----------


def real_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AccountContext:
    for name in ("OPENAI_API_KEY", "CODEX_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "acct"
    home.mkdir()
    return context(LocalTransport({**os.environ, "HOME": str(tmp_path)}), home=str(home))


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("codex") is None, reason="codex is not installed")
def test_real_app_server_signed_out_verify_and_sign_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = real_context(tmp_path, monkeypatch)
    assert asyncio.run(CodexAccounts().verify(account)).signed_in is SignedIn.NO
    assert asyncio.run(CodexAccounts().sign_out(account)).signed_in is SignedIn.NO


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("codex") is None, reason="codex is not installed")
def test_real_app_server_sign_in_shows_its_url_and_is_cancelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = real_context(tmp_path, monkeypatch)
    shown: list[str] = []

    async def scenario() -> None:
        seen = asyncio.Event()

        def show(url: str) -> None:
            shown.append(url)
            seen.set()

        task = asyncio.create_task(CodexAccounts().authenticate(account, show))
        await seen.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    [url] = shown
    assert url.startswith("https://auth.openai.com/oauth/authorize?")
    assert "redirect_uri=http%3A%2F%2F127.0.0.1%3A1455%2Fauth%2Fcallback" in url
    assert asyncio.run(CodexAccounts().verify(account)).signed_in is SignedIn.NO
