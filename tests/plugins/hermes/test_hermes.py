"""The Hermes plugin, against output captured from hermes-agent 0.19.0 (tests/fixtures/hermes)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

import clanker_hermes
from clanker.environment.local import LocalFiles
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import LocalTransport
from clanker.launch.request import SessionTarget
from clanker.models.capability import ModelsContext
from clanker.testing import ScriptedSession, ScriptedSessionExecutor, launch_argv, registered
from clanker_hermes.launch import split_model
from clanker_hermes.models import HermesModels, gateway_interpreter, parse_model_options

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hermes"


@pytest.fixture(autouse=True)
def known_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Listing needs Hermes's Python; name one so tests never depend on an install."""
    monkeypatch.setenv("HERMES_PYTHON", sys.executable)


PROVIDER = registered(clanker_hermes.plugin, "hermes")


def responses(name: str) -> list[dict[str, object]]:
    lines = (FIXTURES / name).read_text().splitlines()
    return [json.loads(line) for line in lines]


# -- launch ----------------------------------------------------------------------------


def plan(**fields: object) -> tuple[str, ...]:
    return launch_argv(PROVIDER, **fields)


def test_fresh_launch_is_the_tui() -> None:
    assert plan() == ("hermes", "--tui")


def test_model_goes_before_tui_and_a_listed_model_keeps_its_provider() -> None:
    assert plan(model="probe-model") == ("hermes", "-m", "probe-model", "--tui")
    assert plan(model="openrouter::anthropic/claude-x:free", user_flags=("--yolo",)) == (
        "hermes", "-m", "anthropic/claude-x:free", "--provider", "openrouter", "--tui", "--yolo"
    )


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("custom::probe-model", ("custom", "probe-model")),
        ("llama3:8b", (None, "llama3:8b")),
        ("z-ai/glm-5.2", (None, "z-ai/glm-5.2")),
        ("::x", (None, "::x")),
        ("a b::x", (None, "a b::x")),
        ("custom::", (None, "custom::")),
    ],
)
def test_split_model(model: str, expected: tuple[str | None, str]) -> None:
    assert split_model(model) == expected


def test_resume_by_id() -> None:
    session = SessionTarget(native_id="20261130_081830_cec5d8")
    assert plan(operation="resume", session=session) == (
        "hermes", "--tui", "--resume", "20261130_081830_cec5d8"
    )


# -- models: the parser ------------------------------------------------------------------


def test_explicit_only_response_lists_the_configured_provider() -> None:
    by_id = {r["id"]: r for r in responses("gateway-model-options-custom-loopback.stdout.ndjson")
             if "id" in r}
    models = parse_model_options(by_id[3])
    assert [(m.id, m.label, m.provider, m.is_default) for m in models] == [
        ("custom::probe-model", "probe-model", "custom", True)
    ]


def test_unconfigured_rows_are_left_out() -> None:
    by_id = {r["id"]: r for r in responses("gateway-model-options-custom-loopback.stdout.ndjson")
             if "id" in r}
    models = parse_model_options(by_id[4])  # include_unconfigured: 39 skeleton rows
    assert {m.provider for m in models} == {"moa", "custom"}


def test_dummy_key_catalog() -> None:
    [response] = [r for r in responses("gateway-model-options-dummy-keys.stdout.ndjson")
                  if "id" in r]
    models = parse_model_options(response)
    counts = {p: sum(1 for m in models if m.provider == p) for p in {m.provider for m in models}}
    assert counts == {"moa": 1, "openrouter": 39, "anthropic": 11, "openai-api": 16}
    assert all(m.id == f"{m.provider}::{m.label}" for m in models)


def test_error_responses_are_command_failures() -> None:
    for response in responses("gateway-errors.stdout.ndjson"):
        if "error" in response:
            with pytest.raises(HarnessCapabilityError) as caught:
                parse_model_options(response)
            assert caught.value.kind is ErrorKind.COMMAND_FAILED


@pytest.mark.parametrize(
    "response",
    [
        {"id": 1},
        {"id": 1, "result": []},
        {"id": 1, "result": {"providers": {}}},
        {"id": 1, "result": {"providers": ["moa"]}},
        {"id": 1, "result": {"providers": [{"slug": "x"}]}},
        {"id": 1, "result": {"providers": [{"slug": "x", "models": [3]}]}},
        {"id": 1, "result": {"providers": [{"slug": "x", "models": [" "]}]}},
    ],
)
def test_malformed_responses_are_parse_failures(response: dict[str, object]) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        parse_model_options(response)
    assert caught.value.kind is ErrorKind.PARSE_FAILURE


# -- models: the protocol, replayed from the capture -----------------------------------------


class ReplayedGateway:
    """Speaks the gateway protocol captured from hermes 0.19.0: the ready event
    first, then each request answered with the captured response of the same params."""

    def __init__(self, capture: str) -> None:
        requests = (FIXTURES / capture.replace("stdout", "stdin")).read_text().splitlines()
        lines = (FIXTURES / capture).read_text().splitlines()
        self.ready = lines[0]
        answers = [json.loads(line) for line in lines[1:]]
        self.by_params = {
            json.dumps(json.loads(req).get("params", {}), sort_keys=True): ans
            for req, ans in zip(requests, answers, strict=True)
        }

    def session(self, _request: object) -> ScriptedSession:
        def reply(line: str) -> list[str]:
            request = json.loads(line)
            answer = dict(self.by_params[json.dumps(request["params"], sort_keys=True)])
            answer["id"] = request["id"]
            return [json.dumps(answer)]

        return ScriptedSession([self.ready], reply=reply)


