"""The accounts contract: what a harness provider owns of a managed account.

A managed account is a home directory clanker owns (created, verified and
removed by the shared accounts service), which the harness is pointed at
through one environment variable (``home_variable``). The provider owns only
the harness's own protocol for that home: sign in, say who is signed in,
sign out. It never chooses, creates or removes a home, never reads or writes
the harness's credential files, and never lets the harness's output reach
the person (failures are typed errors with fixed messages).

Every method runs under the :class:`AccountContext` it is handed, whose
``environment`` already points the harness at the home, through the
context's executors (so the same provider serves wherever the harness runs).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Final, Protocol, runtime_checkable

from attrs import field, frozen

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandExecutor, SessionExecutor

__all__ = [
    "AccountCheck",
    "AccountContext",
    "AccountIdentity",
    "AccountsCapability",
    "SignedIn",
    "checked_home",
    "identity_text",
]

IDENTITY_LIMIT: Final = 320
"""The longest text :func:`identity_text` keeps (an e-mail address is at most 320)."""


@frozen(kw_only=True, hash=False)
class AccountContext:
    """One managed account's home, as a provider sees it."""

    home: str
    """The account's home: absolute, canonical, verified to be clanker's own."""
    environment: Mapping[str, str] = field(repr=False)
    """The environment the harness runs with: the user's, with ``home_variable`` set
    to :attr:`home` (and nothing else changed)."""
    executor: CommandExecutor = field(repr=False)
    """Runs one bounded command where the harness runs, pointed at the home (every
    request gets ``home_variable``)."""
    sessions: SessionExecutor = field(repr=False)
    """Opens one bounded stdio session where the harness runs (a JSON-RPC server),
    pointed at the home the same way."""


@frozen(kw_only=True)
class AccountIdentity:
    """Who is signed in, as far as the harness reports it in structured fields (never
    invented: each is ``None`` when the harness does not say)."""

    email: str | None = None
    plan: str | None = None


class SignedIn(enum.StrEnum):
    """What the harness says of the home's sign-in."""

    YES = "yes"
    """A usable account is signed in."""
    NO = "no"
    """The harness says, in its own structured answer, that nobody is signed in."""


@frozen(kw_only=True)
class AccountCheck:
    """The harness's answer about one home."""

    signed_in: SignedIn
    identity: AccountIdentity = AccountIdentity()


def checked_home(context: AccountContext, variable: str, *, harness: str) -> str:
    """Return the account's home when ``context.environment`` points ``variable`` at it.

    Raise ``not-configured`` otherwise, before anything runs: the harness would
    use whatever home the variable names instead, or its default one.
    """
    if context.environment.get(variable) != context.home:
        raise HarnessCapabilityError(ErrorKind.NOT_CONFIGURED,
                                     f"the environment does not set {variable}", harness=harness)
    return context.home


def identity_text(value: object) -> str | None:
    """Return ``value`` as an :class:`AccountIdentity` field: printable text that is not
    blank, of at most :data:`IDENTITY_LIMIT` characters, as given; ``None`` for anything
    else (the harness's value is then not shown, never cut or cleaned)."""
    if isinstance(value, str) and value.strip() and value.isprintable() \
            and len(value) <= IDENTITY_LIMIT:
        return value
    return None


@runtime_checkable
class AccountsCapability(Protocol):
    """One harness's sign-in protocol, for homes clanker owns."""

    home_variable: str
    """The environment variable that points the harness at an account's home directory."""

    async def authenticate(
        self, context: AccountContext, show_url: Callable[[str], None]
    ) -> AccountIdentity:
        """Run the harness's own sign-in for ``context.home`` until it completes.

        ``show_url`` is called once with the ``http(s)`` sign-in URL when the harness
        gives one (clanker shows it and may open a browser). Returning means the
        harness verified the account. Cancelling the task runs the harness's own
        cancel before its process is reaped. Failures raise
        :class:`~clanker.errors.HarnessCapabilityError` (``unauthenticated`` when
        the sign-in did not complete, ``timeout``, ``command-failed``, ...).
        """
        ...

    async def verify(self, context: AccountContext) -> AccountCheck:
        """Ask the harness who is signed in to ``context.home``; a failure to find out
        raises (it is never reported as signed out)."""
        ...

    async def sign_out(self, context: AccountContext) -> AccountCheck:
        """Sign ``context.home`` out through the harness (its secure-store entries
        included) and return the harness's answer afterwards: ``SignedIn.NO`` is the
        proof the home may be deleted. A failure raises."""
        ...
