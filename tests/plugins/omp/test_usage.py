"""omp's usage capability, against `omp usage --json` from omp 18.2.3 (tests/fixtures/omp/usage).

Fixture kinds (see its README): live runs; the real CLI with a stubbed upstream
(``usage-json-stub-upstream*``); and ``built`` documents written from omp's own
report types.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import MAX_TIMEOUT, CommandRequest, CommandResult, LocalTransport
from clanker.testing import ScriptedExecutor
from clanker.testing.doubles import probe_usage
from clanker.usage.types import Measurement, MeasurementKind, UsageSnapshot
from clanker_omp.usage import OmpUsage, parse_omp_usage, usage_request

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "omp" / "usage"
DONE = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def ms(value: int) -> datetime:
    return datetime.fromtimestamp(value / 1000, tz=UTC)


def parse(text: str) -> UsageSnapshot:
    return parse_omp_usage(text, completed_at=DONE)


def parse_document(document: object) -> UsageSnapshot:
    return parse(json.dumps(document))


def row(m: Measurement) -> tuple[Any, ...]:
    period = m.period
    return (
        m.label, m.kind.value, m.unit, m.used, m.remaining, m.limit,
        m.resets_at, period.label if period else None, period.starts_at if period else None,
        m.scope.provider_id, m.scope.account_id, m.scope.account_label, m.scope.plan_label,
        m.scope.model_id,
    )


def failure(text: str) -> HarnessCapabilityError:
    with pytest.raises(HarnessCapabilityError) as caught:
        parse(text)
    return caught.value


def report(*limits: object, **fields: object) -> dict[str, Any]:
    return {"provider": "zai", "fetchedAt": 1796032280000, "limits": list(limits), **fields}


def limit(amount: dict[str, Any], label: str = "L", **fields: object) -> dict[str, Any]:
    return {"id": "x", "label": label, "scope": {"provider": "zai"}, "amount": amount, **fields}


def only(document: object) -> Measurement:
    [measurement] = parse_document(document).measurements
    return measurement


# -- the live and stubbed fixtures --------------------------------------------------------------

H5, D7 = timedelta(hours=5), timedelta(days=7)
CODEX = ("openai-codex", "acct-0000", "dev@example.com", "plus")
CLAUDE = ("anthropic", "acct-0001", "dev@example.com", None)
AG = ("google-antigravity", None, "dev@example.com", None)


def test_the_stubbed_upstream_report_normalizes_exactly() -> None:
    snapshot = parse(fixture("usage-json-stub-upstream.json"))
    assert snapshot.observed_at == ms(1796032366773)  # the oldest report's fetchedAt
    spark = "GPT-5.3-Codex-Spark"  # omp copies Codex's limit_name here, verbatim
    assert [row(m) for m in snapshot.measurements] == [
        ("5 hours", "rate-limit", "percent", 12.0, 88.0, 100.0, ms(1796039560000), "5 hours",
         ms(1796039560000) - H5, *CODEX, None),
        ("7 days", "rate-limit", "percent", 34.0, 66.0, 100.0, ms(1796291560000), "7 days",
         ms(1796291560000) - D7, *CODEX, None),
        ("5 hours (Spark)", "rate-limit", "percent", 3.0, 97.0, 100.0, ms(1796046760000),
         "5 hours", ms(1796046760000) - H5, *CODEX, spark),
        ("7 days (Spark)", "rate-limit", "percent", 1.0, 99.0, 100.0, ms(1796392360000),
         "7 days", ms(1796392360000) - D7, *CODEX, spark),
        ("Claude 5 Hour", "rate-limit", "percent", 41.0, 59.0, 100.0, ms(1796043160947),
         "5 Hour", ms(1796043160947) - H5, *CLAUDE, None),
        ("Claude 7 Day", "rate-limit", "percent", 18.0, 82.0, 100.0, ms(1796464360947),
         "7 Day", ms(1796464360947) - D7, *CLAUDE, None),
        ("Claude 7 Day (Fable)", "rate-limit", "percent", 5.0, 95.0, 100.0, ms(1796464360947),
         "7 Day", ms(1796464360947) - D7, *CLAUDE, None),
        ("Claude Extra Usage", "spend", "usd", 12.34, 37.66, 50.0, None, None, None,
         *CLAUDE, None),
        # The shared Claude & GPT pool appears once per counter; one copy is kept.
        ("Claude & GPT (shared)", "rate-limit", "percent", 50.0, 50.0, 100.0,
         ms(1796039560947), "5 Hour", ms(1796039560947) - H5, *AG, None),
        # 19.999999999999996 upstream: float noise is rounded away.
        ("Gemini", "rate-limit", "percent", 20.0, 80.0, 100.0, ms(1796035960947), "5 Hour",
         ms(1796035960947) - H5, *AG, None),
        ("Gemini", "rate-limit", "percent", 5.0, 95.0, 100.0, ms(1796356360947), "Weekly",
         ms(1796356360947) - D7, *AG, None),
        ("Claude & GPT (shared)", "rate-limit", "percent", 0.0, 100.0, 100.0,
         ms(1796572360947), "Weekly", ms(1796572360947) - D7, *AG, None),
    ]


def test_provider_ids_are_the_verified_quota_namespaces() -> None:
    """Spec, "Provider identity": the names direct Codex, Claude and Agy also report."""
    snapshot = parse(fixture("usage-json-stub-upstream.json"))
    providers = {m.scope.provider_id for m in snapshot.measurements}
    assert providers == {"openai-codex", "anthropic", "google-antigravity"}


def test_served_last_good_reports_carry_their_real_age() -> None:
    text = fixture("usage-json-stub-upstream-last-good.json")
    snapshot = parse(text)
    assert len(snapshot.measurements) == 12
    assert snapshot.observed_at == ms(1796032460673)
    generated = ms(json.loads(text)["generatedAt"])
    assert generated - snapshot.observed_at > timedelta(seconds=11)


@pytest.mark.parametrize("name", [
    "usage-json-no-credentials.json",
    "usage-json-dummy-anthropic-key.json",
    "usage-json-credentials-fetch-failed.json",  # accountsWithoutUsage is ignored, per spec
])
def test_no_reports_is_an_ok_reading_with_no_measurements(name: str) -> None:
    snapshot = parse(fixture(name))
    assert snapshot.measurements == ()
    assert snapshot.observed_at == DONE  # no report: when the probe finished


def test_a_report_whose_limits_have_no_numbers_is_ok_and_empty() -> None:
    snapshot = parse(fixture("usage-json-built-no-numeric-data.json"))
    assert snapshot.measurements == ()
    assert snapshot.observed_at == ms(1796032399000)


def test_the_built_edge_cases_normalize_exactly() -> None:
    snapshot = parse(fixture("usage-json-built-edge-cases.json"))
    # The malformed reports are older; only valid reports date the reading.
    assert snapshot.observed_at == ms(1796032280000)
    zai = ("zai", "acct-0100", "dev@example.com", "Coding Max")  # metadata.plan
    assert [row(m) for m in snapshot.measurements] == [
        ("Tokens", "tokens", "tokens", 120000.0, 880000.0, 1000000.0, ms(1796039600000),
         "5 Hour", ms(1796039600000) - H5, *zai, None),
        ("Requests", "rate-limit", "requests", 200.0, 300.0, 500.0, None, "Monthly", None,
         *zai, None),
        ("Fraction only", "allowance", "percent", 25.0, 75.0, 100.0, None, None, None,
         *zai, None),
        ("Remaining fraction only", "rate-limit", "percent", 60.0, 40.0, 100.0,
         ms(1796050400000), "Daily", ms(1796050400000) - timedelta(days=1), *zai, "glm-9"),
        ("Overage", "rate-limit", "percent", 125.0, 0.0, 100.0, ms(1796140400000), "7 Day",
         ms(1796140400000) - D7, *zai, None),
        ("Negative", "allowance", "percent", 0.0, 100.0, 100.0, None, None, None, *zai, None),
        ("Credits", "allowance", "credits", 42.0, None, None, None, None, None, *zai, None),
        ("Monthly spend", "spend", "usd", 12.5, 7.5, 20.0, ms(1797472400000), "Monthly", None,
         *zai, None),
        ("Minutes", "allowance", "minutes", 30.0, 90.0, None, None, None, None, *zai, None),
        # scope.tier "plus" is never a plan; metadata.planType is.
        ("Prompts", "rate-limit", "percent", 15.0, 85.0, 100.0, ms(1796036000000), "5 Hour",
         ms(1796036000000) - H5, "minimax-code", None, None, "plus", None),
    ]


@pytest.mark.parametrize("name", [
    "usage-json-built-all-malformed.json",
    "usage-json-built-reports-not-array.json",
    "usage-json-built-root-array.json",
    "usage-text-credentials-fetch-failed.txt",  # text mode is never parsed
])
def test_unrecognized_documents_are_parse_failures(name: str) -> None:
    assert failure(fixture(name)).kind is ErrorKind.PARSE_FAILURE


# -- the rules, one at a time ---------------------------------------------------------------


@pytest.mark.parametrize(("amount", "used"), [
    ({"unit": "percent", "usedFraction": 0.3, "used": 90, "limit": 100}, 30.0),
    ({"unit": "percent", "used": 3, "limit": 4}, 75.0),
    ({"unit": "percent", "used": 42}, 42.0),
    ({"unit": "percent", "remainingFraction": 0.9}, 10.0),
    ({"unit": "percent", "remainingFraction": 1.5}, 0.0),
    ({"unit": "percent", "used": 3, "limit": 0}, 3.0),  # no division by a zero limit
])
def test_the_used_fraction_follows_omps_own_precedence(
    amount: dict[str, Any], used: float
) -> None:
    measurement = only({"reports": [report(limit(amount))]})
    assert (measurement.used, measurement.remaining, measurement.limit) == (
        used, max(0.0, 100 - used), 100.0
    )


def test_absolute_units_derive_the_missing_value_and_keep_overage() -> None:
    document = {"reports": [report(
        limit({"unit": "requests", "used": 120, "limit": 100}, "Over"),
        limit({"unit": "bytes", "remaining": 5, "limit": 8}, "Left"),
        limit({"unit": "requests", "limit": 100}, "Limit only"),  # no number: skipped
    )]}
    over, left = parse_document(document).measurements
    assert (over.used, over.remaining, over.limit) == (120.0, 0.0, 100.0)
    assert (left.used, left.remaining, left.limit) == (3.0, 5.0, 8.0)
    assert over.kind is left.kind is MeasurementKind.ALLOWANCE  # no window


def test_the_unknown_unit_is_skipped_even_with_a_fraction() -> None:
    document = {"reports": [report(
        limit({"unit": "unknown", "remaining": 7}),
        limit({"unit": "unknown", "usedFraction": 0.5}),
    )]}
    snapshot = parse_document(document)
    assert snapshot.measurements == ()


def test_shared_copies_collapse_within_a_report_but_not_across_reports() -> None:
    def shared(counter: str) -> dict[str, Any]:
        return limit({"unit": "percent", "usedFraction": 0.5}, f"Shared {counter}",
                     scope={"provider": "google-antigravity", "sharedGroup": "3p-5h:5h"})

    document = {"reports": [
        report(shared("a"), shared("b"), provider="google-antigravity"),
        report(shared("c"), provider="google-antigravity", metadata={"accountId": "other"}),
    ]}
    labels = [m.label for m in parse_document(document).measurements]
    assert labels == ["Shared a", "Shared c"]


def test_a_copy_without_numbers_does_not_hide_the_one_with_them() -> None:
    scope = {"provider": "google-antigravity", "sharedGroup": "g"}
    document = {"reports": [report(
        limit({"unit": "percent"}, "Empty", scope=scope),
        limit({"unit": "percent", "used": 10}, "Full", scope=scope),
    )]}
    assert only(document).label == "Full"


def test_identity_comes_only_from_documented_fields() -> None:
    document = {"reports": [report(
        limit({"unit": "percent", "used": 1}, "Scoped",
              scope={"provider": "openai-codex", "accountId": "scope-acct", "tier": "pro"}),
        limit({"unit": "percent", "used": 1}, "Meta", scope={"provider": "openai-codex"}),
        provider="openai-codex",
        metadata={"accountId": "meta-acct", "email": "dev@example.com", "planType": "plus",
                  "plan": "ignored when planType is there", "orgId": "org-1"},
    )]}
    scoped, meta = parse_document(document).measurements
    assert scoped.scope.account_id == "scope-acct"
    assert meta.scope.account_id == "meta-acct"
    assert scoped.scope.plan_label == meta.scope.plan_label == "plus"
    assert scoped.scope.account_label == "dev@example.com"


def test_nothing_is_invented_without_identity() -> None:
    measurement = only({"reports": [{"provider": "kimi-code", "limits": [
        {"label": "Quota", "amount": {"unit": "percent", "used": 5}}
    ]}]})
    scope = measurement.scope
    assert scope.provider_id == "kimi-code"  # from the report: the limit has no scope
    assert (scope.account_id, scope.account_label, scope.plan_label, scope.model_id) == (
        None, None, None, None
    )


@pytest.mark.parametrize("resets_at", [
    1796039560,  # seconds, not milliseconds
    1796039560 * 1000 * 1000,  # microseconds
    -1, 0, True, "1796039560000", None, 1e400,
])
def test_an_implausible_reset_time_is_omitted_and_the_meter_kept(resets_at: object) -> None:
    window = {"label": "5 Hour", "durationMs": 18000000, "resetsAt": resets_at}
    measurement = only({"reports": [report(limit({"unit": "percent", "used": 5}, window=window))]})
    assert measurement.resets_at is None
    assert measurement.period is not None
    assert (measurement.period.label, measurement.period.starts_at) == ("5 Hour", None)
    assert measurement.kind is MeasurementKind.RATE_LIMIT


def test_a_seconds_looking_fetched_at_does_not_date_the_reading() -> None:
    document = {"reports": [report(limit({"unit": "percent", "used": 5}), fetchedAt=1796032280)]}
    assert parse_document(document).observed_at == DONE


@pytest.mark.parametrize("amount", [
    {"unit": "percent", "used": float("nan")},
    {"unit": "percent", "used": float("inf")},
    {"unit": "percent", "used": True},
    {"unit": "percent", "used": "50"},
    {"unit": "percent", "used": 10**400},
    {"unit": "tokens", "used": float("-inf"), "limit": 5},
])
def test_values_that_are_not_finite_numbers_count_as_absent(amount: dict[str, Any]) -> None:
    text = json.dumps({"reports": [report(limit(amount))]})  # NaN/Infinity as omp never prints
    assert parse(text).measurements == ()


@pytest.mark.parametrize("bad", [
    "not-an-object",
    {"label": 12, "amount": {"unit": "percent", "used": 1}},
    {"label": "", "amount": {"unit": "percent", "used": 1}},
    {"label": "bell\x07", "amount": {"unit": "percent", "used": 1}},
    {"label": "No amount"},
    {"label": "No unit", "amount": {"used": 1}},
    {"label": "Unit not text", "amount": {"unit": 5, "used": 1}},
    {"label": "Negative limit", "amount": {"unit": "tokens", "used": 1, "limit": -5}},
])
def test_a_malformed_limit_is_skipped_while_valid_ones_survive(bad: object) -> None:
    good = limit({"unit": "percent", "used": 9}, "Good")
    assert only({"reports": [report(bad, good)]}).label == "Good"
    assert failure(json.dumps({"reports": [report(bad)]})).kind is ErrorKind.PARSE_FAILURE


@pytest.mark.parametrize("bad", [
    None, [], {"provider": "", "limits": []}, {"provider": "zai"},
    {"provider": "zai", "limits": {}}, {"provider": "z\nai", "limits": []},
])
def test_a_malformed_report_is_skipped_while_valid_ones_survive(bad: object) -> None:
    good = report(limit({"unit": "percent", "used": 9}, "Good"))
    assert only({"reports": [bad, good]}).label == "Good"
    assert failure(json.dumps({"reports": [bad]})).kind is ErrorKind.PARSE_FAILURE


def test_unknown_future_fields_are_tolerated_everywhere() -> None:
    base = limit({"unit": "percent", "used": 9, "futureAmount": [1]}, "Good",
                 scope={"provider": "zai", "futureScope": {"x": 1}},
                 window={"label": "5 Hour", "futureWindow": None}, futureLimit="x")
    document = {"reports": [report(base, futureReport=[1, 2])], "futureTop": {"a": 1},
                "accountsWithoutUsage": "not even a list", "capacity": None}
    measurement = only(document)
    assert measurement.label == "Good"
    assert measurement.period is not None and measurement.period.label == "5 Hour"


# -- the probe ------------------------------------------------------------------------------


def run_probe(executor: object) -> UsageSnapshot:
    return probe_usage(OmpUsage(), executor)



def test_the_request_is_bounded_and_passes_no_environment() -> None:
    request = usage_request()
    assert request.argv == ("omp", "usage", "--json")  # never `omp usage invalidate`
    assert 0 < request.timeout <= MAX_TIMEOUT
    assert request.timeout == 30
    assert request.stdin is None and request.cwd is None
    # PI_CODING_AGENT_DIR and the like are neither set nor stripped: the
    # user's environment picks omp's store, exactly as for a launch.
    assert dict(request.env) == {}


def test_the_probe_replays_a_captured_run() -> None:
    executor = ScriptedExecutor.returning(fixture("usage-json-stub-upstream.json"))
    snapshot = run_probe(executor)
    assert [r.argv for r in executor.requests] == [("omp", "usage", "--json")]
    assert len(snapshot.measurements) == 12
    assert snapshot.observed_at == ms(1796032366773)


def test_an_empty_reading_is_dated_when_the_probe_finished() -> None:
    before = datetime.now(UTC)
    snapshot = run_probe(ScriptedExecutor.returning(fixture("usage-json-no-credentials.json")))
    assert snapshot.measurements == ()
    assert before <= snapshot.observed_at <= datetime.now(UTC)


@pytest.mark.parametrize("stderr", [
    "usage-json-broker-missing-token.stderr.tail.txt",
    "usage-json-unknown-option.stderr.txt",
    "usage-json-bad-action.stderr.txt",
])
def test_a_non_zero_exit_is_command_failed_and_stderr_is_never_shown(stderr: str) -> None:
    text = fixture(stderr)
    # Even a document on stdout is not data after a failed run.
    executor = ScriptedExecutor.returning(fixture("usage-json-stub-upstream.json"), text, 1)
    with pytest.raises(HarnessCapabilityError) as caught:
        run_probe(executor)
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    for line in text.splitlines():
        if line.strip():
            assert line.strip() not in str(caught.value)


# Junk, cut and altered outputs through the probe: the contract (test_contract.py).


# -- the real CLI, when it is installed -----------------------------------------------------


@pytest.fixture
def fresh_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with no omp credentials and no key in the environment to call a vendor with."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, str(tmp_path / "xdg" / name.lower()))
    # The test, not the probe, picks omp's own default store (see the docs).
    for name in ("PI_CODING_AGENT_DIR", "PI_CODING_AGENT_SESSION_DIR", "PI_CONFIG_DIR",
                 "OMP_PROFILE", "PI_PROFILE", "OMP_AUTH_BROKER_URL"):
        monkeypatch.delenv(name, raising=False)
    for name in list(os.environ):
        if name.endswith(("_API_KEY", "_TOKEN", "_AUTH_TOKEN")):
            monkeypatch.delenv(name)
    return tmp_path


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("omp") is None, reason="omp is not installed")
def test_real_omp_without_credentials_is_an_ok_empty_reading(fresh_home: Path) -> None:
    transport = LocalTransport()
    before = datetime.now(UTC)
    snapshot = run_probe(transport)
    assert snapshot.measurements == ()
    assert snapshot.observed_at >= before
    assert (fresh_home / ".omp" / "agent" / "agent.db").exists()  # omp's own default store


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("omp") is None, reason="omp is not installed")
def test_real_omp_rejects_an_unknown_option_with_exit_1(fresh_home: Path) -> None:
    """Why a non-zero exit is command-failed: it means argv or configuration errors."""
    request = usage_request()
    bogus = CommandRequest(command="omp", args=(*request.args, "--bogus"), timeout=30)
    result: CommandResult = asyncio.run(LocalTransport().run(bogus))
    assert (result.exit_code, result.stdout) == (1, "")
