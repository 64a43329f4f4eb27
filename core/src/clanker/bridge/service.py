"""The capability plane's one authority: credentials, grants, live callers, bounded calls.

:class:`BridgeService` is what every transport calls: ``clanker cmd`` through
the grid's socket today, the MCP endpoint later. It owns

* the credentials (:class:`~clanker.bridge.credentials.BridgeCredentials`):
  minting for a terminal the grid vouches for, revoking, resolving;
* the caller: every request re-derives it from the grid's live state (the
  :class:`BridgeGrid` port). The terminal must still be live, with the very
  record its credential was bound to, and its launcher still running: an
  exited terminal has no authority even before its credential is revoked;
* the grant: a credential lists, describes and runs only the names it
  carries, and an ungranted name is refused exactly as an unknown one;
* the call: arguments through the declaration's parser (nothing undeclared
  reaches ``run``), a per-credential rate limit where one is declared, at
  most :data:`MAX_RUNNING` calls at once (:data:`MAX_RUNNING_PER_CREDENTIAL`
  per credential), the declared time bound with cancellation (the signal is
  aborted, then the task cancelled), and the result bounded and display-safe.

Every refusal is a :class:`BridgeRefusal` carrying one of the wire's error
words and, where it helps, one safe sentence. A refused request changes
nothing (a call refused for its rate does not consume it).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final, Protocol

from clanker._logging import get_logger
from clanker.bridge import wire
from clanker.bridge.credentials import Binding, BridgeCredentials, Grant
from clanker.bridge.declaration import (
    BridgeHost,
    Caller,
    CapabilityRefused,
    HostCapability,
    ResultRefused,
    Signal,
    check_result,
)
from clanker.bridge.input import InvalidArguments

__all__ = [
    "MAX_RUNNING",
    "MAX_RUNNING_PER_CREDENTIAL",
    "BridgeGrid",
    "BridgeRefusal",
    "BridgeService",
]

log = get_logger(__name__)

MAX_RUNNING: Final = 32
MAX_RUNNING_PER_CREDENTIAL: Final = 8


class BridgeRefusal(Exception):
    """A refused request: ``word`` goes on the wire, ``message`` (safe, optional) with it."""

    def __init__(self, word: str, message: str | None = None) -> None:
        self.word = word
        self.message = message
        super().__init__(f"{word}: {message}" if message else word)


class BridgeGrid(Protocol):
    """What the service asks of the grid that owns the terminals."""

    def binding(self, terminal: str) -> Binding | None:
        """``terminal``'s record as it is now, or ``None`` unless it is live and its
        launcher runs."""
        ...

    def host_for(self, binding: Binding) -> BridgeHost:
        """The host acting for that terminal."""
        ...


class _Bucket:
    __slots__ = ("stamp", "tokens")

    def __init__(self, tokens: float, stamp: float) -> None:
        self.tokens = tokens
        self.stamp = stamp


class BridgeService:
    """Credentials, grants and calls for one grid (event-loop thread only)."""

    def __init__(
        self,
        grid: BridgeGrid,
        capabilities: Iterable[HostCapability],
        *,
        clock: Callable[[], float] = time.monotonic,
        max_running: int = MAX_RUNNING,
        max_running_per_credential: int = MAX_RUNNING_PER_CREDENTIAL,
    ) -> None:
        table: dict[str, HostCapability] = {}
        for capability in capabilities:
            if not isinstance(capability, HostCapability):
                raise TypeError("capabilities: HostCapability values (define_capability)")
            if capability.name in table:
                raise ValueError(f"capability {capability.name} is declared twice")
            table[capability.name] = capability
        self._grid = grid
        self._capabilities: Mapping[str, HostCapability] = MappingProxyType(table)
        self._credentials = BridgeCredentials()
        self._clock = clock
        self._max_running = max_running
        self._max_per_credential = max_running_per_credential
        self._running: dict[str, int] = {}
        self._buckets: dict[tuple[str, str], _Bucket] = {}

    @property
    def capabilities(self) -> Mapping[str, HostCapability]:
        """Every capability this grid offers, by name."""
        return self._capabilities

    @property
    def running(self) -> int:
        """Calls in flight."""
        return sum(self._running.values())

    # ------------------------------------------------------------- credentials

    def grant(self, binding: Binding, names: Iterable[str]) -> str:
        """Mint ``binding.terminal``'s credential for ``names``; return the raw value.

        Every name must be one of :attr:`capabilities` (``unknown-capability``
        otherwise, and nothing is minted). A terminal that had a credential has
        it revoked first.
        """
        wanted = list(names)
        if not wanted or any(name not in self._capabilities for name in wanted):
            raise BridgeRefusal(wire.UNKNOWN_CAPABILITY, "a granted name is not a capability")
        self._forget(binding.terminal)
        return self._credentials.mint(binding, wanted)

    def adopt(self, binding: Binding, names: Iterable[str], token: str) -> None:
        """:meth:`grant`, carrying ``token``, the credential ``binding``'s agent already
        holds (its terminal was re-presented to this grid); ``unknown-capability`` as
        for a grant, ``ValueError`` when the token cannot be taken."""
        wanted = list(names)
        if not wanted or any(name not in self._capabilities for name in wanted):
            raise BridgeRefusal(wire.UNKNOWN_CAPABILITY, "a granted name is not a capability")
        self._credentials.adopt(binding, wanted, token)

    def revoke(self, terminal: str) -> bool:
        """Revoke ``terminal``'s credential (idempotent); say whether it had one."""
        self._forget(terminal)
        return self._credentials.revoke(terminal)

    def _forget(self, terminal: str) -> None:
        for key in [k for k in self._buckets if k[0] == terminal]:
            del self._buckets[key]

    def granted(self, terminal: str) -> tuple[str, ...]:
        """The names ``terminal``'s live credential carries, sorted (empty: none)."""
        grant = self._credentials.grant_of(terminal)
        return () if grant is None else tuple(sorted(grant.names))

    def caller(self, token: object) -> Caller:
        """Resolve ``token`` against the grid's live state, or refuse ``unauthorized``."""
        grant = self._credentials.resolve(token)
        if grant is None:
            raise BridgeRefusal(wire.UNAUTHORIZED)
        live = self._grid.binding(grant.binding.terminal)
        if live is None or live != grant.binding:
            raise BridgeRefusal(wire.UNAUTHORIZED)
        return self._caller(grant)

    def _caller(self, grant: Grant) -> Caller:
        binding = grant.binding
        return Caller(terminal=binding.terminal, harness=binding.harness,
                      workspace=binding.workspace, launch_dir=binding.launch_dir,
                      environment=binding.environment, granted=tuple(sorted(grant.names)),
                      host=self._grid.host_for(binding))

    def _granted(self, caller: Caller, name: object) -> HostCapability:
        # An ungranted name is answered exactly as an unknown one.
        capability = self._capabilities.get(name) if isinstance(name, str) else None
        if capability is None or name not in caller.granted:
            raise BridgeRefusal(wire.UNKNOWN_CAPABILITY)
        return capability

    # ------------------------------------------------------------- discovery

    def entries(self, token: object) -> list[dict[str, Any]]:
        """What ``token`` may run: exactly its grant, by name."""
        caller = self.caller(token)
        return [self._capabilities[name].entry() for name in caller.granted]

    def all_entries(self) -> list[dict[str, Any]]:
        """Every capability, each marked non-invokable (for a person, never an agent)."""
        return [self._capabilities[name].entry(invokable=False)
                for name in sorted(self._capabilities)]

    def describe(self, token: object, name: object) -> dict[str, Any]:
        """One granted capability's entry."""
        return self._granted(self.caller(token), name).entry()

    # ----------------------------------------------------------------- calls

    async def call(
        self,
        token: object,
        name: object,
        *,
        arguments: object = None,
        text_arguments: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Run one granted capability for ``token``'s caller and return its result.

        ``arguments`` is decoded JSON (``None``: no arguments); ``text_arguments``
        are command-line strings the declaration types first. Raises
        :class:`BridgeRefusal`.
        """
        caller = self.caller(token)
        capability = self._granted(caller, name)
        try:
            if text_arguments is not None:
                parsed = capability.input.parse_text(text_arguments)
            else:
                parsed = capability.input.parse({} if arguments is None else arguments)
        except InvalidArguments as exc:
            raise BridgeRefusal(wire.INVALID_ARGUMENTS, str(exc)) from None
        if self.running >= self._max_running \
                or self._running.get(caller.terminal, 0) >= self._max_per_credential:
            raise BridgeRefusal(wire.CAPACITY, "too many calls at once")
        self._take(caller.terminal, capability)
        self._running[caller.terminal] = self._running.get(caller.terminal, 0) + 1
        try:
            return await self._run(capability, parsed, caller)
        finally:
            left = self._running[caller.terminal] - 1
            if left:
                self._running[caller.terminal] = left
            else:
                del self._running[caller.terminal]

    def _take(self, terminal: str, capability: HostCapability) -> None:
        limit = capability.rate_limit
        if limit is None:
            return
        now = self._clock()
        key = (terminal, capability.name)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(limit.burst), now)
        bucket.tokens = min(float(limit.burst),
                            bucket.tokens + (now - bucket.stamp) / limit.per_seconds)
        bucket.stamp = now
        if bucket.tokens < 1.0:
            wait = max(1, round((1.0 - bucket.tokens) * limit.per_seconds + 0.5))
            raise BridgeRefusal(wire.RATE_LIMITED,
                                f"{capability.name} allows {limit.burst} calls, then one every "
                                f"{limit.per_seconds:g} s; try again in {wait} s")
        bucket.tokens -= 1.0

    async def _run(self, capability: HostCapability, arguments: Any, caller: Caller
                   ) -> dict[str, Any]:
        signal = Signal()
        task = asyncio.ensure_future(capability.run(arguments, caller, signal))
        try:
            done, _ = await asyncio.wait({task}, timeout=capability.timeout)
        except asyncio.CancelledError:
            # The client went away, or the grid is stopping: cut the call off too.
            signal.abort("cancelled")
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise
        if not done:
            signal.abort("timeout")
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            log.warning("%s ran past its %g s", capability.name, capability.timeout)
            raise BridgeRefusal(wire.TIMEOUT,
                                f"{capability.name} did not finish within "
                                f"{capability.timeout:g} s")
        try:
            result = task.result()
        except CapabilityRefused as exc:
            raise BridgeRefusal(wire.CAPABILITY_FAILED, exc.message) from None
        except asyncio.CancelledError:
            raise BridgeRefusal(wire.CAPABILITY_FAILED, "the call was cancelled") from None
        except Exception as exc:
            log.error("%s failed: %s", capability.name, type(exc).__name__)
            raise BridgeRefusal(wire.CAPABILITY_FAILED) from None
        try:
            return check_result(result)
        except ResultRefused as exc:
            log.error("%s returned a result it may not: %s", capability.name, exc)
            word = wire.RESULT_TOO_LARGE if exc.too_large else wire.CAPABILITY_FAILED
            raise BridgeRefusal(word) from None
