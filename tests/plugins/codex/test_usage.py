"""Codex's usage capability, against `codex app-server` 0.171.0 (tests/fixtures/codex/usage).

Fixture kinds (see its README): live runs without a credential (signed out,
API key, custom provider, Bedrock, GCP), and the live binary with a FAKE
ChatGPT login talking to a fake loopback backend (``app-server-chatgpt-*``:
real app-server output, built backend bodies).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import MAX_TIMEOUT, LocalTransport
from clanker.testing import ScriptedSession, ScriptedSessionExecutor
from clanker.testing.doubles import probe_usage, script_double
from clanker.testing.strategies import (
    documents_with_values_replaced,
    json_values,
)
from clanker.usage.types import Measurement, UsageSnapshot
from clanker_codex.usage import (
    Account,
    CodexUsage,
    limits_result,
    parse_codex_usage,
    parse_rate_limits,
    read_account,
    usage_request,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "codex" / "usage"
DONE = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
H5, D7 = timedelta(hours=5), timedelta(days=7)
CHATGPT = Account(email="dev@example.com", plan="pro")


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def captured(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in fixture(name).splitlines()]


def answer_to(name: str, request_id: int) -> dict[str, Any]:
    [found] = [m for m in captured(name) if m.get("id") == request_id and "method" not in m]
    return found


def sec(value: int) -> datetime:
    return datetime.fromtimestamp(value, tz=UTC)


def parse(name: str) -> UsageSnapshot:
    return parse_codex_usage(fixture(name), completed_at=DONE)


def failure(run: Callable[[], object]) -> HarnessCapabilityError:
    with pytest.raises(HarnessCapabilityError) as caught:
        run()
    return caught.value


def row(m: Measurement) -> tuple[Any, ...]:
    period = m.period
    return (
        m.label, m.kind.value, m.unit, m.used, m.remaining, m.limit, m.resets_at,
        period.label if period else None, period.starts_at if period else None,
        period.ends_at if period else None,
        m.scope.provider_id, m.scope.account_id, m.scope.account_label, m.scope.plan_label,
        m.scope.model_id,
    )


def rate(label: str, used: float, resets: int, duration: timedelta, period: str,
         scope: tuple[Any, ...]) -> tuple[Any, ...]:
    end = sec(resets)
    return (label, "rate-limit", "percent", used, max(0.0, 100 - used), 100.0, end,
            period, end - duration, end, *scope)


def allowance(label: str, remaining: float, resets: int, scope: tuple[Any, ...]) -> tuple[Any, ...]:
    end = sec(resets)
    return (label, "allowance", "percent", 100 - remaining, remaining, 100.0, end,
            None, None, end, *scope)


def meters(result: dict[str, Any], account: Account = CHATGPT) -> list[tuple[Any, ...]]:
    return [row(m) for m in parse_rate_limits(result, account, completed_at=DONE).measurements]


def window(used: object = 10, minutes: object = 300, resets: object = 1796040534) -> dict[str, Any]:
    return {"usedPercent": used, "windowDurationMins": minutes, "resetsAt": resets}


def meter(limit_id: str = "codex", **fields: object) -> dict[str, Any]:
    base: dict[str, Any] = {"limitId": limit_id, "limitName": None, "normalModelSlug": None,
                            "primary": None, "secondary": None, "planType": "pro"}
    return {**base, **fields}


def by_id(*entries: dict[str, Any], **fields: object) -> dict[str, Any]:
    return {"rateLimits": entries[0] if entries else meter(),
            "rateLimitsByLimitId": {e["limitId"]: e for e in entries},
            "accountId": "acct-0000", **fields}


# -- the captured runs, exactly -----------------------------------------------------------------

ACCT = ("openai-codex", "acct-0000", "dev@example.com", "pro", None)
SPARK = "GPT-5.3-Codex-Spark"
RICH = [
    rate("Codex · 5 hour", 23, 1796040534, H5, "5 hour", ACCT),
    rate("Codex · weekly", 41, 1796335734, D7, "weekly", ACCT),
    allowance("Codex · individual limit", 75, 1796897334, ACCT),
    rate(f"{SPARK} · 5 hour", 0, 1796051334, H5, "5 hour", ACCT),
    rate(f"{SPARK} · weekly", 7, 1796533334, D7, "weekly", ACCT),
]


def test_a_chatgpt_reading_normalizes_exactly() -> None:
    snapshot = parse("app-server-chatgpt-out.jsonl")
    assert [row(m) for m in snapshot.measurements] == RICH
    assert snapshot.observed_at == DONE


def test_the_edge_run_keeps_overage_a_model_slug_and_a_30_day_meter() -> None:
    spark = (*ACCT[:4], "gpt-5.3-codex-spark")
    assert [row(m) for m in parse("app-server-chatgpt-edge-out.jsonl").measurements] == [
        rate("Codex · 5 hour", 23, 1796040534, H5, "5 hour", ACCT),
        rate("Codex · weekly", 104, 1796335734, D7, "weekly", ACCT),  # 104 % used, 0 left
        allowance("Codex · individual limit", 75, 1796897334, ACCT),
        rate(f"{SPARK} · 5 hour", 0, 1796051334, H5, "5 hour", spark),
        rate(f"{SPARK} · weekly", 7, 1796533334, D7, "weekly", spark),
        rate("Other meter · 30 day", 5, 1796040534, timedelta(days=30), "30 day", ACCT),
    ]


def test_a_reached_limit_and_a_missing_secondary_window() -> None:
    assert [row(m) for m in parse("app-server-chatgpt-limit-reached-out.jsonl").measurements] == [
        rate("Codex · 5 hour", 100, 1796033934, H5, "5 hour", ACCT),
        allowance("Codex · individual limit", 75, 1796897334, ACCT),
        *RICH[3:],
    ]


def test_a_weekly_only_plan_is_read_from_its_duration_not_its_slot() -> None:
    # The weekly window sits in `primary`; the meter's plan wins over the login's.
    assert [row(m) for m in parse("app-server-chatgpt-weekly-only-out.jsonl").measurements] == [
        rate("Codex · weekly", 10, 1796335734, D7, "weekly",
             ("openai-codex", None, "dev@example.com", "plus", None)),
    ]


def test_no_window_leaves_only_the_individual_limit() -> None:
    assert [row(m) for m in parse("app-server-chatgpt-no-windows-out.jsonl").measurements] == [
        allowance("Codex · individual limit", 75, 1796897334, ACCT),
    ]


def test_a_meter_without_windows_or_limit_is_an_ok_empty_reading() -> None:
    result = answer_to("app-server-chatgpt-no-windows-out.jsonl", 3)["result"]
    for snapshot in (result["rateLimits"], *result["rateLimitsByLimitId"].values()):
        snapshot["individualLimit"] = None
    assert parse_rate_limits(result, CHATGPT, completed_at=DONE).measurements == ()


def test_the_account_id_is_the_backends_never_the_logins() -> None:
    snapshot = parse("app-server-chatgpt-other-account-out.jsonl")
    assert {m.scope.account_id for m in snapshot.measurements} == {"acct-9999"}


def test_an_unknown_plan_falls_back_to_the_accounts() -> None:
    snapshot = parse("app-server-chatgpt-unknown-plan-out.jsonl")
    assert [row(m) for m in snapshot.measurements] == RICH  # meter "unknown" -> login "pro"


def test_a_failed_account_read_still_reads_the_limits_without_an_identity() -> None:
    snapshot = parse("app-server-chatgpt-routing-discovery-failed-out.jsonl")
    anonymous = ("openai-codex", "acct-0000", None, "pro", None)
    assert [row(m)[10:] for m in snapshot.measurements] == [anonymous] * 5
    assert [row(m)[:10] for m in snapshot.measurements] == [r[:10] for r in RICH]


@pytest.mark.parametrize(("name", "kind"), [
    ("app-server-signed-out-out.jsonl", ErrorKind.UNAUTHENTICATED),
    ("app-server-api-key-out.jsonl", ErrorKind.UNSUPPORTED),
    ("app-server-no-openai-auth-out.jsonl", ErrorKind.UNSUPPORTED),
    ("app-server-amazon-bedrock-out.jsonl", ErrorKind.UNSUPPORTED),
    ("app-server-gcp-out.jsonl", ErrorKind.UNSUPPORTED),  # not in the spec; new in 0.171
    ("app-server-chatgpt-backend-401-out.jsonl", ErrorKind.COMMAND_FAILED),
    ("app-server-chatgpt-backend-decode-error-out.jsonl", ErrorKind.COMMAND_FAILED),
])
def test_signed_out_unsupported_and_failed_runs(name: str, kind: ErrorKind) -> None:
    error = failure(lambda: parse(name))
    assert error.kind is kind
    text = str(error)
    for message in captured(name):
        if "error" in message:
            assert message["error"]["message"] not in text
    for secret in ("dev@example.com", "acct-0000", "127.0.0.1", "wham"):
        assert secret not in text


def test_backend_failures_name_only_the_code() -> None:
    error = failure(lambda: parse("app-server-chatgpt-backend-401-out.jsonl"))
    assert "-32603" in str(error) and "401" not in str(error)


# -- account classification -----------------------------------------------------------------


def account_answer(account: object, required: object = True) -> dict[str, Any]:
    return {"id": 2, "result": {"account": account, "userId": None,
                                "requiresOpenaiAuth": required, "workspaceRouting": None}}


def test_a_chatgpt_account_gives_the_label_and_the_fallback_plan() -> None:
    assert read_account(answer_to("app-server-chatgpt-out.jsonl", 2)) == CHATGPT
    unknown = account_answer({"type": "chatgpt", "email": None, "planType": "unknown"})
    assert read_account(unknown) == Account()


@pytest.mark.parametrize(("answer", "kind"), [
    (account_answer(None, True), ErrorKind.UNAUTHENTICATED),
    (account_answer(None, False), ErrorKind.UNSUPPORTED),
    (account_answer({"type": "apiKey"}), ErrorKind.UNSUPPORTED),
    (account_answer({"type": "amazonBedrock", "usesCodexManagedCredentials": True}, False),
     ErrorKind.UNSUPPORTED),
    (account_answer({"type": "gcp"}, False), ErrorKind.UNSUPPORTED),
    ({"id": 2, "result": []}, ErrorKind.PARSE_FAILURE),
    ({"id": 2, "result": {"requiresOpenaiAuth": True}}, ErrorKind.PARSE_FAILURE),
    (account_answer("chatgpt"), ErrorKind.PARSE_FAILURE),
])
def test_accounts_that_stop_the_probe(answer: dict[str, Any], kind: ErrorKind) -> None:
    assert failure(lambda: read_account(answer)).kind is kind


def test_an_unknown_account_type_is_tried_and_its_auth_error_is_unsupported() -> None:
    account = read_account(account_answer({"type": "futureLogin"}))
    assert account == Account(unknown_type=True)
    signed_out = answer_to("app-server-signed-out-out.jsonl", 3)
    assert failure(lambda: limits_result(signed_out, account)).kind is ErrorKind.UNSUPPORTED


def test_an_account_read_error_or_an_ambiguous_answer_continues() -> None:
    error = answer_to("app-server-chatgpt-routing-discovery-failed-out.jsonl", 2)
    assert read_account(error) == Account()
    assert read_account(account_answer(None, None)) == Account()


# -- the limits answer --------------------------------------------------------------------------


def error(code: object, message: object) -> dict[str, Any]:
    return {"id": 3, "error": {"code": code, "message": message}}


@pytest.mark.parametrize(("answer", "kind"), [
    (error(-32600, "codex account authentication required to read rate limits"),
     ErrorKind.UNAUTHENTICATED),
    (error(-32600, "chatgpt authentication required to read rate limits"),
     ErrorKind.UNSUPPORTED),
    # Only that code with that prefix counts.
    (error(-32603, "codex account authentication required to read rate limits"),
     ErrorKind.COMMAND_FAILED),
    (error(-32603, "failed to fetch codex rate limits: 401 Unauthorized"),
     ErrorKind.COMMAND_FAILED),
    (error("-32600", "chatgpt authentication required"), ErrorKind.COMMAND_FAILED),
    (error(None, None), ErrorKind.COMMAND_FAILED),
    ({"id": 3, "error": "boom"}, ErrorKind.COMMAND_FAILED),
    ({"id": 3, "result": None}, ErrorKind.PARSE_FAILURE),
    ({"id": 3}, ErrorKind.PARSE_FAILURE),
])
def test_limit_answers_map_by_code_and_prefix(answer: dict[str, Any], kind: ErrorKind) -> None:
    assert failure(lambda: limits_result(answer, CHATGPT)).kind is kind


@pytest.mark.parametrize("code", [-32600, -32602])
def test_other_invalid_request_errors_retry_once(code: int) -> None:
    invalid = error(code, "Invalid request: invalid type: string \"yes\", expected a boolean")
    assert limits_result(invalid, CHATGPT) is None
    assert failure(lambda: limits_result(invalid, CHATGPT, retried=True)).kind is (
        ErrorKind.COMMAND_FAILED
    )


# -- normalization rules ------------------------------------------------------------------------


def test_meters_are_ordered_codex_first_then_by_key() -> None:
    result = by_id(meter("zeta", primary=window(1)), meter("codex", primary=window(2)),
                   meter("alpha", primary=window(3)))
    assert [r[0] for r in meters(result)] == ["Codex · 5 hour", "alpha · 5 hour", "zeta · 5 hour"]


def test_the_legacy_snapshot_is_used_only_when_no_meter_family_is_listed() -> None:
    legacy = meter("codex", limitName="Legacy", primary=window(9))
    for families in (None, {}):
        result = {"rateLimits": legacy, "rateLimitsByLimitId": families}
        assert [r[0] for r in meters(result)] == ["Legacy · 5 hour"]
    result = {"rateLimits": legacy, "rateLimitsByLimitId": {"codex": meter(primary=window(1))}}
    assert [r[0] for r in meters(result)] == ["Codex · 5 hour"]  # never both


def test_labels_prefer_the_limit_name_then_the_id_then_the_key() -> None:
    result = {"rateLimitsByLimitId": {
        "k1": meter("codex_x", limitName="Spark", primary=window()),
        "k2": meter("codex_y", primary=window()),
        "k3": {**meter("", primary=window()), "limitId": None},
    }}
    assert [r[0] for r in meters(result)] == [
        "Spark · 5 hour", "codex_y · 5 hour", "k3 · 5 hour",
    ]


@pytest.mark.parametrize(("minutes", "label", "duration"), [
    (300, "5 hour", timedelta(hours=5)),
    (10080, "weekly", timedelta(days=7)),
    (43200, "30 day", timedelta(days=30)),
    (20160, "2 week", timedelta(days=14)),
    (1440, "1 day", timedelta(days=1)),
    (120, "2 hour", timedelta(hours=2)),
    (90, "90 min", timedelta(minutes=90)),
])
def test_durations_are_named_from_the_minutes(
    minutes: int, label: str, duration: timedelta
) -> None:
    [found] = meters(by_id(meter(primary=window(5, minutes))))
    assert (found[0], found[7], found[9] - found[8]) == (f"Codex · {label}", label, duration)


def test_a_window_without_a_duration_has_no_start_and_no_duration_in_its_label() -> None:
    [found] = meters(by_id(meter(secondary=window(5, None))))
    assert found[0] == "Codex"
    assert (found[7], found[8], found[9]) == (None, None, sec(1796040534))


@pytest.mark.parametrize("resets", [1796040534000, 10**11, 0, -5, None, "1796040534", True])
def test_implausible_reset_times_are_dropped_and_the_window_kept(resets: object) -> None:
    [found] = meters(by_id(meter(primary=window(5, 300, resets))))
    assert found[3] == 5 and found[6] is None and found[8] is None and found[9] is None


def test_a_window_with_neither_duration_nor_reset_has_no_period() -> None:
    [measurement] = parse_rate_limits(by_id(meter(primary=window(5, None, None))), CHATGPT,
                                      completed_at=DONE).measurements
    assert measurement.period is None and measurement.label == "Codex"


@pytest.mark.parametrize("bad", [
    "not a window", [], window(-1), window("23"), window(None), window(True),
    window(float("nan")), window(10**400), window(5, 0), window(5, -300), window(5, 7.5),
    window(5, "300"), window(5, True), {"windowDurationMins": 300},
])
def test_a_malformed_window_is_skipped_while_valid_ones_survive(bad: object) -> None:
    result = by_id(meter(primary=bad, secondary=window(41, 10080)))
    assert [r[0] for r in meters(result)] == ["Codex · weekly"]


@pytest.mark.parametrize("bad", ["x", None, 3, {"limitId": None, "primary": "x"}])
def test_a_malformed_meter_is_skipped_while_valid_ones_survive(bad: object) -> None:
    result = {"rateLimitsByLimitId": {"codex": meter(primary=window()), "broken": bad}}
    assert [r[0] for r in meters(result)] == ["Codex · 5 hour"]


@pytest.mark.parametrize("bad_limit", ["x", {}, {"remainingPercent": "75"},
                                       {"remainingPercent": None}])
def test_a_malformed_individual_limit_is_skipped(bad_limit: object) -> None:
    result = by_id(meter(primary=window(), individualLimit=bad_limit))
    assert [r[0] for r in meters(result)] == ["Codex · 5 hour"]


def test_everything_malformed_is_a_parse_failure() -> None:
    result = {"rateLimitsByLimitId": {"codex": meter(primary=window(-1), secondary="x"),
                                      "other": "x"}}
    error = failure(lambda: parse_rate_limits(result, CHATGPT, completed_at=DONE))
    assert error.kind is ErrorKind.PARSE_FAILURE


@pytest.mark.parametrize("result", [{}, {"rateLimits": None}, {"rateLimits": []},
                                    {"rateLimitsByLimitId": {}, "rateLimits": "x"}])
def test_a_result_without_any_snapshot_is_a_parse_failure(result: dict[str, Any]) -> None:
    error = failure(lambda: parse_rate_limits(result, CHATGPT, completed_at=DONE))
    assert error.kind is ErrorKind.PARSE_FAILURE


def test_identity_comes_only_from_documented_fields() -> None:
    result = by_id(meter(primary=window(), planType=None, normalModelSlug="gpt-x"),
                   accountId=None, email="other@example.com", userId="user-1")
    [found] = meters(result, Account())
    assert found[10:] == ("openai-codex", None, None, None, "gpt-x")
    [found] = meters({**result, "accountId": " "}, Account(plan="plus"))
    assert found[10:] == ("openai-codex", None, None, "plus", "gpt-x")


def test_unknown_future_fields_are_tolerated_everywhere() -> None:
    result = answer_to("app-server-chatgpt-out.jsonl", 3)["result"]
    result["futureTopLevel"] = {"x": [1, 2]}
    for snapshot in (result["rateLimits"], *result["rateLimitsByLimitId"].values()):
        snapshot["futureMeterField"] = "y"
        for slot in ("primary", "secondary"):
            snapshot[slot]["futureWindowField"] = None
    assert meters(result) == RICH


# -- the probe, against scripted sessions -------------------------------------------------------


def server(name: str, *, overrides: dict[int, dict[str, Any]] | None = None,
           exit_code: int = 0) -> ScriptedSessionExecutor:
    """Replays a capture: each request gets the captured lines up to its captured answer."""
    lines = fixture(name).splitlines()
    replies = dict(overrides or {})

    def session(_request: object) -> ScriptedSession:
        pending = list(lines)

        def reply(line: str) -> list[str]:
            request = json.loads(line)
            if "id" not in request:
                return []
            if request["id"] in replies:
                return [json.dumps({**replies[request["id"]], "id": request["id"]})]
            out = []
            while pending:
                out.append(pending.pop(0))
                message = json.loads(out[-1])
                if message.get("id") == request["id"] and "method" not in message:
                    break
            return out

        return ScriptedSession(reply=reply, exit_code=exit_code)

    return ScriptedSessionExecutor(session)


def probe(executor: object, usage: CodexUsage | None = None) -> UsageSnapshot:
    return probe_usage(usage or CodexUsage(), executor, executor)


def test_the_probe_speaks_the_captured_exchange() -> None:
    executor = server("app-server-chatgpt-out.jsonl")
    before = datetime.now(UTC)
    snapshot = probe(executor)
    assert [row(m) for m in snapshot.measurements] == RICH
    assert before <= snapshot.observed_at <= datetime.now(UTC)
    [request] = executor.requests
    assert request == usage_request()
    [session] = executor.sessions
    sent = [json.loads(line) for line in session.written]
    expected = captured("app-server-in.jsonl")
    assert sent[0]["params"]["capabilities"] is None
    assert sent[1:] == expected[1:]
    assert session.input_closed and session.disposed


def test_signed_out_stops_before_the_limits_read() -> None:
    executor = server("app-server-signed-out-out.jsonl")
    assert failure(lambda: probe(executor)).kind is ErrorKind.UNAUTHENTICATED
    methods = [json.loads(line).get("method") for line in executor.sessions[0].written]
    assert methods == ["initialize", "initialized", "account/read"]
    assert executor.sessions[0].disposed


def test_the_limits_read_is_retried_once_with_null_params() -> None:
    invalid = {"error": {"code": -32602, "message": "Invalid params: secret"}}
    good = answer_to("app-server-chatgpt-out.jsonl", 3)
    executor = server("app-server-chatgpt-out.jsonl", overrides={3: invalid, 4: good})
    assert [row(m) for m in probe(executor).measurements] == RICH
    sent = [json.loads(line) for line in executor.sessions[0].written]
    assert sent[-2:] == [
        {"id": 3, "method": "account/rateLimits/read",
         "params": {"excludeResetCreditDetails": True}},
        {"id": 4, "method": "account/rateLimits/read", "params": None},
    ]


def test_a_failed_retry_is_not_retried_again() -> None:
    invalid = {"error": {"code": -32600, "message": "Invalid request: secret"}}
    executor = server("app-server-chatgpt-out.jsonl", overrides={3: invalid, 4: invalid})
    error = failure(lambda: probe(executor))
    assert error.kind is ErrorKind.COMMAND_FAILED and "secret" not in str(error)
    assert len(executor.sessions[0].written) == 5


def test_an_auth_error_is_never_retried() -> None:
    executor = server("app-server-api-key-out.jsonl",
                      overrides={2: account_answer({"type": "futureLogin"})})
    assert failure(lambda: probe(executor)).kind is ErrorKind.UNSUPPORTED
    assert len(executor.sessions[0].written) == 4


def test_data_counts_only_after_a_clean_exit() -> None:
    executor = server("app-server-chatgpt-out.jsonl", exit_code=1)
    assert failure(lambda: probe(executor)).kind is ErrorKind.COMMAND_FAILED
    assert executor.sessions[0].input_closed and executor.sessions[0].disposed


# -- the probe, through the real LocalTransport, against a protocol-faithful double ---------

DOUBLE = '''
"""A stand-in for `codex app-server` (codex-cli 0.171.0) speaking a captured exchange.

