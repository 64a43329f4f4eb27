"""agy's usage capability (tests/fixtures/agy/usage).

Every fixture is BUILT from the spec and public descriptions of agy
1.2.1-1.2.14 output; agy cannot be installed here, so there is no
``real_cli`` test for it. The fake ``agy`` below only reproduces the
documented exchange (the version line, the signed-out wait) through the real
``LocalTransport``.
"""

from __future__ import annotations

import json
import stat
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import MAX_TIMEOUT, CommandRequest, CommandResult, LocalTransport
from clanker.testing import FailingExecutor, ScriptedExecutor
from clanker.testing.doubles import probe_usage
from clanker.testing.strategies import (
    junk_text,
)
from clanker.usage.types import Measurement, UsageSnapshot
from clanker_agy.usage import (
    PROVIDER_ID,
    TURN_BACKOFF,
    AgyUsage,
    check_version,
    parse_agy_usage,
    usage_request,
    version_request,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agy" / "usage"
DONE = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
SUCCESS = "usage-json-success.json"
H5, D7 = timedelta(hours=5), timedelta(days=7)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def parse(stdout: str, exit_code: int = 0) -> UsageSnapshot:
    return parse_agy_usage(stdout, exit_code=exit_code, completed_at=DONE)


def failure(stdout: str, exit_code: int = 0) -> HarnessCapabilityError:
    with pytest.raises(HarnessCapabilityError) as caught:
        parse(stdout, exit_code)
    return caught.value


def row(m: Measurement) -> tuple[Any, ...]:
    period = m.period
    return (m.label, m.kind.value, m.unit, m.used, m.remaining, m.limit, m.resets_at,
            period.label if period else None, period.starts_at if period else None)


def envelope(*buckets: object, group: object = "Gemini Models", **fields: object) -> str:
    return json.dumps({
        "conversation_id": "", "status": "SUCCESS", "num_turns": 0, "duration_seconds": 0,
        "usage": {"input_tokens": 0, "output_tokens": 0, "thinking_tokens": 0,
                  "cache_read_tokens": 0, "total_tokens": 0},
        "response": "(never parsed)",
        "command": {"name": "usage", "data": {"groups": [
            {"name": group, "buckets": list(buckets)},
        ]}},
        **fields,
    })


def bucket(**fields: object) -> dict[str, Any]:
    return {"id": "gemini-5h", "name": "Five Hour Limit Remaining", "window": "5h",
            "remaining_fraction": 0.5, "reset_time": "2026-11-30T13:31:12Z", **fields}


def without(mapping: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k not in keys}


# -- the version gate ------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "version"), [
    ("version-1.2.12.txt", (1, 2, 12)),
    ("version-v1.2.14.txt", (1, 2, 14)),
    ("version-1.1.11.txt", (1, 1, 11)),
])
def test_plain_versions_from_1_1_11_pass_the_gate(name: str, version: tuple[int, ...]) -> None:
    assert check_version(CommandResult(fixture(name), "", 0)) == version


@pytest.mark.parametrize("stdout", [
    fixture("version-1.1.10.txt"),
    fixture("version-1.1.11-rc.1.txt"),
    fixture("version-noisy.txt"),
    fixture("version-two-lines.txt"),
    "1.0.99\n", "0.99.99\n", "", "\n", "1.2\n", "1.2.12.1\n", " 1.2.12\n", "1.2.12 \n",
    "1.2.12\n\n", "V1.2.12\n", "v 1.2.12\n", "\u0661.\u0662.\u0661\u0662\n",  # Arabic-Indic digits
])
def test_anything_else_is_unsupported(stdout: str) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        check_version(CommandResult(stdout, "", 0))
    assert caught.value.kind is ErrorKind.UNSUPPORTED


def test_a_crlf_line_and_a_noisy_stderr_still_pass() -> None:
    assert check_version(CommandResult("1.2.12\r\n", "update available\n", 0)) == (1, 2, 12)


