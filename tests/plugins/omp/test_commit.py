"""Oh My Pi commit messages, against omp 18.2.3's ``--print --mode json`` output
(tests/fixtures/omp/commit)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import strategies as st

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import INFERENCE_TIMEOUT, CommandResult
from clanker.testing.commit import (
    change_repository,
    commit_failure,
    installed_provider,
    json_lines,
    propose,
    repository_state,
)
from clanker.testing.message_stream import assistant_message as assistant
from clanker.testing.message_stream import message_run
from clanker.testing.strategies import json_values
from clanker_omp.commit import COMMIT_ARGS, MAX_TIME, OmpCommit, parse_commit_stream

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "omp"
COMMIT = FIXTURES / "commit"
ANSWER = (
    "feat: add retry to the sync client\n\n"
    "Retry transient network failures with exponential backoff so a\n"
    "flaky connection no longer aborts a sync."
)
STREAMS = sorted(p.name for p in COMMIT.glob("*.stdout.jsonl"))
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


def captured(name: str, stderr: str = "") -> CommandResult:
    return CommandResult(stdout=stream(name), stderr=stderr, exit_code=EXIT_CODES.get(name, 0))


def failure(stdout: str, exit_code: int = 0) -> HarnessCapabilityError:
    return commit_failure(OmpCommit(), "omp", stdout, exit_code)


HEADER = json.loads(stream("stub-success.stdout.jsonl").split("\n", 1)[0])


def run_of(message: dict[str, object], *, agent_end: bool = True,
           terminal: bool | None = True) -> str:
    """A minimal run around one assistant message, in omp's event order."""
    return message_run(HEADER, message, agent_end=agent_end, terminal=terminal)


# -- the invocation ---------------------------------------------------------------------


def test_the_invocation_without_a_model() -> None:
    request = OmpCommit().build_invocation(None, "Write a commit message.\n\nDiff: é\n")
    assert request.command == "omp"
    assert request.args == (
        "--print", "--mode", "json", "--no-session", "--no-tools", "--no-extensions",
        "--no-skills", "--no-rules", "--no-title", "--max-time", "65",
    )
    assert request.args == COMMIT_ARGS
    assert request.stdin == "Write a commit message.\n\nDiff: é\n".encode()
    assert request.timeout == INFERENCE_TIMEOUT == 90
    assert MAX_TIME < INFERENCE_TIMEOUT
    assert request.inference is True
    assert dict(request.env) == {}  # no config overlay, no variables
    assert request.cwd is None  # the service sets the repository root
    assert not any(arg.startswith("--config") for arg in request.args)


@pytest.mark.parametrize("model", ["loopback/probe-model", "opus", "openai/gpt-5.2",
                                   "--tricky"])
def test_the_model_is_two_tokens_at_the_end_exactly_as_given(model: str) -> None:
    request = OmpCommit().build_invocation(model, "p")
    assert request.args == (*COMMIT_ARGS, "--model", model)
    assert request.stdin == b"p"


# -- the captured streams ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["stub-success.stdout.jsonl",
                                  "final-argv-stub-success.stdout.jsonl",
                                  "stub-thinking-then-text.stdout.jsonl",
                                  "stub-toolcall-then-text.stdout.jsonl",
                                  "stub-5xx-retried-then-success.stdout.jsonl"])
def test_the_answer_is_the_text_of_the_last_completed_assistant(name: str) -> None:
    assert parse_commit_stream(stream(name)) == ANSWER
    assert OmpCommit().parse_output(captured(name, stderr="ignored")) == ANSWER


def test_reasoning_and_deltas_are_never_part_of_the_answer() -> None:
    answer = parse_commit_stream(stream("stub-thinking-then-text.stdout.jsonl"))
    assert "retry loop" not in answer  # the stub's reasoning sentence


@pytest.mark.parametrize(
    ("name", "kind", "detail"),
    [
        # omp re-prompts a thinking-only answer once, then ends with isTerminal false; exit 0
        ("stub-thinking-only.stdout.jsonl", ErrorKind.PARSE_FAILURE, "only reasoning"),
        ("stub-length.stdout.jsonl", ErrorKind.PARSE_FAILURE, "cut off"),
        ("json-empty-stdin.stdout.jsonl", ErrorKind.PARSE_FAILURE, "no answer"),
        # exit 1, and the stream says why
        ("json-http-400.stdout.jsonl", ErrorKind.COMMAND_FAILED, "stopReason error, HTTP 400"),
        ("json-refused-port-retry-disabled.stdout.jsonl", ErrorKind.COMMAND_FAILED,
         "stopReason error"),
        ("json-refused-port-max-time-10.stdout.jsonl", ErrorKind.TIMEOUT, "--max-time"),
        ("final-argv-refused-port-default-retry.stdout.jsonl", ErrorKind.TIMEOUT, "--max-time"),
        # killed (by the sandbox's timeout or a signal)
        ("json-refused-port-default-retry-killed.stdout.jsonl", ErrorKind.COMMAND_FAILED,
         "stopReason aborted"),
        ("json-refused-port-sigterm.stdout.jsonl", ErrorKind.COMMAND_FAILED, "exit status 143"),
        ("stub-toolcall-then-killed.stdout.jsonl", ErrorKind.COMMAND_FAILED, "exit status 124"),
        ("json-no-api-key.stdout.jsonl", ErrorKind.COMMAND_FAILED, "exit status 1"),
    ],
)
def test_runs_without_an_answer_fail_typed(name: str, kind: ErrorKind, detail: str) -> None:
    stderr = (COMMIT / "json-no-api-key.stderr.tail.txt").read_text()
    with pytest.raises(HarnessCapabilityError) as caught:
        OmpCommit().parse_output(captured(name, stderr=stderr))
    assert caught.value.kind is kind
    assert caught.value.harness == "omp"
    assert detail in (caught.value.detail or "")
    assert "API key" not in caught.value.message


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


def test_provider_text_and_the_saved_request_path_never_reach_the_message() -> None:
    error = failure(stream("json-http-400.stdout.jsonl"), exit_code=1)
    assert "stub" not in error.message
    assert "raw-http-request" not in error.message and ".omp" not in error.message


def test_a_complete_answer_from_a_failed_process_is_not_accepted() -> None:
    error = failure(stream("stub-success.stdout.jsonl"), exit_code=1)
    assert error.kind is ErrorKind.COMMAND_FAILED


def test_nothing_at_all_is_a_parse_failure() -> None:
    assert "no output" in (failure("").detail or "")
    assert "no output" in (failure("\n \n").detail or "")


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
    marker = "clanker-commit-marker-4b1e"
    (repo / "retry.py").write_text(f"# {marker}\ndef retry(f):\n    return f()\n")
    before = repository_state(repo)
    with pytest.raises(HarnessCapabilityError) as caught:
        propose(installed_provider("omp"), repo, tmp_path / "locks", "loopback/probe-model")
    # With default settings omp retries a refused connection for minutes; --max-time
    # ends the run with an aborted "Deadline exceeded" turn (exit 1) about 75 s after
    # its session starts. On a slow start clanker's own 90 s kill can come first:
    # both are a timeout, never a model call and never an answer.
    assert caught.value.kind is ErrorKind.TIMEOUT
    assert repository_state(repo) == before
    assert not (refused_home / ".omp" / "agent" / "sessions").exists()
    for path in refused_home.rglob("*"):
        if path.is_file():
            assert marker.encode() not in path.read_bytes(), path
