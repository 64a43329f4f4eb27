"""Claude Code managed accounts: ``claude auth`` under the account's ``CLAUDE_CONFIG_DIR``.

Three bounded one-shot commands, each with ``CLAUDE_CONFIG_DIR`` set to the
home clanker owns::

    sign in:  claude auth login --claudeai      then  claude auth status --json
    verify:   claude auth status --json
    sign out: claude auth logout                then  claude auth status --json

The CLI opens the browser itself. What it prints (the sign-in URL among it)
is drained and discarded, never shown: the URL it prints is its manual flow,
whose page hands the person a code to paste into the CLI's own prompt, and
nothing here can carry that code back, so showing it would only lead the
person to a dead end. ``auth status --json`` decides everything: its stdout
is one JSON object and it exits 0 when ``loggedIn`` is true, 1 when false.
Only ``authMethod: "claude.ai"`` without an ``apiKeySource`` is a usable
subscription account; an API key, a token or a third-party provider is not a
managed account. An exported ``ANTHROPIC_API_KEY`` or
``CLAUDE_CODE_OAUTH_TOKEN`` would answer in the home's place, so both are
passed empty (which the CLI treats as unset). clanker never reads or writes
``.credentials.json`` or a keychain entry; the CLI keeps them for the home.

What Claude Code 2.1.197 and 2.1.332 do, live (docs/harnesses/claude.md "Accounts"):

* ``auth login`` needs no terminal: with stdin from ``/dev/null`` or a pipe it
  prints ``Opening browser to sign in…``, ``If the browser didn't open,
  visit: <URL>`` and ``Paste code here if prompted > ``, hands the browser
  another URL whose redirect is its own listener on ``localhost``, and
  waits. End of input does not stop it; SIGTERM ends it (exit 143), SIGINT
  too (exit 0). So its exit status never proves a sign-in: ``auth status``
  does. Success prints ``Login successful.`` and exits 0, failure exits 1.
* ``auth logout`` exits 0 signed in or not (2.1.332 may add that the server
  did not confirm the revocation); ``auth status`` then says signed out.
"""

from __future__ import annotations

import json
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
from clanker.execution import ATTENDED_TIMEOUT, MAX_TIMEOUT, CommandRequest, CommandResult

__all__ = [
    "HOME_VARIABLE",
    "ClaudeAccounts",
    "parse_status",
]

HOME_VARIABLE: Final = "CLAUDE_CONFIG_DIR"
# A sign-in waits for a person in a browser: an attended command, at most the 5
# minutes the accounts service gives a sign-in.
SIGN_IN_TIMEOUT: Final = ATTENDED_TIMEOUT
TIMEOUT: Final = MAX_TIMEOUT  # auth status may refresh a token over the network
# Variables that would make the CLI answer for themselves instead of the home.
_OVERRIDING: Final = ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN")
_SUBSCRIPTION: Final = "claude.ai"
_STATUS_EXITS: Final = {True: 0, False: 1}


def _fail(kind: ErrorKind, detail: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(kind, detail, harness="claude")


def parse_status(result: CommandResult) -> AccountCheck:
    """Read ``claude auth status --json``: stdout decides, and the exit status must agree."""
    if result.exit_code not in (0, 1):
        raise _fail(ErrorKind.COMMAND_FAILED, f"auth status exited {result.exit_code}")
    try:
        status: Any = json.loads(result.stdout)
    except (ValueError, RecursionError) as exc:
        raise _fail(ErrorKind.PARSE_FAILURE, "auth status did not print a JSON object") from exc
    if not isinstance(status, dict):
        raise _fail(ErrorKind.PARSE_FAILURE, "auth status did not print a JSON object")
    logged_in, method = status.get("loggedIn"), status.get("authMethod")
    if not isinstance(logged_in, bool) or not isinstance(method, str):
        raise _fail(ErrorKind.PARSE_FAILURE, "auth status has no loggedIn / authMethod")
    if result.exit_code != _STATUS_EXITS[logged_in]:
        raise _fail(ErrorKind.PARSE_FAILURE, "auth status exit status contradicts loggedIn")
    if not logged_in:
        return AccountCheck(signed_in=SignedIn.NO)
    if method != _SUBSCRIPTION or "apiKeySource" in status:
        raise _fail(ErrorKind.UNSUPPORTED,
                    "the home is signed in with something other than a Claude subscription")
    return AccountCheck(signed_in=SignedIn.YES, identity=AccountIdentity(
        email=identity_text(status.get("email")),
        plan=identity_text(status.get("subscriptionType"))))


class ClaudeAccounts:
    """Claude Code's own claude.ai sign-in, for homes clanker owns (``CLAUDE_CONFIG_DIR``)."""

    home_variable = HOME_VARIABLE

    def __init__(self, *, sign_in_timeout: float = SIGN_IN_TIMEOUT,
                 timeout: float = TIMEOUT) -> None:
        self._sign_in_timeout = sign_in_timeout
        self._timeout = timeout

    @staticmethod
    def _env(context: AccountContext) -> Mapping[str, str]:
        home = checked_home(context, HOME_VARIABLE, harness="claude")
        return {HOME_VARIABLE: home, **dict.fromkeys(_OVERRIDING, "")}

    def _auth(self, context: AccountContext, *args: str, timeout: float) -> CommandRequest:
        return CommandRequest(command="claude", args=("auth", *args), env=self._env(context),
                              timeout=timeout, attended=timeout > MAX_TIMEOUT)

    async def _status(self, context: AccountContext) -> AccountCheck:
        request = self._auth(context, "status", "--json", timeout=self._timeout)
        return parse_status(await context.executor.run(request))

    async def authenticate(
        self, context: AccountContext, show_url: Callable[[str], None]
    ) -> AccountIdentity:
        # Cancelling the run ends the CLI with SIGTERM, its own way out of a sign-in.
        login = self._auth(context, "login", "--claudeai", timeout=self._sign_in_timeout)
        ended = await context.executor.run(login)
        if ended.exit_code != 0:
            raise _fail(ErrorKind.UNAUTHENTICATED, "the sign-in did not complete")
        check = await self._status(context)
        if check.signed_in is not SignedIn.YES:
            raise _fail(ErrorKind.UNAUTHENTICATED, "the sign-in did not complete")
        return check.identity

    async def verify(self, context: AccountContext) -> AccountCheck:
        return await self._status(context)

    async def sign_out(self, context: AccountContext) -> AccountCheck:
        logout = self._auth(context, "logout", timeout=self._timeout)
        if (await context.executor.run(logout)).exit_code != 0:
            raise _fail(ErrorKind.COMMAND_FAILED, "auth logout failed")
        return await self._status(context)

implementation = ClaudeAccounts
