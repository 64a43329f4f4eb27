"""Pi commit messages, against pi 0.73.1's ``--print --mode json`` output
(tests/fixtures/pi/commit)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import strategies as st

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandResult
from clanker.testing.commit import (
    change_repository,
    check_kept_nowhere,
    commit_failure,
    installed_provider,
    json_lines,
    propose,
    refused_real_run,
)
from clanker.testing.message_stream import assistant_message as assistant
from clanker.testing.message_stream import message_run
from clanker.testing.strategies import json_values
from clanker_pi.commit import PiCommit, parse_commit_stream

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "pi"
COMMIT = FIXTURES / "commit"
ANSWER = (
    "feat: add retry to the sync client\n\n"
    "Retry transient network failures with exponential backoff so a\n"
    "flaky connection no longer aborts a sync."
)


def stream(name: str) -> str:
    return (COMMIT / name).read_text()


def failure(stdout: str, exit_code: int = 0) -> HarnessCapabilityError:
    return commit_failure(PiCommit(), "pi", stdout, exit_code)


def events(name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream(name).splitlines() if line]


HEADER = events("stub-success.stdout.jsonl")[0]


def run_of(message: dict[str, object], *, agent_end: bool = True) -> str:
    """A minimal run around one assistant message, in pi's event order."""
    return message_run(HEADER, message, agent_end=agent_end)


# -- the invocation ---------------------------------------------------------------------


def test_print_is_never_followed_by_a_value_pi_would_take_as_a_prompt() -> None:
    args = PiCommit().build_invocation("m", "p").args
    assert args[args.index("--print") + 1].startswith("-")


# -- the captured streams ---------------------------------------------------------------


def test_reasoning_is_never_part_of_the_answer() -> None:
    answer = parse_commit_stream(stream("stub-thinking-then-text.stdout.jsonl"))
    assert "retry loop" not in answer  # the stub's reasoning sentence


# Signed out: the session header alone, exit 1 (pi says why only on stderr).
SIGNED_OUT = (
    "final-argv-signed-out.stdout.jsonl",  # clanker's argv, an empty home (2026-12-01)
    "json-no-api-key.stdout.jsonl",  # a named model, no key for its provider
    "json-no-models.stdout.jsonl",  # no model at all
)


@pytest.mark.parametrize("name", SIGNED_OUT)
def test_the_header_alone_with_exit_1_is_unauthenticated(name: str) -> None:
    stderr_file = COMMIT / name.replace(".stdout.jsonl", ".stderr.txt")
    with pytest.raises(HarnessCapabilityError) as caught:
        PiCommit().parse_output(CommandResult(stdout=stream(name),
                                              stderr=stderr_file.read_text(), exit_code=1))
    error = caught.value
    assert error.kind is ErrorKind.UNAUTHENTICATED
    assert error.exit_code == 6
    assert error.message == ("pi: the harness is not signed in (sign in with /login in pi, "
                             "or set an API key for the model's provider)")
    assert "No API key" not in error.message and "docs" not in error.message


@pytest.mark.parametrize("exit_code", [0, 2, 124, 129, 143])
def test_the_header_alone_with_another_status_is_not_signed_out(exit_code: int) -> None:
    error = failure(stream("final-argv-signed-out.stdout.jsonl"), exit_code)
    assert error.kind is not ErrorKind.UNAUTHENTICATED


@pytest.mark.parametrize(
    "text",
    ["", "\n",
     '{"type":"session","version":3}\n{"type":"agent_start"}\n',
     '{"type":"session","version":3}\n{"type":"session","version":3}\n',
     '{"type":"agent_start"}\n', '{"type":"session"\n', "not json\n"],
)
def test_anything_but_the_header_alone_with_exit_1_is_command_failed(text: str) -> None:
    error = failure(text, 1)
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert error.detail == "exit status 1"


# -- built streams: pi's own edges (the format's are the contract's) -----------------

TEXT = {"type": "text", "text": "Fix the upload race"}


def test_streamed_partials_are_never_read() -> None:
    update = {"type": "message_update",
              "message": assistant("stop", {"type": "text", "text": "Partial"}),
              "assistantMessageEvent": {"type": "text_delta", "delta": "Partial"}}
    text = json_lines(HEADER, {"type": "message_start", "message": assistant("stop")}, update)
    assert "inside an answer" in (failure(text).detail or "")
    # and a partial whose key order pi does not use is still only a partial
    reordered = {"assistantMessageEvent": {}, "type": "message_update", "message": "junk"}
    assert parse_commit_stream(run_of(assistant("stop", TEXT)).replace(
        "\n", "\n" + json.dumps(reordered) + "\n", 3)) == "Fix the upload race"


# -- shapes for the contract's properties (test_contract.py) --------------------------

# Any JSON value, NaN and the infinities included, with the format's own keys.
EVENTS = json_values(max_leaves=20, floats=st.floats(), keys=st.sampled_from([
    "type", "message", "role", "content", "stopReason", "text", "textSignature", "isTerminal",
    "messages"]))
"""Events near the output format: what the contract adds after and instead of an output."""


# -- the real CLI, when it is installed ---------------------------------------------------
# (End to end through the commit service and a double: the contract, test_contract.py.)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return change_repository(tmp_path)


@pytest.fixture
def refused_agent_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh home whose only pi provider is a refused loopback port (default retries)."""
    home = tmp_path / "home"
    agent = home / ".pi" / "agent"
    agent.mkdir(parents=True)
    shutil.copy(FIXTURES / "loopback-models.json", agent / "models.json")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.delenv("PI_CODING_AGENT_SESSION_DIR", raising=False)
    return home


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("pi") is None, reason="pi is not installed")
def test_real_pi_against_a_refused_provider_is_a_typed_failure_and_keeps_nothing(
    repo: Path, refused_agent_dir: Path, tmp_path: Path
) -> None:
    error = refused_real_run("pi", repo, tmp_path / "locks", "loopback/probe-model")
    # pi retries a refused connection three times (about 30 s), then ends the turn
    # with stopReason error and exits 0: the stream, not the exit code, says so.
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert "stopReason error" in error.message
    assert not (refused_agent_dir / ".pi" / "agent" / "sessions").exists()
    check_kept_nowhere(refused_agent_dir)


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("pi") is None, reason="pi is not installed")
def test_real_pi_signed_out_is_unauthenticated(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".pi" / "agent").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(home / ".pi" / "agent"))
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(HarnessCapabilityError) as caught:
        propose(installed_provider("pi"), repo, tmp_path / "locks", None)
    assert caught.value.kind is ErrorKind.UNAUTHENTICATED
    assert caught.value.exit_code == 6
