"""The Pi plugin, against output captured from pi 0.73.1 (tests/fixtures/pi)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

import clanker_pi
from clanker.environment.local import LocalFiles
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import MAX_OUTPUT, CommandResult, LocalTransport
from clanker.launch.request import SessionTarget
from clanker.models.capability import ModelsContext
from clanker.models.types import Model
from clanker.testing import ScriptedSession, ScriptedSessionExecutor, launch_argv, registered
from clanker_pi.launch import PiLaunch
from clanker_pi.models import LISTING_ARGS, PiModels, parse_available_models

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "pi"
[SESSION_FILE] = FIXTURES.glob("session-loopback--*.jsonl")
[FORK_FILE] = FIXTURES.glob("session-loopback-fork--*.jsonl")


def header(path: Path) -> dict[str, str]:
    return json.loads(path.read_text().splitlines()[0])


# Real ids from the captured session files: the source and the fork pi made of it.
SESSION_ID = header(SESSION_FILE)["id"]
FORK_ID = header(FORK_FILE)["id"]
# Where that session lives in the faked home: what a forked file names as its parent.
STORE_PATH = header(FORK_FILE)["parentSession"]


PROVIDER = registered(clanker_pi.plugin, "pi")


def responses(name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]


# -- launch ----------------------------------------------------------------------------


def plan(**fields: object) -> tuple[str, ...]:
    return launch_argv(PROVIDER, **fields)


def test_fresh_launch_is_the_bare_tui() -> None:
    assert plan() == ("pi",)


def test_the_model_is_two_tokens_provider_qualified() -> None:
    assert plan(model="anthropic/claude-sonnet-4-5") == (
        "pi", "--model", "anthropic/claude-sonnet-4-5"
    )


def test_a_model_that_looks_like_an_option_stays_the_value() -> None:
    # pi's parser takes the token after --model whatever it looks like.
    assert plan(model="-x") == ("pi", "--model", "-x")


def test_resume_by_id_and_fork_by_id() -> None:
    session = SessionTarget(native_id=SESSION_ID)
    assert plan(operation="resume", session=session) == ("pi", "--session", SESSION_ID)
    assert plan(operation="fork", session=session) == ("pi", "--fork", SESSION_ID)


def test_a_trusted_store_path_is_preferred_over_the_id() -> None:
    session = SessionTarget(native_id=SESSION_ID, store_path=STORE_PATH)
    assert plan(operation="resume", session=session) == ("pi", "--session", STORE_PATH)
    assert plan(operation="fork", session=session) == ("pi", "--fork", STORE_PATH)


def test_user_flags_come_last_verbatim() -> None:
    session = SessionTarget(native_id=SESSION_ID, store_path=STORE_PATH)
    flags = ("--thinking", "high", "--model=ignored", "list")
    assert plan(operation="resume", session=session, model="loopback/probe-model",
                user_flags=flags) == (
        "pi", "--model", "loopback/probe-model", "--session", STORE_PATH, *flags
    )


def test_version_request_is_bounded_for_a_slow_start() -> None:
    request = PiLaunch().version_request()
    assert request.argv == ("pi", "--version")
    assert 10.0 < request.timeout <= 30.0


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        ("1.0.4\n", "1.0.4"),
        ("Warning: something\n0.87.1-beta.2\n", "0.87.1-beta.2"),
    ],
)
def test_version_shapes(stderr: str, expected: str) -> None:
    assert PiLaunch().parse_version(CommandResult("", stderr, 0)) == expected


@pytest.mark.parametrize(
    ("result", "kind"),
    [
        (CommandResult("", (FIXTURES / "short-m-rejected.stderr.txt").read_text(), 1),
         ErrorKind.COMMAND_FAILED),
        (CommandResult("", "pi v0.73.1 is here\n", 0), ErrorKind.PARSE_FAILURE),
        (CommandResult("", "", 0), ErrorKind.PARSE_FAILURE),
    ],
)
def test_version_failures(result: CommandResult, kind: ErrorKind) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        PiLaunch().parse_version(result)
    assert caught.value.kind is kind


# -- models: the parser ------------------------------------------------------------------


def test_dummy_key_catalog_lists_every_anthropic_model() -> None:
    [response] = responses("rpc-get_available_models-dummy-anthropic.jsonl")
    raw = response["data"]["models"]  # type: ignore[index]
    models = parse_available_models(response)
    assert len(models) == 23
    assert [m.id for m in models] == [f"{r['provider']}/{r['id']}" for r in raw]
    assert [m.label for m in models] == [r["name"] for r in raw]
    assert {m.provider for m in models} == {"anthropic"}
    assert models[0].id == "anthropic/claude-3-5-haiku-20241022"
    assert not any(m.is_default for m in models)


def test_loopback_provider() -> None:
    [response] = responses("rpc-get_available_models-loopback.jsonl")
    assert parse_available_models(response) == (
        Model(id="loopback/probe-model", label="probe-model", provider="loopback"),
    )


@pytest.mark.parametrize(
    "capture",
    [
        "rpc-get_available_models-no-credentials.jsonl",
        "rpc-get_state-then-get_available_models-no-credentials.jsonl",
    ],
)
def test_no_credentials_is_a_valid_empty_listing(capture: str) -> None:
    response = responses(capture)[-1]
    assert response["command"] == "get_available_models"
    assert parse_available_models(response) == ()


@pytest.mark.parametrize("capture", ["rpc-unknown-command.jsonl", "rpc-parse-error.jsonl"])
def test_refusals_are_command_failures_without_pi_text(capture: str) -> None:
    [response] = responses(capture)
    with pytest.raises(HarnessCapabilityError) as caught:
        parse_available_models(response)
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    assert str(response["error"]) not in caught.value.message


def test_duplicates_are_listed_once() -> None:
    entry = {"provider": "loopback", "id": "probe-model", "name": "probe-model"}
    response = {"success": True, "data": {"models": [entry, dict(entry)]}}
    assert [m.id for m in parse_available_models(response)] == ["loopback/probe-model"]


def test_an_unusable_name_only_loses_the_label() -> None:
    entry = {"provider": "loopback", "id": "probe-model", "name": ""}
    [model] = parse_available_models({"success": True, "data": {"models": [entry]}})
    assert model.label is None


@pytest.mark.parametrize(
    "response",
    [
        {"success": True},
        {"success": True, "data": []},
        {"success": True, "data": {"models": {}}},
        {"success": True, "data": {"models": ["anthropic/x"]}},
        {"success": True, "data": {"models": [{"provider": "x"}]}},
        {"success": True, "data": {"models": [{"provider": "x", "id": 3}]}},
        {"success": True, "data": {"models": [{"provider": " x", "id": "m"}]}},
        {"success": True, "data": {"models": [{"provider": "x", "id": "m\x1b[2J"}]}},
        {"success": True, "data": {"models": [{"provider": "", "id": "m"}]}},
    ],
)
def test_malformed_responses_are_parse_failures(response: dict[str, object]) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        parse_available_models(response)
    assert caught.value.kind is ErrorKind.PARSE_FAILURE


# -- models: the protocol, replayed from the capture -----------------------------------------


def replayed_rpc(capture: str, exit_code: int = 0) -> ScriptedSessionExecutor:
    """Speak pi's RPC mode as captured from pi 0.73.1: each request line is answered
    with the captured response to the same command, carrying the request's id the way
    pi echoes it (and dropping it where pi dropped it)."""
    captured = {r["command"]: r for r in responses(capture)}

    def reply(line: str) -> list[str]:
        request = json.loads(line)
        answer = dict(captured[request["type"]])
        if "id" in answer:
            answer["id"] = request["id"]
        return [json.dumps(answer, separators=(",", ":"))]

    return ScriptedSessionExecutor(lambda _: ScriptedSession(reply=reply, exit_code=exit_code))


def discover(executor: ScriptedSessionExecutor, refresh: bool = False) -> tuple[Model, ...]:
    context = ModelsContext(files=LocalFiles(), environ={}, executor=executor,  # type: ignore[arg-type]
                            session_executor=executor, refresh=refresh)
    return asyncio.run(PiModels().discover(context))


def test_discovery_speaks_the_rpc_protocol() -> None:
    executor = replayed_rpc("rpc-get_available_models-dummy-anthropic.jsonl")
    models = discover(executor)
    assert len(models) == 23
    [request] = executor.requests
    assert request.argv == ("pi", "--mode", "rpc", "--no-session", "--offline")
    assert request.args == LISTING_ARGS
    assert request.stdin is None
    assert request.max_output_bytes == MAX_OUTPUT
    assert 4.0 < request.timeout <= 30.0
    [session] = executor.sessions
    assert [json.loads(line) for line in session.written] == [
        {"id": "clanker-models", "type": "get_available_models"}
    ]
    assert session.input_closed and session.disposed


def test_refresh_runs_the_same_listing() -> None:
    executor = replayed_rpc("rpc-get_available_models-loopback.jsonl")
    assert [m.id for m in discover(executor, refresh=True)] == ["loopback/probe-model"]
    assert executor.requests[0].args == LISTING_ARGS


def test_an_answer_that_lost_its_id_still_ends_the_wait() -> None:
    captured = (FIXTURES / "rpc-unknown-command.jsonl").read_text().strip()
    answer = captured.replace("no_such_command", "get_available_models")
    executor = ScriptedSessionExecutor(lambda _: ScriptedSession(reply=lambda _: [answer]))
    with pytest.raises(HarnessCapabilityError) as caught:
        discover(executor)
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    assert executor.sessions[0].disposed


def test_other_messages_before_the_answer_are_skipped() -> None:
    [answer] = (FIXTURES / "rpc-get_available_models-loopback.jsonl").read_text().splitlines()
    answer = answer.replace('"r1"', '"clanker-models"')
    other = '{"id":"r0","type":"response","command":"get_state","success":true,"data":{}}'
    executor = ScriptedSessionExecutor(
        lambda _: ScriptedSession(reply=lambda _: [other, answer])
    )
    assert [m.id for m in discover(executor)] == ["loopback/probe-model"]


def test_pi_ending_before_it_answers_is_a_command_failure() -> None:
    stderr = (FIXTURES / "short-m-rejected.stderr.txt").read_text()
    executor = ScriptedSessionExecutor(lambda _: ScriptedSession(exit_code=1, stderr=stderr))
    with pytest.raises(HarnessCapabilityError) as caught:
        discover(executor)
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    assert stderr.strip() not in caught.value.message


def test_a_pathologically_nested_line_is_a_parse_failure() -> None:
    executor = ScriptedSessionExecutor(lambda _: ScriptedSession(["[" * 100_000]))
    with pytest.raises(HarnessCapabilityError) as caught:
        discover(executor)
    assert caught.value.kind is ErrorKind.PARSE_FAILURE


# -- the real CLI, when it is installed ---------------------------------------------------


@pytest.fixture
def loopback_agent_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh Pi agent dir whose only configured provider is a refused loopback port."""
    agent = tmp_path / "agent"
    agent.mkdir()
    shutil.copy(FIXTURES / "loopback-models.json", agent / "models.json")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.delenv("PI_CODING_AGENT_SESSION_DIR", raising=False)
    return agent


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("pi") is None, reason="pi is not installed")
def test_real_pi_lists_its_configured_provider(loopback_agent_dir: Path) -> None:
    transport = LocalTransport()
    context = ModelsContext(files=LocalFiles(), environ={},
                            executor=transport, session_executor=transport)
    models = asyncio.run(PiModels().discover(context))
    assert Model(id="loopback/probe-model", label="probe-model", provider="loopback") in models
    assert not (loopback_agent_dir / "sessions").exists()  # --no-session wrote nothing


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("pi") is None, reason="pi is not installed")
def test_real_pi_version(loopback_agent_dir: Path) -> None:
    launch = PiLaunch()
    result = asyncio.run(LocalTransport().run(launch.version_request()))
    version = launch.parse_version(result)
    assert version.count(".") >= 2
    assert version in result.stdout + result.stderr