def test_a_failed_version_run_is_unsupported() -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        check_version(CommandResult(fixture("version-1.2.12.txt"), "", 1))
    assert caught.value.kind is ErrorKind.UNSUPPORTED


# -- the reply --------------------------------------------------------------------------------


def test_the_success_reply_normalizes_exactly() -> None:
    snapshot = parse(fixture(SUCCESS))
    assert snapshot.observed_at == DONE  # agy gives no time: when the probe finished
    gemini_weekly, gemini_5h = at("2026-12-05T20:14:34+00:00"), at("2026-11-30T12:31:12+00:00")
    third_weekly = at("2026-12-07T09:58:00+00:00")
    assert [row(m) for m in snapshot.measurements] == [
        ("Gemini Models · Weekly Limit Remaining", "rate-limit", "percent", 3.88, 96.12, 100.0,
         gemini_weekly, "weekly", gemini_weekly - D7),
        # +01:00 is kept as the same instant, in UTC.
        ("Gemini Models · Five Hour Limit Remaining", "rate-limit", "percent", 13.35, 86.65,
         100.0, gemini_5h, "5 hour", gemini_5h - H5),
        ("Claude and GPT models · Weekly Limit Remaining", "rate-limit", "percent", 0.0, 100.0,
         100.0, third_weekly, "weekly", third_weekly - D7),
        # remaining_fraction 1.2 clamps to 1; a reset without an offset is omitted.
        ("Claude and GPT models · Five Hour Limit Remaining", "rate-limit", "percent", 0.0,
         100.0, 100.0, None, "5 hour", None),
    ]  # 3p-daily is disabled: skipped, never shown as 100 % left
    assert {m.resets_at.utcoffset() for m in snapshot.measurements if m.resets_at} == {
        timedelta(0)
    }


def test_scope_is_only_the_provider_namespace() -> None:
    """Spec, "Provider identity": the id omp's Antigravity reports use too."""
    assert PROVIDER_ID == "google-antigravity"
    for m in parse(fixture(SUCCESS)).measurements:
        assert (m.scope.provider_id, m.scope.account_id, m.scope.account_label,
                m.scope.plan_label, m.scope.model_id) == ("google-antigravity", None, None,
                                                          None, None)


def test_an_absent_enabled_means_enabled() -> None:
    snapshot = parse(fixture("usage-json-success-no-enabled-field.pretty.json"))
    assert [(m.label, m.remaining, m.used) for m in snapshot.measurements] == [
        ("Gemini Models · Weekly Limit Remaining", 96.1241, 3.8759),
        ("Gemini Models · Five Hour Limit Remaining", 86.6497, 13.3503),
        ("Claude and GPT models · Weekly Limit Remaining", 100.0, 0.0),
        ("Claude and GPT models · Five Hour Limit Remaining", 100.0, 0.0),
    ]


def test_only_disabled_buckets_is_an_ok_empty_reading() -> None:
    assert parse(fixture("usage-json-disabled-only.json")).measurements == ()


@pytest.mark.parametrize("flags", [{"enabled": False}, {"disabled": True},
                                   {"enabled": True, "disabled": True}])
def test_disabled_buckets_are_skipped(flags: dict[str, bool]) -> None:
    assert parse(envelope(bucket(**flags), bucket(name="Other"))).measurements[0].label == (
        "Gemini Models · Other"
    )
    assert len(parse(envelope(bucket(**flags), bucket(name="Other"))).measurements) == 1


def test_an_omitted_fraction_with_a_reset_is_an_exhausted_bucket() -> None:
    weekly_reset = at("2026-12-05T20:14:34+00:00")
    snapshot = parse(fixture("usage-json-omitted-fraction.json"))
    assert [row(m) for m in snapshot.measurements] == [
        ("Gemini Models · Weekly Limit Remaining", "rate-limit", "percent", 100.0, 0.0, 100.0,
         weekly_reset, "weekly", weekly_reset - D7),
        ("Gemini Models · Five Hour Limit Remaining", "rate-limit", "percent", 50.0, 50.0,
         100.0, at("2026-11-30T13:31:12+00:00"), "5 hour", at("2026-11-30T08:31:12+00:00")),
    ]


