"""Claude Code commit messages, against Claude Code 2.1.197's ``-p --output-format
stream-json`` output (tests/fixtures/claude/commit). The ``*.stdout.json`` captures are
``--output-format json``: its one line is the stream's last event, the same ``result``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clanker.commit.gitcontext import ChangeContext
from clanker.commit.message import Style
from clanker.commit.prompt import build_prompt
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.testing.commit import (
    change_repository,
    check_kept_nowhere,
    commit_failure,
    installed_provider,
    propose,
    refused_real_run,
)
from clanker.testing.strategies import json_values
from clanker_claude.commit import COMMIT_ARGS, COMMIT_ENV, ClaudeCommit, parse_commit_result
from clanker_claude.models import ISOLATION_ARGS, PROBE_ENV

COMMIT = Path(__file__).resolve().parents[2] / "fixtures" / "claude" / "commit"
ANSWER = ("feat: add retry to the sync client\n\n"
          "Retry transient network errors up to three times with backoff.")
RESULTS = sorted(p.name for p in COMMIT.glob("*.stdout.json"))
STREAMS = sorted(p.name for p in COMMIT.glob("*.stdout.json*"))


def stdout(name: str) -> str:
    return (COMMIT / name).read_text()


def captured(name: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(stdout(name))
    return value


def failure(text: str, exit_code: int = 0, stderr: str = "") -> HarnessCapabilityError:
    return commit_failure(ClaudeCommit(), "claude", text, exit_code, stderr)


def result_line(**changes: object) -> str:
    """The captured clean success with some fields changed (``None`` values drop the field)."""
    base = captured("stub-success.stdout.json")
    for key, value in changes.items():
        if value is None:
            base.pop(key, None)
        else:
            base[key] = value
    return json.dumps(base) + "\n"


# -- the invocation ---------------------------------------------------------------------

ARGV = (
    "-p", "--output-format", "stream-json", "--verbose", "--tools", "", "--max-turns", "1",
    "--disable-slash-commands", "--setting-sources", "user",
    "--no-session-persistence", "--settings", '{"disableAllHooks":true}',
    "--mcp-config", '{"mcpServers":{}}', "--strict-mcp-config",
)
ENV = {
    "ENABLE_CLAUDEAI_MCP_SERVERS": "false",
    "CLAUDE_CODE_AUTO_CONNECT_IDE": "0",
    "CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL": "1",
    "CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1",
    "CLAUDE_CODE_DISABLE_ATTACHMENTS": "1",
}


def test_the_isolation_is_the_models_probes_own() -> None:
    args = list(COMMIT_ARGS)
    start = args.index(ISOLATION_ARGS[0])
    assert tuple(args[start:start + len(ISOLATION_ARGS)]) == ISOLATION_ARGS
    assert PROBE_ENV.items() <= COMMIT_ENV.items()


def _options(args: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """Pair each option with its value; fail on a bare word (a positional prompt)."""
    takes_value = {"--output-format", "--tools", "--max-turns", "--setting-sources", "--settings",
                   "--mcp-config", "--model"}
    pairs: list[tuple[str, str | None]] = []
    rest = list(args)
    while rest:
        option = rest.pop(0)
        assert option.startswith("-"), f"a bare word {option!r} would be read as a prompt"
        pairs.append((option, rest.pop(0) if option in takes_value else None))
    return pairs


def test_nothing_can_re_enable_tools_or_become_a_prompt() -> None:
    pairs = _options(ClaudeCommit().build_invocation("--tools", "p").args)
    names = [name for name, _ in pairs]
    assert ("--tools", "") in pairs and names.count("--tools") == 1
    assert ("--model", "--tools") in pairs  # the model is a value, never an option
    for never in ("--include-partial-messages", "--allowedTools", "--allowed-tools",
                  "--permission-mode",
                  "--dangerously-skip-permissions", "--plugin-dir", "--add-dir"):
        assert never not in names
    # `--mcp-config` is variadic: an option follows it, never a bare word.
    args = COMMIT_ARGS
    assert args[args.index("--mcp-config") + 2].startswith("--")


@pytest.mark.parametrize("style", list(Style))
@pytest.mark.parametrize("patch", ["", "/context\n", "/etc/passwd | @notes.txt\n"])
def test_the_prompt_the_service_builds_never_starts_with_a_slash(style: Style, patch: str) -> None:
    # A stdin prompt starting with `/` is a local slash command in print mode: no model
    # call, a `num_turns: 0` result (refused by the parser, see below).
    change = ChangeContext(root="/r", status=("/M a.py",), patch=patch, untracked="/x\n",
                           recent_subjects=("/revert",), omitted=())
    prompt = build_prompt(change, style)
    assert not prompt.lstrip().startswith("/")
    assert prompt.startswith("Write a git commit message")
    request = ClaudeCommit().build_invocation(None, prompt)
    assert request.stdin is not None and not request.stdin.lstrip().startswith(b"/")


# -- every captured and built fixture ---------------------------------------------------

ANSWERS = {
    # name: exit code of the capture (README)
    "stub-success.stdout.json": 0,
    "stub-thinking-then-text.stdout.json": 0,
    "stub-success-model-haiku.stdout.json": 0,
    "final-argv-stub-success.stdout.json": 0,
    "brief-argv-project-settings.stdout.json": 0,  # answered, but by the redirected endpoint
    "stub-success.stdout.jsonl": 0,
    "stub-thinking-then-text.stdout.jsonl": 0,
}
PARSE_FAILURES = {
    "stub-thinking-only.stdout.json": (0, "only reasoning"),
    "final-argv-stub-thinking-only.stdout.json": (0, "only reasoning"),
    "stub-slash-command.stdout.json": (0, "slash command"),
    "stub-sigint.stdout.jsonl": (0, "no result object"),  # init only
    "stub-thinking-only.stdout.jsonl": (0, "only reasoning"),
}
COMMAND_FAILURES = {
    # `--output-format json` alone cannot say why: its result has no error category.
    "json-not-logged-in.stdout.json": (1, "error result"),
    "json-refused-port-retries-off.stdout.json": (1, "error result"),
    "stub-http-400.stdout.json": (1, "HTTP 400"),
    "stub-http-404-model.stdout.json": (1, "HTTP 404"),
    "stub-max-tokens.stdout.json": (1, "error result"),
    "stub-refusal.stdout.json": (1, "error result"),
    "stub-toolcall-max-turns.stdout.json": (1, "--max-turns 1"),
    "final-argv-stub-toolcall.stdout.json": (1, "--max-turns 1"),
    "built-error-during-execution.stdout.json": (1, "error_during_execution"),
    "final-argv-project-settings.stdout.json": (1, "error result"),
    "final-argv-project-settings-api-key.stdout.json": (1, "error result"),
    "json-verbose-is-array.stdout.json": (1, "exit status 1"),
    "stream-json-refused-port-default-retries-killed.stdout.jsonl": (124, "exit status 124"),
    "stub-max-tokens.stdout.jsonl": (1, "error result"),
    "stub-refusal.stdout.jsonl": (1, "error result"),
    "stub-http-400.stdout.jsonl": (1, "HTTP 400"),
    "stub-toolcall-max-turns.stdout.jsonl": (1, "--max-turns 1"),
    "stub-sigterm.stdout.jsonl": (143, "exit status 143"),
    # A key the endpoint refuses (401), default retries, killed at 80 s: in clanker the
    # 90 s bound ends it first, as a timeout; the output alone is a killed run.
    "final-argv-stub-401-killed.stdout.jsonl": (143, "exit status 143"),
}
# Signed out: the assistant message says `error: "authentication_failed"` (exit 1).
UNAUTHENTICATED = {
    "stream-json-not-logged-in.stdout.jsonl": 1,
    "final-argv-not-logged-in.stdout.jsonl": 1,  # no login at all (2026-12-01)
    "final-argv-stub-401-retries-off.stdout.jsonl": 1,  # a refused key, HTTP 401
}
DECORATED = {"stub-decorated.stdout.json": 0, "stub-decorated.stdout.jsonl": 0}


def test_every_fixture_has_an_expected_outcome() -> None:
    known = {*ANSWERS, *PARSE_FAILURES, *COMMAND_FAILURES, *UNAUTHENTICATED, *DECORATED}
    assert sorted(known) == STREAMS


@pytest.mark.parametrize("name", sorted(UNAUTHENTICATED))
@pytest.mark.parametrize("exit_code", [None, 0])
def test_signed_out_is_unauthenticated_and_says_how_to_sign_in(
    name: str, exit_code: int | None
) -> None:
    code = UNAUTHENTICATED[name] if exit_code is None else exit_code
    error = failure(stdout(name), code)
    assert error.kind is ErrorKind.UNAUTHENTICATED
    assert error.exit_code == 6
    assert error.message == ("claude: the harness is not signed in (sign in with `claude` "
                             "and /login, or check the API key it uses)")
    # Claude's own words ("Not logged in", "Invalid API key") never reach the message.
    assert "logged" not in error.message and "Invalid" not in error.message


def test_the_same_signed_out_result_without_the_stream_cannot_say_why() -> None:
    lines = stdout("final-argv-not-logged-in.stdout.jsonl").splitlines()
    assert failure(lines[-1] + "\n", 1).kind is ErrorKind.COMMAND_FAILED
    assert failure("\n".join(lines) + "\n", 1).kind is ErrorKind.UNAUTHENTICATED


def test_an_authentication_category_without_an_error_result_is_not_unauthenticated() -> None:
    # Only an error result is a failure; a stray category on a clean answer changes nothing.
    lines = stdout("stub-success.stdout.jsonl").splitlines()
    tagged = json.loads(lines[1])
    assert tagged["type"] == "assistant"
    tagged["error"] = "authentication_failed"
    text = "\n".join([lines[0], json.dumps(tagged), *lines[2:]]) + "\n"
    assert parse_commit_result(text) == ANSWER


def test_an_event_after_the_result_is_a_parse_failure() -> None:
    text = stdout("stub-success.stdout.jsonl") + json.dumps({"type": "system"}) + "\n"
    assert failure(text).kind is ErrorKind.PARSE_FAILURE


def test_reasoning_is_never_part_of_the_answer() -> None:
    assert "The change adds retries." not in parse_commit_result(
        stdout("stub-thinking-then-text.stdout.json"))


@pytest.mark.parametrize("name", sorted(COMMAND_FAILURES))
def test_claudes_error_text_never_reaches_the_message(name: str) -> None:
    exit_code, _ = COMMAND_FAILURES[name]
    error = failure(stdout(name), exit_code)
    raw = json.loads(stdout(name).strip().splitlines()[-1])
    if isinstance(raw, list):  # the --verbose array: its last element is the result
        raw = raw[-1]
    for text in [raw.get("result"), *raw.get("errors", [])]:
        if isinstance(text, str):
            assert text not in error.message
    assert "API Error" not in error.message and "login" not in error.message


@pytest.mark.parametrize("name", ["final-argv-stub-toolcall.stdout.json",
                                  "stub-http-404-model.stdout.json"])
def test_an_error_result_is_a_command_failure_even_with_exit_0(name: str) -> None:
    assert failure(stdout(name), 0).kind is ErrorKind.COMMAND_FAILED


# -- built results: the rule's edges ----------------------------------------------------


def test_terminal_reason_may_be_absent() -> None:
    assert parse_commit_result(result_line(terminal_reason=None)) == ANSWER


@pytest.mark.parametrize(
    ("changes", "detail"),
    [
        ({"subtype": "error_during_execution"}, "without is_error"),
        ({"subtype": "error_max_budget_usd"}, "without is_error"),
        ({"subtype": "partial"}, "no known subtype"),
        ({"subtype": 1}, "no known subtype"),
        ({"is_error": "false"}, "no is_error"),
        ({"is_error": 0}, "no is_error"),
        ({"num_turns": 0}, "slash command"),
        ({"num_turns": True}, "turn count"),
        ({"num_turns": "1"}, "turn count"),
        ({"num_turns": 1.0}, "turn count"),
        ({"stop_reason": "max_tokens"}, "cut off"),
        ({"stop_reason": "tool_use"}, "tool call"),
        ({"stop_reason": "refusal"}, "end_turn"),
        ({"stop_reason": "stop_sequence"}, "end_turn"),
        ({"stop_reason": "pause_turn"}, "end_turn"),
        ({"terminal_reason": "max_turns"}, "did not complete"),
        ({"terminal_reason": "aborted_streaming"}, "did not complete"),
        ({"deferred_tool_use": {"name": "Bash"}}, "deferred"),
        ({"result": 7}, "no answer text"),
        ({"result": ["Fix it"]}, "no answer text"),
        ({"result": ""}, "empty"),
        ({"result": " \n\t"}, "empty"),
        ({"result": "Fix \ud800 it"}, "Unicode"),
        ({"type": "assistant"}, "no result object"),
    ],
)
def test_a_result_that_is_not_a_clean_answer_is_a_parse_failure(
    changes: dict[str, object], detail: str
) -> None:
    error = failure(result_line(**changes))
    assert error.kind is ErrorKind.PARSE_FAILURE
    assert detail in (error.detail or "")


@pytest.mark.parametrize("field", ["subtype", "is_error", "num_turns", "stop_reason", "result",
                                   "type"])
def test_a_missing_field_is_a_parse_failure(field: str) -> None:
    assert failure(result_line(**{field: None})).kind is ErrorKind.PARSE_FAILURE


def test_a_null_stop_reason_and_terminal_reason_fail() -> None:
    base = captured("stub-success.stdout.json")
    for key in ("stop_reason", "terminal_reason", "deferred_tool_use"):
        assert failure(json.dumps({**base, key: None})).kind is ErrorKind.PARSE_FAILURE


@pytest.mark.parametrize(
    ("changes", "detail"),
    [
        ({"is_error": True}, "error result"),
        ({"is_error": True, "api_error_status": 429}, "HTTP 429"),
        ({"is_error": True, "api_error_status": True}, "error result"),
        ({"is_error": True, "api_error_status": "500 mock"}, "error result"),
        ({"is_error": True, "api_error_status": 99999}, "error result"),
        ({"subtype": "error_max_turns", "is_error": False}, "--max-turns 1"),
        ({"subtype": "error_max_structured_output_retries", "is_error": True},
         "error_max_structured_output_retries"),
    ],
)
def test_error_results_are_command_failed(changes: dict[str, object], detail: str) -> None:
    error = failure(result_line(**changes))
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert detail in (error.detail or "")
    assert "500 mock" not in error.message and "99999" not in error.message


@pytest.mark.parametrize(
    "text",
    [
        "not json\n",
        "[]\n",
        '"result"\n',
        "7\n",
        "null\n",
        result_line() + result_line(),  # two results: an event after the result
        result_line() + '{"type":"system","subtype":"init"}\n',
        "[" * 100_000 + "\n",
        '{"type":"result"' + " " * 2_000_000,
        result_line()[:-3],
    ],
)
def test_malformed_output_is_a_parse_failure(text: str) -> None:
    assert failure(text).kind is ErrorKind.PARSE_FAILURE


def test_surrounding_whitespace_is_not_an_error() -> None:
    assert parse_commit_result("\n\n" + result_line() + "\n  ") == ANSWER


def test_events_before_the_result_are_not_the_answer() -> None:
    events = '{"type":"system","subtype":"init"}\n{"type":"user","message":{}}\n'
    assert parse_commit_result(events + result_line()) == ANSWER


# -- properties -------------------------------------------------------------------------

_PROPERTY = settings(max_examples=200, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


def _typed_or_answer(text: str) -> str | None:
    try:
        return parse_commit_result(text)
    except HarnessCapabilityError as exc:
        assert exc.kind in (ErrorKind.PARSE_FAILURE, ErrorKind.COMMAND_FAILED,
                            ErrorKind.UNAUTHENTICATED)
        assert exc.harness == "claude"
        return None


_JSON = json_values(max_leaves=20, floats=st.floats())  # NaN and the infinities too
_FIELDS = st.dictionaries(
    st.sampled_from(["type", "subtype", "is_error", "num_turns", "stop_reason", "terminal_reason",
                     "deferred_tool_use", "result", "api_error_status", "errors"]),
    _JSON | st.sampled_from(["result", "success", "error_max_turns", "end_turn", "completed"]),
    max_size=6,
)


@_PROPERTY
@given(fields=_FIELDS, name=st.sampled_from(RESULTS))
def test_arbitrary_fields_are_an_answer_or_a_typed_failure(
    fields: dict[str, object], name: str
) -> None:
    base = json.loads(stdout(name))
    if isinstance(base, dict):
        mixed = {**base, **fields}
        answer = _typed_or_answer(json.dumps(mixed))
        if answer is not None:
            assert answer == mixed["result"] and answer.strip()
    _typed_or_answer(json.dumps(fields))


# -- the real CLI, when it is installed ---------------------------------------------------
# (End to end through the commit service and a double: the contract, test_contract.py.)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return change_repository(tmp_path)


@pytest.fixture
def refused_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh home and config directory whose only endpoint is a refused loopback port."""
    home = tmp_path / "home"
    config = home / ".claude"
    config.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy-not-a-key")
    # One attempt (the default, 10 retries, takes about 3 minutes against a dead port).
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    return config


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("claude") is None, reason="claude is not installed")
def test_real_claude_against_a_refused_endpoint_is_a_typed_failure_and_keeps_nothing(
    repo: Path, refused_config_dir: Path, tmp_path: Path
) -> None:
    # What the repository must not be able to do: run a command through its own settings,
    # or send the request elsewhere.
    ran = tmp_path / "api-key-helper-ran"
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(json.dumps({
        "apiKeyHelper": f"touch {ran}; echo dummy-not-a-key",
        "env": {"ANTHROPIC_BASE_URL": "http://127.0.0.1:10"},
    }))
    error = refused_real_run("claude", repo, tmp_path / "locks", "haiku")
    # Claude answers `is_error: true` ("Unable to connect") and exits 1.
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert error.detail == "the turn ended in an error result"
    assert "connect" not in error.message
    assert not ran.exists()
    assert not list(refused_config_dir.glob("projects/*/*.jsonl"))
    assert not (refused_config_dir / "history.jsonl").exists()
    check_kept_nowhere(tmp_path, outside=repo)


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("claude") is None, reason="claude is not installed")
def test_real_claude_signed_out_is_unauthenticated(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / ".claude"))
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
                 "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(HarnessCapabilityError) as caught:
        propose(installed_provider("claude"), repo, tmp_path / "locks", None)
    # No login: Claude answers at once, without a request.
    assert caught.value.kind is ErrorKind.UNAUTHENTICATED
    assert caught.value.exit_code == 6
