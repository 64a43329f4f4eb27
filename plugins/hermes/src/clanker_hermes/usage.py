"""Hermes Agent remaining quota, from ``hermes usage --json``.

One process, no stdin, no agent started: the account-limits block of
Hermes's ``/usage`` for the configured provider, with the credentials a chat
would use. Hermes documents the command (``website/docs/reference/
cli-commands.md``, "keys are stable; new keys may be added")::

    {"provider": "openai-codex", "source": "usage_api", "title": "Account limits",
     "plan": "Plus", "fetched_at": "2026-09-19T07:58:55+00:00",
     "windows": [{"label": "Session", "used_percent": 37.0,
                  "resets_at": "2026-09-19T21:00:00+00:00", "detail": null}],
     "details": [...], "unavailable_reason": null}

Exit 0 on success; exit 1 with one free-text stderr line when no credential
is configured, the provider has no usage endpoint, or the fetch failed.

Upstream assumptions this parser relies on:

* hermes-agent 0.19.0 (the version checked here) has no ``usage`` command:
  argparse exits 2 with ``invalid choice: 'usage'`` on stderr. That one
  phrase is the only thing ever read from Hermes's stderr, because nothing on
  stdout or in the exit status (2 is every argparse error) tells a version
  without the command from a broken invocation; it is reported as
  ``unsupported`` rather than as a failure that would never clear.
* Timestamps come from Python ``isoformat()``: always an offset, sometimes
  microseconds.
* ``used_percent`` is 0-100. Hermes scales Anthropic utilizations of 1 or less
  by 100 itself, so a true 1 % reads as 100 %: an upstream quirk that cannot
  be corrected here.
* No account identity is documented, so none is produced.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Final

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, CommandResult
from clanker.execution.jsonlines import document_list
from clanker.stores import clean_text
from clanker.usage.capability import (
    Measurement,
    MeasurementKind,
    Period,
    RefreshPolicy,
    Scope,
    UsageContext,
    UsageSnapshot,
    label_text,
    offset_timestamp,
)

__all__ = ["POLICY", "HermesUsage", "interpret_result", "parse_hermes_usage", "usage_request"]

_HARNESS: Final = "hermes"
# Python start-up and plugin discovery take 2-4 s, then one provider request
# with a 10-15 s client timeout.
_TIMEOUT: Final = 30.0
_ARGPARSE_USAGE_ERROR: Final = 2
_NO_USAGE_COMMAND: Final = re.compile(r"invalid choice: ['\"]?usage['\"]?(?![\w-])")
# Python 3.14's argparse may colour its errors (FORCE_COLOR, PYTHON_COLORS).
_ANSI: Final = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")

# cache 60 s, hard minimum 60 s, failure backoff 300 s (spec, "Usage adapters"):
# every call is a live provider request, and exit 1 is often a lasting
# "not configured", so failures are not retried every minute.
POLICY: Final = RefreshPolicy(
    cache_ttl=timedelta(seconds=60),
    minimum_interval=timedelta(seconds=60),
    failure_backoff=timedelta(seconds=300),
)


def usage_request() -> CommandRequest:
    """Return the one command the probe runs."""
    return CommandRequest(command="hermes", args=("usage", "--json"), timeout=_TIMEOUT)


def _parse_failure(detail: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(ErrorKind.PARSE_FAILURE, detail, harness=_HARNESS)


def _used_percent(value: object) -> float | None:
    """``None`` for a window without a number; a parse failure for a bad one."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _parse_failure("a window's used_percent is not a number")
    try:
        number = float(value)
    except OverflowError as exc:
        raise _parse_failure("a window's used_percent is out of range") from exc
    if not math.isfinite(number) or not 0 <= number <= 100:
        raise _parse_failure("a window's used_percent is outside 0-100")
    return number


def parse_hermes_usage(stdout: str, *, completed_at: datetime) -> UsageSnapshot:
    """Turn ``hermes usage --json`` stdout (exit 0) into a snapshot.

    Strict, as the spec asks: a bad root, windows list, window label or
    used_percent is a ``parse-failure``; a window whose used_percent is null
    is skipped; an unreadable resets_at/fetched_at is only omitted. With
    ``unavailable_reason`` set and no measurement: ``unsupported``.
    """
    document, windows = document_list(
        stdout, "windows", command="hermes usage --json", harness=_HARNESS
    )
    provider = label_text(document.get("provider"))
    if provider is None:
        raise _parse_failure("the document names no provider")
    reason = document.get("unavailable_reason")
    if reason is not None and not isinstance(reason, str):
        raise _parse_failure("unavailable_reason is not text")
    scope = Scope(provider_id=provider, plan_label=label_text(document.get("plan")))
    measurements = []
    for window in windows:
        label = label_text(window.get("label")) if isinstance(window, dict) else None
        if label is None:
            raise _parse_failure("a window has no label")
        used = _used_percent(window.get("used_percent"))
        if used is None:
            continue  # the provider did not report this window
        resets_at = offset_timestamp(window.get("resets_at"))
        measurements.append(
            Measurement(
                kind=MeasurementKind.RATE_LIMIT if resets_at else MeasurementKind.ALLOWANCE,
                unit="percent",
                label=label,
                scope=scope,
                used=used,
                remaining=100 - used,
                limit=100.0,
                period=Period(label=label),
                resets_at=resets_at,
                # The spec maps a window's detail to its description (one line, printable).
                description=clean_text(window.get("detail")),
            )
        )
    if reason is not None and reason.strip() and not measurements:
        # Free text (an API key where OAuth is needed, ...): only its presence is used.
        raise HarnessCapabilityError(
            ErrorKind.UNSUPPORTED, "the configured provider reports no usage", harness=_HARNESS
        )
    observed_at = offset_timestamp(document.get("fetched_at")) or completed_at
    return UsageSnapshot(observed_at=observed_at, measurements=measurements)


def interpret_result(result: CommandResult, *, completed_at: datetime) -> UsageSnapshot:
    """Map a finished ``hermes usage --json`` run to a snapshot or a typed failure."""
    if (
        result.exit_code == _ARGPARSE_USAGE_ERROR
        and not result.stdout.strip()
        and _NO_USAGE_COMMAND.search(_ANSI.sub("", result.stderr))
    ):
        raise HarnessCapabilityError(
            ErrorKind.UNSUPPORTED, "this Hermes version has no usage command", harness=_HARNESS
        )
    # Exit 1 covers "no credential", "no usage endpoint" and "fetch failed"
    # alike; its stderr is free text and is never read, so it is never
    # taken for signed out.
    result.require_success(_HARNESS)
    return parse_hermes_usage(result.stdout, completed_at=completed_at)


class HermesUsage:
    """The configured provider's account limits, as Hermes reports them."""

    policy = POLICY

    async def probe(self, context: UsageContext) -> UsageSnapshot:
        result = await context.executor.run(usage_request())
        return interpret_result(result, completed_at=datetime.now(UTC))


implementation = HermesUsage
