"""Antigravity remaining quota, from agy's print-mode ``/usage``.

Two one-shot commands, in order, on every probe:

1. ``agy --version``. Before 1.1.11, ``-p /usage`` is not a command: it goes
   to the model as a prompt, a real conversation that spends quota. So the
   second command runs only when the whole version output is exactly one
   ``X.Y.Z`` / ``vX.Y.Z`` line of at least 1.1.11; anything else (older,
   prerelease, noisy, unreadable, a failed run) is ``unsupported``.
2. ``agy --output-format json -p=/usage`` (``-p=`` binds the prompt, so no
   later word can become it; ``--disable-slash-commands`` would turn
   ``/usage`` back into a prompt and is never passed).

Written from the spec and public descriptions of agy 1.2.1-1.2.14 output;
never run here (agy cannot be installed on this machine). Upstream
assumptions this parser relies on:

* One envelope: ``status``, ``conversation_id``, ``num_turns``,
  ``usage.*_tokens``, ``command.name == "usage"`` and
  ``command.data.groups[].buckets[]`` with ``name``, ``window``,
  ``remaining_fraction`` (0..1) and an RFC 3339 ``reset_time``. The human
  ``response`` text is never read, nor is stderr.
* ``enabled`` is named by the spec (agy 1.2.12/1.2.14) but absent from a
  public 1.2.7 capture: an absent ``enabled`` means enabled.
* agy's output struct tags ``remaining_fraction`` ``omitempty`` (strings in
  the 1.2.7 binary), and omp observed the same vendor backend drop the
  fraction of exhausted counters while keeping the reset time. So an enabled
  bucket without the key but with a reset time is read as exhausted (0 %
  left), not left out: leaving it out would hide exactly the pool that has
  run dry.
* A signed-out agy starts a browser login and waits 60 s before printing
  anything on stdout; the probe's 30 s bound ends it first, so a signed-out
  agy shows as a timeout, never as signed out.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final, TypeGuard

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, CommandResult
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

__all__ = [
    "MINIMUM_VERSION",
    "POLICY",
    "PROVIDER_ID",
    "TURN_BACKOFF",
    "AgyUsage",
    "check_version",
    "interpret_result",
    "parse_agy_usage",
    "usage_request",
    "version_request",
]

_HARNESS: Final = "agy"
MINIMUM_VERSION: Final = (1, 1, 11)
# The quota namespace omp's Antigravity reports use too (spec, "Provider identity").
PROVIDER_ID: Final = "google-antigravity"
# A reply showing a model turn ran: hard backoff, honoured even by a manual refresh.
TURN_BACKOFF: Final = 3600.0
# Successful runs take 2-4 s, some reports say up to about 20 s.
_TIMEOUT: Final = 30.0
_VERSION_TIMEOUT: Final = 10.0
_VERSION: Final = re.compile(r"v?([0-9]{1,9})\.([0-9]{1,9})\.([0-9]{1,9})(?:\r?\n)?")
_WINDOWS: Final[Mapping[str, tuple[str, timedelta]]] = {
    "5h": ("5 hour", timedelta(hours=5)),
    "weekly": ("weekly", timedelta(days=7)),
}
# Matched in the envelope's own structured error text only, case-insensitively.
# "authentication failed or timed out" is deliberately absent: it is not proof
# of a signed-out state.
_SIGNED_OUT: Final = (
    "authentication required",
    "not authenticated",
    "login required",
    "credentials revoked",
    "token revoked",
    "token expired",
)
_PERCENT_DIGITS: Final = 4

# cache 60 s, hard minimum 120 s, failure backoff 300 s (spec, "Usage adapters"):
# each probe is a live vendor quota request with no local cache.
POLICY: Final = RefreshPolicy(
    cache_ttl=timedelta(seconds=60),
    minimum_interval=timedelta(seconds=120),
    failure_backoff=timedelta(seconds=300),
)


def version_request() -> CommandRequest:
    return CommandRequest(command="agy", args=("--version",), timeout=_VERSION_TIMEOUT)


def usage_request(timeout: float = _TIMEOUT) -> CommandRequest:
    return CommandRequest(
        command="agy", args=("--output-format", "json", "-p=/usage"), timeout=timeout
    )


def _error(
    kind: ErrorKind, detail: str, retry_after: float | None = None
) -> HarnessCapabilityError:
    return HarnessCapabilityError(kind, detail, harness=_HARNESS, retry_after=retry_after)


def check_version(result: CommandResult) -> tuple[int, int, int]:
    """Return the version when ``/usage`` may be sent to it, else raise ``unsupported``."""
    match = _VERSION.fullmatch(result.stdout) if result.exit_code == 0 else None
    if match is None:
        raise _error(ErrorKind.UNSUPPORTED, "agy --version is not one plain X.Y.Z line")
    major, minor, patch = (int(part) for part in match.groups())
    if (major, minor, patch) < MINIMUM_VERSION:
        raise _error(ErrorKind.UNSUPPORTED, "agy before 1.1.11 has no print-mode /usage")
    return major, minor, patch






def _looks_like_envelope(value: object) -> TypeGuard[dict[str, Any]]:
    return isinstance(value, dict) and "status" in value and (
        "command" in value or "conversation_id" in value
    )


def _load(text: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _envelope(stdout: str) -> dict[str, Any] | None:
    """The one envelope on stdout: the whole of it, else one whole line of it.

    Two different envelopes are a parse failure; JSON inside a prose line is
    never a candidate.
    """
    whole = _load(stdout)
    if whole is not None:
        return whole if _looks_like_envelope(whole) else None
    candidates: list[dict[str, Any]] = []
    for line in stdout.splitlines():
        stripped = line.strip()
        if stripped.startswith("{") and stripped.endswith("}"):
            value = _load(stripped)
            if _looks_like_envelope(value):
                candidates.append(value)
    try:
        conflicting = any(candidate != candidates[0] for candidate in candidates[1:])
    except RecursionError:  # absurdly nested lines
        conflicting = True
    if conflicting:
        raise _error(ErrorKind.PARSE_FAILURE, "agy printed conflicting replies")
    return candidates[0] if candidates else None


def _is_zero(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and value == 0


def _turn_ran(envelope: Mapping[str, Any]) -> bool:
    """Whether the reply shows a model turn (absent fields count as zero)."""
    if envelope.get("conversation_id", "") != "":
        return True
    if "num_turns" in envelope and not _is_zero(envelope["num_turns"]):
        return True
    usage = envelope.get("usage", {})
    if not isinstance(usage, dict):
        return True
    return any(
        name.endswith("_tokens") and not _is_zero(value) for name, value in usage.items()
    )


def _error_texts(envelope: Mapping[str, Any]) -> list[str]:
    texts = []
    error = envelope.get("error")
    if isinstance(error, str):
        texts.append(error)
    elif isinstance(error, dict) and isinstance(error.get("message"), str):
        texts.append(error["message"])
    texts += [envelope[key] for key in ("message", "error_message")
              if isinstance(envelope.get(key), str)]
    return texts


def _bucket(group: str, bucket: object) -> Measurement | None:
    """One bucket's measurement; ``None`` when it is disabled or has no number."""
    if not isinstance(bucket, dict) or (name := label_text(bucket.get("name"))) is None:
        raise ValueError("a bucket has no name")
    enabled, disabled = bucket.get("enabled", True), bucket.get("disabled", False)
    if not isinstance(enabled, bool) or not isinstance(disabled, bool):
        raise ValueError("a bucket's enabled flag is not a boolean")
    if not enabled or disabled:
        return None  # not metered for this tier: never shown as 100 % left
    resets_at = offset_timestamp(bucket.get("reset_time"))
    if "remaining_fraction" in bucket:
        fraction = bucket["remaining_fraction"]
        if fraction is None:
            return None
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise ValueError("remaining_fraction is not a number")
        fraction = float(fraction)
        if not math.isfinite(fraction):
            raise ValueError("remaining_fraction is not finite")
    elif resets_at is not None:
        fraction = 0.0  # omitted zero: exhausted until the reset
    else:
        return None
    remaining = round(min(max(fraction, 0.0), 1.0) * 100, _PERCENT_DIGITS)
    window = bucket.get("window")
    known = _WINDOWS.get(window) if isinstance(window, str) else None
    starts_at = None
    if known is not None and resets_at is not None:
        try:
            starts_at = resets_at - known[1]
        except OverflowError:
            starts_at = None
    period_label = known[0] if known is not None else label_text(window)
    return Measurement(
        kind=MeasurementKind.RATE_LIMIT,
        unit="percent",
        label=f"{group} · {name}",
        scope=Scope(provider_id=PROVIDER_ID),
        used=round(100 - remaining, _PERCENT_DIGITS),
        remaining=remaining,
        limit=100.0,
        period=Period(label=period_label, starts_at=starts_at, ends_at=resets_at),
        resets_at=resets_at,
    )


