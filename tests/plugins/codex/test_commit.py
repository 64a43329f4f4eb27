"""Codex commit messages, against Codex CLI 0.171.0's ``exec --json`` output
(tests/fixtures/codex/commit)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import strategies as st

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import INFERENCE_TIMEOUT, CommandResult
from clanker.testing.commit import (
    MARKER,
    change_repository,
    check_kept_nowhere,
    commit_failure,
    git,
    installed_provider,
    json_lines,
    propose,
    refused_real_run,
)
from clanker.testing.strategies import json_values
from clanker_codex.commit import CodexCommit, parse_commit_stream

COMMIT = Path(__file__).resolve().parents[2] / "fixtures" / "codex" / "commit"
ANSWER = (
    "feat: add retry to the sync client\n\n"
    "Retry failed sync requests up to three times with backoff."
)
STREAMS = sorted(p.name for p in COMMIT.glob("*.jsonl"))
# How each captured run exited (tests/fixtures/codex/commit/README.md); 0 when not listed.
EXIT_CODES = {
    "exec-config-warning.jsonl": 124,
    "exec-http-400.jsonl": 1,
    "exec-http-401.jsonl": 1,
    "exec-http-500.jsonl": 1,
    "exec-input-too-large.jsonl": 1,
    "exec-offline-default-provider.jsonl": 124,
    "exec-offline-unbounded.jsonl": 124,
    "exec-refused-bounded-5-retries.jsonl": 1,
    "exec-refused-bounded.jsonl": 1,
    "exec-sigint.jsonl": 1,
    "exec-sigterm.jsonl": 143,
    "built-failed-after-message.jsonl": 1,
    "exec-signed-out-http-401.jsonl": 1,
    "exec-missing-env-key.jsonl": 1,
    "exec-signed-out-offline-killed.jsonl": 143,
}
# Refused or missing credentials: `unauthenticated`, the rest of EXIT_CODES `command-failed`.
SIGNED_OUT = {
    # No login, Codex's default provider aimed at a loopback stand-in that answers 401 as
    # the real endpoint does to a request without credentials (2026-12-01).
    "exec-signed-out-http-401.jsonl": "sign in with `codex login`",
    # The research's probe provider with a key, refused with 401 by the error stub.
    "exec-http-401.jsonl": "sign in with `codex login`",
    # A provider whose `env_key` variable is unset: no request at all.
    "exec-missing-env-key.jsonl": "env_key",
}


def stream(name: str) -> str:
    return (COMMIT / name).read_text()


def captured(name: str, stderr: str = "") -> CommandResult:
    return CommandResult(stdout=stream(name), stderr=stderr, exit_code=EXIT_CODES.get(name, 0))


def failure(stdout: str, exit_code: int = 0) -> HarnessCapabilityError:
    return commit_failure(CodexCommit(), "codex", stdout, exit_code)


STARTED = {"type": "thread.started", "thread_id": "01a22bd0-0000-7000-8000-000000000001"}
TURN = {"type": "turn.started"}
DONE = {"type": "turn.completed",
        "usage": {"input_tokens": 1, "cached_input_tokens": 0, "output_tokens": 1}}


def item(kind: str, event: str = "item.completed", n: int = 0, **fields: object) -> object:
    return {"type": event, "item": {"id": f"item_{n}", "type": kind, **fields}}


def message(text: object, n: int = 0) -> object:
    return item("agent_message", n=n, text=text)


def turn_of(*items: object, end: object = DONE) -> str:
    """One turn in Codex's event order around the given events."""
    return json_lines(STARTED, TURN, *items, end)


COMMAND = {"command": "/bin/bash -lc 'git diff --cached'", "aggregated_output": "",
           "exit_code": None, "status": "in_progress"}


# -- the invocation ---------------------------------------------------------------------


def test_no_flag_that_drops_user_config_or_the_git_check() -> None:
    args = CodexCommit().build_invocation("m", "p").args
    assert "--ignore-user-config" not in args
    assert "--skip-git-repo-check" not in args
    assert "--dangerously-bypass-approvals-and-sandbox" not in args
    assert args[0] == "exec"


# -- the captured and built streams -----------------------------------------------------


def test_reasoning_and_commentary_are_never_part_of_the_answer() -> None:
    answer = parse_commit_stream(stream("built-success-commentary-then-tool.jsonl"))
    assert "Summarizing" not in answer and "I will look" not in answer