It answers what tests/fixtures/codex/usage/app-server-in.jsonl sent with the
stdout captured in $FAKE_CODEX_CAPTURE (an app-server-*-out.jsonl): for each
request read on stdin it prints the captured lines up to and including the
captured answer with the same id, so notifications keep their captured place;
client notifications (`initialized`) get nothing. Every line read is logged to
$FAKE_CODEX_LOG. At EOF on stdin it exits with $FAKE_CODEX_EXIT (default 0).
$FAKE_CODEX_MODE changes one thing:
  eof-before-answer  exit 0 when account/read arrives, without answering it
  flood              after answering initialize, print 100 KB notifications forever
  silent             read requests, never answer
  garbage            answer every request with a line that is not JSON
"""
import json, os, sys

pending = open(os.environ["FAKE_CODEX_CAPTURE"]).read().splitlines()
mode = os.environ.get("FAKE_CODEX_MODE", "replay")
log = open(os.environ["FAKE_CODEX_LOG"], "a")
for raw in sys.stdin:
    log.write(raw)
    log.flush()
    request = json.loads(raw)
    if "id" not in request or mode == "silent":
        continue
    if mode == "garbage":
        print("thread 'main' panicked", flush=True)
        continue
    if mode == "eof-before-answer" and request["method"] == "account/read":
        sys.exit(0)
    while pending:
        line = pending.pop(0)
        print(line, flush=True)
        message = json.loads(line)
        if message.get("id") == request["id"] and "method" not in message:
            break
    if mode == "flood" and request["method"] == "initialize":
        note = json.dumps({"method": "configWarning", "params": {"summary": "x" * 100_000}})
        while True:
            print(note, flush=True)
sys.exit(int(os.environ.get("FAKE_CODEX_EXIT", "0")))
'''


def real_double(tmp_path: Path, capture: str, **settings: str) -> tuple[LocalTransport, Path]:
    return script_double(tmp_path, "codex", DOUBLE, capture=str(FIXTURES / capture), **settings)


def misbehaving_double(directory: Path, behaviour: str) -> LocalTransport:
    """The double for the contract's misbehaving-process tests (test_contract.py)."""
    if behaviour == "signed-out":
        return real_double(directory, "app-server-signed-out-out.jsonl")[0]
    settings = {"exit": "3"} if behaviour == "failed-exit" else {"mode": behaviour}
    return real_double(directory, "app-server-chatgpt-out.jsonl", **settings)[0]


