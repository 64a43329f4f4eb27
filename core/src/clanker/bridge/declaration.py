"""A host capability, declared once: what an agent may ask clanker to do.

::

    async def run(arguments: Arguments, caller: Caller, signal: Signal) -> dict[str, Any]:
        delivered = caller.host.notify(str(arguments["message"]))
        return {"delivered": delivered}

    NOTIFY = define_capability(
        name="clanker_notify",
        description="Send the person a short message.",
        input=Input(message=Text("What to tell the person.", max_length=200)),
        annotations=Annotations(read_only=False, idempotent=False),
        rate_limit=RateLimit(burst=3, per_seconds=10.0),
        run=run,
    )

The one declaration serves every transport (``clanker cmd`` today, the MCP
endpoint later): its :class:`~clanker.bridge.input.Input` is both the
advertised JSON Schema and the parser, and ``run`` receives only parsed
arguments, the caller resolved from the grid's live state on this very call
(:class:`Caller`, whose ``host`` acts for that caller alone), and a
:class:`Signal` that is aborted when the call is cut off (its time ran out,
the client went away, the grid is stopping). The task running ``run`` is
cancelled then too; a capability that hands work to a thread checks the
signal.

Arguments describe the operation only, never identity: a capability learns
who calls from ``caller`` and nowhere else. A result is one JSON object of
display-safe values (no control character other than newline and tab, no
bidirectional override), at most 64 KiB encoded; a larger or unsafe one is
refused, never cut. ``run`` raises :class:`CapabilityRefused` with one safe
sentence for an expected refusal; any other exception is a failure reported
without its text.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Protocol

from attrs import field, frozen

from clanker.bridge import wire
from clanker.bridge.input import MAX_DESCRIPTION, Arguments, Input
from clanker.execution import CommandRequest, CommandResult

if TYPE_CHECKING:
    from clanker.environment import HostFiles

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_GUIDANCE",
    "MAX_TIMEOUT",
    "Annotations",
    "BridgeHost",
    "Caller",
    "CapabilityRefused",
    "HostCapability",
    "PeerAgent",
    "RateLimit",
    "ResultRefused",
    "Run",
    "Signal",
    "check_result",
    "define_capability",
]

DEFAULT_TIMEOUT: Final = 10.0
MAX_TIMEOUT: Final = 60.0
MAX_GUIDANCE: Final = 300
MAX_RESULT: Final = wire.MAX_RESULT
_MAX_DEPTH: Final = 16
_UNSAFE: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
"""What a displayed string must not hold: controls (newline and tab aside), DEL, C1,
bidirectional overrides and isolates, lone surrogates."""


class CapabilityRefused(Exception):
    """Raised by ``run`` to refuse with one safe sentence (shown to the agent as it is)."""

    def __init__(self, message: str) -> None:
        if not isinstance(message, str) or not message.strip() or "\n" in message \
                or len(message) > 300:
            raise ValueError("a refusal is one line of at most 300 characters")
        self.message = message
        super().__init__(message)


class ResultRefused(ValueError):
    """A capability's result is not a bounded, display-safe JSON object."""

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        self.too_large = too_large
        super().__init__(message)


@frozen(kw_only=True)
class Annotations:
    """MCP's tool annotations: hints for a client, never authority."""

    read_only: bool = False
    """``readOnlyHint``: it changes nothing."""
    destructive: bool = False
    """``destructiveHint``: it may destroy something (meaningful when not read-only)."""
    idempotent: bool = False
    """``idempotentHint``: calling it again with the same arguments changes nothing more."""
    open_world: bool = False
    """``openWorldHint``: it reaches outside clanker's own state."""

    def to_json(self) -> dict[str, bool]:
        return {"readOnlyHint": self.read_only, "destructiveHint": self.destructive,
                "idempotentHint": self.idempotent, "openWorldHint": self.open_world}


@frozen(kw_only=True)
class RateLimit:
    """At most ``burst`` calls at once, then one per ``per_seconds``, per credential."""

    burst: int = field()
    per_seconds: float = field()

    @burst.validator
    def _burst(self, _: object, value: int) -> None:
        if type(value) is not int or not 1 <= value <= 1000:
            raise ValueError("burst: from 1 to 1000 calls")

    @per_seconds.validator
    def _per(self, _: object, value: float) -> None:
        if not isinstance(value, int | float) or isinstance(value, bool) \
                or not 0 < value <= 3600:
            raise ValueError("per_seconds: more than 0 and at most 3600")


@frozen(kw_only=True)
class PeerAgent:
    """Another live agent as the grid knows it (the capability decides what to show)."""

    harness: str
    attention: str
    since: datetime
    location: str
    """Where it works: an absolute path on the grid's host."""


class BridgeHost(Protocol):
    """What the host does for one caller (the grid implements it)."""

    def peers(self) -> tuple[PeerAgent, ...]:
        """The other live agents in the caller's workspace, oldest first."""
        ...

    def notify(self, message: str) -> int:
        """Show the person ``message`` from the caller; return how many watchers got it."""
        ...

    async def run_command(self, request: CommandRequest) -> CommandResult:
        """Run one bounded command where the caller's agent runs."""
        ...

    async def create_isolated_checkout(self, branch: str) -> dict[str, Any]:
        """Create a worktree of the caller's repository on the new ``branch`` and move
        the caller's conversation into it; the answer (``status``: ``created`` or
        ``already-isolated``, ``branch``, ``path``). Raises
        :class:`CapabilityRefused` with a one-line, typed reason."""
        ...

    async def complete_isolated_checkout(self, *, delete_branch: bool,
                                         discard_ignored: bool) -> dict[str, Any]:
        """Move the caller's conversation back to the main checkout and remove the
        worktree it ran in; the answer (``status``: ``completed``, ``already-complete``,
        ``dirty``, ``ignored-only`` or ``partial``). Raises :class:`CapabilityRefused`
        with a one-line, typed reason."""
        ...

    @property
    def files(self) -> HostFiles:
        """Read-only, bounded access to the files where the caller's agent runs (each
        method blocks: call it from a thread)."""
        ...


