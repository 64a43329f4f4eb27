"""Claude Code's usage capability, against the control protocol of 2.1.197
(tests/fixtures/claude/usage).

Fixture kinds (see its README): live runs without a credential or with
placeholder credentials in the environment, the live binary with a FAKE
claude.ai login (``subscriber-*``), and the same with a fake
api.anthropic.com on loopback answering the usage request with built bodies
(``subscriber``, ``subscriber-telemetry-disabled``, ``-usage-429``,
``-usage-error-envelope``).
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

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import MAX_TIMEOUT, LocalTransport
from clanker.testing import ScriptedSession, ScriptedSessionExecutor
from clanker.testing.doubles import probe_usage, script_double
from clanker.usage.types import Measurement, UsageSnapshot
from clanker_claude.models import PROBE_ARGS, PROBE_ENV, probe_request
from clanker_claude.usage import (
    Account,
    ClaudeUsage,
    parse_claude_usage,
    parse_get_usage,
    read_account,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "claude" / "usage"
DONE = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
H5, D7 = timedelta(hours=5), timedelta(days=7)
MAX = Account(email="dev@example.com", plan="Max")


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def captured(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in fixture(name).splitlines()]


def response_to(name: str, request_id: str) -> dict[str, Any]:
    [found] = [m for m in captured(name) if m["response"]["request_id"] == request_id]
    return found


def parse(name: str) -> UsageSnapshot:
    return parse_claude_usage(fixture(name), completed_at=DONE)


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


def rate(label: str, used: float, resets: datetime | None, period: str,
         duration: timedelta | None = None, model: str | None = None,
         account: Account = MAX) -> tuple[Any, ...]:
    starts = resets - duration if resets is not None and duration is not None else None
    return (label, "rate-limit", "percent", used, max(0.0, 100 - used), 100.0, resets,
            period, starts, resets, "anthropic", None, account.email, account.plan, model)


def usage_answer(payload: dict[str, Any]) -> dict[str, Any]:
    return {"type": "control_response",
            "response": {"subtype": "success", "request_id": "clanker-usage",
                         "response": payload}}


def limits(rate_limits: object, subscription: object = "max") -> dict[str, Any]:
    return usage_answer({"subscription_type": subscription, "rate_limits_available": True,
                         "rate_limits": rate_limits})


def rows(rate_limits: object, account: Account = MAX, subscription: object = "max"
         ) -> list[tuple[Any, ...]]:
    snapshot = parse_get_usage(limits(rate_limits, subscription), account, completed_at=DONE)
    return [row(m) for m in snapshot.measurements]


# -- the captured runs, exactly -----------------------------------------------------------------

NOON = datetime(2026, 11, 30, 12, 19, 40, tzinfo=UTC)
WEEK_END = datetime(2026, 12, 3, 22, 19, 40, tzinfo=UTC)
NAMED = [
    rate("Claude · 5 hour", 23, NOON, "5 hour", H5),
    rate("Claude · weekly", 41, WEEK_END, "weekly", D7),
    rate("Claude · weekly · Opus", 12, WEEK_END, "weekly", model="opus"),
    rate("Claude · weekly · Sonnet", 5, WEEK_END, "weekly", model="sonnet"),
]


def test_a_subscriber_reading_normalizes_exactly() -> None:
    snapshot = parse("control-usage-subscriber-out.jsonl")
    assert [row(m) for m in snapshot.measurements] == [
        *NAMED,
        # model_scoped: display_name only, no model id; its Z time reads as UTC.
        rate("Claude · weekly · Fable", 17, WEEK_END, "weekly"),
    ]
    assert snapshot.observed_at == DONE


def test_without_growthbook_there_are_no_model_scoped_rows() -> None:
    snapshot = parse("control-usage-subscriber-telemetry-disabled-out.jsonl")
    assert [row(m) for m in snapshot.measurements] == NAMED


@pytest.mark.parametrize(("name", "kind"), [
    ("control-usage-signed-out-out.jsonl", ErrorKind.UNAUTHENTICATED),
    ("control-usage-api-key-out.jsonl", ErrorKind.UNSUPPORTED),
    ("control-usage-auth-token-env-out.jsonl", ErrorKind.UNSUPPORTED),
    ("control-usage-oauth-token-env-out.jsonl", ErrorKind.UNSUPPORTED),
    ("control-usage-bedrock-out.jsonl", ErrorKind.UNSUPPORTED),
    ("control-usage-vertex-out.jsonl", ErrorKind.UNSUPPORTED),
    ("control-usage-subscriber-inference-scope-only-out.jsonl", ErrorKind.UNSUPPORTED),
    ("control-usage-subscriber-with-api-key-out.jsonl", ErrorKind.UNSUPPORTED),
    # rate_limits_available true, rate_limits null: the fetch was skipped or failed.
    ("control-usage-subscriber-essential-traffic-only-out.jsonl", ErrorKind.COMMAND_FAILED),
    ("control-usage-subscriber-no-subscription-type-out.jsonl", ErrorKind.COMMAND_FAILED),
    ("control-usage-subscriber-usage-429-out.jsonl", ErrorKind.COMMAND_FAILED),
    ("control-usage-subscriber-usage-error-envelope-out.jsonl", ErrorKind.COMMAND_FAILED),
])
def test_signed_out_unsupported_and_failed_runs(name: str, kind: ErrorKind) -> None:
    error = failure(lambda: parse(name))
    assert error.kind is kind
    assert "dev@example.com" not in str(error)


# -- account classification -----------------------------------------------------------------


def init_answer(account: object) -> dict[str, Any]:
    return {"type": "control_response",
            "response": {"subtype": "success", "request_id": "clanker-init",
                         "response": {"models": [], "account": account}}}


@pytest.mark.parametrize(("name", "expected"), [
    ("control-usage-subscriber-out.jsonl", MAX),
    ("control-usage-subscriber-no-subscription-type-out.jsonl",  # "Claude API": no plan
     Account(email="dev@example.com")),
    ("control-usage-auth-token-env-out.jsonl", Account()),
    ("control-usage-oauth-token-env-out.jsonl", Account()),
])
def test_accounts_that_continue(name: str, expected: Account) -> None:
    assert read_account(response_to(name, "clanker-init")) == expected


@pytest.mark.parametrize(("account", "kind"), [
    ({"tokenSource": "none", "apiProvider": "firstParty"}, ErrorKind.UNAUTHENTICATED),
    ({"tokenSource": "none"}, ErrorKind.UNAUTHENTICATED),
    ({"apiProvider": "bedrock"}, ErrorKind.UNSUPPORTED),
    ({"apiProvider": "foundry", "email": "dev@example.com"}, ErrorKind.UNSUPPORTED),
    ({"apiProvider": 3}, ErrorKind.UNSUPPORTED),
    ({"tokenSource": "none", "apiKeySource": "apiKeyHelper"}, ErrorKind.UNSUPPORTED),
    ({"tokenSource": "claude.ai", "apiKeySource": "ANTHROPIC_API_KEY",
      "apiProvider": "firstParty"}, ErrorKind.UNSUPPORTED),
])
def test_accounts_that_stop_the_probe(account: dict[str, Any], kind: ErrorKind) -> None:
    assert failure(lambda: read_account(init_answer(account))).kind is kind


@pytest.mark.parametrize("account", [
    None, "x", {}, {"apiProvider": "firstParty"}, {"tokenSource": "none", "email": "a@b.c"},
    {"tokenSource": "none", "subscriptionType": "Claude Pro"},
])
def test_absent_or_ambiguous_accounts_are_not_claimed_as_signed_out(account: object) -> None:
    assert isinstance(read_account(init_answer(account)), Account)


@pytest.mark.parametrize(("message", "kind"), [
    ({"type": "control_response", "response": {"subtype": "error", "request_id": "clanker-init",
                                               "error": "secret"}}, ErrorKind.COMMAND_FAILED),
    ({"type": "control_response", "response": "x"}, ErrorKind.PARSE_FAILURE),
    ({"type": "control_response", "response": {"subtype": "success"}}, ErrorKind.PARSE_FAILURE),
    ({"type": "control_response", "response": {"subtype": "maybe", "response": {}}},
     ErrorKind.PARSE_FAILURE),
])
def test_broken_initialize_answers(message: dict[str, Any], kind: ErrorKind) -> None:
    error = failure(lambda: read_account(message))
    assert error.kind is kind and "secret" not in str(error)


# -- the get_usage answer -------------------------------------------------------------------------


@pytest.mark.parametrize(("payload", "kind"), [
    ({"rate_limits_available": False, "rate_limits": None}, ErrorKind.UNSUPPORTED),
    # even with limits: "false" is never an empty ok, and never read
    ({"rate_limits_available": False, "rate_limits": {"five_hour": {"utilization": 1}}},
     ErrorKind.UNSUPPORTED),
    ({"rate_limits_available": True, "rate_limits": None}, ErrorKind.COMMAND_FAILED),
    ({"rate_limits_available": True}, ErrorKind.PARSE_FAILURE),
    ({"rate_limits_available": True, "rate_limits": []}, ErrorKind.PARSE_FAILURE),
    ({"rate_limits_available": "yes", "rate_limits": {}}, ErrorKind.PARSE_FAILURE),
    ({"rate_limits": {}}, ErrorKind.PARSE_FAILURE),
])
def test_usage_answers_that_are_not_readings(payload: dict[str, Any], kind: ErrorKind) -> None:
    error = failure(lambda: parse_get_usage(usage_answer(payload), MAX, completed_at=DONE))
    assert error.kind is kind


def test_a_control_error_is_command_failed_without_its_text() -> None:
    message = {"type": "control_response",
               "response": {"subtype": "error", "request_id": "clanker-usage",
                            "error": "Unsupported control request subtype: get_usage"}}
    error = failure(lambda: parse_get_usage(message, MAX, completed_at=DONE))
    assert error.kind is ErrorKind.COMMAND_FAILED and "Unsupported" not in str(error)


def test_windows_without_a_number_are_skipped_and_nothing_left_is_an_ok_empty_reading() -> None:
    assert rows({"five_hour": None, "seven_day": {"utilization": None, "resets_at": None},
                 "seven_day_oauth_apps": None, "model_scoped": []}) == []
    assert rows({}) == []


def test_the_oauth_apps_family_is_a_row_of_its_own() -> None:
    assert rows({"seven_day_oauth_apps": {"utilization": 2.5, "resets_at": None}}) == [
        rate("Claude · weekly · OAuth apps", 2.5, None, "weekly"),
    ]


def test_overage_is_kept_and_fractions_are_not_rescaled() -> None:
    assert rows({"five_hour": {"utilization": 104, "resets_at": None},
                 "seven_day": {"utilization": 0.5, "resets_at": None}}) == [
        rate("Claude · 5 hour", 104, None, "5 hour"),
        rate("Claude · weekly", 0.5, None, "weekly"),
    ]


@pytest.mark.parametrize(("value", "expected"), [
    ("2026-11-30T12:19:40.000000+00:00", NOON),
    ("2026-11-30T12:19:40Z", NOON),
    ("2026-11-30T14:19:40+02:00", NOON),
    ("2026-11-30T12:19:40", None),  # naive: never read as local time
    ("tomorrow", None),
    (1796336380, None),  # numbers are converted by Claude itself, never here
    (None, None),
])
def test_reset_times_need_an_offset(value: object, expected: datetime | None) -> None:
    [found] = rows({"five_hour": {"utilization": 1, "resets_at": value}})
    assert found[6] == expected
    assert found[8] == (None if expected is None else expected - H5)


def test_a_model_scoped_family_already_named_is_not_duplicated() -> None:
    scoped = [{"display_name": "Opus", "utilization": 99, "resets_at": None},
              {"display_name": "sonnet", "utilization": 99, "resets_at": None},
              {"display_name": "Fable", "utilization": 17, "resets_at": None}]
    named = {"seven_day_opus": {"utilization": 12, "resets_at": None}}
    assert rows({**named, "model_scoped": scoped}) == [
        rate("Claude · weekly · Opus", 12, None, "weekly", model="opus"),
        rate("Claude · weekly · sonnet", 99, None, "weekly"),  # no named Sonnet row here
        rate("Claude · weekly · Fable", 17, None, "weekly"),
    ]


@pytest.mark.parametrize("bad", [
    "x", [], {"utilization": -1}, {"utilization": "23"}, {"utilization": True},
    {"utilization": float("inf")}, {"utilization": 10**400},
])
def test_a_malformed_window_is_skipped_while_valid_ones_survive(bad: object) -> None:
    found = rows({"five_hour": bad, "seven_day": {"utilization": 41, "resets_at": None},
                  "model_scoped": [{"display_name": "Fable", "utilization": bad}]})
    assert [r[0] for r in found] == ["Claude · weekly"]


@pytest.mark.parametrize("bad", [
    "x", {"utilization": 1}, {"display_name": "", "utilization": 1},
    {"display_name": "A\x1b[2J", "utilization": 1}, {"display_name": 5, "utilization": 1},
])
def test_a_malformed_model_scoped_entry_is_skipped(bad: object) -> None:
    found = rows({"model_scoped": [bad, {"display_name": "Fable", "utilization": 3}]})
    assert [r[0] for r in found] == ["Claude · weekly · Fable"]


@pytest.mark.parametrize("rate_limits", [
    {"five_hour": "x", "seven_day": {"utilization": -3}},
    {"model_scoped": "x"},
    {"model_scoped": [{"display_name": None, "utilization": 4}]},
])
def test_everything_malformed_is_a_parse_failure(rate_limits: dict[str, Any]) -> None:
    error = failure(lambda: rows(rate_limits))
    assert error.kind is ErrorKind.PARSE_FAILURE


@pytest.mark.parametrize(("subscription", "account", "plan"), [
    ("max", Account(), "Max"),
    ("pro", Account(), "Pro"),
    ("team", Account(), "Team"),
    ("enterprise", Account(), "Enterprise"),
    ("claude_max_20x", Account(), "Claude Max 20x"),  # other values keep their words
    (None, Account(plan="Max"), "Max"),
    (None, Account(), None),
    ("api", Account(), None),
    (3, Account(plan="Team"), "Team"),
])
def test_the_plan(subscription: object, account: Account, plan: str | None) -> None:
    [found] = rows({"five_hour": {"utilization": 1}}, account, subscription)
    assert found[13] == plan


def test_no_account_id_is_ever_invented() -> None:
    snapshot = parse("control-usage-subscriber-out.jsonl")
    assert {m.scope.account_id for m in snapshot.measurements} == {None}


def test_ignored_parts_and_unknown_future_fields_change_nothing() -> None:
    message = response_to("control-usage-subscriber-out.jsonl", "clanker-usage")
    payload = message["response"]["response"]
    payload["future"] = {"x": 1}
    payload["rate_limits"]["five_hour"]["future"] = [1]
    payload["rate_limits"]["cinder_cove"] = {"utilization": 99, "resets_at": None}
    payload["rate_limits"]["extra_usage"]["utilization"] = 99
    snapshot = parse_get_usage(message, MAX, completed_at=DONE)
    assert [r[0] for r in map(row, snapshot.measurements)] == [
        *[r[0] for r in NAMED], "Claude · weekly · Fable",
    ]


# -- the probe, against scripted sessions -------------------------------------------------------


def replaying(name: str, *, before_usage: list[dict[str, Any]] | None = None,
              exit_code: int = 0) -> ScriptedSessionExecutor:
    """Replays a capture: each control request gets its captured control response."""
    lines = fixture(name).splitlines()

    def session(_request: object) -> ScriptedSession:
        def reply(line: str) -> list[str]:
            request_id = json.loads(line)["request_id"]
            extra = before_usage if request_id == "clanker-usage" else None
            answer = [x for x in lines if json.loads(x)["response"]["request_id"] == request_id]
            return [json.dumps(m) for m in extra or ()] + answer

        return ScriptedSession(reply=reply, exit_code=exit_code)

    return ScriptedSessionExecutor(session)


def probe(executor: object, usage: ClaudeUsage | None = None) -> UsageSnapshot:
    return probe_usage(usage or ClaudeUsage(), executor, executor)


def test_the_probe_writes_exactly_the_two_captured_requests() -> None:
    executor = replaying("control-usage-subscriber-out.jsonl")
    before = datetime.now(UTC)
    snapshot = probe(executor)
    assert len(snapshot.measurements) == 5
    assert before <= snapshot.observed_at <= datetime.now(UTC)
    [request] = executor.requests
    assert request == probe_request()
    assert request.args == PROBE_ARGS and dict(request.env) == PROBE_ENV
    [session] = executor.sessions
    assert [json.loads(line) for line in session.written] == captured("control-usage-in.jsonl")
    assert session.input_closed and session.disposed


def test_signed_out_stops_before_get_usage() -> None:
    executor = replaying("control-usage-signed-out-out.jsonl")
    assert failure(lambda: probe(executor)).kind is ErrorKind.UNAUTHENTICATED
    assert len(executor.sessions[0].written) == 1


def test_unrelated_frames_and_other_responses_are_skipped() -> None:
    noise = [{"type": "system", "subtype": "init"},
             {"type": "control_response", "response": {"subtype": "success",
                                                       "request_id": "other", "response": {}}},
             {"type": "keep_alive"}]
    snapshot = probe(replaying("control-usage-subscriber-out.jsonl", before_usage=noise))
    assert len(snapshot.measurements) == 5


@pytest.mark.parametrize("frame", [
    {"type": "assistant", "message": {}}, {"type": "user", "message": {}},
    {"type": "result", "subtype": "success"}, {"type": "stream_event", "event": {}},
    {"type": "control_request", "request_id": "x",
     "request": {"subtype": "can_use_tool", "tool_name": "Bash"}},
])
def test_turn_frames_and_inbound_requests_fail_the_probe_unanswered(frame: dict[str, Any]) -> None:
    executor = replaying("control-usage-subscriber-out.jsonl", before_usage=[frame])
    assert failure(lambda: probe(executor)).kind is ErrorKind.COMMAND_FAILED
    assert len(executor.sessions[0].written) == 2  # nothing answered, nothing granted


def test_data_counts_only_after_a_clean_exit() -> None:
    executor = replaying("control-usage-subscriber-out.jsonl", exit_code=1)
    assert failure(lambda: probe(executor)).kind is ErrorKind.COMMAND_FAILED
    assert executor.sessions[0].input_closed and executor.sessions[0].disposed


# -- the probe, through the real LocalTransport, against a protocol-faithful double ---------

DOUBLE = '''
"""A stand-in for Claude Code 2.1.197's stream-json control protocol.

