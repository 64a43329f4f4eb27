"""Claude Code remaining quota, from the stream-json control protocol's ``get_usage``.

One isolated Claude Code (the models probe's argv and environment:
:func:`clanker_claude.models.probe_request`) over the stdio session seam, 30 s
and 512 KiB for the whole conversation. Only two control requests are ever
written, and never a user message::

    -> {"type": "control_request", "request_id": "clanker-init",
        "request": {"subtype": "initialize"}}
    <- its control_response (with ``account``)
    -> {"type": "control_request", "request_id": "clanker-usage",
        "request": {"subtype": "get_usage", "skip_behaviors": true}}
    <- its control_response

then stdin is closed and the reading counts only once Claude has exited 0.
A turn frame (``assistant``, ``user``, ``result``, ``stream_event``) or an
inbound ``control_request`` fails the probe and is never answered. The Agent
SDK is not used: it would spawn a local Claude Code outside the environment.

Upstream assumptions this module relies on (Claude Code 2.1.197, live and
against a fake login and a fake loopback backend, see docs/harnesses/claude.md
"Usage"):

* ``initialize`` answers ``account``: ``apiProvider`` (``firstParty``,
  ``bedrock``, ``vertex``, ...), ``apiKeySource`` when an API key is
  configured (it wins over a claude.ai login), ``tokenSource`` (``"none"``
  when signed out, absent for a claude.ai subscriber), ``email`` and
  ``subscriptionType`` (``"Claude Max"``; ``"Claude API"`` when the stored
  type is null).
* ``get_usage`` never answers a control error for an auth state:
  ``rate_limits_available`` is ``false`` for API keys, third-party providers,
  environment OAuth tokens and logins without the profile scope.
  ``true`` with ``rate_limits: null`` means the usage fetch was skipped
  (``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``: permanently) or failed.
* ``rate_limits`` is the server body spread verbatim: named windows
  ``{utilization (0-100), resets_at (ISO 8601, offset or Z)}``, plus
  ``model_scoped[]`` (GrowthBook-allow-listed model windows, ``Z`` times;
  absent when GrowthBook is off), ``extra_usage``, ``limits[]`` and codename
  windows, which are not normalized.
* ``skip_behaviors`` does not exist in 2.1.197 (silently dropped), so a
  claude.ai session's ``get_usage`` also scans the local transcripts; it is
  sent anyway, read-only and honoured by later versions.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from attrs import evolve, frozen

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution.jsonlines import read_matching, send, transcript_objects
from clanker.usage.capability import (
    Measurement,
    MeasurementKind,
    Period,
    RefreshPolicy,
    Scope,
    UsageContext,
    UsageSnapshot,
    finite_number,
    label_text,
    offset_timestamp,
    probe_session,
)
from clanker_claude.models import answers, probe_request

if TYPE_CHECKING:
    from clanker.execution import LineSession

__all__ = [
    "INITIALIZE_REQUEST",
    "POLICY",
    "PROVIDER_ID",
    "USAGE_REQUEST",
    "Account",
    "ClaudeUsage",
    "parse_claude_usage",
    "parse_get_usage",
    "read_account",
]

# The quota namespace omp's Anthropic reports use too (spec, "Provider identity").
PROVIDER_ID: Final = "anthropic"
_INIT_ID: Final = "clanker-init"
_USAGE_ID: Final = "clanker-usage"
INITIALIZE_REQUEST: Final = {
    "type": "control_request",
    "request_id": _INIT_ID,
    "request": {"subtype": "initialize"},
}
USAGE_REQUEST: Final = {
    "type": "control_request",
    "request_id": _USAGE_ID,
    # skip_behaviors: no local transcript scan (ignored by 2.1.197, honoured later).
    "request": {"subtype": "get_usage", "skip_behaviors": True},
}
_TIMEOUT: Final = 30.0
_PURPOSE: Final = "reading usage"

# cache 60 s, hard minimum 60 s, failure backoff 180 s (spec, "Usage adapters").
# A skipped usage fetch (essential-traffic mode) fails every time: the longer
# backoff keeps such a setup from spawning Claude every two minutes.
POLICY: Final = RefreshPolicy(
    cache_ttl=timedelta(seconds=60),
    minimum_interval=timedelta(seconds=60),
    failure_backoff=timedelta(seconds=180),
)

# (field, label, period label, duration for startsAt, model id)
_WINDOWS: Final[tuple[tuple[str, str, str, timedelta | None, str | None], ...]] = (
    ("five_hour", "Claude · 5 hour", "5 hour", timedelta(hours=5), None),
    ("seven_day", "Claude · weekly", "weekly", timedelta(days=7), None),
    ("seven_day_oauth_apps", "Claude · weekly · OAuth apps", "weekly", None, None),
    ("seven_day_opus", "Claude · weekly · Opus", "weekly", None, "opus"),
    ("seven_day_sonnet", "Claude · weekly · Sonnet", "weekly", None, "sonnet"),
)
_CLAUDE_PREFIX: Final = "Claude "
_NO_PLAN: Final = "api"  # "Claude API": a login without a subscription


def _fail(kind: ErrorKind, detail: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(kind, detail, harness="claude")


@frozen(kw_only=True)
class Account:
    """What ``initialize`` said about the account, as far as the reading needs it."""

    email: str | None = None
    plan: str | None = None


def _plan_label(value: object) -> str | None:
    """``max`` -> ``Max``, ``Claude Team`` -> ``Team``; ``API`` is no plan."""
    text = label_text(value)
    if text is None:
        return None
    words = text.strip().removeprefix(_CLAUDE_PREFIX).replace("_", " ").split()
    if not words or " ".join(words).lower() == _NO_PLAN:
        return None
    return " ".join(word[:1].upper() + word[1:] for word in words)


def _payload(message: Mapping[str, Any], request: str) -> dict[str, Any]:
    response = message.get("response")
    if not isinstance(response, dict):
        raise _fail(ErrorKind.PARSE_FAILURE, "a control response without a response object")
    subtype = response.get("subtype")
    if subtype == "error":
        # The error text is Claude's; it never leaves the provider.
        raise _fail(ErrorKind.COMMAND_FAILED, f"{request} was refused")
    payload = response.get("response")
    if subtype != "success" or not isinstance(payload, dict):
        raise _fail(ErrorKind.PARSE_FAILURE, f"{request} answered without a result")
    return payload


def read_account(message: Mapping[str, Any]) -> Account:
    """Classify the ``initialize`` answer; raise when ``get_usage`` should not follow.

    A provider other than ``firstParty`` or any ``apiKeySource`` is
    ``unsupported``; ``tokenSource: "none"`` with no email and no
    subscription (the signed-out shape) is ``unauthenticated``; anything else,
    absent or ambiguous information included, continues.
    """
    account = _payload(message, "initialize").get("account")
    if not isinstance(account, dict):
        return Account()
    provider = account.get("apiProvider")
    if provider is not None and provider != "firstParty":
        raise _fail(ErrorKind.UNSUPPORTED, "a third-party provider has no Claude usage limits")
    if account.get("apiKeySource") is not None:
        raise _fail(ErrorKind.UNSUPPORTED, "an API key has no Claude usage limits")
    email = label_text(account.get("email"))
    subscription = label_text(account.get("subscriptionType"))
    if account.get("tokenSource") == "none" and email is None and subscription is None:
        raise _fail(ErrorKind.UNAUTHENTICATED, "Claude Code is not signed in")
    return Account(email=email, plan=_plan_label(subscription))


class _Malformed(Exception):
    """One window is not in the expected shape; it is skipped."""


def _utilization(window: object) -> tuple[float, datetime | None] | None:
    """A window's used percent and reset; ``None`` when it reports no number."""
    if window is None:
        return None
    if not isinstance(window, dict):
        raise _Malformed("a window is not an object")
    value = window.get("utilization")
    if value is None:
        return None
    used = finite_number(value)
    if used is None or used < 0:
        raise _Malformed("utilization is not a percentage")
    return used, offset_timestamp(window.get("resets_at"))