@pytest.mark.parametrize("shape", [
    without(bucket(), "remaining_fraction", "reset_time"),  # nothing to go on
    without(bucket(reset_time="soon"), "remaining_fraction"),  # no readable reset
    without(bucket(reset_time="2026-11-30T13:31:12"), "remaining_fraction"),  # no offset
    bucket(remaining_fraction=None),  # null is not what omitempty produces
])
def test_a_bucket_without_a_number_or_reset_is_skipped_not_malformed(
    shape: dict[str, Any]
) -> None:
    assert parse(envelope(shape)).measurements == ()


@pytest.mark.parametrize(("fraction", "remaining"), [
    (0, 0.0), (1, 100.0), (-0.5, 0.0), (1.7, 100.0), (0.333333333, 33.3333),
])
def test_fractions_clamp_to_0_1_and_lose_float_noise(fraction: float, remaining: float) -> None:
    [measurement] = parse(envelope(bucket(remaining_fraction=fraction))).measurements
    assert (measurement.remaining, measurement.used, measurement.limit) == (
        remaining, round(100 - remaining, 4), 100.0
    )


@pytest.mark.parametrize(("window", "label", "starts"), [
    ("5h", "5 hour", at("2026-11-30T08:31:12+00:00")),
    ("weekly", "weekly", at("2026-11-23T13:31:12+00:00")),
    ("daily", "daily", None),  # an unknown window: kept verbatim, no start derived
    (None, None, None),
    (7, None, None),
])
def test_period_labels_and_starts_come_only_from_known_windows(
    window: object, label: str | None, starts: datetime | None
) -> None:
    [measurement] = parse(envelope(bucket(window=window))).measurements
    assert measurement.period is not None
    assert (measurement.period.label, measurement.period.starts_at) == (label, starts)
    assert measurement.resets_at == measurement.period.ends_at == at("2026-11-30T13:31:12Z")


@pytest.mark.parametrize("reset_time", [
    "2026-11-30T13:31:12", "2026-11-30", "tomorrow", 1796032366, "2026-11-30T25:00:00Z", "",
])
def test_a_reset_without_an_explicit_offset_is_omitted(reset_time: object) -> None:
    [measurement] = parse(envelope(bucket(reset_time=reset_time))).measurements
    assert measurement.resets_at is None
    assert measurement.period is not None and measurement.period.starts_at is None


def test_malformed_groups_and_buckets_are_skipped_while_valid_ones_survive() -> None:
    text = json.dumps({**json.loads(envelope(
        bucket(), "not-a-bucket", bucket(name=5), bucket(remaining_fraction="0.5"),
        bucket(remaining_fraction=True), bucket(enabled="yes"), bucket(name="bell\x07"),
    )), "future": 1})
    document = json.loads(text)
    document["command"]["data"]["groups"] += ["not-a-group", {"name": "No buckets"},
                                              {"name": 5, "buckets": [bucket()]}]
    [measurement] = parse(json.dumps(document)).measurements
    assert measurement.label == "Gemini Models · Five Hour Limit Remaining"


def test_everything_malformed_is_a_parse_failure() -> None:
    assert failure(fixture("usage-json-all-malformed.json")).kind is ErrorKind.PARSE_FAILURE


@pytest.mark.parametrize("fraction", [float("nan"), float("inf"), 10**400, "1", [1]])
def test_a_fraction_that_is_not_a_finite_number_is_malformed(fraction: object) -> None:
    assert failure(envelope(bucket(remaining_fraction=fraction))).kind is ErrorKind.PARSE_FAILURE


@pytest.mark.parametrize("command", [
    {"name": "credits", "data": {"groups": []}},
    {"name": "usage"},
    {"name": "usage", "data": []},
    {"name": "usage", "data": {"groups": {}}},
    {"name": "usage", "data": {}},
    "usage",
    None,
])
def test_a_reply_that_is_not_a_usage_result_is_a_parse_failure(command: object) -> None:
    assert failure(envelope(command=command)).kind is ErrorKind.PARSE_FAILURE
    assert failure(fixture("usage-json-wrong-command.json")).kind is ErrorKind.PARSE_FAILURE


