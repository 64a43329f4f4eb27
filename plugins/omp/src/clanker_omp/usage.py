"""Oh My Pi remaining quota, from ``omp usage --json``.

One process, no stdin, one pretty-printed JSON document on stdout, exit 0
whatever the credentials (verified against omp 18.2.3, see
docs/harnesses/omp.md "Usage"): ``{"generatedAt", "reports": [...],
"accountsWithoutUsage", "disabledCredentials", "capacity"}``. A report is one
credential's ``UsageReport`` (``pi-ai/src/usage.ts``) without ``raw``; its
``limits[]`` carry ``label``, ``scope``, ``window`` and ``amount``.

Upstream assumptions this parser relies on (omp 18.2.3 source and live runs):

* ``fetchedAt`` and ``window.resetsAt`` are epoch milliseconds; omp serves
  cached reports (about 5 minutes, and the last good one for up to 24 hours
  when a refresh fails), so the oldest ``fetchedAt`` is the honest data age.
* ``amount.unit`` is ``percent``, an absolute unit (``tokens``, ``requests``,
  ``credits``, ``usd``, ``minutes``, ``bytes``) or ``unknown`` (a bare
  ``remainingAmount`` omp could not place; skipped here, it names no unit).
* The account id of Codex chat windows and of every Anthropic row is only in
  ``metadata.accountId``; ``scope.tier`` also names model meters (Codex
  ``spark``), so it is never a plan.
* JSON mode cannot tell "no credentials" from "every fetch failed": both are
  ``reports: []``, exit 0. That is an ok reading with no measurements.

omp reads the credential store its environment selects
(``PI_CODING_AGENT_DIR``, ``OMP_PROFILE``, a broker): the probe passes no
environment of its own, so it reads what a launch from the same environment
would use.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import MAX_OUTPUT, CommandRequest
from clanker.execution.jsonlines import document_list
from clanker.usage.capability import (
    Measurement,
    MeasurementKind,
    Period,
    RefreshPolicy,
    Scope,
    UsageContext,
    UsageSnapshot,
    epoch_milliseconds,
    finite_number,
    label_text,
)

__all__ = ["POLICY", "OmpUsage", "parse_omp_usage", "usage_request"]

_HARNESS: Final = "omp"
# Start-up is 2-6 s; omp allows each upstream usage request 10 s (Claude retries).
_TIMEOUT: Final = 30.0
# About 1 KB per limit on stdout; a crash prints kilobytes of minified source
# on stderr first. The generous cap keeps a crash a command-failed.
_MAX_OUTPUT: Final = MAX_OUTPUT
# Epoch milliseconds between 1973 and 5138: a value in seconds (or garbage)
# is never read as a time.
_PERCENT_DIGITS: Final = 4  # removes float noise such as 19.999999999999996
_ABSOLUTE_DIGITS: Final = 6

# cache 60 s, hard minimum 60 s, failure backoff 120 s (spec, "Usage adapters").
# omp caches each report for about 5 minutes itself; the minimum bounds spawns.
POLICY: Final = RefreshPolicy(
    cache_ttl=timedelta(seconds=60),
    minimum_interval=timedelta(seconds=60),
    failure_backoff=timedelta(seconds=120),
)


def usage_request() -> CommandRequest:
    """Return the one command the probe runs (never ``omp usage invalidate``)."""
    return CommandRequest(
        command="omp", args=("usage", "--json"), timeout=_TIMEOUT, max_output_bytes=_MAX_OUTPUT
    )


class _Malformed(Exception):
    """One report or limit is not in the expected shape; it is skipped."""


def _parse_failure(detail: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(ErrorKind.PARSE_FAILURE, detail, harness=_HARNESS)


def _object(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _used_fraction(amount: Mapping[str, Any]) -> float | None:
    """omp's own precedence (``resolveUsedFraction``), for percent limits."""
    used_fraction = finite_number(amount.get("usedFraction"))
    if used_fraction is not None:
        return used_fraction
    used, limit = finite_number(amount.get("used")), finite_number(amount.get("limit"))
    if used is not None and limit is not None and limit > 0:
        return used / limit
    if used is not None:
        return used / 100
    remaining_fraction = finite_number(amount.get("remainingFraction"))
    if remaining_fraction is not None:
        return max(0.0, 1 - remaining_fraction)
    return None


def _percent(amount: Mapping[str, Any]) -> tuple[float, float, float] | None:
    """Return ``(used, remaining, limit)`` in percent, or ``None`` without numbers."""
    fraction = _used_fraction(amount)
    if fraction is None:
        return None
    # Negative fractions clamp to 0; overage (above 100) stays visible.
    used = round(max(fraction, 0.0) * 100, _PERCENT_DIGITS)
    return used, round(max(0.0, 100 - used), _PERCENT_DIGITS), 100.0