Started with the probe's argv (--output-format stream-json --verbose
--input-format stream-json ...), it answers what
tests/fixtures/claude/usage/control-usage-in.jsonl sent with the stdout
captured in $FAKE_CLAUDE_CAPTURE (a control-usage-*-out.jsonl): each
control_request read on stdin gets the captured control_response with the same
request_id. Every line read is logged to $FAKE_CLAUDE_LOG; the argv is logged
as its first line. At EOF on stdin it exits with $FAKE_CLAUDE_EXIT (default
0). $FAKE_CLAUDE_MODE changes one thing:
  eof-before-answer  exit 0 when get_usage arrives, without answering it
  flood              after answering initialize, print 100 KB system frames forever
  silent             read requests, never answer
  garbage            answer every request with a line that is not JSON
"""
import json, os, sys

captured = open(os.environ["FAKE_CLAUDE_CAPTURE"]).read().splitlines()
mode = os.environ.get("FAKE_CLAUDE_MODE", "replay")
log = open(os.environ["FAKE_CLAUDE_LOG"], "a")
log.write(json.dumps(sys.argv[1:]) + "\\n")
for raw in sys.stdin:
    log.write(raw)
    log.flush()
    request = json.loads(raw)
    if mode == "silent":
        continue
    if mode == "garbage":
        print("Error: something went wrong", flush=True)
        continue
    subtype = request["request"]["subtype"]
    if mode == "eof-before-answer" and subtype == "get_usage":
        sys.exit(0)
    for line in captured:
        if json.loads(line)["response"]["request_id"] == request["request_id"]:
            print(line, flush=True)
    if mode == "flood" and subtype == "initialize":
        frame = json.dumps({"type": "system", "subtype": "status", "text": "x" * 100_000})
        while True:
            print(frame, flush=True)
sys.exit(int(os.environ.get("FAKE_CLAUDE_EXIT", "0")))
'''


def real_double(tmp_path: Path, capture: str, **settings: str) -> tuple[LocalTransport, Path]:
    return script_double(tmp_path, "claude", DOUBLE, capture=str(FIXTURES / capture), **settings)


def misbehaving_double(directory: Path, behaviour: str) -> LocalTransport:
    """The double for the contract's misbehaving-process tests (test_contract.py)."""
    if behaviour == "signed-out":
        return real_double(directory, "control-usage-signed-out-out.jsonl")[0]
    settings = {"exit": "1"} if behaviour == "failed-exit" else {"mode": behaviour}
    return real_double(directory, "control-usage-subscriber-out.jsonl", **settings)[0]