def _measurement(
    label: str,
    used: float,
    resets_at: datetime | None,
    scope: Scope,
    period_label: str,
    duration: timedelta | None,
) -> Measurement:
    starts_at = None
    if duration is not None and resets_at is not None:
        try:
            starts_at = resets_at - duration
        except OverflowError:
            starts_at = None
    return Measurement(
        kind=MeasurementKind.RATE_LIMIT,
        unit="percent",
        label=label,
        scope=scope,
        used=used,  # already 0-100; overage is kept
        remaining=max(0.0, 100.0 - used),
        limit=100.0,
        period=Period(label=period_label, starts_at=starts_at, ends_at=resets_at),
        resets_at=resets_at,
    )


def _limits(rate_limits: Mapping[str, Any], scope: Scope) -> tuple[list[Measurement], bool]:
    measurements: list[Measurement] = []
    malformed = False
    families: set[str] = set()
    for name, label, period_label, duration, model in _WINDOWS:
        try:
            reading = _utilization(rate_limits.get(name))
            if reading is None:
                continue
            window_scope = scope if model is None else evolve(scope, model_id=model)
            measurements.append(_measurement(label, *reading, window_scope, period_label, duration))
        except (_Malformed, ValueError):
            malformed = True
            continue
        if model is not None:
            families.add(model)
    scoped = rate_limits.get("model_scoped")
    if scoped is None:
        return measurements, malformed  # absent when GrowthBook is off: normal
    if not isinstance(scoped, list):
        return measurements, True
    for entry in scoped:
        try:
            display = label_text(entry.get("display_name")) if isinstance(entry, dict) else None
            if display is None:
                raise _Malformed("a model_scoped entry has no display_name")
            reading = _utilization(entry)
            # display_name is presentation text: no model id is made from it.
            if reading is None or display.strip().lower() in families:
                continue
            measurements.append(
                _measurement(f"Claude · weekly · {display}", *reading, scope, "weekly", None)
            )
        except (_Malformed, ValueError):
            malformed = True
    return measurements, malformed