def test_an_empty_groups_list_is_an_ok_empty_reading() -> None:
    document = json.loads(envelope())
    document["command"]["data"]["groups"] = []
    assert parse(json.dumps(document)).measurements == ()


def test_unknown_future_fields_are_tolerated() -> None:
    document = json.loads(envelope(bucket(future={"x": 1}, description="d")))
    document["command"]["data"]["future"] = [1]
    document["command"]["data"]["groups"][0]["future"] = None
    document["future"] = "x"
    document["usage"]["cache_write_cost"] = 3  # not a *_tokens counter
    assert len(parse(json.dumps(document)).measurements) == 1


# -- the no-turn guard --------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    fixture("usage-json-turn-ran.json"),
    fixture("usage-json-turn-ran-tokens-only.json"),
    envelope(bucket(), conversation_id="c0ffee"),
    envelope(bucket(), conversation_id=None),
    envelope(bucket(), num_turns=1),
    envelope(bucket(), num_turns="0"),
    envelope(bucket(), num_turns=False),
    envelope(bucket(), usage={"input_tokens": 1}),
    envelope(bucket(), usage={"future_tokens": 0.5}),
    envelope(bucket(), usage={"output_tokens": None}),
    envelope(bucket(), usage=None),
    envelope(bucket(), usage=[0]),
    # An error envelope that ran a turn is still a turn.
    json.dumps({"conversation_id": "", "status": "ERROR", "error": "Authentication required",
                "num_turns": 1}),
])
def test_a_reply_showing_a_model_turn_is_refused_for_an_hour(text: str) -> None:
    error = failure(text)
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert error.retry_after == TURN_BACKOFF == 3600


def test_the_guard_comes_before_the_exit_status() -> None:
    assert failure(fixture("usage-json-turn-ran.json"), exit_code=1).retry_after == 3600


@pytest.mark.parametrize("fields", [
    {}, {"usage": {"input_tokens": 0.0, "total_tokens": 0}}, {"usage": {}},
])
def test_absent_guard_fields_count_as_zero(fields: dict[str, Any]) -> None:
    document = {k: v for k, v in json.loads(envelope(bucket())).items()
                if k not in ("conversation_id", "num_turns", "usage")}
    assert len(parse(json.dumps({**document, **fields})).measurements) == 1


# -- errors and exit statuses ----------------------------------------------------------------


def test_the_signed_out_envelope_is_a_generic_failure() -> None:
    error = failure(fixture("usage-json-error-auth-timeout.json"))
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert error.retry_after is None
    assert "timed out" not in str(error)


def test_a_structured_authentication_error_is_unauthenticated() -> None:
    assert failure(fixture("usage-json-error-auth-required.json")).kind is (
        ErrorKind.UNAUTHENTICATED
    )


def test_a_network_error_is_a_generic_failure_without_vendor_text() -> None:
    error = failure(fixture("usage-json-error-network.json"))
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert "googleapis" not in str(error)


@pytest.mark.parametrize("phrase", [
    "Authentication required", "NOT AUTHENTICATED", "login required: run agy",
    "credentials revoked", "Token revoked", "oauth token expired",
])
@pytest.mark.parametrize("key", ["error", "error.message", "message", "error_message"])
def test_each_signed_out_phrase_in_each_structured_field(phrase: str, key: str) -> None:
    value: object = {"message": phrase} if key == "error.message" else phrase
    field = key.split(".")[0]
    text = json.dumps({"conversation_id": "", "status": "ERROR", field: value})
    assert failure(text).kind is ErrorKind.UNAUTHENTICATED
    assert failure(text, exit_code=1).kind is ErrorKind.UNAUTHENTICATED