def test_the_double_replays_a_reading_through_the_real_transport(tmp_path: Path) -> None:
    transport, log = real_double(tmp_path, "control-usage-subscriber-out.jsonl")
    snapshot = probe(transport)
    assert [row(m) for m in snapshot.measurements][:4] == NAMED
    argv, *sent = log.read_text().splitlines()
    assert tuple(json.loads(argv)) == PROBE_ARGS
    assert [json.loads(line) for line in sent] == captured("control-usage-in.jsonl")


# -- policy and registration --------------------------------------------------------------------


def test_the_request_is_the_isolated_probe_bounded() -> None:
    request = probe_request()
    assert request.argv == ("claude", *PROBE_ARGS)
    assert "--print" not in request.args and "--bare" not in request.args
    assert 0 < request.timeout <= MAX_TIMEOUT and request.timeout == 30
    assert request.max_output_bytes == 512 * 1024
    assert dict(request.env) == PROBE_ENV and request.stdin is None


# Junk, cut and altered outputs through the probe: the contract (test_contract.py).


# -- the real CLI, when it is installed ---------------------------------------------------------


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("claude") is None, reason="claude is not installed")
def test_real_claude_signed_out_is_unauthenticated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh config directory, no key, no token: the live signed-out shape."""
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "CLAUDE_CODE_USE_")) or name in (
            "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CONFIG_DIR",
        ):
            monkeypatch.delenv(name)
    transport = LocalTransport({**os.environ, "HOME": str(tmp_path),
                                "CLAUDE_CONFIG_DIR": str(tmp_path / ".claude")})
    error = failure(lambda: probe(transport))
    assert error.kind is ErrorKind.UNAUTHENTICATED
