"""The Codex plugin, against output captured from Codex CLI 0.171.0 (tests/fixtures/codex)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import clanker
import clanker_codex
from clanker.environment.local import LocalFiles
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandResult, LocalTransport
from clanker.launch.planning import plan_launch
from clanker.launch.request import LaunchRequest, SessionTarget
from clanker.models.capability import ModelsContext
from clanker.models.types import Model
from clanker.testing import ScriptedSession, ScriptedSessionExecutor, launch_argv, registered
from clanker_codex.launch import CodexLaunch
from clanker_codex.models import (
    MAX_PAGES,
    CodexModels,
    parse_initialize_response,
    parse_model_list_page,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "codex"
SESSION = "01a22b86-c7d0-79e0-b3c0-03c56f3ce14a"
VISIBLE = [
    "gpt-6.2-sol", "gpt-6.2-astra", "gpt-6.1-terra", "gpt-6.1-sol", "gpt-6-astra", "gpt-6-sol",
    "gpt-6-luna", "gpt-5.6-sol", "gpt-5.6-terra", "gpt-5.6-luna", "gpt-5.5",
]


PROVIDER = registered(clanker_codex.plugin, "codex")


def captured(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]


def response(request_id: int) -> dict[str, Any]:
    [found] = [m for m in captured("app-server-model-list-out.jsonl") if m.get("id") == request_id]
    return found


# -- launch ----------------------------------------------------------------------------


def plan(**fields: object) -> tuple[str, ...]:
    return launch_argv(PROVIDER, **fields)


def test_fresh_launch_is_the_bare_tui() -> None:
    assert plan() == ("codex",)
    assert plan(user_flags=("--search", "-c", "x=1")) == ("codex", "--search", "-c", "x=1")


def test_the_model_goes_before_the_subcommand() -> None:
    assert plan(model="gpt-6.2-astra") == ("codex", "-m", "gpt-6.2-astra")
    session = SessionTarget(native_id=SESSION)
    assert plan(operation="resume", session=session, model="gpt-6.2-astra") == (
        "codex", "-m", "gpt-6.2-astra", "-C", "/w", "resume", SESSION
    )


def test_resume_and_fork_are_subcommands_followed_by_the_user_flags() -> None:
    session = SessionTarget(native_id=SESSION)
    # A user's own -C after the id is a subcommand-level option: it wins over ours.
    assert plan(operation="resume", session=session, user_flags=("-C", "/x")) == (
        "codex", "-C", "/w", "resume", SESSION, "-C", "/x"
    )
    assert plan(operation="fork", session=session, user_flags=("--no-daemon",)) == (
        "codex", "-C", "/w", "fork", SESSION, "--no-daemon"
    )


def test_resume_and_fork_name_the_launch_directory_but_a_fresh_launch_does_not() -> None:
    # Verified 2026-11-30 with 0.171.0 (docs/harnesses/codex.md, "Sessions"): a
    # TUI resumed outside the session's recorded cwd asks "Working directory ·
    # resume" and defaults to that directory even when it is gone; with -C
    # before the subcommand it continues in the given directory, no question.
    session = SessionTarget(native_id=SESSION)
    provider = PROVIDER
    for operation in ("resume", "fork"):
        argv = plan_launch(provider, LaunchRequest(
            operation=operation, session=session, cwd="/elsewhere/work",  # type: ignore[arg-type]
        )).argv
        assert argv == ("codex", "-C", "/elsewhere/work", operation, SESSION)
    assert plan_launch(provider, LaunchRequest(cwd="/elsewhere/work")).argv == ("codex",)
    # Without a launch directory there is nothing to pass.
    assert plan_launch(provider, LaunchRequest(operation="resume", session=session)  # type: ignore[arg-type]
                       ).argv == ("codex", "resume", SESSION)


def test_uppercase_ids_pass_unchanged() -> None:
    session = SessionTarget(native_id=SESSION.upper())
    assert plan(operation="resume", session=session) == (
        "codex", "-C", "/w", "resume", SESSION.upper()
    )


def test_a_store_path_is_not_used_because_codex_refuses_paths() -> None:
    rollout = f"/h/.codex/sessions/2026/11/30/rollout-{SESSION}.jsonl"
    session = SessionTarget(native_id=SESSION, store_path=rollout)
    assert plan(operation="fork", session=session) == ("codex", "-C", "/w", "fork", SESSION)


def test_version_ignores_the_stderr_warning() -> None:
    warning = (FIXTURES / "app-server-model-list-stderr.txt").read_text()
    with pytest.raises(HarnessCapabilityError) as caught:
        CodexLaunch().parse_version(CommandResult("", warning, 0))
    assert caught.value.kind is ErrorKind.PARSE_FAILURE


# -- models: the parser ------------------------------------------------------------------


def test_the_default_page_lists_the_eleven_visible_models() -> None:
    models, cursor = parse_model_list_page(response(2))
    assert cursor is None
    assert [m.id for m in models] == VISIBLE
    assert [m.id for m in models if m.is_default] == ["gpt-6.2-sol"]
    assert models[2] == Model(id="gpt-6.1-terra", label="GPT-6.1 Terra")
    assert all(m.provider is None for m in models)


def test_pages_carry_the_cursor() -> None:
    pages = [parse_model_list_page(response(i)) for i in (3, 4, 5)]
    assert [len(models) for models, _ in pages] == [4, 4, 3]
    assert [cursor for _, cursor in pages] == ["4", "8", None]
    assert [m.id for models, _ in pages for m in models] == VISIBLE


def test_hidden_models_are_listed_when_the_server_sends_them() -> None:
    models, _ = parse_model_list_page(response(6))  # {"includeHidden": true}
    assert len(models) == 14
    assert {"gpt-daybreak-blue-latest", "codex-auto-review"} <= {m.id for m in models}


def test_the_initialize_response_is_accepted() -> None:
    parse_initialize_response(response(1))


@pytest.mark.parametrize("request_id", [8, 9, 10])
def test_error_responses_are_command_failures_without_the_server_text(request_id: int) -> None:
    captured_error = response(request_id)
    with pytest.raises(HarnessCapabilityError) as caught:
        parse_model_list_page(captured_error)
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    assert captured_error["error"]["message"] not in str(caught.value)
    assert "-32600" in str(caught.value)


@pytest.mark.parametrize(
    "answer",
    [
        {"id": 2},
        {"id": 2, "result": []},
        {"id": 2, "result": {"nextCursor": None}},
        {"id": 2, "result": {"data": {}, "nextCursor": None}},
        {"id": 2, "result": {"data": ["gpt-x"], "nextCursor": None}},
        {"id": 2, "result": {"data": [{"id": "gpt-x"}], "nextCursor": None}},
        {"id": 2, "result": {"data": [{"model": " gpt-x"}], "nextCursor": None}},
        {"id": 2, "result": {"data": [{"model": "a\0b"}], "nextCursor": None}},
        {"id": 2, "result": {"data": [{"model": "x", "displayName": 3}], "nextCursor": None}},
        {"id": 2, "result": {"data": [{"model": "x", "isDefault": "yes"}], "nextCursor": None}},
        {"id": 2, "result": {"data": [], "nextCursor": 4}},
        {"id": 2, "result": {"data": [], "nextCursor": ""}},
    ],
)
def test_malformed_pages_are_parse_failures(answer: dict[str, Any]) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        parse_model_list_page(answer)
    assert caught.value.kind is ErrorKind.PARSE_FAILURE


def test_an_empty_listing_is_a_valid_empty_page() -> None:
    empty = {"id": 2, "result": {"data": [], "nextCursor": None}}
    assert parse_model_list_page(empty) == ((), None)


# -- models: the protocol, replayed from the capture -----------------------------------------


class ReplayedAppServer:
    """Speaks the app-server exchange captured from codex 0.171.0: the initialize
    result, then the captured notifications once the client sends ``initialized``,
    then each ``model/list`` answered with the captured response to the same params
    (under the client's id). ``page_size`` 4 answers as the capture's
    ``{"limit": 4}`` requests did, to exercise pagination."""

    def __init__(self, page_size: int | None = None) -> None:
        requests = captured("app-server-model-list-in.jsonl")
        answers = {m["id"]: m for m in captured("app-server-model-list-out.jsonl") if "id" in m}
        self.notifications = [
            json.dumps(m) for m in captured("app-server-model-list-out.jsonl") if "method" in m
        ]
        self.initialize = answers[1]
        self.by_params = {
            self.key(r["params"]): answers[r["id"]]
            for r in requests if r.get("method") == "model/list" and "params" in r
        }
        self.page_size = page_size
        self.sessions: list[ScriptedSession] = []

    @staticmethod
    def key(params: dict[str, Any]) -> str:
        return json.dumps(params, sort_keys=True)

    def reply(self, line: str) -> list[str]:
        message = json.loads(line)
        if message["method"] == "initialize":
            return [json.dumps({**self.initialize, "id": message["id"]})]
        if message["method"] == "initialized":
            return self.notifications
        params = dict(message["params"])
        if self.page_size is not None:
            params["limit"] = self.page_size
        return [json.dumps({**self.by_params[self.key(params)], "id": message["id"]})]

    def session(self, _request: object) -> ScriptedSession:
        return ScriptedSession(reply=self.reply)


def replayed_app_server(exit_code: int = 0) -> ScriptedSessionExecutor:
    """The captured exchange, ending with ``exit_code`` (the contract's listing double)."""
    server = ReplayedAppServer()
    return ScriptedSessionExecutor(
        lambda _: ScriptedSession(reply=server.reply, exit_code=exit_code)
    )


def discover(executor: object, refresh: bool = False) -> tuple[Model, ...]:
    context = ModelsContext(files=LocalFiles(), environ={}, executor=executor,  # type: ignore[arg-type]
                            session_executor=executor, refresh=refresh)
    return asyncio.run(CodexModels().discover(context))


def test_discovery_speaks_the_app_server_protocol() -> None:
    executor = ScriptedSessionExecutor(ReplayedAppServer().session)
    models = discover(executor)
    assert [m.id for m in models] == VISIBLE
    assert [m.id for m in models if m.is_default] == ["gpt-6.2-sol"]
    [request] = executor.requests
    assert request.argv == ("codex", "app-server")
    assert request.timeout == 30.0
    assert dict(request.env) == {}
    [session] = executor.sessions
    assert [json.loads(line) for line in session.written] == [
        {
            "id": 1,
            "method": "initialize",
            "params": {
                "clientInfo": {
                    "name": "clanker", "title": "clanker", "version": clanker.__version__
                },
                "capabilities": None,
            },
        },
        {"method": "initialized"},
        {"id": 2, "method": "model/list", "params": {}},
    ]
    assert session.input_closed and session.disposed


def test_discovery_follows_the_cursor() -> None:
    executor = ScriptedSessionExecutor(ReplayedAppServer(page_size=4).session)
    assert [m.id for m in discover(executor)] == VISIBLE
    lists = [json.loads(line) for line in executor.sessions[0].written][2:]
    assert lists == [
        {"id": 2, "method": "model/list", "params": {}},
        {"id": 3, "method": "model/list", "params": {"cursor": "4"}},
        {"id": 4, "method": "model/list", "params": {"cursor": "8"}},
    ]


def test_refresh_sends_the_same_requests() -> None:
    """model/list has no refresh parameter; refresh only bypasses clanker's cache."""
    executor = ScriptedSessionExecutor(ReplayedAppServer().session)
    assert [m.id for m in discover(executor, refresh=True)] == VISIBLE
    assert json.loads(executor.sessions[0].written[-1])["params"] == {}


def scripted(reply: Callable[[dict[str, Any]], list[dict[str, Any]]], exit_code: int = 0) -> Any:
    def session(_request: object) -> ScriptedSession:
        return ScriptedSession(
            reply=lambda line: [json.dumps(m) for m in reply(json.loads(line))],
            exit_code=exit_code,
        )

    return ScriptedSessionExecutor(session)


def test_a_server_request_with_our_id_is_not_taken_for_the_answer() -> None:
    server = ReplayedAppServer()

    def reply(message: dict[str, Any]) -> list[dict[str, Any]]:
        if message.get("method") == "model/list":
            ask = {"id": message["id"], "method": "item/tool/requestUserInput", "params": {}}
            return [ask, *map(json.loads, server.reply(json.dumps(message)))]
        return [json.loads(line) for line in server.reply(json.dumps(message))]

    assert [m.id for m in discover(scripted(reply))] == VISIBLE


def test_an_initialize_error_is_a_command_failure() -> None:
    def reply(message: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"id": message.get("id"), "error": {"code": -32600, "message": "secret path"}}]

    with pytest.raises(HarnessCapabilityError) as caught:
        discover(scripted(reply))
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    assert "secret path" not in str(caught.value)


def test_a_model_list_error_is_a_command_failure() -> None:
    server = ReplayedAppServer()

    def reply(message: dict[str, Any]) -> list[dict[str, Any]]:
        if message.get("method") == "model/list":
            return [{**response(8), "id": message["id"]}]
        return [json.loads(line) for line in server.reply(json.dumps(message))]

    with pytest.raises(HarnessCapabilityError) as caught:
        discover(scripted(reply))
    assert caught.value.kind is ErrorKind.COMMAND_FAILED


def test_a_server_that_never_stops_paginating_fails_typed() -> None:
    def reply(message: dict[str, Any]) -> list[dict[str, Any]]:
        if message.get("method") == "model/list":
            page = {"data": [{"model": f"m{message['id']}"}], "nextCursor": "1"}
            return [{"id": message["id"], "result": page}]
        if message.get("method") == "initialize":
            return [response(1)]
        return []

    executor = scripted(reply)
    with pytest.raises(HarnessCapabilityError) as caught:
        discover(executor)
    assert caught.value.kind is ErrorKind.PARSE_FAILURE
    assert len(executor.sessions[0].written) == 2 + MAX_PAGES


def test_a_server_that_exits_before_answering_fails_typed() -> None:
    """What a missing CODEX_HOME does: app-server prints an error on stderr and exits 1."""
    executor = ScriptedSessionExecutor(
        lambda _: ScriptedSession([], exit_code=1, stderr="Error finding codex home: /x")
    )
    with pytest.raises(HarnessCapabilityError) as caught:
        discover(executor)
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    assert "/x" not in str(caught.value)


def test_duplicate_slugs_across_pages_are_listed_once() -> None:
    pages = {
        2: {"data": [{"model": "a", "isDefault": True}], "nextCursor": "1"},
        3: {"data": [{"model": "a"}, {"model": "b"}], "nextCursor": None},
    }

    def reply(message: dict[str, Any]) -> list[dict[str, Any]]:
        if message.get("method") == "initialize":
            return [response(1)]
        if message.get("method") == "model/list":
            return [{"id": message["id"], "result": pages[message["id"]]}]
        return []

    assert discover(scripted(reply)) == (Model(id="a", is_default=True), Model(id="b"))


# -- the real CLI, when it is installed ---------------------------------------------------


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("codex") is None, reason="codex is not installed")
def test_real_app_server_lists_the_bundled_catalog(tmp_path: Path) -> None:
    # A fresh CODEX_HOME: app-server writes its state databases there.
    transport = LocalTransport({**os.environ, "CODEX_HOME": str(tmp_path)})
    context = ModelsContext(files=LocalFiles(), environ={},
                            executor=transport, session_executor=transport)
    models = asyncio.run(CodexModels().discover(context))
    assert models
    assert len([m for m in models if m.is_default]) == 1
    launch = CodexLaunch()
    version = launch.parse_version(asyncio.run(transport.run(launch.version_request())))
    if version == "0.171.0":
        assert [m.id for m in models] == VISIBLE