def test_the_human_response_is_never_read() -> None:
    text = json.dumps({"conversation_id": "", "status": "ERROR",
                       "response": "Authentication required", "error": {"code": 16}})
    assert failure(text).kind is ErrorKind.COMMAND_FAILED


def test_a_success_after_a_non_zero_exit_is_not_data() -> None:
    error = failure(fixture(SUCCESS), exit_code=1)
    assert error.kind is ErrorKind.COMMAND_FAILED


@pytest.mark.parametrize(("stdout", "exit_code", "kind"), [
    ("", 1, ErrorKind.COMMAND_FAILED),
    ("panic: runtime error\n", 2, ErrorKind.COMMAND_FAILED),
    ("", 0, ErrorKind.PARSE_FAILURE),
    ("Gemini Models\tWeekly Limit Remaining\t96%\t2026-12-05T20:14:34Z\n", 0,
     ErrorKind.PARSE_FAILURE),  # the plain print-mode rows are never parsed
    ('{"status": "SUCCESS"}', 0, ErrorKind.PARSE_FAILURE),  # not an envelope
    ("[1, 2]", 0, ErrorKind.PARSE_FAILURE),
])
def test_no_envelope(stdout: str, exit_code: int, kind: ErrorKind) -> None:
    assert failure(stdout, exit_code).kind is kind


def test_an_envelope_after_noise_on_its_own_line_is_read() -> None:
    [measurement] = parse(fixture("usage-stdout-noise-then-envelope.txt")).measurements
    assert (measurement.label, measurement.remaining) == (
        "Gemini Models · Five Hour Limit Remaining", 75.0
    )


def test_the_same_envelope_twice_is_read_once() -> None:
    line = fixture("usage-stdout-noise-then-envelope.txt").splitlines()[1]
    assert len(parse(f"{line}\n{line}\n").measurements) == 1


@pytest.mark.parametrize("name", ["usage-stdout-two-envelopes.txt",
                                  "usage-stdout-prose-embedded.txt"])
def test_conflicting_or_embedded_envelopes_are_parse_failures(name: str) -> None:
    assert failure(fixture(name)).kind is ErrorKind.PARSE_FAILURE


def test_a_pretty_envelope_after_noise_is_not_guessed_at() -> None:
    text = "Fetching quota...\n" + fixture("usage-json-success-no-enabled-field.pretty.json")
    assert failure(text).kind is ErrorKind.PARSE_FAILURE


# -- the probe ------------------------------------------------------------------------------


def by_argv(answers: dict[tuple[str, ...], CommandResult]) -> ScriptedExecutor:
    def respond(request: CommandRequest) -> CommandResult:
        return answers[request.argv]

    return ScriptedExecutor(respond)


VERSION = ("agy", "--version")
USAGE = ("agy", "--output-format", "json", "-p=/usage")


def run_probe(executor: object, usage: AgyUsage | None = None) -> UsageSnapshot:
    return probe_usage(usage or AgyUsage(), executor)



def test_the_requests_are_bounded_and_never_disable_slash_commands() -> None:
    assert version_request().argv == VERSION
    request = usage_request()
    assert request.argv == USAGE  # -p= binds the prompt
    assert "--disable-slash-commands" not in request.args
    assert request.timeout == 30 <= MAX_TIMEOUT
    for each in (version_request(), request):
        assert each.stdin is None and each.cwd is None and dict(each.env) == {}
        assert each.timeout <= MAX_TIMEOUT


def test_the_probe_checks_the_version_then_asks_for_usage() -> None:
    executor = by_argv({VERSION: CommandResult(fixture("version-1.2.12.txt"), "", 0),
                        USAGE: CommandResult(fixture(SUCCESS), "", 0)})
    before = datetime.now(UTC)
    snapshot = run_probe(executor)
    assert [r.argv for r in executor.requests] == [VERSION, USAGE]
    assert len(snapshot.measurements) == 4
    assert before <= snapshot.observed_at <= datetime.now(UTC)


