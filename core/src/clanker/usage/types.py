"""The usage measurement model: what a quota reading is, whatever the harness.

Nothing here is summed across harnesses and no identity is invented: a
measurement carries the scope its source reported (provider, account, plan,
model) and nothing more.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from attrs import field, frozen

__all__ = ["Measurement", "MeasurementKind", "Period", "Scope", "UsageSnapshot"]


class MeasurementKind(enum.StrEnum):
    RATE_LIMIT = "rate-limit"  # a rolling window that refills (5 hours, a week)
    ALLOWANCE = "allowance"  # an amount granted for a period
    TOKENS = "tokens"
    SPEND = "spend"


def _aware(_: object, attribute: Any, value: Any) -> None:
    if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
        raise ValueError(f"{attribute.name}: must be a timestamp with a time zone")


def _number(_: object, attribute: Any, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{attribute.name}: must be a finite number")


def _label(_: object, attribute: Any, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value.strip() or not value.isprintable():
        raise ValueError(f"{attribute.name}: must be printable text")


@frozen(kw_only=True)
class Period:
    """The window a measurement covers."""

    label: str | None = field(default=None, validator=_label)
    starts_at: datetime | None = field(default=None, validator=_aware)
    ends_at: datetime | None = field(default=None, validator=_aware)


@frozen(kw_only=True)
class Scope:
    """Whose quota this is. ``account_id`` is an opaque grouping key, kept internal."""

    provider_id: str = field(validator=_label)
    account_id: str | None = field(default=None, validator=_label)
    account_label: str | None = field(default=None, validator=_label)
    plan_label: str | None = field(default=None, validator=_label)
    model_id: str | None = field(default=None, validator=_label)


@frozen(kw_only=True)
class Measurement:
    """One meter. ``unit`` is ``"percent"`` or an absolute unit (``"usd"``, ``"tokens"``).

    At least one of ``used`` / ``remaining`` is known; ``limit`` when the
    source states it (100 for percent meters). Overage stays visible: a used
    value above the limit is kept, never clamped.
    """

    kind: MeasurementKind
    unit: str = field(validator=_label)
    label: str = field(validator=_label)
    scope: Scope
    used: float | None = field(default=None, validator=_number)
    remaining: float | None = field(default=None, validator=_number)
    limit: float | None = field(default=None, validator=_number)
    period: Period | None = None
    resets_at: datetime | None = field(default=None, validator=_aware)
    description: str | None = field(default=None, validator=_label)
    """The source's own explanation of the meter, when it gives one."""

    def __attrs_post_init__(self) -> None:
        if self.used is None and self.remaining is None:
            raise ValueError("measurement: needs used or remaining")

    @property
    def remaining_percent(self) -> float | None:
        """Remaining share of the limit in percent, when that can be known."""
        if self.unit == "percent":
            if self.remaining is not None:
                return self.remaining
            return None if self.used is None else max(0.0, 100.0 - self.used)
        if self.limit and self.remaining is not None:
            return 100.0 * self.remaining / self.limit
        if self.limit and self.used is not None:
            return max(0.0, 100.0 * (self.limit - self.used) / self.limit)
        return None


def _measurements(values: Iterable[Measurement]) -> tuple[Measurement, ...]:
    return tuple(values)


@frozen(kw_only=True)
class UsageSnapshot:
    """A provider's reading: zero or more measurements, when it was observed."""

    observed_at: datetime = field(validator=_aware)
    measurements: tuple[Measurement, ...] = field(default=(), converter=_measurements)