def parse_get_usage(
    message: Mapping[str, Any], account: Account, *, completed_at: datetime
) -> UsageSnapshot:
    """Normalize the ``get_usage`` control response.

    ``rate_limits_available: false`` is ``unsupported`` (never an empty ok);
    ``true`` with ``rate_limits: null`` is ``command-failed`` (the fetch was
    skipped or failed); a missing or non-boolean flag, or missing limits, is
    a ``parse-failure``. Malformed windows are skipped while valid ones
    survive (all malformed: ``parse-failure``); no window with a number is an
    ok, empty reading. ``observed_at`` is ``completed_at``.
    """
    payload = _payload(message, "get_usage")
    available = payload.get("rate_limits_available")
    if available is False:
        raise _fail(ErrorKind.UNSUPPORTED, "this account has no Claude usage limits")
    if available is not True:
        raise _fail(ErrorKind.PARSE_FAILURE, "get_usage has no rate_limits_available flag")
    if "rate_limits" not in payload:
        raise _fail(ErrorKind.PARSE_FAILURE, "get_usage has no rate_limits")
    rate_limits = payload["rate_limits"]
    if rate_limits is None:
        raise _fail(ErrorKind.COMMAND_FAILED, "Claude Code could not fetch the usage limits")
    if not isinstance(rate_limits, dict):
        raise _fail(ErrorKind.PARSE_FAILURE, "get_usage rate_limits is not an object")
    scope = Scope(
        provider_id=PROVIDER_ID,
        account_label=account.email,  # there is no stable account id: none is invented
        plan_label=_plan_label(payload.get("subscription_type")) or account.plan,
    )
    measurements, malformed = _limits(rate_limits, scope)
    if malformed and not measurements:
        raise _fail(ErrorKind.PARSE_FAILURE, "no usage window was in the expected format")
    return UsageSnapshot(observed_at=completed_at, measurements=measurements)


def _answer(messages: list[dict[str, Any]], request_id: str) -> dict[str, Any]:
    matches = answers(request_id, _PURPOSE)
    for message in messages:
        if matches(message):
            return message
    raise _fail(ErrorKind.COMMAND_FAILED, "the server ended before answering")


def parse_claude_usage(stdout: str, *, completed_at: datetime) -> UsageSnapshot:
    """Interpret a whole control-protocol transcript (the probe's stdout), as the probe does."""
    messages = transcript_objects(stdout, harness="claude")
    account = read_account(_answer(messages, _INIT_ID))
    return parse_get_usage(_answer(messages, _USAGE_ID), account, completed_at=completed_at)


async def _read_usage(session: LineSession) -> UsageSnapshot:
    await send(session, INITIALIZE_REQUEST)
    account = read_account(
        await read_matching(session, answers(_INIT_ID, _PURPOSE), harness="claude")
    )
    await send(session, USAGE_REQUEST)
    return parse_get_usage(
        await read_matching(session, answers(_USAGE_ID, _PURPOSE), harness="claude"),
        account,
        completed_at=datetime.now(UTC),
    )


class ClaudeUsage:
    """The claude.ai subscription's usage windows, read through Claude Code."""

    policy = POLICY

    def __init__(self, *, timeout: float = _TIMEOUT) -> None:
        self._timeout = timeout

    async def probe(self, context: UsageContext) -> UsageSnapshot:
        return await probe_session(context, probe_request(self._timeout), _read_usage,
                                   harness="claude", process="claude")


implementation = ClaudeUsage
