"""Hermes's usage capability (tests/fixtures/hermes/usage).

hermes-agent 0.19.0, the version installed here, has no ``usage`` command:
its live answer is ``usage-json-0.19.0-invalid-choice.stderr.txt``. Every
``usage-json-built-*`` / ``usage-built-*`` file is BUILT from Hermes's
documented JSON schema (``website/docs/reference/cli-commands.md``) and the
``AccountUsageSnapshot`` model 0.19.0 ships, never captured.
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
from clanker.execution import MAX_TIMEOUT, CommandResult, LocalTransport
from clanker.testing import ScriptedExecutor
from clanker.testing.doubles import probe_usage
from clanker.usage.types import Measurement, MeasurementKind, UsageSnapshot
from clanker_hermes.launch import HermesLaunch
from clanker_hermes.usage import (
    HermesUsage,
    interpret_result,
    parse_hermes_usage,
    usage_request,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hermes" / "usage"
DONE = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
NO_USAGE_COMMAND = "usage-json-0.19.0-invalid-choice.stderr.txt"  # live, 0.19.0


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def parse(text: str) -> UsageSnapshot:
    return parse_hermes_usage(text, completed_at=DONE)


def interpret(stdout: str = "", stderr: str = "", exit_code: int = 0) -> UsageSnapshot:
    return interpret_result(CommandResult(stdout, stderr, exit_code), completed_at=DONE)


def row(m: Measurement) -> tuple[Any, ...]:
    return (m.label, m.kind.value, m.unit, m.used, m.remaining, m.limit, m.resets_at,
            m.period.label if m.period else None, m.scope.provider_id, m.scope.plan_label,
            m.scope.account_id, m.scope.account_label)


def failure(text: str) -> HarnessCapabilityError:
    with pytest.raises(HarnessCapabilityError) as caught:
        parse(text)
    return caught.value


def document(*windows: object, **fields: object) -> str:
    return json.dumps({"provider": "openai-codex", "source": "usage_api",
                       "title": "Account limits", "plan": "Plus",
                       "fetched_at": "2026-11-30T09:58:55+00:00", "windows": list(windows),
                       "details": [], "unavailable_reason": None, **fields})


def window(label: object = "Session", used: object = 10.0, **fields: object) -> dict[str, Any]:
    return {"label": label, "used_percent": used, "resets_at": None, "detail": None, **fields}


# -- the version installed here ------------------------------------------------------------


def test_hermes_without_the_usage_command_is_unsupported() -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        interpret(stderr=fixture(NO_USAGE_COMMAND), exit_code=2)
    assert caught.value.kind is ErrorKind.UNSUPPORTED
    assert caught.value.detail == "this Hermes version has no usage command"
    assert "choose from" not in str(caught.value)


def test_the_missing_command_is_recognized_through_colour_codes() -> None:
    coloured = "\x1b[1;31mhermes: error:\x1b[0m argument command: invalid choice: " \
               "\x1b[1;33m'usage'\x1b[0m (choose from \x1b[32mchat\x1b[0m, model)\n"
    with pytest.raises(HarnessCapabilityError) as caught:
        interpret(stderr=coloured, exit_code=2)
    assert caught.value.kind is ErrorKind.UNSUPPORTED


@pytest.mark.parametrize(("stdout", "stderr", "exit_code"), [
    # Any other argparse error (exit 2) is a failed command.
    ("", "hermes usage: error: unrecognized arguments: --jsn\n", 2),
    ("", "hermes: error: argument command: invalid choice: 'usages'\n", 2),
    ("", "hermes: error: argument command: invalid choice: 'usage-x'\n", 2),
    # Output on stdout is not the 0.19.0 shape, whatever stderr says.
    (document(window()), fixture(NO_USAGE_COMMAND), 2),
    # The phrase only counts with argparse's exit status.
    ("", fixture(NO_USAGE_COMMAND), 1),
])
def test_only_that_exact_answer_means_no_usage_command(
    stdout: str, stderr: str, exit_code: int
) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        interpret(stdout, stderr, exit_code)
    assert caught.value.kind is ErrorKind.COMMAND_FAILED


def test_exit_1_is_command_failed_never_unauthenticated() -> None:
    stderr = fixture("usage-built-exit1.stderr.txt")  # wording invented: never interpreted
    with pytest.raises(HarnessCapabilityError) as caught:
        interpret(stderr=stderr, exit_code=1)
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    assert stderr.strip() not in str(caught.value)


# -- the documented schema (built fixtures) ----------------------------------------------------


def test_codex_limits_normalize_exactly() -> None:
    snapshot = parse(fixture("usage-json-built-codex.json"))
    assert snapshot.observed_at == at("2026-11-30T09:58:55.123456+00:00")
    assert [row(m) for m in snapshot.measurements] == [
        ("Session", "rate-limit", "percent", 37.0, 63.0, 100.0,
         at("2026-11-30T14:00:00+00:00"), "Session", "openai-codex", "Plus", None, None),
        ("Weekly", "rate-limit", "percent", 12.5, 87.5, 100.0,
         at("2026-12-05T09:00:00+00:00"), "Weekly", "openai-codex", "Plus", None, None),
    ]
    assert all(m.period is not None and m.period.starts_at is None
               for m in snapshot.measurements)  # no duration is given: none is inferred


def test_anthropic_limits_skip_a_window_without_a_number() -> None:
    snapshot = parse(fixture("usage-json-built-anthropic.json"))
    assert snapshot.observed_at == at("2026-11-30T09:58:55.654321+00:00")
    assert [row(m) for m in snapshot.measurements] == [
        ("Current session", "rate-limit", "percent", 41.0, 59.0, 100.0,
         at("2026-11-30T12:30:00.512+00:00"), "Current session", "anthropic", None, None, None),
        ("Current week", "rate-limit", "percent", 18.0, 82.0, 100.0,
         at("2026-12-04T08:00:00+00:00"), "Current week", "anthropic", None, None, None),
    ]


def test_a_window_without_a_reset_is_an_allowance() -> None:
    [measurement] = parse(fixture("usage-json-built-openrouter.json")).measurements
    assert row(measurement) == ("API key quota", "allowance", "percent", 25.0, 75.0, 100.0,
                                None, "API key quota", "openrouter", None, None, None)


def test_an_unavailable_reason_without_windows_is_unsupported() -> None:
    error = failure(fixture("usage-json-built-anthropic-api-key-unavailable.json"))
    assert error.kind is ErrorKind.UNSUPPORTED
    assert "OAuth" not in str(error)  # the free text is never shown


def test_an_unavailable_reason_beside_windows_changes_nothing() -> None:
    snapshot = parse(document(window(), unavailable_reason="partial"))
    assert len(snapshot.measurements) == 1


def test_details_only_is_an_ok_empty_reading() -> None:
    snapshot = parse(fixture("usage-json-built-details-only.json"))
    assert snapshot.measurements == ()
    assert snapshot.observed_at == at("2026-11-30T09:58:58+00:00")


def test_unreadable_times_are_omitted_never_guessed() -> None:
    snapshot = parse(fixture("usage-json-built-bad-timestamps.json"))  # has an unknown key
    assert snapshot.observed_at == DONE  # fetched_at "yesterday": when the probe finished
    assert [(m.label, m.resets_at, m.kind) for m in snapshot.measurements] == [
        ("Session", None, MeasurementKind.ALLOWANCE),  # "soon"
        ("Weekly", None, MeasurementKind.ALLOWANCE),  # no offset: never read as local time
    ]


@pytest.mark.parametrize("name", [
    "usage-json-built-bad-used-percent.json",
    "usage-json-built-window-without-label.json",
])
def test_strictly_bad_windows_are_parse_failures(name: str) -> None:
    assert failure(fixture(name)).kind is ErrorKind.PARSE_FAILURE


@pytest.mark.parametrize("used", [-0.1, 100.01, 140, float("nan"), float("inf"), True, "50",
                                  [50], 10**400])
def test_a_used_percent_out_of_range_or_not_a_number_is_a_parse_failure(used: object) -> None:
    assert failure(document(window(used=used))).kind is ErrorKind.PARSE_FAILURE


@pytest.mark.parametrize("used", [0, 100, 0.5, 99.999])
def test_the_range_is_inclusive(used: float) -> None:
    [measurement] = parse(document(window(used=used))).measurements
    assert (measurement.used, measurement.remaining) == (used, 100 - used)


@pytest.mark.parametrize("text", [
    "", "not json", "[]", "null", '{"provider": "x"}',
    document(windows=None), document(windows={}), document(provider=None),
    document(provider=""), document(unavailable_reason=5),
    document(window(label=None)), document(window(label=" ")), document("not-a-window"),
    document(window(label="tab\there")),
])
def test_a_bad_root_or_window_is_a_parse_failure(text: str) -> None:
    assert failure(text).kind is ErrorKind.PARSE_FAILURE


@pytest.mark.parametrize(("resets_at", "expected"), [
    ("2026-11-30T14:00:00Z", "2026-11-30T14:00:00+00:00"),
    ("2026-11-30T15:00:00.123456789+01:00", "2026-11-30T14:00:00.123456+00:00"),
    ("2026-11-30T14:00:00", None),
    ("2026-11-30", None),
    ("2026-11-30 14:00:00+00:00", None),
    ("2026-13-30T14:00:00+00:00", None),
    (1796032366, None),
    ("", None),
])
def test_resets_at_needs_iso_with_an_offset(resets_at: object, expected: str | None) -> None:
    [measurement] = parse(document(window(resets_at=resets_at))).measurements
    assert measurement.resets_at == (at(expected) if expected else None)
    if measurement.resets_at is not None:
        assert measurement.resets_at.utcoffset() == timedelta(0)


def test_unknown_future_fields_are_tolerated() -> None:
    text = document(window(future_window_key=[1], detail="text"), raw={"upstream": True},
                    schema_version=2)
    assert len(parse(text).measurements) == 1


def test_no_identity_is_invented() -> None:
    [measurement] = parse(document(window(), plan=None)).measurements
    scope = measurement.scope
    assert (scope.account_id, scope.account_label, scope.plan_label, scope.model_id) == (
        None, None, None, None
    )


# -- the probe ------------------------------------------------------------------------------


def run_probe(executor: object) -> UsageSnapshot:
    return probe_usage(HermesUsage(), executor)



def test_the_request_is_bounded() -> None:
    request = usage_request()
    assert request.argv == ("hermes", "usage", "--json")
    assert request.timeout == 30 <= MAX_TIMEOUT
    assert request.stdin is None and request.cwd is None and dict(request.env) == {}


def test_the_probe_replays_the_live_0_19_0_answer() -> None:
    executor = ScriptedExecutor.returning("", fixture(NO_USAGE_COMMAND), 2)
    with pytest.raises(HarnessCapabilityError) as caught:
        run_probe(executor)
    assert caught.value.kind is ErrorKind.UNSUPPORTED
    assert [r.argv for r in executor.requests] == [("hermes", "usage", "--json")]


def test_the_probe_reads_a_documented_answer() -> None:
    snapshot = run_probe(ScriptedExecutor.returning(fixture("usage-json-built-codex.json")))
    assert [m.label for m in snapshot.measurements] == ["Session", "Weekly"]


def test_a_reading_without_fetched_at_is_dated_when_the_probe_finished() -> None:
    before = datetime.now(UTC)
    snapshot = run_probe(ScriptedExecutor.returning(document(window(), fetched_at=None)))
    assert before <= snapshot.observed_at <= datetime.now(UTC)


# Junk, cut and altered outputs through the probe: the contract (test_contract.py).


# -- the real CLI, when it is installed -----------------------------------------------------


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("hermes") is None, reason="hermes is not installed")
def test_real_hermes_without_credentials_reports_no_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.19.0: unsupported (no usage command). A later Hermes without a credential exits 1."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / ".hermes"))
    for name in list(os.environ):
        if name.endswith(("_API_KEY", "_TOKEN")):
            monkeypatch.delenv(name)
    with pytest.raises(HarnessCapabilityError) as caught:
        run_probe(LocalTransport())
    assert caught.value.kind in (ErrorKind.UNSUPPORTED, ErrorKind.COMMAND_FAILED)
    version = asyncio.run(LocalTransport().run(HermesLaunch().version_request()))
    if "v0.19." in version.stdout:
        assert caught.value.kind is ErrorKind.UNSUPPORTED
        assert caught.value.detail == "this Hermes version has no usage command"


def test_a_window_detail_becomes_the_measurement_description() -> None:
    document = {"provider": "anthropic", "windows": [
        {"label": "Session", "used_percent": 12, "resets_at": None,
         "detail": "Resets\nwhen the session ends"},
        {"label": "Weekly", "used_percent": 3, "resets_at": None, "detail": None},
    ]}
    snapshot = parse_hermes_usage(json.dumps(document), completed_at=datetime.now(UTC))
    assert [m.description for m in snapshot.measurements] == [
        "Resets when the session ends", None
    ]
