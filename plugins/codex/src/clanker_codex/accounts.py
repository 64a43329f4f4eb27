"""Codex managed accounts: sign-in, verification and sign-out through ``codex app-server``.

Every operation is one ``codex app-server`` under the account's home
(``CODEX_HOME``), driven through :class:`~clanker_codex.appserver.Connection`
(one read pump per connection)::

    sign in:  initialize -> initialized
              -> account/login/start {"type": "chatgpt"}   <- {type, loginId, authUrl}
              (the URL is shown)  ... <- account/login/completed {loginId, success}
              -> account/read {"refreshToken": false}
    verify:   initialize -> initialized -> account/read
    sign out: initialize -> initialized -> account/logout -> account/read

A cancelled or failed sign-in sends ``account/login/cancel {loginId}`` (bounded)
before the server is reaped. The answer counts only once the server has
exited 0 after its input was closed. Only ``account/read``'s structured
``account`` decides: ``null`` is signed out, ``{"type": "chatgpt", "email",
"planType"}`` a usable account; any other type (an API key, Bedrock, GCP) is
not a managed account. clanker never reads or writes ``auth.json`` or a keyring
entry: Codex keeps them under the home it is pointed at.

What codex-cli 0.171.0 does, live (docs/harnesses/codex.md "Accounts"):

* ``account/login/start`` answers at once with a ``loginId`` and an
  ``https://auth.openai.com/oauth/authorize?...`` URL whose redirect is
  Codex's own listener on ``127.0.0.1:1455``.
* ``account/login/cancel`` answers ``{"status": "canceled"}`` (then
  ``account/login/completed`` with ``success: false``), ``notFound`` for a
  login that already ended, and -32600 for an id it never issued.
* A second sign-in started on the same machine, by any app-server, takes the
  port over and ends the first with ``success: false``.
* ``account/logout`` answers ``{}`` signed in or not (about 5 s with a
  ChatGPT login and no network); ``account/read`` then says ``account: null``.
* With a ChatGPT login and no reachable backend, ``account/read`` fails with
  -32603 (workspace routing discovery): that is a failure, never "signed out".
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any, Final

from clanker.accounts.capability import (
    AccountCheck,
    AccountContext,
    AccountIdentity,
    SignedIn,
    checked_home,
    identity_text,
)
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import ATTENDED_TIMEOUT, MAX_TIMEOUT, CommandRequest, LineSession
from clanker.execution.jsonlines import end_cleanly
from clanker_codex.appserver import Connection, app_server_request, fail, result_of

__all__ = [
    "CANCEL_TIMEOUT",
    "HOME_VARIABLE",
    "CodexAccounts",
    "account_check",
    "is_web_url",
    "login_started",
]

HOME_VARIABLE: Final = "CODEX_HOME"
# A sign-in waits for a person in a browser: an attended session, at most the 5
# minutes the accounts service gives a sign-in.
SIGN_IN_TIMEOUT: Final = ATTENDED_TIMEOUT
TIMEOUT: Final = MAX_TIMEOUT  # verify / sign out: logout alone took 5 s offline
CANCEL_TIMEOUT: Final = 5.0
MAX_URL: Final = 8192
_READ_PARAMS: Final = {"refreshToken": False}
_UNKNOWN_PLAN: Final = "unknown"


def is_web_url(value: object) -> bool:
    """Whether ``value`` is an absolute ``http(s)`` URL fit to show a person."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_URL:
        return False
    if not value.isprintable() or any(c.isspace() for c in value):
        return False
    try:
        parts = urllib.parse.urlsplit(value)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def login_started(response: Mapping[str, Any]) -> tuple[str, object]:
    """Return ``(loginId, authUrl)`` from the ``account/login/start`` response."""
    result = result_of(response, "account/login/start")
    login_id = result.get("loginId")
    if result.get("type") != "chatgpt" or not identity_text(login_id):
        raise fail(ErrorKind.PARSE_FAILURE, "account/login/start did not start a ChatGPT login")
    assert isinstance(login_id, str)
    return login_id, result.get("authUrl")