@frozen(kw_only=True)
class Caller:
    """Who is calling, resolved from the grid's live state on this call.

    An exited or retired terminal never resolves: it has no authority, even
    before its credential is revoked.
    """

    terminal: str
    harness: str
    workspace: str | None
    """The workspace the launch registered (an absolute path), or ``None``."""
    launch_dir: str
    """The directory the agent was launched in (absolute)."""
    environment: str
    """Where it runs (``local``)."""
    granted: tuple[str, ...]
    """The capability names its credential carries, sorted."""
    host: BridgeHost = field(eq=False, repr=False)
    """The host, acting for this caller alone."""


class Signal:
    """Aborted when a call is cut off: its time ran out, the client left, the grid stops."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._reason: str | None = None

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str | None:
        """``timeout``, ``cancelled``, or ``None`` while the call runs."""
        return self._reason

    def abort(self, reason: str) -> None:
        if not self._event.is_set():
            self._reason = reason
            self._event.set()

    async def wait(self) -> None:
        """Return once the call is aborted."""
        await self._event.wait()


Run = Callable[[Arguments, Caller, Signal], Awaitable[dict[str, Any]]]


def _name(_: object, __: object, value: str) -> None:
    if not wire.is_name(value):
        raise ValueError("name: [a-z][a-z0-9_]{0,63}")


def _description(_: object, __: object, value: str) -> None:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_DESCRIPTION \
            or _UNSAFE.search(value):
        raise ValueError(f"description: display-safe text of at most {MAX_DESCRIPTION} characters")


def _timeout(_: object, __: object, value: float) -> None:
    if not isinstance(value, int | float) or isinstance(value, bool) \
            or not 0 < value <= MAX_TIMEOUT:
        raise ValueError(f"timeout: more than 0 and at most {MAX_TIMEOUT:g} seconds")


def _guidance(_: object, __: object, value: str | None) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()
                              or len(value) > MAX_GUIDANCE or "\n" in value
                              or _UNSAFE.search(value)):
        raise ValueError(f"guidance: one display-safe line of at most {MAX_GUIDANCE} characters")


@frozen(kw_only=True)
class HostCapability:
    """One declared capability (build it with :func:`define_capability`)."""

    name: str = field(validator=_name)
    description: str = field(validator=_description)
    input: Input
    run: Run = field(eq=False, repr=False)
    timeout: float = field(default=DEFAULT_TIMEOUT, validator=_timeout)
    annotations: Annotations = Annotations()
    rate_limit: RateLimit | None = None
    guidance: str | None = field(default=None, validator=_guidance)
    """One sentence the launch's guidance carries when this capability is granted:
    when to use it (instead of what the harness would do on its own)."""

    def entry(self, *, invokable: bool = True) -> dict[str, Any]:
        """How listings show it (``cmd list``, later MCP's ``tools/list``)."""
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input.schema(),
            "annotations": self.annotations.to_json(),
            "timeout": self.timeout,
            "invokable": invokable,
        }


def define_capability(
    *,
    name: str,
    description: str,
    input: Input,
    run: Run,
    timeout: float = DEFAULT_TIMEOUT,
    annotations: Annotations | None = None,
    rate_limit: RateLimit | None = None,
    guidance: str | None = None,
) -> HostCapability:
    """Declare a host capability. ``timeout`` is at most 60 s (default 10 s);
    ``guidance`` is the sentence the launch's guidance adds when it is granted."""
    if not isinstance(input, Input):
        raise TypeError("input: an Input")
    if not callable(run):
        raise TypeError("run: an async function of (arguments, caller, signal)")
    return HostCapability(name=name, description=description, input=input, run=run,
                          timeout=float(timeout), annotations=annotations or Annotations(),
                          rate_limit=rate_limit, guidance=guidance)


def _check_scalar(value: object) -> None:
    if type(value) is int and abs(value) > 2**53 - 1:
        raise ResultRefused("the result holds an integer out of range")
    if type(value) is float and not math.isfinite(value):
        raise ResultRefused("the result holds a number that is not finite")
    if type(value) is str and _UNSAFE.search(value):
        raise ResultRefused("the result holds text that is not display-safe")


def _check(value: object, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise ResultRefused("the result nests too deeply")
    if value is None or type(value) in (bool, int, float, str):
        _check_scalar(value)
    elif type(value) is list:
        for item in value:
            _check(item, depth + 1)
    elif type(value) is dict:
        for key, item in value.items():
            if type(key) is not str or _UNSAFE.search(key):
                raise ResultRefused("the result holds a key that is not display-safe text")
            _check(item, depth + 1)
    else:
        raise ResultRefused("the result holds a value that is not JSON")


def check_result(value: object) -> dict[str, Any]:
    """Return ``value`` if it is a bounded, display-safe JSON object; else raise
    :class:`ResultRefused` (never a truncated copy)."""
    if type(value) is not dict:
        raise ResultRefused("the result is not an object")
    _check(value, 0)
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    if size > MAX_RESULT:
        raise ResultRefused(f"the result is {size} bytes, over {MAX_RESULT}", too_large=True)
    return value