# Streams alone (as with exit 0) and how each fails (the contract's commit_refusals).
STREAM_REFUSALS = (
        ("built-thinking-only.jsonl", ErrorKind.PARSE_FAILURE, "only reasoning"),
        ("built-tool-call-only.jsonl", ErrorKind.PARSE_FAILURE, "only tool calls"),
        ("built-tool-after-last-message.jsonl", ErrorKind.PARSE_FAILURE, "not the answer"),
        ("built-empty-message.jsonl", ErrorKind.PARSE_FAILURE, "empty"),
        ("built-incomplete.jsonl", ErrorKind.PARSE_FAILURE, "did not end"),
        ("built-failed-after-message.jsonl", ErrorKind.COMMAND_FAILED, "turn failed"),
        ("exec-http-400.jsonl", ErrorKind.COMMAND_FAILED, "turn failed"),
        ("exec-http-401.jsonl", ErrorKind.UNAUTHENTICATED, "codex login"),
        ("exec-signed-out-http-401.jsonl", ErrorKind.UNAUTHENTICATED, "codex login"),
        ("exec-missing-env-key.jsonl", ErrorKind.UNAUTHENTICATED, "env_key"),
        # Signed out without a network: nothing ever answers, nothing says why.
        ("exec-signed-out-offline-killed.jsonl", ErrorKind.PARSE_FAILURE, "did not end"),
        ("exec-http-500.jsonl", ErrorKind.COMMAND_FAILED, "turn failed"),
        ("exec-refused-bounded.jsonl", ErrorKind.COMMAND_FAILED, "turn failed"),
        ("exec-refused-bounded-5-retries.jsonl", ErrorKind.COMMAND_FAILED, "turn failed"),
        ("exec-offline-unbounded.jsonl", ErrorKind.PARSE_FAILURE, "did not end"),
        ("exec-offline-default-provider.jsonl", ErrorKind.PARSE_FAILURE, "did not end"),
        ("exec-config-warning.jsonl", ErrorKind.PARSE_FAILURE, "did not end"),
        ("exec-sigint.jsonl", ErrorKind.PARSE_FAILURE, "did not end"),
        ("exec-sigterm.jsonl", ErrorKind.PARSE_FAILURE, "did not end"),
        ("exec-input-too-large.jsonl", ErrorKind.PARSE_FAILURE, "no turn"),
)


@pytest.mark.parametrize("name", sorted(SIGNED_OUT))
def test_refused_or_missing_credentials_are_unauthenticated(name: str) -> None:
    stderr_file = COMMIT / name.replace(".jsonl", ".stderr.txt")
    stderr = stderr_file.read_text() if stderr_file.exists() else ""
    with pytest.raises(HarnessCapabilityError) as caught:
        CodexCommit().parse_output(captured(name, stderr=stderr))
    error = caught.value
    assert error.kind is ErrorKind.UNAUTHENTICATED
    assert error.exit_code == 6
    assert error.message.startswith("codex: the harness is not signed in (")
    assert SIGNED_OUT[name] in error.message
    # Codex's and the provider's words never reach the message.
    for never in ("401", "Unauthorized", "Missing bearer", "stub", "127.0.0.1", "PROBE_KEY",
                  "WARNING"):
        assert never not in error.message


@pytest.mark.parametrize(
    "text",
    ["unexpected status 4010 x", "unexpected status 403 Forbidden: no", "x unexpected status 401 ",
     "Reconnecting... 1/5 (unexpected status 401 Unauthorized: x)", "", "missing environment"],
)
def test_only_codexs_own_prefix_of_the_failure_says_signed_out(text: str) -> None:
    end = {"type": "turn.failed", "error": {"message": text}}
    assert failure(turn_of(end=end), exit_code=1).kind is ErrorKind.COMMAND_FAILED


def test_a_refusal_notice_before_a_completed_turn_changes_nothing() -> None:
    notice = {"type": "error", "message": "Reconnecting... 1/5 (unexpected status 401 "
                                          "Unauthorized: x, url: http://h/v1/responses)"}
    assert parse_commit_stream(turn_of(notice, message("Fix it", 1))) == "Fix it"


@pytest.mark.parametrize("error", [None, "text", {"message": 401}, {"text": "x"}, []])
def test_a_failed_turn_without_a_message_text_is_command_failed(error: object) -> None:
    end = {"type": "turn.failed", "error": error}
    assert failure(turn_of(end=end), exit_code=1).kind is ErrorKind.COMMAND_FAILED