@pytest.mark.parametrize("version", [
    CommandResult(fixture("version-1.1.10.txt"), "", 0),
    CommandResult(fixture("version-1.1.11-rc.1.txt"), "", 0),
    CommandResult(fixture("version-two-lines.txt"), "", 0),
    CommandResult(fixture("version-1.2.12.txt"), "", 2),
])
def test_usage_is_never_asked_of_an_unproven_version(version: CommandResult) -> None:
    executor = by_argv({VERSION: version})  # asking for anything else would fail the test
    with pytest.raises(HarnessCapabilityError) as caught:
        run_probe(executor)
    assert caught.value.kind is ErrorKind.UNSUPPORTED
    assert [r.argv for r in executor.requests] == [VERSION]


def test_a_missing_agy_stops_at_the_version_check() -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        run_probe(FailingExecutor(HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE)))
    assert caught.value.kind is ErrorKind.BINARY_UNAVAILABLE


def test_the_probe_passes_the_turn_guard_backoff_on() -> None:
    executor = by_argv({VERSION: CommandResult("1.2.14\n", "", 0),
                        USAGE: CommandResult(fixture("usage-json-turn-ran.json"), "", 0)})
    with pytest.raises(HarnessCapabilityError) as caught:
        run_probe(executor)
    assert (caught.value.kind, caught.value.retry_after) == (ErrorKind.COMMAND_FAILED, 3600)


def test_stderr_is_never_read() -> None:
    stderr = fixture("usage-stderr-signed-out.txt")
    executor = by_argv({VERSION: CommandResult("1.2.14\n", stderr, 0),
                        USAGE: CommandResult(fixture(SUCCESS), stderr, 0)})
    assert len(run_probe(executor).measurements) == 4


# -- a fake agy through the real transport ----------------------------------------------------

FAKE_AGY = '''#!{python}
"""A fake agy: prints VERSION for --version and records every other call.

For `--output-format json -p=/usage` it behaves as a signed-out agy does
(publicly described for 1.2.7): the login prompt on stderr, then a 60 s wait
for a browser before anything reaches stdout.
"""
import sys, time
if sys.argv[1:] == ["--version"]:
    print({version!r})
    sys.exit(0)
with open({log!r}, "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
sys.stderr.write({stderr!r})
sys.stderr.flush()
time.sleep(60)
print('{{"status":"ERROR","error":"authentication failed or timed out"}}')
'''


def fake_agy(tmp_path: Path, version: str) -> tuple[LocalTransport, Path]:
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    script = bin_dir / "agy"
    script.write_text(FAKE_AGY.format(python=sys.executable, version=version, log=str(log),
                                      stderr=fixture("usage-stderr-signed-out.txt")))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return LocalTransport({"PATH": str(bin_dir), "HOME": str(tmp_path)}), log


def test_a_signed_out_agy_shows_as_a_timeout(tmp_path: Path) -> None:
    transport, log = fake_agy(tmp_path, "1.2.14")
    with pytest.raises(HarnessCapabilityError) as caught:
        run_probe(transport, AgyUsage(timeout=1.5))
    assert caught.value.kind is ErrorKind.TIMEOUT
    assert log.read_text() == "--output-format json -p=/usage\n"


def test_an_old_agy_is_never_sent_usage(tmp_path: Path) -> None:
    transport, log = fake_agy(tmp_path, "1.1.10")
    with pytest.raises(HarnessCapabilityError) as caught:
        run_probe(transport)
    assert caught.value.kind is ErrorKind.UNSUPPORTED
    assert not log.exists()


# -- properties ---------------------------------------------------------------------------------
# Junk, cut and altered outputs through the probe: the contract (test_contract.py).


@PROPERTY
@given(stdout=junk_text())
def test_junk_versions_are_never_accepted_by_accident(stdout: str) -> None:
    try:
        version = check_version(CommandResult(stdout, "", 0))
    except HarnessCapabilityError as exc:
        assert exc.kind is ErrorKind.UNSUPPORTED
    else:
        assert version >= (1, 1, 11)


