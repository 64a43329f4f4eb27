"""When a usage probe may run: the refresh policy as a pure decision.

Three clocks guard every harness (and account): the cache TTL, which an
ordinary read honours and a manual refresh may bypass; the hard minimum
interval between probes and the failure backoff, which nothing bypasses; and
a harness's own ``retry_after``. A manual refresh also waits for clanker's
10 s floor. Keeping this a pure function of (state, now, force) is what lets a
state machine test prove the hard limits are never broken.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from attrs import field, frozen

__all__ = ["MANUAL_REFRESH_FLOOR", "Decision", "ProbeState", "RefreshPolicy", "decide"]

MANUAL_REFRESH_FLOOR: Final = timedelta(seconds=10)


def _positive(_: object, attribute: object, value: timedelta) -> None:
    if value < timedelta(0):
        raise ValueError(f"{getattr(attribute, 'name', 'value')}: must not be negative")


@frozen(kw_only=True)
class RefreshPolicy:
    """A provider's refresh policy (the spec's defaults: 5 min cache, 60 s backoff)."""

    cache_ttl: timedelta = field(default=timedelta(minutes=5), validator=_positive)
    minimum_interval: timedelta = field(default=timedelta(0), validator=_positive)
    failure_backoff: timedelta = field(default=timedelta(seconds=60), validator=_positive)


@frozen(kw_only=True)
class ProbeState:
    """What is remembered about one (environment, harness, account)."""

    last_probe_at: datetime | None = None  # when the latest probe started
    last_success_at: datetime | None = None
    last_failure_at: datetime | None = None  # set when the latest probe failed
    retry_after_until: datetime | None = None


@frozen(kw_only=True)
class Decision:
    """Whether to probe now, and when the next ordinary / manual refresh may happen."""

    probe: bool
    next_refresh_at: datetime | None
    refreshable_at: datetime


def _latest(*moments: datetime | None) -> datetime | None:
    present = [m for m in moments if m is not None]
    return max(present) if present else None


def decide(state: ProbeState, policy: RefreshPolicy, now: datetime, *, force: bool) -> Decision:
    """Decide whether a read at ``now`` probes; never past a hard limit."""
    hard = _latest(
        state.last_probe_at + policy.minimum_interval if state.last_probe_at else None,
        state.last_failure_at + policy.failure_backoff if state.last_failure_at else None,
        state.retry_after_until,
    )
    floor = state.last_probe_at + MANUAL_REFRESH_FLOOR if state.last_probe_at else None
    refreshable_at = _latest(hard, floor) or now
    fresh_until = state.last_success_at + policy.cache_ttl if state.last_success_at else None
    next_refresh_at = _latest(fresh_until, hard)
    if hard is not None and now < hard:
        return Decision(probe=False, next_refresh_at=next_refresh_at,
                        refreshable_at=refreshable_at)
    # A manual refresh may skip the cache, never the floor; an ordinary read waits.
    probe = now >= refreshable_at if force else fresh_until is None or now >= fresh_until
    return Decision(probe=probe, next_refresh_at=next_refresh_at, refreshable_at=refreshable_at)