def test_a_failed_turn_says_so_and_other_failures_give_the_exit_status() -> None:
    with pytest.raises(HarnessCapabilityError) as failed:
        CodexCommit().parse_output(captured("exec-http-400.jsonl"))
    assert failed.value.detail == "the turn failed"
    with pytest.raises(HarnessCapabilityError) as killed:
        CodexCommit().parse_output(captured("exec-sigterm.jsonl"))
    assert killed.value.detail == "exit status 143"
    # a complete answer from a process that failed is still a failure
    assert "exit status 1" in failure(stream("built-success.jsonl"), exit_code=1).message


def test_provider_text_and_stderr_never_reach_the_message() -> None:
    for name in ("exec-http-400.jsonl", "exec-http-401.jsonl", "exec-http-500.jsonl",
                 "exec-refused-bounded.jsonl"):
        stderr = (COMMIT / name.replace(".jsonl", ".stderr.txt")).read_text()
        with pytest.raises(HarnessCapabilityError) as caught:
            CodexCommit().parse_output(captured(name, stderr=stderr))
        text = caught.value.message
        assert "stub" not in text and "401" not in text and "127.0.0.1" not in text
        assert "Connection failed" not in text and "demand" not in text
        assert "Reading prompt" not in text and "WARNING" not in text


# -- built streams: the rule's edges ----------------------------------------------------


def test_the_last_of_several_messages_is_the_answer() -> None:
    text = turn_of(message("Looking first.", 0), item("reasoning", n=1, text="hm"),
                   message("Fix it", 2))
    assert parse_commit_stream(text) == "Fix it"


@pytest.mark.parametrize("kind", ["reasoning", "plan", "todo_list", "error"])
def test_harmless_items_may_follow_the_answer(kind: str) -> None:
    text = turn_of(message("Fix it"), item(kind, n=1, text="t", items=[], message="m"))
    assert parse_commit_stream(text) == "Fix it"


@pytest.mark.parametrize("kind", ["command_execution", "file_change", "mcp_tool_call",
                                  "collab_tool_call", "web_search", "image_generation"])
@pytest.mark.parametrize("event", ["item.started", "item.updated", "item.completed"])
def test_a_tool_or_unknown_item_after_the_message_means_it_was_not_the_answer(
    kind: str, event: str
) -> None:
    error = failure(turn_of(message("Fix it"), item(kind, event, n=1, **COMMAND)))
    assert "not the answer" in (error.detail or "")
    # and before the last message it is only work done on the way
    assert parse_commit_stream(turn_of(item(kind, event, n=1, **COMMAND),
                                       message("Fix it", 2))) == "Fix it"


def test_only_completed_messages_count() -> None:
    text = turn_of(item("agent_message", "item.started", text="Fix it"))
    assert "without a message" in (failure(text).detail or "")


def test_a_plan_or_reasoning_is_never_a_fallback_answer() -> None:
    assert failure(turn_of(item("plan", text="Fix it"))).kind is ErrorKind.PARSE_FAILURE
    assert "only reasoning" in (failure(turn_of(item("reasoning", text="Fix it"))).detail or "")


def test_top_level_errors_and_unknown_events_are_ignored() -> None:
    text = turn_of({"type": "error", "message": "Reconnecting... 1/5"},
                   {"type": "item.plan.delta", "item_id": "item_9", "delta": "x"},
                   {"type": "request_user_input", "id": "t", "call_id": "c", "questions": []},
                   message("Fix it", 1), {"type": "error", "message": "late notice"})
    assert parse_commit_stream(text) == "Fix it"
    extra_fields = json_lines(STARTED, {**TURN, "turn_id": "t1"},
                              {"type": "item.completed", "new": 1,
                               "item": {"id": "i", "type": "agent_message", "text": "Fix it",
                                        "phase": "final"}}, {**DONE, "status": "ok"})
    assert parse_commit_stream(extra_fields) == "Fix it"


def test_no_thread_started_line_is_needed() -> None:
    assert parse_commit_stream(json_lines(TURN, message("Fix it"), DONE)) == "Fix it"