def _successful_envelope(stdout: str, exit_code: int) -> Mapping[str, Any]:
    """Return the reply envelope when it reports success without a turn, else raise."""
    envelope = _envelope(stdout)
    if envelope is None:
        if exit_code != 0:
            raise _error(ErrorKind.COMMAND_FAILED, f"exit status {exit_code}")
        raise _error(ErrorKind.PARSE_FAILURE, "no /usage reply envelope on stdout")
    if _turn_ran(envelope):
        raise _error(ErrorKind.COMMAND_FAILED, "/usage ran a model turn", retry_after=TURN_BACKOFF)
    if envelope.get("status") != "SUCCESS":
        texts = [text.lower() for text in _error_texts(envelope)]
        if any(phrase in text for text in texts for phrase in _SIGNED_OUT):
            raise _error(ErrorKind.UNAUTHENTICATED, "agy reported an authentication error")
        raise _error(ErrorKind.COMMAND_FAILED, "agy reported an error")
    if exit_code != 0:
        raise _error(ErrorKind.COMMAND_FAILED, f"exit status {exit_code}")
    return envelope


def parse_agy_usage(stdout: str, *, exit_code: int, completed_at: datetime) -> UsageSnapshot:
    """Turn the output of ``agy --output-format json -p=/usage`` into a snapshot.

    In order: no envelope is ``command-failed`` after a non-zero exit, else
    ``parse-failure``; a reply showing a model turn is ``command-failed`` with
    a one-hour ``retry_after``; an error envelope is ``unauthenticated`` only
    for its own structured signed-out wording, else ``command-failed``; a
    success with a non-zero exit is ``command-failed``. Malformed groups and
    buckets are skipped while valid ones survive (all malformed:
    ``parse-failure``). ``observed_at`` is ``completed_at``.
    """
    envelope = _successful_envelope(stdout, exit_code)
    command = envelope.get("command")
    data = command.get("data") if isinstance(command, dict) else None
    if (
        not isinstance(command, dict) or command.get("name") != "usage"
        or not isinstance(data, dict) or not isinstance(data.get("groups"), list)
    ):
        raise _error(ErrorKind.PARSE_FAILURE, "the reply is not a /usage result")
    measurements = []
    malformed = False
    for group in data["groups"]:
        name = label_text(group.get("name")) if isinstance(group, dict) else None
        if name is None or not isinstance(group.get("buckets"), list):
            malformed = True
            continue
        for bucket in group["buckets"]:
            try:
                measurement = _bucket(name, bucket)
            except (ValueError, TypeError, OverflowError):
                malformed = True
                continue
            if measurement is not None:
                measurements.append(measurement)
    if malformed and not measurements:
        raise _error(ErrorKind.PARSE_FAILURE, "no group or bucket was in the expected format")
    return UsageSnapshot(observed_at=completed_at, measurements=measurements)


def interpret_result(result: CommandResult, *, completed_at: datetime) -> UsageSnapshot:
    """Map a finished ``/usage`` run to a snapshot or a typed failure (stderr unread)."""
    return parse_agy_usage(result.stdout, exit_code=result.exit_code, completed_at=completed_at)


class AgyUsage:
    """The Antigravity account's quota buckets, behind the version gate."""

    policy = POLICY

    def __init__(self, *, timeout: float = _TIMEOUT) -> None:
        self._timeout = timeout

    async def probe(self, context: UsageContext) -> UsageSnapshot:
        check_version(await context.executor.run(version_request()))
        result = await context.executor.run(usage_request(self._timeout))
        return interpret_result(result, completed_at=datetime.now(UTC))

implementation = AgyUsage
