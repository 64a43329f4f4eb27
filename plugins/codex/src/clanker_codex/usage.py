"""Codex remaining quota, from the app server's ``account/rateLimits/read``.

One ``codex app-server`` over the stdio session seam (never ``executor.run``,
auth files, backend HTTP, ``codex exec`` or the TUI), 30 s for the whole
conversation (:mod:`clanker_codex.appserver` holds the handshake)::

    initialize -> initialized
    -> {"id": 2, "method": "account/read", "params": {"refreshToken": false}}
    -> {"id": 3, "method": "account/rateLimits/read",
        "params": {"excludeResetCreditDetails": true}}

then stdin is closed and the reading counts only once the server has exited
0. ``supportsLunaReserve`` is never sent: it lets the backend record
experiment exposure, which a passive read must not do.

Upstream assumptions this module relies on (codex-cli 0.171.0, live and
against a fake loopback backend, see docs/harnesses/codex.md "Usage"):

* ``account/read``: ``account`` is ``null``, ``{"type": "chatgpt", "email",
  "planType"}``, ``{"type": "apiKey"}``, ``{"type": "amazonBedrock"}`` or
  ``{"type": "gcp"}`` (0.171 added ``gcp``); ``requiresOpenaiAuth`` tells a
  signed-out Codex (``true``) from a provider that needs no OpenAI login.
  With a ChatGPT login the call also runs workspace-routing discovery and can
  fail with -32603 while the limits stay readable, so its error is not fatal.
* ``account/rateLimits/read`` errors: -32600 with a message starting
  ``codex account authentication required`` (no Codex credential) or
  ``chatgpt authentication required`` (a non-ChatGPT credential); -32603 for
  backend, network and decode failures (including an expired token). The
  message text can hold the backend body, the email and the account id, so
  only the code ever leaves this module. 0.171 answers every invalid request
  with -32600 and never -32602.
* The result: ``rateLimitsByLimitId`` (every meter; key order is not stable)
  and ``rateLimits`` (a copy of the ``codex`` meter); a window's
  ``usedPercent`` is an integer percentage that can exceed 100,
  ``windowDurationMins`` its length, ``resetsAt`` Unix seconds. A weekly-only
  plan puts its weekly window in ``primary``, so the slot never names the
  window. A backend with no window gives a successful, empty reading.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from attrs import frozen

from clanker.errors import ErrorKind
from clanker.execution import CommandRequest, LineSession
from clanker.execution.jsonlines import send, transcript_objects
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
    probe_session,
)
from clanker_codex.appserver import answer, app_server_request, error_code, fail, start

__all__ = [
    "ACCOUNT_ID",
    "LIMITS_ID",
    "POLICY",
    "PROVIDER_ID",
    "RETRY_ID",
    "Account",
    "CodexUsage",
    "limits_result",
    "parse_codex_usage",
    "parse_rate_limits",
    "read_account",
    "usage_request",
]

# The quota namespace omp's Codex reports use too (spec, "Provider identity").
PROVIDER_ID: Final = "openai-codex"
ACCOUNT_ID: Final = 2
LIMITS_ID: Final = 3
RETRY_ID: Final = 4
_TIMEOUT: Final = 30.0

# cache 60 s, hard minimum 60 s, failure backoff 120 s (spec, "Usage adapters"):
# every probe spawns an app server and, with a ChatGPT login, asks the backend.
POLICY: Final = RefreshPolicy(
    cache_ttl=timedelta(seconds=60),
    minimum_interval=timedelta(seconds=60),
    failure_backoff=timedelta(seconds=120),
)

_ACCOUNT_PARAMS: Final = {"refreshToken": False}
_LIMITS_PARAMS: Final = {"excludeResetCreditDetails": True}
_NOT_CHATGPT: Final = frozenset({"apiKey", "amazonBedrock", "gcp"})
_NO_CODEX_ACCOUNT: Final = "codex account authentication required"
_NO_CHATGPT_ACCOUNT: Final = "chatgpt authentication required"
_INVALID_REQUEST: Final = -32600
_INVALID_PARAMS: Final = -32602
_UNKNOWN_PLAN: Final = "unknown"  # what 0.171 makes of a plan it does not know
# Unix seconds from here on are milliseconds in disguise (year 5138): refused.
_SECONDS_LIMIT: Final = 10**11
_MINUTES_PER_HOUR: Final = 60
_MINUTES_PER_DAY: Final = 24 * 60
_MINUTES_PER_WEEK: Final = 7 * _MINUTES_PER_DAY
_NAMED_DURATIONS: Final = {300: "5 hour", _MINUTES_PER_WEEK: "weekly"}
_PRIMARY_METER: Final = "codex"


def usage_request(timeout: float = _TIMEOUT) -> CommandRequest:
    """Return the one command the probe runs: ``codex app-server``."""
    return app_server_request(timeout)


@frozen(kw_only=True)
class Account:
    """What ``account/read`` said, as far as the reading needs it."""

    email: str | None = None
    plan: str | None = None
    # A type this version does not know: its auth errors mean "unsupported".
    unknown_type: bool = False


def _plan(value: object) -> str | None:
    plan = label_text(value)
    return None if plan == _UNKNOWN_PLAN else plan


def read_account(response: Mapping[str, Any]) -> Account:
    """Classify the ``account/read`` answer; raise when no limit read should follow.

    ``account: null`` is ``unauthenticated`` when OpenAI auth is required and
    ``unsupported`` when the configured provider needs none; API-key, Bedrock
    and GCP accounts are ``unsupported``; ChatGPT and unknown future types
    continue. An error answer also continues (0.171 fails routing discovery
    with -32603 while the limits stay readable), with nothing known.
    """
    if "error" in response:
        return Account()
    result = response.get("result")
    if not isinstance(result, dict) or "account" not in result:
        raise fail(ErrorKind.PARSE_FAILURE, "account/read answered without an account")
    account, required = result["account"], result.get("requiresOpenaiAuth")
    if account is None:
        if required is True:
            raise fail(ErrorKind.UNAUTHENTICATED, "Codex is not signed in")
        if required is False:
            raise fail(ErrorKind.UNSUPPORTED, "the configured provider needs no OpenAI login")
        return Account()  # ambiguous: never claimed as signed out, the read decides
    if not isinstance(account, dict):
        raise fail(ErrorKind.PARSE_FAILURE, "account/read account is not an object")
    kind = account.get("type")
    if isinstance(kind, str) and kind in _NOT_CHATGPT:
        raise fail(ErrorKind.UNSUPPORTED, "only ChatGPT accounts have Codex rate limits")
    if kind == "chatgpt":
        return Account(email=label_text(account.get("email")), plan=_plan(account.get("planType")))
    return Account(unknown_type=True)


def limits_result(
    response: Mapping[str, Any], account: Account, *, retried: bool = False
) -> dict[str, Any] | None:
    """Return the ``account/rateLimits/read`` result, ``None`` to retry, or raise.

    Only the code and the message *prefix* of an error are read. ``None``
    (retry once with ``params: null``) is for a -32600/-32602 that is neither
    auth error, as the Codex TUI does; 0.171 never needs it.
    """
    if "error" not in response:
        result = response.get("result")
        if not isinstance(result, dict):
            raise fail(ErrorKind.PARSE_FAILURE, "account/rateLimits/read has no result object")
        return result
    code = error_code(response)
    error = response["error"]
    message = error.get("message") if isinstance(error, dict) else None
    if code == _INVALID_REQUEST and isinstance(message, str):
        if message.startswith(_NO_CODEX_ACCOUNT):
            if account.unknown_type:
                raise fail(ErrorKind.UNSUPPORTED, "this account type has no Codex rate limits")
            raise fail(ErrorKind.UNAUTHENTICATED, "Codex is not signed in")
        if message.startswith(_NO_CHATGPT_ACCOUNT):
            raise fail(ErrorKind.UNSUPPORTED, "only ChatGPT accounts have Codex rate limits")
    if code in (_INVALID_REQUEST, _INVALID_PARAMS) and not retried:
        return None
    suffix = f" {code}" if code is not None else ""
    raise fail(ErrorKind.COMMAND_FAILED, f"account/rateLimits/read error{suffix}")


# -- normalization ----------------------------------------------------------------------


class _Malformed(Exception):
    """One meter or window is not in the expected shape; it is skipped."""


def _duration_label(minutes: int) -> str:
    if minutes in _NAMED_DURATIONS:
        return _NAMED_DURATIONS[minutes]
    for size, unit in (
        (_MINUTES_PER_WEEK, "week"),
        (_MINUTES_PER_DAY, "day"),
        (_MINUTES_PER_HOUR, "hour"),
    ):
        if minutes % size == 0:
            return f"{minutes // size} {unit}"
    return f"{minutes} min"


def _minutes(value: object) -> int | None:
    """``windowDurationMins``: null is unknown; anything but a whole positive number is bad."""
    if value is None:
        return None
    number = finite_number(value)
    if number is None or number <= 0 or not number.is_integer():
        raise _Malformed("windowDurationMins is not a whole positive number")
    return int(number)


def _seconds(value: object) -> datetime | None:
    """Unix seconds; a value that looks like milliseconds (or no time at all) is dropped."""
    number = finite_number(value)
    if number is None or not 0 < number < _SECONDS_LIMIT:
        return None
    return datetime.fromtimestamp(number, tz=UTC)


def _percent(value: object, name: str) -> float:
    number = finite_number(value)
    if number is None or number < 0:
        raise _Malformed(f"{name} is not a percentage")
    return number


def _window(window: object, name: str, scope: Scope) -> Measurement | None:
    if window is None:
        return None
    if not isinstance(window, dict):
        raise _Malformed("a window is not an object")
    used = _percent(window.get("usedPercent"), "usedPercent")
    minutes = _minutes(window.get("windowDurationMins"))
    ends_at = _seconds(window.get("resetsAt"))
    duration = None if minutes is None else _duration_label(minutes)
    starts_at = None
    if minutes is not None and ends_at is not None:
        try:
            starts_at = ends_at - timedelta(minutes=minutes)
        except OverflowError:
            starts_at = None
    period = None
    if duration is not None or ends_at is not None:
        period = Period(label=duration, starts_at=starts_at, ends_at=ends_at)
    return Measurement(
        kind=MeasurementKind.RATE_LIMIT,
        unit="percent",
        label=name if duration is None else f"{name} · {duration}",
        scope=scope,
        used=used,  # overage is kept: 104 % used stays 104
        remaining=max(0.0, 100.0 - used),
        limit=100.0,
        period=period,
        resets_at=ends_at,
    )


def _individual_limit(value: object, name: str, scope: Scope) -> Measurement | None:
    """Only ``remainingPercent``: the ``limit``/``used`` strings name no currency."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _Malformed("individualLimit is not an object")
    remaining = finite_number(value.get("remainingPercent"))
    if remaining is None:
        raise _Malformed("individualLimit has no remainingPercent")
    resets_at = _seconds(value.get("resetsAt"))
    return Measurement(
        kind=MeasurementKind.ALLOWANCE,
        unit="percent",
        label=f"{name} · individual limit",
        scope=scope,
        used=100.0 - remaining,
        remaining=max(0.0, remaining),
        limit=100.0,
        period=None if resets_at is None else Period(ends_at=resets_at),
        resets_at=resets_at,
    )


