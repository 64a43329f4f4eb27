"""Oh My Pi commit messages, against omp 18.2.3's ``--print --mode json`` output
(tests/fixtures/omp/commit)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import strategies as st

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import INFERENCE_TIMEOUT
from clanker.testing.commit import (
    change_repository,
    check_kept_nowhere,
    commit_failure,
    json_lines,
    refused_real_run,
)
from clanker.testing.message_stream import assistant_message as assistant
from clanker.testing.message_stream import message_run
from clanker.testing.strategies import json_values
from clanker_omp.commit import MAX_TIME, OmpCommit, parse_commit_stream

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "omp"
COMMIT = FIXTURES / "commit"
ANSWER = (
    "feat: add retry to the sync client\n\n"
    "Retry transient network failures with exponential backoff so a\n"
    "flaky connection no longer aborts a sync."
)
# How each captured run exited (tests/fixtures/omp/commit/README.md); 0 when not listed.
EXIT_CODES = {
    "json-http-400.stdout.jsonl": 1,
    "json-no-api-key.stdout.jsonl": 1,
    "json-refused-port-default-retry-killed.stdout.jsonl": 124,
    "json-refused-port-retry-disabled.stdout.jsonl": 1,
    "json-refused-port-max-time-10.stdout.jsonl": 1,
    "final-argv-refused-port-default-retry.stdout.jsonl": 1,
    "json-refused-port-sigterm.stdout.jsonl": 143,
    "stub-toolcall-then-killed.stdout.jsonl": 124,
}


def stream(name: str) -> str:
    return (COMMIT / name).read_text()


def failure(stdout: str, exit_code: int = 0) -> HarnessCapabilityError:
    return commit_failure(OmpCommit(), "omp", stdout, exit_code)


HEADER = json.loads(stream("stub-success.stdout.jsonl").split("\n", 1)[0])


def run_of(message: dict[str, object], *, agent_end: bool = True,
           terminal: bool | None = True) -> str:
    """A minimal run around one assistant message, in omp's event order."""
    return message_run(HEADER, message, agent_end=agent_end, terminal=terminal)


# -- the invocation ---------------------------------------------------------------------


def test_omps_own_deadline_ends_before_clankers_and_no_config_is_passed() -> None:
    request = OmpCommit().build_invocation(None, "p")
    assert request.args[request.args.index("--max-time") + 1] == str(MAX_TIME)
    assert MAX_TIME < INFERENCE_TIMEOUT
    assert not any(arg.startswith("--config") for arg in request.args)


# -- the captured streams ---------------------------------------------------------------


def test_reasoning_and_deltas_are_never_part_of_the_answer() -> None:
    answer = parse_commit_stream(stream("stub-thinking-then-text.stdout.jsonl"))
    assert "retry loop" not in answer  # the stub's reasoning sentence


@pytest.mark.parametrize(
    ("name", "detail"),
    [
        ("stub-toolcall-then-killed.stdout.jsonl", "did not end"),
        ("json-refused-port-sigterm.stdout.jsonl", "did not end"),
        ("stub-thinking-only.stdout.jsonl", "only reasoning"),
    ],
)
def test_the_stream_alone_is_judged_the_same_way(name: str, detail: str) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        parse_commit_stream(stream(name))
    assert caught.value.kind is ErrorKind.PARSE_FAILURE
    assert detail in (caught.value.detail or "")


# -- built streams: omp's own edges (the format's are the contract's) ----------------

TEXT = {"type": "text", "text": "Fix the upload race"}


def test_the_last_agent_end_must_not_say_the_run_continues() -> None:
    assert parse_commit_stream(run_of(assistant("stop", TEXT))) == "Fix the upload race"
    assert parse_commit_stream(run_of(assistant("stop", TEXT), terminal=None)) == (
        "Fix the upload race"
    )
    error = failure(run_of(assistant("stop", TEXT), terminal=False))
    assert error.kind is ErrorKind.PARSE_FAILURE
    assert "isTerminal false" in (error.detail or "")
    bad = run_of(assistant("stop", TEXT)).replace('"isTerminal": true', '"isTerminal": "yes"')
    assert failure(bad).kind is ErrorKind.PARSE_FAILURE


# (Which stopReason answers is the contract's: test_contract.py, MessageStreamContract.)
@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ({**assistant("aborted"), "errorMessage": "Deadline exceeded"}, ErrorKind.TIMEOUT),
        ({**assistant("aborted"), "errorMessage": "Request was aborted"},
         ErrorKind.COMMAND_FAILED),
        ({**assistant("error"), "errorMessage": "Deadline exceeded"}, ErrorKind.COMMAND_FAILED),
    ],
)
def test_only_an_aborted_turn_at_the_deadline_is_a_timeout(
    message: dict[str, object], kind: ErrorKind
) -> None:
    assert failure(run_of(message)).kind is kind


def test_an_http_status_is_shown_only_when_it_is_a_number() -> None:
    odd = {**assistant("error"), "errorStatus": "400; key=sk-secret"}
    assert "sk-secret" not in failure(run_of(odd)).message
    assert "HTTP 429" in failure(run_of({**assistant("error"), "errorStatus": 429})).message


def test_irc_and_custom_messages_are_not_the_answer() -> None:
    text = run_of(assistant("stop", TEXT)) + json_lines(
        {"type": "irc_message", "message": {"role": "custom", "content": "hi"}},
        {"type": "message_end", "message": {"role": "custom", "content": "x"}},
        {"type": "notice", "level": "warning", "message": "Compaction freed too little"},
    )
    assert parse_commit_stream(text) == "Fix the upload race"


# -- shapes for the contract's properties (test_contract.py) --------------------------

# Any JSON value, NaN and the infinities included, with the format's own keys.
EVENTS = json_values(max_leaves=20, floats=st.floats(), keys=st.sampled_from([
    "type", "message", "role", "content", "stopReason", "text", "textSignature", "isTerminal",
    "errorStatus", "errorMessage"]))
"""Events near the output format: what the contract adds after and instead of an output."""


# -- the real CLI, when it is installed ---------------------------------------------------
# (End to end through the commit service and a double: the contract, test_contract.py.)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return change_repository(tmp_path)


@pytest.fixture
def refused_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh home whose only omp provider is a refused loopback port, default settings."""
    home = tmp_path / "home"
    agent = home / ".omp" / "agent"
    agent.mkdir(parents=True)
    shutil.copy(FIXTURES / "loopback-models.yml", agent / "models.yml")
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, str(home / "xdg" / name.lower()))
    # Pi's variables move omp's state too; this test wants omp's own default.
    for name in ("PI_CODING_AGENT_DIR", "PI_CODING_AGENT_SESSION_DIR", "PI_CONFIG_DIR",
                 "OMP_PROFILE", "PI_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("omp") is None, reason="omp is not installed")
def test_real_omp_against_a_refused_provider_stops_at_its_deadline(
    repo: Path, refused_home: Path, tmp_path: Path
) -> None:
    error = refused_real_run("omp", repo, tmp_path / "locks", "loopback/probe-model")
    # With default settings omp retries a refused connection for minutes; --max-time
    # ends the run with an aborted "Deadline exceeded" turn (exit 1) about 75 s after
    # its session starts. On a slow start clanker's own 90 s kill can come first:
    # both are a timeout, never a model call and never an answer.
    assert error.kind is ErrorKind.TIMEOUT
    assert not (refused_home / ".omp" / "agent" / "sessions").exists()
    check_kept_nowhere(refused_home)