def account_check(response: Mapping[str, Any]) -> AccountCheck:
    """Classify the ``account/read`` response (an error or an unknown shape raises)."""
    result = result_of(response, "account/read")
    if "account" not in result:
        raise fail(ErrorKind.PARSE_FAILURE, "account/read answered without an account")
    account = result["account"]
    if account is None:
        return AccountCheck(signed_in=SignedIn.NO)
    if not isinstance(account, dict) or not isinstance(account.get("type"), str):
        raise fail(ErrorKind.PARSE_FAILURE, "account/read account is not an account")
    if account["type"] != "chatgpt":
        # An API key, Bedrock or GCP credential: Codex is usable, but not as a managed account.
        raise fail(ErrorKind.UNSUPPORTED, "the home holds a sign-in that is not a ChatGPT account")
    plan = identity_text(account.get("planType"))
    return AccountCheck(signed_in=SignedIn.YES, identity=AccountIdentity(
        email=identity_text(account.get("email")), plan=None if plan == _UNKNOWN_PLAN else plan))


def _completes(login_id: str) -> Callable[[dict[str, Any]], bool]:
    def matches(message: dict[str, Any]) -> bool:
        params = message.get("params")
        return (message.get("method") == "account/login/completed"
                and isinstance(params, dict) and params.get("loginId") == login_id)
    return matches


async def _cancel(connection: Connection, login_id: str) -> None:
    """Ask the server to end the login, bounded; a server that cannot answer is reaped anyway."""
    with contextlib.suppress(HarnessCapabilityError, TimeoutError):
        async with asyncio.timeout(CANCEL_TIMEOUT):
            await connection.request("account/login/cancel", {"loginId": login_id})


async def _finish(session: LineSession) -> None:
    await end_cleanly(session, harness="codex", process="app-server")


class CodexAccounts:
    """Codex's own ChatGPT sign-in, for homes clanker owns (``CODEX_HOME``)."""

    home_variable = HOME_VARIABLE

    def __init__(self, *, sign_in_timeout: float = SIGN_IN_TIMEOUT,
                 timeout: float = TIMEOUT) -> None:
        self._sign_in_timeout = sign_in_timeout
        self._timeout = timeout

    def _request(self, context: AccountContext, timeout: float) -> CommandRequest:
        home = checked_home(context, HOME_VARIABLE, harness="codex")
        return app_server_request(timeout, {HOME_VARIABLE: home},
                                  attended=timeout > MAX_TIMEOUT)

    async def authenticate(
        self, context: AccountContext, show_url: Callable[[str], None]
    ) -> AccountIdentity:
        request = self._request(context, self._sign_in_timeout)
        async with await context.sessions.open(request) as session, \
                Connection(session) as connection:
            await connection.initialize()
            login_id, url = login_started(
                await connection.request("account/login/start", {"type": "chatgpt"}))
            try:
                if not is_web_url(url):
                    raise fail(ErrorKind.PARSE_FAILURE, "the sign-in URL is not an http(s) URL")
                assert isinstance(url, str)
                show_url(url)
                completed = await connection.notification(_completes(login_id))
            except BaseException:
                # Cancelled, timed out or failed while the login is open: Codex's own
                # cancel first, so its listener is released before the process is reaped.
                await _cancel(connection, login_id)
                raise
            if completed["params"].get("success") is not True:
                raise fail(ErrorKind.UNAUTHENTICATED, "the sign-in did not complete")
            check = account_check(await connection.request("account/read", _READ_PARAMS))
            if check.signed_in is not SignedIn.YES:
                raise fail(ErrorKind.UNAUTHENTICATED, "the sign-in left no ChatGPT account")
            await _finish(session)
        return check.identity

    async def verify(self, context: AccountContext) -> AccountCheck:
        request = self._request(context, self._timeout)
        async with await context.sessions.open(request) as session, \
                Connection(session) as connection:
            await connection.initialize()
            check = account_check(await connection.request("account/read", _READ_PARAMS))
            await _finish(session)
        return check

    async def sign_out(self, context: AccountContext) -> AccountCheck:
        request = self._request(context, self._timeout)
        async with await context.sessions.open(request) as session, \
                Connection(session) as connection:
            await connection.initialize()
            result_of(await connection.request("account/logout"), "account/logout")
            check = account_check(await connection.request("account/read", _READ_PARAMS))
            await _finish(session)
        return check

implementation = CodexAccounts
