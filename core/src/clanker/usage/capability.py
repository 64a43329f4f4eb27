"""The usage contract: what a provider implements to read remaining quota, and
what a probe is handed.

A plugin imports its usage types (and the strict value readers its parser
shares) from here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from attrs import evolve, frozen

from clanker.environment import HostContext
from clanker.usage.parsing import epoch_milliseconds, finite_number, label_text, offset_timestamp
from clanker.usage.policy import RefreshPolicy
from clanker.usage.types import Measurement, MeasurementKind, Period, Scope, UsageSnapshot

if TYPE_CHECKING:
    from clanker.execution import CommandRequest, LineSession

__all__ = [
    "Measurement",
    "MeasurementKind",
    "Period",
    "RefreshPolicy",
    "Scope",
    "UsageCapability",
    "UsageContext",
    "UsageSnapshot",
    "epoch_milliseconds",
    "finite_number",
    "label_text",
    "offset_timestamp",
    "probe_session",
]


@frozen(kw_only=True)
class UsageContext(HostContext):
    """The environment's bound pieces and the account asked about; never a path,
    target or credential."""

    account_id: str | None = None


@runtime_checkable
class UsageCapability(Protocol):
    """Reads remaining quota from the harness's own authenticated interface."""

    policy: RefreshPolicy
    """Cache TTL, hard minimum probe interval and failure backoff for this harness."""

    async def probe(self, context: UsageContext) -> UsageSnapshot:
        """Return one snapshot (possibly with no measurements), or raise a typed failure:
        ``unauthenticated`` when signed out, ``unsupported`` when the account or version
        has no quota interface, ``parse-failure`` for unrecognized output."""
        ...


async def probe_session(
    context: UsageContext,
    request: CommandRequest,
    read: Callable[[LineSession], Awaitable[UsageSnapshot]],
    *,
    harness: str,
    process: str,
) -> UsageSnapshot:
    """Return the snapshot ``read`` makes of one stdio session opened for ``request``.

    The session is the context's (``unsupported`` where the environment has none).
    What ``read`` made counts only once the process has exited 0 after its input
    was closed (``command-failed`` "<process> exited <status>" otherwise), and the
    snapshot is observed then: its ``observed_at`` is when the session ended.
    """
    from clanker.execution.jsonlines import end_cleanly  # here: the contract stays light

    sessions = context.require_sessions(harness)
    async with await sessions.open(request) as session:
        snapshot = await read(session)
        await end_cleanly(session, harness=harness, process=process)
    return evolve(snapshot, observed_at=datetime.now(UTC))
