"""The Claude Code plugin, against output captured from Claude Code 2.1.197
(tests/fixtures/claude)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import clanker_claude
from clanker.environment.local import LocalFiles
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import LocalTransport
from clanker.launch.request import SessionTarget
from clanker.models.capability import ModelsContext
from clanker.models.types import Model
from clanker.testing import ScriptedSession, ScriptedSessionExecutor, launch_argv, registered
from clanker_claude.launch import ClaudeLaunch
from clanker_claude.models import ClaudeModels, parse_initialize_response

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "claude"
SESSION = "2bd84788-1866-4763-ad83-f2741628502f"
TRANSCRIPT = f"/home/u/.claude/projects/-home-u-src-repo/{SESSION}.jsonl"
NO_CREDENTIALS = ["default", "opus[1m]", "sonnet", "haiku"]


PROVIDER = registered(clanker_claude.plugin, "claude")


def captured(name: str) -> dict[str, Any]:
    [line] = (FIXTURES / name).read_text().splitlines()
    message: dict[str, Any] = json.loads(line)
    return message


# -- launch ----------------------------------------------------------------------------


def plan(**fields: object) -> tuple[str, ...]:
    return launch_argv(PROVIDER, **fields)


def test_fresh_launch_is_the_bare_command() -> None:
    assert plan() == ("claude",)
    assert plan(model="opus[1m]") == ("claude", "--model", "opus[1m]")


def test_resume_and_fork_come_before_the_user_flags() -> None:
    session = SessionTarget(native_id=SESSION)
    flags = ("--add-dir", "/a", "/b")  # variadic: it would swallow a following word
    assert plan(operation="resume", session=session, model="sonnet", user_flags=flags) == (
        "claude", "--model", "sonnet", "--resume", SESSION, "--add-dir", "/a", "/b"
    )
    assert plan(operation="fork", session=session, user_flags=flags) == (
        "claude", "--resume", SESSION, "--fork-session", "--add-dir", "/a", "/b"
    )


def test_a_trusted_transcript_path_is_preferred_over_the_id() -> None:
    session = SessionTarget(native_id=SESSION, store_path=TRANSCRIPT)
    assert plan(operation="resume", session=session) == ("claude", "--resume", TRANSCRIPT)
    assert plan(operation="fork", session=session) == (
        "claude", "--resume", TRANSCRIPT, "--fork-session"
    )


def test_a_relative_store_path_is_not_used() -> None:
    session = SessionTarget(native_id=SESSION, store_path=f"-x/{SESSION}.jsonl")
    assert plan(operation="resume", session=session) == ("claude", "--resume", SESSION)


# -- models: the parser ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capture", "expected"),
    [
        ("control-initialize-out.jsonl", NO_CREDENTIALS),
        ("control-initialize-out.api-key.jsonl", NO_CREDENTIALS),
        ("control-initialize-out.base-url.jsonl",
         ["default", "opus[1m]", "sonnet", "sonnet[1m]", "haiku"]),
    ],
)
def test_first_party_listings(capture: str, expected: list[str]) -> None:
    models = parse_initialize_response(captured(capture))
    assert [m.id for m in models] == expected
    assert [m.id for m in models if m.is_default] == ["default"]
    assert models[0].label == "Default (recommended)"
    assert all(m.provider is None for m in models)


def test_bedrock_listing() -> None:
    models = parse_initialize_response(captured("control-initialize-out.bedrock.jsonl"))
    assert len(models) == 13
    assert models[0] == Model(id="default", label="Default", is_default=True)
    assert models[4] == Model(id="us.anthropic.claude-fable-5", label="Fable")
    assert models[-1] == Model(id="haiku", label="Haiku")


def test_a_control_error_is_a_command_failure_without_its_text() -> None:
    error = captured("control-unknown-subtype-out.jsonl")
    with pytest.raises(HarnessCapabilityError) as caught:
        parse_initialize_response(error)
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    assert error["response"]["error"] not in str(caught.value)


def _success(models: object) -> dict[str, Any]:
    return {
        "type": "control_response",
        "response": {"subtype": "success", "request_id": "clanker-models",
                     "response": {"models": models}},
    }


@pytest.mark.parametrize(
    "message",
    [
        {"type": "control_response"},
        {"type": "control_response", "response": {"subtype": "success"}},
        {"type": "control_response", "response": {"subtype": "other", "response": {}}},
        _success(None),
        _success({"value": "sonnet"}),
        _success(["sonnet"]),
        _success([{"displayName": "Sonnet"}]),
        _success([{"value": ""}]),
        _success([{"value": "sonnet "}]),
        _success([{"value": "a\0b"}]),
        _success([{"value": "sonnet", "displayName": ["Sonnet"]}]),
    ],
)
def test_malformed_responses_are_parse_failures(message: dict[str, Any]) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        parse_initialize_response(message)
    assert caught.value.kind is ErrorKind.PARSE_FAILURE


def test_an_empty_models_list_is_a_valid_empty_listing() -> None:
    assert parse_initialize_response(_success([])) == ()


# -- models: the protocol, replayed from the capture -----------------------------------------

PROBE_ARGV = (
    "claude", "--output-format", "stream-json", "--verbose", "--input-format", "stream-json",
    "--setting-sources", "user",
    "--no-session-persistence", "--settings", '{"disableAllHooks":true}',
    "--mcp-config", '{"mcpServers":{}}', "--strict-mcp-config",
)
PROBE_ENV = {
    "ENABLE_CLAUDEAI_MCP_SERVERS": "false",
    "CLAUDE_CODE_AUTO_CONNECT_IDE": "0",
    "CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL": "1",
}


def replayed(
    capture: str = "control-initialize-out.jsonl",
    before: list[dict[str, Any]] | None = None,
    exit_code: int = 0,
) -> ScriptedSessionExecutor:
    """Speaks the control protocol captured from claude 2.1.197: each control
    request is answered with the captured response under the request's id,
    after the frames in ``before``."""
    answer = captured(capture)

    def reply(line: str) -> list[str]:
        request = json.loads(line)
        response = {**answer["response"], "request_id": request["request_id"]}
        return [json.dumps(m) for m in [*(before or []), {**answer, "response": response}]]

    return ScriptedSessionExecutor(lambda _: ScriptedSession(reply=reply, exit_code=exit_code))


def discover(executor: ScriptedSessionExecutor) -> tuple[Model, ...]:
    context = ModelsContext(files=LocalFiles(), environ={},
                            executor=executor, session_executor=executor)  # type: ignore[arg-type]
    return asyncio.run(ClaudeModels().discover(context))


def test_discovery_sends_one_isolated_initialize() -> None:
    executor = replayed()
    assert [m.id for m in discover(executor)] == NO_CREDENTIALS
    [request] = executor.requests
    assert request.argv == PROBE_ARGV
    assert dict(request.env) == PROBE_ENV
    assert request.timeout == 30.0
    [session] = executor.sessions
    assert [json.loads(line) for line in session.written] == [
        {"type": "control_request", "request_id": "clanker-models",
         "request": {"subtype": "initialize"}},
    ]
    assert session.input_closed and session.disposed


def test_unrelated_frames_and_other_responses_are_skipped() -> None:
    other = {"type": "control_response",
             "response": {"subtype": "error", "request_id": "someone-else", "error": "x"}}
    system = {"type": "system", "subtype": "status"}
    executor = replayed(before=[system, other])
    assert [m.id for m in discover(executor)] == NO_CREDENTIALS


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "assistant", "message": {}},
        {"type": "user", "message": {}},
        {"type": "result", "subtype": "success"},
        {"type": "stream_event", "event": {}},
        {"type": "control_request", "request_id": "c1",
         "request": {"subtype": "can_use_tool", "tool_name": "Bash"}},
    ],
)
def test_turn_frames_and_inbound_requests_fail_the_probe_unanswered(
    frame: dict[str, Any],
) -> None:
    executor = replayed(before=[frame])
    with pytest.raises(HarnessCapabilityError) as caught:
        discover(executor)
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    [session] = executor.sessions
    assert len(session.written) == 1  # nothing was answered or granted
    assert session.disposed


def test_a_control_error_fails_the_probe() -> None:
    executor = replayed("control-unknown-subtype-out.jsonl")
    with pytest.raises(HarnessCapabilityError) as caught:
        discover(executor)
    assert caught.value.kind is ErrorKind.COMMAND_FAILED


def test_a_refused_input_fails_typed_without_the_stderr_text() -> None:
    """How claude 2.1.197 ends on input it cannot parse: stdout empty, exit 1."""
    stderr = (FIXTURES / "control-garbage-input.stderr.txt").read_text()
    executor = ScriptedSessionExecutor(
        lambda _: ScriptedSession([], exit_code=1, stderr=stderr)
    )
    with pytest.raises(HarnessCapabilityError) as caught:
        discover(executor)
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    assert "JSON Parse error" not in str(caught.value)


# -- the real CLI, when it is installed ---------------------------------------------------

# Each of these changes the listed models (or signs in); the test wants a signed-out home.
_PROVIDER_VARIABLES = frozenset({
    "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL",
    "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_OAUTH_TOKEN",
})


def signed_out_environment(home: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARIABLES}
    return {**environ, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")}


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("claude") is None, reason="claude is not installed")
def test_real_probe_accepts_the_isolation_flags_and_lists_models(tmp_path: Path) -> None:
    """A signed-out first-party home: the probe runs, exits 0 and parses."""
    transport = LocalTransport(signed_out_environment(tmp_path))
    context = ModelsContext(files=LocalFiles(), environ={},
                            executor=transport, session_executor=transport)
    models = asyncio.run(ClaudeModels().discover(context))
    assert [m.id for m in models if m.is_default] == ["default"]
    launch = ClaudeLaunch()
    version = launch.parse_version(asyncio.run(transport.run(launch.version_request())))
    if version == "2.1.197":
        assert [m.id for m in models] == NO_CREDENTIALS