def _meter_name(key: str, meter: Mapping[str, Any]) -> str:
    name = label_text(meter.get("limitName"))
    if name is not None:
        return name
    ident = label_text(meter.get("limitId")) or label_text(key)
    if ident is None:
        raise _Malformed("a meter has no name")
    return "Codex" if ident == _PRIMARY_METER else ident


def _meter(
    key: str, meter: object, result: Mapping[str, Any], account: Account
) -> Iterator[Measurement | _Malformed]:
    """One meter's measurements; a malformed window is yielded as such, the rest survive."""
    if not isinstance(meter, dict):
        yield _Malformed("a meter is not an object")
        return
    try:
        name = _meter_name(key, meter)
    except _Malformed as exc:
        yield exc
        return
    scope = Scope(
        provider_id=PROVIDER_ID,
        account_id=label_text(result.get("accountId")),
        account_label=account.email,
        plan_label=_plan(meter.get("planType")) or account.plan,
        model_id=label_text(meter.get("normalModelSlug")),
    )
    for slot in ("primary", "secondary"):
        try:
            measurement = _window(meter.get(slot), name, scope)
        except (_Malformed, ValueError, OverflowError) as exc:
            yield exc if isinstance(exc, _Malformed) else _Malformed(str(exc))
            continue
        if measurement is not None:
            yield measurement
    try:
        allowance = _individual_limit(meter.get("individualLimit"), name, scope)
    except (_Malformed, ValueError, OverflowError) as exc:
        yield exc if isinstance(exc, _Malformed) else _Malformed(str(exc))
        return
    if allowance is not None:
        yield allowance