def discover(executor: ScriptedSessionExecutor, refresh: bool = False) -> tuple[object, ...]:
    context = ModelsContext(files=LocalFiles(), environ=dict(os.environ), executor=executor,  # type: ignore[arg-type]
                            session_executor=executor, refresh=refresh)
    return asyncio.run(HermesModels().discover(context))


def test_discovery_speaks_the_gateway_protocol() -> None:
    gateway = ReplayedGateway("gateway-model-options-custom-loopback.stdout.ndjson")
    executor = ScriptedSessionExecutor(gateway.session)
    models = discover(executor)
    assert [m.id for m in models] == ["custom::probe-model"]  # type: ignore[attr-defined]
    [request] = executor.requests
    assert request.args == ("-m", "tui_gateway.entry")
    assert request.command == Path(sys.executable).name
    assert request.env["PATH"].startswith(str(Path(sys.executable).parent) + os.pathsep)
    assert request.env["HERMES_DISABLE_LAZY_INSTALLS"] == "1"
    [session] = executor.sessions
    assert json.loads(session.written[0])["params"] == {"explicit_only": True}
    assert session.input_closed and session.disposed


def test_refresh_asks_for_live_catalogs() -> None:
    gateway = ReplayedGateway("gateway-model-options-custom-loopback.stdout.ndjson")
    gateway.by_params[json.dumps({"explicit_only": True, "refresh": True}, sort_keys=True)] = (
        gateway.by_params[json.dumps({"explicit_only": True}, sort_keys=True)]
    )
    executor = ScriptedSessionExecutor(gateway.session)
    discover(executor, refresh=True)
    assert json.loads(executor.sessions[0].written[0])["params"]["refresh"] is True
    assert executor.requests[0].timeout == 30.0


def test_a_gateway_that_never_gets_ready_fails_typed() -> None:
    executor = ScriptedSessionExecutor(lambda _: ScriptedSession(['{"jsonrpc":"2.0"}']))
    with pytest.raises(HarnessCapabilityError) as caught:
        discover(executor)
    assert caught.value.kind is ErrorKind.COMMAND_FAILED


# -- finding Hermes's Python ---------------------------------------------------------------


def test_interpreter_from_hermes_python() -> None:
    assert (gateway_interpreter({"HERMES_PYTHON": "/opt/h/bin/python3"}, LocalFiles())
            == ("python3", "/opt/h/bin"))


def test_interpreter_from_the_installer_venv(tmp_path: Path) -> None:
    python = tmp_path / "hermes-agent" / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert gateway_interpreter({"HERMES_HOME": str(tmp_path), "PATH": ""}, LocalFiles()) == (
        "python", str(python.parent)
    )


@pytest.mark.parametrize(
    ("shebang", "expected"),
    [
        ("#!/opt/example/hermes-venv/bin/python3\n", ("python3", "/opt/example/hermes-venv/bin")),
        ("#!/usr/bin/env python3\n", ("python3", None)),
    ],
)
def test_interpreter_from_the_launcher_shebang(
    tmp_path: Path, shebang: str, expected: tuple[str, str | None]
) -> None:
    launcher = tmp_path / "hermes"
    launcher.write_text(shebang + "from hermes_cli.main import main\n")
    launcher.chmod(0o755)
    assert (gateway_interpreter({"PATH": str(tmp_path), "HOME": str(tmp_path)}, LocalFiles())
            == expected)


@pytest.mark.parametrize("content", ["no shebang\n", "#!\n", "#!relative/python extra args\n"])
def test_unusable_launcher_is_not_configured(tmp_path: Path, content: str) -> None:
    launcher = tmp_path / "hermes"
    launcher.write_text(content)
    launcher.chmod(0o755)
    with pytest.raises(HarnessCapabilityError) as caught:
        gateway_interpreter({"PATH": str(tmp_path), "HOME": str(tmp_path)}, LocalFiles())
    assert caught.value.kind is ErrorKind.NOT_CONFIGURED


def test_missing_hermes_is_binary_unavailable(tmp_path: Path) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        gateway_interpreter({"PATH": str(tmp_path), "HOME": str(tmp_path)}, LocalFiles())
    assert caught.value.kind is ErrorKind.BINARY_UNAVAILABLE


# -- the real CLI, when it is installed ---------------------------------------------------


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("hermes") is None, reason="hermes is not installed")
def test_real_gateway_lists_nothing_for_an_unconfigured_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HERMES_PYTHON")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / ".hermes"))
    transport = LocalTransport()
    context = ModelsContext(files=LocalFiles(), environ=dict(os.environ),
                            executor=transport, session_executor=transport)
    assert asyncio.run(HermesModels().discover(context)) == ()
