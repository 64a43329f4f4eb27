"""The usage contract: what a provider implements to read remaining quota, and
what a probe is handed.

A plugin imports its usage types (and the strict value readers its parser
shares) from here.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from attrs import frozen

from clanker.environment import HostContext
from clanker.usage.parsing import epoch_milliseconds, finite_number, label_text, offset_timestamp
from clanker.usage.policy import RefreshPolicy
from clanker.usage.types import Measurement, MeasurementKind, Period, Scope, UsageSnapshot

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