def _meters(result: Mapping[str, Any]) -> list[tuple[str, object]]:
    """Every meter family when listed, else the legacy single meter; never both."""
    by_id = result.get("rateLimitsByLimitId")
    if isinstance(by_id, dict) and by_id:
        # HashMap order changes between runs: the main meter first, then by key.
        return sorted(by_id.items(), key=lambda item: (item[0] != _PRIMARY_METER, item[0]))
    legacy = result.get("rateLimits")
    if isinstance(legacy, dict):
        key = label_text(legacy.get("limitId")) or _PRIMARY_METER
        return [(key, legacy)]
    raise fail(ErrorKind.PARSE_FAILURE, "account/rateLimits/read has no rate limit snapshot")


def parse_rate_limits(
    result: Mapping[str, Any], account: Account, *, completed_at: datetime
) -> UsageSnapshot:
    """Normalize an ``account/rateLimits/read`` result.

    Each primary/secondary window is a rate-limit percent measurement
    labelled ``<limitName | Codex | limitId> · <duration>``; an
    ``individualLimit`` is an allowance percent. Malformed meters and windows
    are skipped while valid ones survive; something malformed and nothing
    left is a ``parse-failure``; no window at all is an ok, empty reading.
    ``observed_at`` is ``completed_at``.
    """
    measurements: list[Measurement] = []
    malformed = False
    for key, meter in _meters(result):
        for item in _meter(key, meter, result, account):
            if isinstance(item, _Malformed):
                malformed = True
            else:
                measurements.append(item)
    if malformed and not measurements:
        raise fail(ErrorKind.PARSE_FAILURE, "no rate limit window was in the expected format")
    return UsageSnapshot(observed_at=completed_at, measurements=measurements)