def _absolute(amount: Mapping[str, Any]) -> tuple[float | None, float | None, float | None] | None:
    """Return ``(used, remaining, limit)`` in the limit's own unit, or ``None`` without numbers."""
    used = finite_number(amount.get("used"))
    remaining = finite_number(amount.get("remaining"))
    limit = finite_number(amount.get("limit"))
    if limit is not None and limit < 0:
        raise _Malformed("a negative limit")
    if used is None and limit is not None and remaining is not None:
        used = limit - remaining
    if remaining is None and limit is not None and used is not None:
        remaining = limit - used
    if used is None and remaining is None:
        return None

    def tidy(value: float | None) -> float | None:
        return None if value is None else round(max(value, 0.0), _ABSOLUTE_DIGITS)

    return tidy(used), tidy(remaining), tidy(limit)


def _period(window: Mapping[str, Any]) -> tuple[Period, datetime | None]:
    resets_at = epoch_milliseconds(window.get("resetsAt"))
    starts_at = None
    duration = finite_number(window.get("durationMs"))
    if resets_at is not None and duration is not None and duration > 0:
        try:
            starts_at = resets_at - timedelta(milliseconds=duration)
        except OverflowError:
            starts_at = None
    period = Period(label=label_text(window.get("label")), starts_at=starts_at, ends_at=resets_at)
    return period, resets_at


def _measurement(
    limit: object, report_provider: str, metadata: Mapping[str, Any]
) -> Measurement | None:
    """Return one limit's measurement, ``None`` when it carries no number."""
    if not isinstance(limit, dict):
        raise _Malformed("a limit is not an object")
    label, amount = label_text(limit.get("label")), limit.get("amount")
    if label is None or not isinstance(amount, dict):
        raise _Malformed("a limit has no label or amount")
    unit = amount.get("unit")
    if not isinstance(unit, str):
        raise _Malformed("an amount has no unit")
    if unit == "unknown":
        return None  # a number of no stated unit: nothing a person could read
    if label_text(unit) is None:
        raise _Malformed("an amount unit is not text")
    values = _percent(amount) if unit == "percent" else _absolute(amount)
    if values is None:
        return None
    used, remaining, maximum = values
    scope = _object(limit.get("scope"))
    window = limit.get("window")
    if unit == "tokens":
        kind = MeasurementKind.TOKENS
    elif unit == "usd":
        kind = MeasurementKind.SPEND
    elif isinstance(window, dict):
        kind = MeasurementKind.RATE_LIMIT
    else:
        kind = MeasurementKind.ALLOWANCE
    period, resets_at = _period(window) if isinstance(window, dict) else (None, None)
    return Measurement(
        kind=kind,
        unit=unit,
        label=label,
        scope=Scope(
            provider_id=label_text(scope.get("provider")) or report_provider,
            account_id=label_text(scope.get("accountId")) or label_text(metadata.get("accountId")),
            account_label=label_text(metadata.get("email")),
            plan_label=label_text(metadata.get("planType")) or label_text(metadata.get("plan")),
            model_id=label_text(scope.get("modelId")),
        ),
        used=used,
        remaining=remaining,
        limit=maximum,
        period=period,
        resets_at=resets_at,
    )


def parse_omp_usage(stdout: str, *, completed_at: datetime) -> UsageSnapshot:
    """Turn ``omp usage --json`` stdout into a snapshot.

    Malformed reports and limits are skipped while valid ones survive; if
    something was malformed and no measurement remains, ``parse-failure``.
    ``observed_at`` is the oldest valid report's ``fetchedAt``, else
    ``completed_at`` (when the probe finished).
    """
    _, reports = document_list(stdout, "reports", command="omp usage --json", harness=_HARNESS)
    measurements: list[Measurement] = []
    fetched: list[datetime] = []
    malformed = False
    for report in reports:
        provider = label_text(report.get("provider")) if isinstance(report, dict) else None
        if provider is None or not isinstance(report.get("limits"), list):
            malformed = True
            continue
        fetched_at = epoch_milliseconds(report.get("fetchedAt"))
        if fetched_at is not None:
            fetched.append(fetched_at)
        metadata = _object(report.get("metadata"))
        shared_groups: set[str] = set()
        for limit in report["limits"]:
            try:
                group = _object(_object(limit).get("scope")).get("sharedGroup")
                if isinstance(group, str) and group in shared_groups:
                    continue  # another counter's copy of a quota already read
                measurement = _measurement(limit, provider, metadata)
            except (_Malformed, ValueError, TypeError):
                malformed = True
                continue
            if measurement is None:
                continue
            if isinstance(group, str):
                shared_groups.add(group)
            measurements.append(measurement)
    if malformed and not measurements:
        raise _parse_failure("no report or limit was in the expected format")
    return UsageSnapshot(observed_at=min(fetched, default=completed_at), measurements=measurements)


class OmpUsage:
    """Every omp credential's quota, as omp itself reports it."""

    policy = POLICY

    async def probe(self, context: UsageContext) -> UsageSnapshot:
        result = await context.executor.run(usage_request())
        # Non-zero: argv or configuration errors, or a crash (stderr may hold
        # minified source). Neither stream is read.
        result.require_success(_HARNESS)
        return parse_omp_usage(result.stdout, completed_at=datetime.now(UTC))


implementation = OmpUsage