@pytest.mark.parametrize(
    ("events", "detail"),
    [
        ([TURN, message("A"), DONE, TURN, message("B"), DONE], "more than one turn"),
        ([TURN, TURN, message("A"), DONE], "more than one turn"),
        ([message("A"), DONE], "without its own turn.started"),
        ([TURN, message("A"), DONE, DONE], "without its own turn.started"),
        ([TURN, message("A"), DONE, {"type": "turn.failed", "error": {"message": "x"}}],
         "without its own turn.started"),
        ([STARTED, message("A")], "no turn started"),
    ],
)
def test_exactly_one_turn_with_exactly_one_end(events: list[object], detail: str) -> None:
    assert detail in (failure(json_lines(*events)).detail or "")


def test_a_message_outside_the_turn_is_not_the_answer() -> None:
    text = json_lines(STARTED, message("Early"), TURN, DONE, message("Late", 1))
    assert "without a message" in (failure(text).detail or "")


def test_a_failed_turn_is_command_failed_even_with_exit_0_and_a_message() -> None:
    error = failure(turn_of(message("Fix it"), end={"type": "turn.failed",
                                                    "error": {"message": "sk-secret"}}))
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert "sk-secret" not in error.message


@pytest.mark.parametrize(
    "text",
    [
        "not json\n",
        json_lines([1, 2]),
        json_lines({"no": "type"}),
        json_lines({"type": 7}),
        "[" * 100_000 + "\n",
        '{"type":"turn.started"' + " " * 2_000_000,
        json_lines(TURN) + '{"type":"item.completed","item":{"id":"i","type":"agent_mess',
        '{"type":"turn.started","n":' + "9" * 5000 + "}\n",
    ],
)
def test_malformed_output_is_a_parse_failure(text: str) -> None:
    assert failure(text).kind is ErrorKind.PARSE_FAILURE


@pytest.mark.parametrize(
    "event",
    [
        {"type": "item.completed"},
        {"type": "item.completed", "item": "agent_message"},
        {"type": "item.completed", "item": {"id": "i", "text": "Fix it"}},
        {"type": "item.started", "item": {"id": "i", "type": None}},
    ],
)
def test_an_item_without_a_type_is_a_parse_failure_anywhere(event: dict[str, object]) -> None:
    assert failure(turn_of(event)).kind is ErrorKind.PARSE_FAILURE
    before_the_turn = json_lines(STARTED, event, TURN, message("Fix it"), DONE)
    assert failure(before_the_turn).kind is ErrorKind.PARSE_FAILURE


@pytest.mark.parametrize(
    "event",
    [
        {"type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": 7}},
        {"type": "item.completed", "item": {"id": "i", "type": "agent_message"}},
        {"type": "item.completed", "item": {"id": "i", "type": "agent_message",
                                            "text": "\ud800"}},
    ],
)
def test_a_message_without_text_is_a_parse_failure(event: dict[str, object]) -> None:
    assert failure(turn_of(event)).kind is ErrorKind.PARSE_FAILURE


# -- shapes for the contract's properties (test_contract.py) --------------------------

# Any JSON value, NaN and the infinities included, with the format's own keys.
_JSON = json_values(max_leaves=20, floats=st.floats(), keys=st.sampled_from([
    "type", "item", "id", "text", "message", "error", "usage"]))
_TYPES = st.sampled_from(["thread.started", "turn.started", "turn.completed", "turn.failed",
                          "item.started", "item.updated", "item.completed", "error"])
_ITEM_TYPES = st.sampled_from(["agent_message", "reasoning", "command_execution", "plan",
                               "todo_list", "error", "web_search"])
EVENTS = st.one_of(
    _JSON,
    st.builds(lambda t, body: {**(body if isinstance(body, dict) else {}), "type": t},
              _TYPES, _JSON),
    st.builds(lambda t, it, text: {"type": t, "item": {"id": "i", "type": it, "text": text}},
              _TYPES, _ITEM_TYPES, st.text(max_size=10) | st.integers()),
)
"""Events near the output format: what the contract adds after and instead of an output."""


# -- the real CLI, when it is installed ---------------------------------------------------
# (End to end through the commit service and a double: the contract, test_contract.py.)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return change_repository(tmp_path)


ENV_MARKER = "clanker-env-marker-51c9"