def _responses(stdout: str) -> dict[int, dict[str, Any]]:
    found: dict[int, dict[str, Any]] = {}
    for message in transcript_objects(stdout, harness="codex"):
        request_id = message.get("id")
        if "method" not in message and type(request_id) is int:
            found.setdefault(request_id, message)
    return found


def parse_codex_usage(stdout: str, *, completed_at: datetime) -> UsageSnapshot:
    """Interpret a whole app-server transcript (the probe's stdout), as the probe does.

    The answers to ``account/read`` (id 2), ``account/rateLimits/read``
    (id 3) and its retry (id 4) are taken from the transcript; everything
    else (notifications, the initialize answer) is ignored.
    """
    responses = _responses(stdout)
    if ACCOUNT_ID not in responses:
        raise fail(ErrorKind.COMMAND_FAILED, "the server ended before answering")
    account = read_account(responses[ACCOUNT_ID])
    if LIMITS_ID not in responses:
        raise fail(ErrorKind.COMMAND_FAILED, "the server ended before answering")
    result = limits_result(responses[LIMITS_ID], account)
    if result is None:
        if RETRY_ID not in responses:
            raise fail(ErrorKind.COMMAND_FAILED, "the server ended before answering")
        result = limits_result(responses[RETRY_ID], account, retried=True)
        if result is None:  # pragma: no cover - limits_result never retries twice
            raise fail(ErrorKind.COMMAND_FAILED, "account/rateLimits/read was refused")
    return parse_rate_limits(result, account, completed_at=completed_at)


class CodexUsage:
    """The ChatGPT account's Codex rate limits, read through ``codex app-server``."""

    policy = POLICY

    def __init__(self, *, timeout: float = _TIMEOUT) -> None:
        self._timeout = timeout

    async def probe(self, context: UsageContext) -> UsageSnapshot:
        return await probe_session(context, usage_request(self._timeout), self._read,
                                   harness="codex", process="app-server")

    async def _read(self, session: LineSession) -> UsageSnapshot:
        await start(session)
        await send(
            session, {"id": ACCOUNT_ID, "method": "account/read", "params": _ACCOUNT_PARAMS}
        )
        account = read_account(await answer(session, ACCOUNT_ID))
        result = await self._limits(session, account)
        return parse_rate_limits(result, account, completed_at=datetime.now(UTC))

    @staticmethod
    async def _limits(session: LineSession, account: Account) -> dict[str, Any]:
        await send(
            session,
            {"id": LIMITS_ID, "method": "account/rateLimits/read", "params": _LIMITS_PARAMS},
        )
        result = limits_result(await answer(session, LIMITS_ID), account)
        if result is not None:
            return result
        # The TUI's compatibility retry: the same read with the old params form.
        await send(session, {"id": RETRY_ID, "method": "account/rateLimits/read", "params": None})
        retried = limits_result(await answer(session, RETRY_ID), account, retried=True)
        if retried is None:  # pragma: no cover - limits_result never retries twice
            raise fail(ErrorKind.COMMAND_FAILED, "account/rateLimits/read was refused")
        return retried


implementation = CodexUsage