def test_the_double_replays_a_reading_through_the_real_transport(tmp_path: Path) -> None:
    transport, log = real_double(tmp_path, "app-server-chatgpt-out.jsonl")
    assert [row(m) for m in probe(transport).measurements] == RICH
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    assert sent[1:] == captured("app-server-in.jsonl")[1:]


# -- policy and registration --------------------------------------------------------------------


def test_the_request_is_bounded_plain_app_server() -> None:
    request = usage_request()
    assert request.argv == ("codex", "app-server")
    assert 0 < request.timeout <= MAX_TIMEOUT and request.timeout == 30
    assert request.max_output_bytes >= 64 * 1024
    assert dict(request.env) == {} and request.stdin is None


# -- properties ---------------------------------------------------------------------------------
# Junk, cut and altered whole outputs through the probe: the contract (test_contract.py).
# Here: any value replaced in the one answer that carries the limits.

READINGS = ["app-server-chatgpt-out.jsonl", "app-server-chatgpt-edge-out.jsonl",
            "app-server-chatgpt-weekly-only-out.jsonl"]
# Any JSON value, NaN and the infinities included.
JSON_VALUES = json_values(max_leaves=8, floats=st.floats())


@PROPERTY
@given(source=st.sampled_from(READINGS), data=st.data())
def test_any_value_replaced_anywhere_never_raises_anything_but_a_typed_failure(
    source: str, data: st.DataObject
) -> None:
    document: Any = data.draw(
        documents_with_values_replaced(answer_to(source, 3), JSON_VALUES))
    try:
        result = limits_result(document, CHATGPT, retried=True)
        assert result is not None
        snapshot = parse_rate_limits(result, CHATGPT, completed_at=DONE)
    except HarnessCapabilityError:
        return
    assert isinstance(snapshot, UsageSnapshot)


# -- the real CLI, when it is installed ---------------------------------------------------------


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("codex") is None, reason="codex is not installed")
def test_real_app_server_signed_out_is_unauthenticated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh CODEX_HOME (it must exist) and no key: app-server writes its state there.
    for name in ("OPENAI_API_KEY", "CODEX_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    transport = LocalTransport({**os.environ, "HOME": str(tmp_path),
                                "CODEX_HOME": str(tmp_path)})
    error = failure(lambda: probe(transport))
    assert error.kind is ErrorKind.UNAUTHENTICATED