def codex_home_with_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base_url: str, extra: str = ""
) -> Path:
    """A fresh CODEX_HOME whose only provider is ``base_url`` (Responses API, dummy key)."""
    home = tmp_path / "home"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(
        'model_provider = "probe"\n'
        'web_search = "live"\n'  # a user's choice the invocation overrides
        "[model_providers.probe]\n"
        'name = "probe"\n'
        f'base_url = "{base_url}"\n'
        'env_key = "PROBE_KEY"\n'
        'wire_api = "responses"\n' + extra
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    monkeypatch.setenv("PROBE_KEY", "dummy-not-a-key")
    # What a shell snapshot would copy out of the environment.
    monkeypatch.setenv("COMMIT_TEST_ENV_MARKER", ENV_MARKER)
    for name in ("OPENAI_API_KEY", "CODEX_API_KEY", "CODEX_ACCESS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return codex_home


@pytest.fixture
def refused_codex_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A provider at a refused loopback port, with Codex's default retries."""
    return codex_home_with_provider(tmp_path, monkeypatch, "http://127.0.0.1:9/v1")


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("codex") is None, reason="codex is not installed")
def test_real_codex_against_a_refused_provider_is_a_typed_failure_and_keeps_nothing(
    repo: Path, refused_codex_home: Path, tmp_path: Path
) -> None:
    started = time.monotonic()
    error = refused_real_run("codex", repo, tmp_path / "locks", "probe-model")
    elapsed = time.monotonic() - started
    # Without features.unbounded_connection_retries=false this never ends (the
    # service's 90 s timeout would); with it the provider's five retries take ~25 s.
    assert error.kind is ErrorKind.COMMAND_FAILED, error.message
    assert error.detail == "the turn failed"
    assert elapsed < INFERENCE_TIMEOUT
    assert not list((refused_codex_home / "sessions").rglob("*.jsonl"))
    assert not [p for p in (refused_codex_home / "shell_snapshots").rglob("*") if p.is_file()]
    check_kept_nowhere(refused_codex_home, MARKER, ENV_MARKER)


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("codex") is None, reason="codex is not installed")
def test_real_codex_request_has_the_prompt_and_model_but_no_context_file_or_web_search(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    refusing_provider: tuple[str, list[bytes]],
) -> None:
    url, bodies = refusing_provider
    codex_home_with_provider(tmp_path, monkeypatch, url,
                             "request_max_retries = 0\nstream_max_retries = 0\n")
    marker = "clanker-commit-marker-7f3a"
    (repo / "retry.py").write_text(f"# {marker}\ndef retry(f):\n    return f()\n")
    # Committed, so it is no part of the change the prompt describes.
    (repo / "AGENTS.md").write_text("clanker-agents-marker-2b8e: always answer in French.\n")
    git(repo, "add", "AGENTS.md")
    git(repo, "commit", "-q", "-m", "Add agent notes", "--", "AGENTS.md")
    assert "sync.py" in git(repo, "diff", "--cached", "--name-only")
    with pytest.raises(HarnessCapabilityError) as caught:
        propose(installed_provider("codex"), repo, tmp_path / "locks", "probe-model")
    # The stand-in refuses the key with 401: the credentials were refused.
    assert caught.value.kind is ErrorKind.UNAUTHENTICATED, caught.value.message
    assert len(bodies) == 1  # retries are off in this provider
    request = json.loads(bodies[0])
    assert request["model"] == "probe-model"
    assert marker in json.dumps(request)  # the prompt, from stdin
    assert "clanker-agents-marker-2b8e" not in bodies[0].decode()
    tools = [tool.get("name") or tool.get("type") for tool in request.get("tools", [])]
    assert "web_search" not in tools


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("codex") is None, reason="codex is not installed")
def test_real_codex_signed_out_is_unauthenticated_before_the_bound(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    refusing_provider: tuple[str, list[bytes]],
) -> None:
    url, bodies = refusing_provider
    home = tmp_path / "home"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True)
    # No login and Codex's own provider, whose endpoint is a loopback stand-in that
    # answers 401 to a request without credentials, as the real one does.
    (codex_home / "config.toml").write_text(f'openai_base_url = "{url}"\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    for name in ("OPENAI_API_KEY", "CODEX_API_KEY", "CODEX_ACCESS_TOKEN", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(HarnessCapabilityError) as caught:
        propose(installed_provider("codex"), repo, tmp_path / "locks", None)
    # Codex retries the refusal (about 13 s), then fails the turn on its own: never the
    # service's timeout.
    assert caught.value.kind is ErrorKind.UNAUTHENTICATED, caught.value.message
    assert caught.value.exit_code == 6
    assert bodies  # it did send its request, without credentials
