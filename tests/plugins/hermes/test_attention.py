"""Hermes attention: the real observer plugin file, driven with Hermes's hook calls.

The plugin is loaded by path, as Hermes loads a plugin directory's
``__init__.py``, and its ``register(ctx)`` is given a context that records the
callbacks, as Hermes's ``PluginContext.register_hook`` does. Hook calls use the
keyword arguments of hermes-agent 0.19.0 (``tests/fixtures/hermes/attention``).
Deliveries go to a section-3 socket double (exact envelopes) or to a real
in-process grid (resulting states).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clanker.attention.capability import (
    AttachmentContext,
    AttachmentPlan,
    Declined,
)
from clanker.attention.envelope import parse_envelope
from clanker.grid.client import Registration
from clanker.grid.server import Grid
from clanker.testing.attention import GridDouble
from clanker.testing.doubles import attachment_context
from clanker_hermes.attention import BUNDLED_ENV, OBSERVER_SOURCE, PLUGIN_NAME, HermesAttention

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hermes" / "attention"
ROOT = "20261130_120000_aaaaaa"
CHILD = "20261130_120100_cccccc"
ROTATED = "20261130_120200_bbbbbb"
TASK = "00000000-0000-4000-8000-000000000001"
TURN_1 = f"{ROOT}:{TASK}:0000aaa1"
TURN_2 = f"{ROOT}:{TASK}:0000aaa2"
CHILD_TURN = f"{CHILD}:{TASK}:0000ccc1"
TOKEN = "ab" * 32
SECRET = "do-not-forward-this-text"
DRAIN_SECONDS = 20.0


def load_plugin() -> ModuleType:
    """A fresh copy of the plugin module, loaded by path as Hermes loads it."""
    name = f"hermes_plugins.clanker_attention_{os.urandom(4).hex()}"
    spec = importlib.util.spec_from_file_location(name, OBSERVER_SOURCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class HookContext:
    """What the plugin sees of Hermes's ``PluginContext``: ``register_hook``."""

    def __init__(self) -> None:
        self.hooks: dict[str, list[Callable[..., Any]]] = {}

    def register_hook(self, name: str, callback: Callable[..., Any]) -> None:
        self.hooks.setdefault(name, []).append(callback)


@pytest.fixture
def double(short_dir: Path) -> Iterator[GridDouble]:
    server = GridDouble(short_dir / "g.sock")
    try:
        yield server
    finally:
        server.close()


class Hermes:
    """One Hermes process as the plugin sees it: the environment, then hook calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, socket_path: Path, terminal: str,
                 token: str, *, state_db: Path | None = None) -> None:
        monkeypatch.setenv("CLANKER_ATTENTION_SOCKET", str(socket_path))
        monkeypatch.setenv("CLANKER_ATTENTION_TERMINAL", terminal)
        monkeypatch.setenv("CLANKER_ATTENTION_TOKEN", token)
        if state_db is not None:
            monkeypatch.setenv("HERMES_HOME", str(state_db.parent))
        else:
            monkeypatch.setenv("HERMES_HOME", str(socket_path.parent / "no-hermes-home"))
        self.module = load_plugin()
        self.context = HookContext()
        self.module.register(self.context)

    def fire(self, hook: str, **kwargs: Any) -> None:
        for callback in self.context.hooks.get(hook, []):
            assert callback(**kwargs) is None  # an observer: never a context, never a veto

    def drain(self) -> None:
        observer = self.module.loaded_observer()
        assert observer is not None
        assert observer.drain(DRAIN_SECONDS)


# -- the kwargs Hermes 0.19.0 passes (agent/turn_context.py, agent/turn_finalizer.py, ...) --


def pre_llm_call(session: str, turn: str, **extra: Any) -> dict[str, Any]:
    return {
        "session_id": session, "task_id": turn.split(":")[1] if ":" in turn else TASK,
        "turn_id": turn, "user_message": SECRET, "conversation_history": [{"content": SECRET}],
        "is_first_turn": True, "model": "probe-model", "platform": "tui", "sender_id": "",
        "telemetry_schema_version": "hermes.observer.v1", **extra,
    }


def post_llm_call(session: str, turn: str) -> dict[str, Any]:
    return {
        "session_id": session, "task_id": TASK, "turn_id": turn, "user_message": SECRET,
        "assistant_response": SECRET, "conversation_history": [], "model": "probe-model",
        "platform": "tui", "telemetry_schema_version": "hermes.observer.v1",
    }


def session_end(session: str, turn: str, *, completed: bool, interrupted: bool) -> dict[str, Any]:
    return {
        "session_id": session, "task_id": TASK, "turn_id": turn, "completed": completed,
        "interrupted": interrupted, "model": "probe-model", "platform": "tui",
        "telemetry_schema_version": "hermes.observer.v1",
    }


def approval(turn: str, *, tool_call_id: str = "call_1", surface: str = "cli",
             choice: str | None = None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "command": SECRET, "description": SECRET, "pattern_key": "recursive delete",
        "pattern_keys": ["recursive delete"], "session_key": "stale-key", "surface": surface,
        "turn_id": turn, "tool_call_id": tool_call_id,
        "telemetry_schema_version": "hermes.observer.v1",
    }
    if choice is not None:
        kwargs["choice"] = choice
    return kwargs


def summary(envelopes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["event"], e["sessionId"], e["turnId"]) for e in envelopes]


def assert_wire_valid(double: GridDouble) -> None:
    for request in double.requests:
        assert request["v"] == 1 and request["op"] == "deliver"
        assert request["token"] == TOKEN
        assert 1 <= len(request["envelopes"]) <= 16
        for envelope in request["envelopes"]:
            parse_envelope(envelope)
            assert envelope["scope"] == "root"
    assert double.problems == []
    assert SECRET not in json.dumps(double.requests)


# -- the plugin entry point -----------------------------------------------------------------


def test_inert_without_the_launch_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CLANKER_ATTENTION_SOCKET", "CLANKER_ATTENTION_TERMINAL",
                 "CLANKER_ATTENTION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLANKER_ATTENTION_SOCKET", "/tmp/x.sock")
    module = load_plugin()
    context = HookContext()
    module.register(context)
    assert context.hooks == {}
    assert module.loaded_observer() is None


def test_registers_only_known_hermes_hooks(monkeypatch: pytest.MonkeyPatch,
                                           double: GridDouble) -> None:
    hermes = Hermes(monkeypatch, double.path, "t-1", TOKEN)
    valid = json.loads((FIXTURES / "valid-hooks-0.19.0.json").read_text())
    assert set(hermes.context.hooks) <= set(valid)
    assert all(len(callbacks) == 1 for callbacks in hermes.context.hooks.values())


def test_the_plugin_reads_only_keywords_hermes_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load_plugin()
    built = json.loads((FIXTURES / "source-built.json").read_text())
    for hook, keys in module._HOOKS.items():
        assert set(keys) <= set(built[hook]["kwargs"]), hook
    live = json.loads((FIXTURES / "live-tui-interrupt.json").read_text())
    for call in live:
        if call["hook"] in module._HOOKS:
            assert set(call["kwargs"]) <= set(built[call["hook"]]["kwargs"])


def test_the_plugin_imports_only_the_standard_library() -> None:
    script = (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('p', sys.argv[1])\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('clanker', 'clanker_hermes',"
        " 'attrs', 'cattrs')]\n"
        "print(bad)\n"
    )
    done = subprocess.run([sys.executable, "-I", "-S", "-c", script, str(OBSERVER_SOURCE)],
                          capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"


# -- the mapping, against the socket double ---------------------------------------------------


def test_live_tui_sequence_start_interrupt_finalize(monkeypatch: pytest.MonkeyPatch,
                                                    double: GridDouble) -> None:
    """The hook calls captured from `hermes --tui` (submit, Ctrl+C, quit), in order."""
    hermes = Hermes(monkeypatch, double.path, "t-1", TOKEN)
    for call in json.loads((FIXTURES / "live-tui-interrupt.json").read_text()):
        hermes.fire(call["hook"], **call["kwargs"])
    hermes.drain()
    assert summary(double.envelopes()) == [
        ("turn_started", ROOT, f"{ROOT}:{ROOT}:0000aaa1"),
        ("turn_interrupted", ROOT, f"{ROOT}:{ROOT}:0000aaa1"),
        ("session_ended", ROOT, None),
    ]
    assert [e["nativeEvent"] for e in double.envelopes()] == [
        "pre_llm_call", "on_session_end", "on_session_finalize"]
    assert_wire_valid(double)


def test_completion_from_post_llm_call(monkeypatch: pytest.MonkeyPatch,
                                       double: GridDouble) -> None:
    hermes = Hermes(monkeypatch, double.path, "t-1", TOKEN)
    hermes.fire("pre_llm_call", **pre_llm_call(ROOT, TURN_1))
    hermes.fire("post_llm_call", **post_llm_call(ROOT, TURN_1))
    hermes.fire("on_session_end", **session_end(ROOT, TURN_1, completed=True, interrupted=False))
    hermes.fire("pre_llm_call", **pre_llm_call(ROOT, TURN_2))
    hermes.fire("on_session_end", **session_end(ROOT, TURN_2, completed=False, interrupted=False))
    hermes.drain()
    assert summary(double.envelopes()) == [
        ("turn_started", ROOT, TURN_1),
        ("turn_completed", ROOT, TURN_1),  # the turn's own on_session_end adds nothing
        ("turn_started", ROOT, TURN_2),
        ("turn_failed", ROOT, TURN_2),  # ended without completing, not interrupted
    ]
    assert_wire_valid(double)


def test_a_completed_turn_without_a_response_still_completes(
        monkeypatch: pytest.MonkeyPatch, double: GridDouble) -> None:
    hermes = Hermes(monkeypatch, double.path, "t-1", TOKEN)
    hermes.fire("pre_llm_call", **pre_llm_call(ROOT, TURN_1))
    hermes.fire("on_session_end", **session_end(ROOT, TURN_1, completed=True, interrupted=False))
    hermes.drain()
    assert summary(double.envelopes()) == [
        ("turn_started", ROOT, TURN_1), ("turn_completed", ROOT, TURN_1)]


def test_child_turns_never_report(monkeypatch: pytest.MonkeyPatch, double: GridDouble) -> None:
    hermes = Hermes(monkeypatch, double.path, "t-1", TOKEN)
    hermes.fire("pre_llm_call", **pre_llm_call(ROOT, TURN_1))
    hermes.fire("subagent_start", parent_session_id=ROOT, parent_turn_id=TURN_1,
                parent_subagent_id=None, child_session_id=CHILD, child_subagent_id="sa-1",
                child_role="leaf", child_goal=SECRET, telemetry_schema_version="hermes.observer.v1")
    hermes.fire("pre_llm_call", **pre_llm_call(CHILD, CHILD_TURN))
    hermes.fire("pre_approval_request", **approval(CHILD_TURN))
    hermes.fire("post_llm_call", **post_llm_call(CHILD, CHILD_TURN))
    hermes.fire("on_session_end", **session_end(CHILD, CHILD_TURN, completed=True,
                                                 interrupted=False))
    hermes.fire("on_session_finalize", session_id=CHILD, platform="tui")
    hermes.fire("post_llm_call", **post_llm_call(ROOT, TURN_1))
    hermes.drain()
    assert summary(double.envelopes()) == [
        ("turn_started", ROOT, TURN_1), ("turn_completed", ROOT, TURN_1)]


@pytest.mark.parametrize(("parent", "reported"), [("", True), (ROOT, False)])
def test_a_newer_hermes_names_the_parent_on_pre_llm_call(
        monkeypatch: pytest.MonkeyPatch, double: GridDouble, parent: str,
        reported: bool) -> None:
    hermes = Hermes(monkeypatch, double.path, "t-1", TOKEN)
    hermes.fire("pre_llm_call", **pre_llm_call(CHILD, CHILD_TURN, parent_session_id=parent))
    hermes.fire("post_llm_call", **post_llm_call(CHILD, CHILD_TURN))
    hermes.drain()
    expected = [("turn_started", CHILD, CHILD_TURN), ("turn_completed", CHILD, CHILD_TURN)]
    assert summary(double.envelopes()) == (expected if reported else [])


def test_unseen_turns_and_other_sessions_are_dropped(monkeypatch: pytest.MonkeyPatch,
                                                     double: GridDouble) -> None:
    hermes = Hermes(monkeypatch, double.path, "t-1", TOKEN)
    hermes.fire("post_llm_call", **post_llm_call(ROOT, TURN_1))  # never seen start
    hermes.fire("pre_approval_request", **approval(TURN_1))
    hermes.fire("pre_llm_call", **pre_llm_call(ROOT, TURN_2))
    # Another session (a background review, say) with no proof of lineage.
    other = f"{ROTATED}:{TASK}:0000bbb1"
    hermes.fire("pre_llm_call", **pre_llm_call(ROTATED, other))
    hermes.fire("post_llm_call", **post_llm_call(ROTATED, other))
    hermes.fire("on_session_finalize", session_id=ROTATED, platform="tui")
    hermes.drain()
    assert summary(double.envelopes()) == [("turn_started", ROOT, TURN_2)]


def test_human_approvals_are_waits_tied_to_the_turn(monkeypatch: pytest.MonkeyPatch,
                                                    double: GridDouble) -> None:
    hermes = Hermes(monkeypatch, double.path, "t-1", TOKEN)
    hermes.fire("pre_llm_call", **pre_llm_call(ROOT, TURN_1))
    hermes.fire("pre_approval_request", **approval(TURN_1, surface="smart"))  # no human
    hermes.fire("post_approval_response", **approval(TURN_1, surface="smart",
                                                     choice="smart_approve"))
    hermes.fire("pre_approval_request", **approval(TURN_1))
    hermes.fire("post_approval_response", **approval(TURN_1, tool_call_id="call_9",
                                                     choice="once"))  # not this wait
    hermes.fire("post_approval_response", **approval(TURN_1, choice="once"))
    hermes.fire("pre_approval_request", **approval(TURN_1, tool_call_id=""))
    hermes.fire("post_approval_response", **approval(TURN_1, tool_call_id="", choice="deny"))
    hermes.fire("post_llm_call", **post_llm_call(ROOT, TURN_1))
    hermes.drain()
    envelopes = double.envelopes()
    assert [(e["event"], e.get("inputId")) for e in envelopes] == [
        ("turn_started", None),
        ("input_requested", "call_1"),
        ("input_resolved", "call_1"),
        ("input_requested", envelopes[3]["inputId"]),
        ("input_resolved", envelopes[3]["inputId"]),
        ("turn_completed", None),
    ]
    # Without a tool call id: a fingerprint of the pattern key, never the key itself.
    assert envelopes[3]["inputId"].startswith("pattern-")
    assert "recursive" not in json.dumps(envelopes)
    assert_wire_valid(double)


def test_rotation_inside_a_root_turn_is_a_continuation(monkeypatch: pytest.MonkeyPatch,
                                                       double: GridDouble) -> None:
    hermes = Hermes(monkeypatch, double.path, "t-1", TOKEN)
    hermes.fire("pre_llm_call", **pre_llm_call(ROOT, TURN_1))
    hermes.fire("post_llm_call", **post_llm_call(ROTATED, TURN_1))  # compressed mid-turn
    next_turn = f"{ROTATED}:{TASK}:0000bbb2"
    hermes.fire("pre_llm_call", **pre_llm_call(ROTATED, next_turn))
    hermes.drain()
    assert [(e["event"], e["sessionId"], e.get("continuesSessionId"))
            for e in double.envelopes()] == [
        ("turn_started", ROOT, None),
        ("session_continued", ROTATED, ROOT),
        ("turn_completed", ROTATED, None),
        ("turn_started", ROTATED, None),
    ]
    assert_wire_valid(double)


def write_state_db(path: Path, rows: list[tuple[str, str | None, str | None]]) -> Path:
    """A Hermes ``state.db`` with the ``sessions`` columns the lineage check reads."""
    path.mkdir(parents=True, exist_ok=True)
    database = path / "state.db"
    with contextlib.closing(sqlite3.connect(database)) as connection:
        connection.execute(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, parent_session_id TEXT,"
            " end_reason TEXT, started_at REAL)")
        connection.executemany(
            "INSERT INTO sessions (id, source, parent_session_id, end_reason, started_at)"
            " VALUES (?, 'tui', ?, ?, 0)", rows)
        connection.commit()
    return database


@pytest.mark.parametrize(("end_reason", "continued"), [
    ("compression", True), ("user_exit", False), (None, False)])
def test_rotation_between_turns_needs_hermes_lineage(
        monkeypatch: pytest.MonkeyPatch, double: GridDouble, short_dir: Path,
        end_reason: str | None, continued: bool) -> None:
    database = write_state_db(short_dir / "hermes-home", [
        (ROOT, None, end_reason), (ROTATED, ROOT, None)])
    hermes = Hermes(monkeypatch, double.path, "t-1", TOKEN, state_db=database)
    hermes.fire("pre_llm_call", **pre_llm_call(ROOT, TURN_1))
    hermes.fire("post_llm_call", **post_llm_call(ROOT, TURN_1))
    next_turn = f"{ROTATED}:{TASK}:0000bbb2"
    hermes.fire("pre_llm_call", **pre_llm_call(ROTATED, next_turn))  # after a manual /compress
    hermes.drain()
    events = [(e["event"], e["sessionId"]) for e in double.envelopes()]
    assert events[:2] == [("turn_started", ROOT), ("turn_completed", ROOT)]
    assert events[2:] == ([("session_continued", ROTATED), ("turn_started", ROTATED)]
                          if continued else [])


def test_session_boundaries(monkeypatch: pytest.MonkeyPatch, double: GridDouble) -> None:
    hermes = Hermes(monkeypatch, double.path, "t-1", TOKEN)
    hermes.fire("on_session_reset", session_id=ROOT, platform="tui")  # startup: nothing bound
    hermes.fire("pre_llm_call", **pre_llm_call(ROOT, TURN_1))
    hermes.fire("on_session_finalize", session_id=CHILD, platform="tui")  # not the root
    hermes.fire("on_session_reset", session_id=ROTATED, platform="tui")  # /new in the TUI
    new_turn = f"{ROTATED}:{TASK}:0000bbb1"
    hermes.fire("pre_llm_call", **pre_llm_call(ROTATED, new_turn))  # the new session binds
    hermes.fire("post_llm_call", **post_llm_call(ROOT, TURN_1))  # the old turn is forgotten
    hermes.fire("on_session_finalize", session_id=ROTATED, platform="tui")  # quit
    hermes.drain()
    assert summary(double.envelopes()) == [
        ("turn_started", ROOT, TURN_1),
        ("session_ended", ROOT, None),
        ("turn_started", ROTATED, new_turn),
        ("session_ended", ROTATED, None),
    ]
    assert [e["nativeEvent"] for e in double.envelopes()] == [
        "pre_llm_call", "on_session_reset", "pre_llm_call", "on_session_finalize"]


def test_root_events_carry_the_local_terminal_directory(monkeypatch: pytest.MonkeyPatch,
                                                        double: GridDouble) -> None:
    class LocalEnvironment:
        cwd = "/work/project/sub"

    class DockerEnvironment:
        cwd = "/workspace"

    terminal_tool = ModuleType("tools.terminal_tool")
    terminal_tool._active_environments = {  # type: ignore[attr-defined]
        TASK: LocalEnvironment(), "container": DockerEnvironment()}
    monkeypatch.setitem(sys.modules, "tools.terminal_tool", terminal_tool)
    hermes = Hermes(monkeypatch, double.path, "t-1", TOKEN)
    hermes.fire("pre_llm_call", **pre_llm_call(ROOT, TURN_1))
    hermes.fire("post_llm_call", **post_llm_call(ROOT, TURN_1))
    container_turn = f"{ROOT}:container:0000aaa3"
    hermes.fire("pre_llm_call", **pre_llm_call(ROOT, container_turn))
    hermes.drain()
    assert [e.get("cwd") for e in double.envelopes()] == [
        "/work/project/sub", "/work/project/sub", None]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(
    st.sampled_from(["pre_llm_call", "post_llm_call", "on_session_end", "pre_approval_request",
                     "post_approval_response", "on_session_finalize", "on_session_reset",
                     "subagent_start", "unknown_hook"]),
    st.dictionaries(
        st.sampled_from(["session_id", "turn_id", "task_id", "tool_call_id", "pattern_key",
                         "surface", "completed", "interrupted", "child_session_id",
                         "parent_session_id"]),
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=300),
                  st.sampled_from([ROOT, CHILD, TURN_1, TURN_2, "", "cli", "smart"])),
    )), max_size=25))
def test_any_hook_input_maps_to_valid_envelopes_or_nothing(
        calls: list[tuple[str, dict[str, Any]]]) -> None:
    """The mapping itself (the worker's ``handle``), on arbitrary keyword values."""
    module = load_plugin()
    observer = module.Observer("/nonexistent.sock", "t-1", TOKEN)
    for event, facts in calls:
        for envelope in observer.handle(event, dict(facts, has_parent_field="parent_session_id"
                                                    in facts)):
            parse_envelope(envelope)
            assert envelope["scope"] == "root"


# -- delivery: never blocking, never raising ---------------------------------------------------


def test_a_grid_that_is_down_costs_hermes_nothing(monkeypatch: pytest.MonkeyPatch,
                                                  short_dir: Path) -> None:
    hermes = Hermes(monkeypatch, short_dir / "absent.sock", "t-1", TOKEN)
    hermes.fire("pre_llm_call", **pre_llm_call(ROOT, TURN_1))
    hermes.fire("post_llm_call", **post_llm_call(ROOT, TURN_1))
    hermes.drain()


def test_a_full_queue_stops_delivery_for_good(monkeypatch: pytest.MonkeyPatch,
                                              double: GridDouble) -> None:
    hermes = Hermes(monkeypatch, double.path, "t-1", TOKEN)
    observer = hermes.module.loaded_observer()
    release = threading.Event()
    handled: list[str] = []
    real_handle = observer.handle

    def held(event: str, facts: dict[str, Any]) -> list[dict[str, Any]]:
        release.wait(DRAIN_SECONDS)
        handled.append(event)
        result: list[dict[str, Any]] = real_handle(event, facts)
        return result

    monkeypatch.setattr(observer, "handle", held)
    for index in range(hermes.module.MAX_QUEUED + 2):
        hermes.fire("pre_llm_call", **pre_llm_call(ROOT, f"{ROOT}:{TASK}:{index:08x}"))
    release.set()
    hermes.drain()
    # At most the one event the worker held, and nothing after the overflow.
    assert len(handled) <= 1
    assert len(double.envelopes()) <= 1


def test_a_revoked_credential_stops_delivery(monkeypatch: pytest.MonkeyPatch,
                                             short_dir: Path) -> None:
    refusing = GridDouble(short_dir / "r.sock",
                            answer={"v": 1, "ok": False, "error": "unauthorized"})
    try:
        hermes = Hermes(monkeypatch, refusing.path, "t-1", TOKEN)
        hermes.fire("pre_llm_call", **pre_llm_call(ROOT, TURN_1))
        hermes.drain()
        hermes.fire("post_llm_call", **post_llm_call(ROOT, TURN_1))
        hermes.drain()
        assert len(refusing.requests) == 1
    finally:
        refusing.close()


# -- against a real grid: the states `clanker status` shows -------------------------------------


class RunningGrid:
    """A real :class:`Grid` on its own event loop thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._grid: Grid | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(DRAIN_SECONDS)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            self._grid = Grid(self.path)
            await self._grid.start()
            self._ready.set()
            await self._grid.wait_stopped()

        try:
            self._loop.run_until_complete(main())
        finally:
            self._loop.close()

    def call(self, function: Callable[[Grid], Any]) -> Any:
        async def run() -> Any:
            assert self._grid is not None
            return function(self._grid)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(DRAIN_SECONDS)

    def register(self) -> Registration:
        return self.call(lambda grid: grid.register(
            harness="hermes", cwd="/tmp", launcher_pid=os.getpid(), workspace="/tmp"))

    def attention(self, terminal: str) -> str:
        return str(self.call(lambda grid: grid.entry(terminal).attention))

    def close(self) -> None:
        async def stop() -> None:
            assert self._grid is not None
            await self._grid.stop()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(DRAIN_SECONDS)
        self._thread.join(DRAIN_SECONDS)


@pytest.fixture
def grid(short_dir: Path) -> Iterator[RunningGrid]:
    running = RunningGrid(short_dir / "grid.sock")
    try:
        yield running
    finally:
        running.close()


def test_states_through_a_real_grid(monkeypatch: pytest.MonkeyPatch, grid: RunningGrid) -> None:
    registration = grid.register()
    hermes = Hermes(monkeypatch, grid.path, registration.terminal, registration.token)
    assert grid.attention(registration.terminal) == "unknown"
    hermes.fire("pre_llm_call", **pre_llm_call(ROOT, TURN_1))
    hermes.drain()
    assert grid.attention(registration.terminal) == "working"
    hermes.fire("pre_approval_request", **approval(TURN_1))
    hermes.drain()
    assert grid.attention(registration.terminal) == "needs-input"
    hermes.fire("post_approval_response", **approval(TURN_1, choice="once"))
    hermes.drain()
    assert grid.attention(registration.terminal) == "working"
    hermes.fire("subagent_start", child_session_id=CHILD, parent_session_id=ROOT)
    hermes.fire("pre_llm_call", **pre_llm_call(CHILD, CHILD_TURN))
    hermes.fire("post_llm_call", **post_llm_call(CHILD, CHILD_TURN))
    hermes.drain()
    assert grid.attention(registration.terminal) == "working"  # a child never settles it
    hermes.fire("post_llm_call", **post_llm_call(ROOT, TURN_1))
    hermes.drain()
    assert grid.attention(registration.terminal) == "done"
    hermes.fire("pre_llm_call", **pre_llm_call(ROOT, TURN_2))
    hermes.fire("on_session_end", **session_end(ROOT, TURN_2, completed=False, interrupted=True))
    hermes.drain()
    assert grid.attention(registration.terminal) == "idle"


# -- prepare() ---------------------------------------------------------------------------------


def fake_bundled(root: Path) -> Path:
    bundled = root / "site-packages" / "plugins"
    (bundled / "disk-cleanup").mkdir(parents=True)
    (bundled / "disk-cleanup" / "plugin.yaml").write_text("name: disk-cleanup\n")
    (bundled / "image_gen" / "openai").mkdir(parents=True)
    (bundled / "__init__.py").write_text("")
    return bundled


def context(private_dir: Path, *, env: dict[str, str], flags: tuple[str, ...] = ()) -> (
        AttachmentContext):
    private_dir.mkdir(mode=0o700, exist_ok=True)
    return attachment_context(argv=("hermes", "--tui", *flags), env=env, cwd="/tmp",
                            private_dir=private_dir, user_flags=flags)


def test_prepare_builds_a_launch_owned_bundled_directory(tmp_path: Path) -> None:
    bundled = fake_bundled(tmp_path)
    plan = HermesAttention().prepare(context(tmp_path / "launch",
                                             env={BUNDLED_ENV: str(bundled), "PATH": "/bin"}))
    assert isinstance(plan, AttachmentPlan)
    assert plan.argv is None
    mirror = Path(plan.env[BUNDLED_ENV])
    assert mirror.parent == tmp_path / "launch"
    assert sorted(p.name for p in mirror.iterdir()) == sorted(
        [p.name for p in bundled.iterdir()] + [PLUGIN_NAME])
    for entry in bundled.iterdir():
        assert (mirror / entry.name).is_symlink()
        assert (mirror / entry.name).resolve() == entry.resolve()
    plugin = mirror / PLUGIN_NAME
    assert (plugin / "__init__.py").read_bytes() == OBSERVER_SOURCE.read_bytes()
    manifest = (plugin / "plugin.yaml").read_text()
    assert f"name: {PLUGIN_NAME}\n" in manifest and "kind: backend\n" in manifest
    assert sorted(p.name for p in bundled.iterdir()) == ["__init__.py", "disk-cleanup",
                                                         "image_gen"]  # untouched


def test_loading_the_observer_as_hermes_does_writes_no_bytecode(tmp_path: Path) -> None:
    bundled = fake_bundled(tmp_path)
    plan = HermesAttention().prepare(context(tmp_path / "launch",
                                             env={BUNDLED_ENV: str(bundled), "PATH": "/bin"}))
    assert isinstance(plan, AttachmentPlan)
    plugin = Path(plan.env[BUNDLED_ENV]) / PLUGIN_NAME
    before = sorted(p.name for p in plugin.iterdir())
    load = ("import importlib.util, sys\n"
            "spec = importlib.util.spec_from_file_location(\n"
            "    'hermes_plugins.clanker_attention', sys.argv[1] + '/__init__.py',\n"
            "    submodule_search_locations=[sys.argv[1]])\n"
            "module = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(module)\n"
            "assert callable(module.register)\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    subprocess.run([sys.executable, "-c", load, str(plugin)], check=True, env=env, timeout=60)
    assert sorted(p.name for p in plugin.iterdir()) == before == [
        "__init__.py", "__pycache__", "plugin.yaml"]
    assert (plugin / "__pycache__").read_bytes() == b""


@pytest.mark.parametrize(("flags", "env"), [
    (("--safe-mode",), {}),
    (("--safe",), {}),
    ((), {"HERMES_SAFE_MODE": "1"}),
    ((), {"HERMES_SAFE_MODE": "true"}),
])
def test_safe_mode_is_a_conflict(tmp_path: Path, flags: tuple[str, ...],
                                 env: dict[str, str]) -> None:
    bundled = fake_bundled(tmp_path)
    ctx = context(tmp_path / "launch", env={BUNDLED_ENV: str(bundled), **env}, flags=flags)
    assert isinstance(HermesAttention().prepare(ctx), Declined)
    assert list((tmp_path / "launch").iterdir()) == []


def test_a_flag_after_the_separator_is_not_safe_mode(tmp_path: Path) -> None:
    bundled = fake_bundled(tmp_path)
    ctx = context(tmp_path / "launch", env={BUNDLED_ENV: str(bundled)},
                  flags=("--", "--safe-mode"))
    assert HermesAttention().prepare(ctx) is not None


def test_an_existing_entry_of_our_name_is_not_hidden(tmp_path: Path) -> None:
    bundled = fake_bundled(tmp_path)
    (bundled / PLUGIN_NAME).mkdir()
    plan = HermesAttention().prepare(context(tmp_path / "launch", env={BUNDLED_ENV: str(bundled)}))
    assert isinstance(plan, Declined) and PLUGIN_NAME in plan.reason


def test_no_hermes_installation_means_no_attention(tmp_path: Path) -> None:
    # An interpreter without hermes_cli: the bundled directory cannot be found.
    env = {"HERMES_PYTHON": sys.executable, "HOME": str(tmp_path), "PATH": "/bin"}
    assert isinstance(HermesAttention().prepare(context(tmp_path / "launch", env=env)), Declined)
    env = {"HOME": str(tmp_path), "PATH": str(tmp_path / "empty")}
    assert isinstance(HermesAttention().prepare(context(tmp_path / "launch", env=env)), Declined)


# -- the installed CLI -------------------------------------------------------------------------


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("hermes") is None, reason="hermes is not installed")
def test_real_hermes_loads_the_plugin_and_reports_a_turn(
        short_dir: Path, grid: RunningGrid, monkeypatch: pytest.MonkeyPatch) -> None:
    """A loopback-provider run: the prompt is refused locally, pre_llm_call still fires."""
    monkeypatch.delenv("HERMES_PYTHON", raising=False)
    monkeypatch.delenv(BUNDLED_ENV, raising=False)
    home = short_dir / "home"
    (home / ".hermes").mkdir(parents=True)
    (home / ".hermes" / "config.yaml").write_text(
        "model:\n  default: probe-model\n  provider: custom\n"
        "  base_url: http://127.0.0.1:9/v1\n  api_key: dummy-not-a-key\n")
    registration = grid.register()
    env = {
        "PATH": os.environ["PATH"], "HOME": str(home), "HERMES_HOME": str(home / ".hermes"),
        "HERMES_DISABLE_LAZY_INSTALLS": "1", "HERMES_PLUGINS_DEBUG": "1",
        "CLANKER_ATTENTION_SOCKET": str(grid.path),
        "CLANKER_ATTENTION_TERMINAL": registration.terminal,
        "CLANKER_ATTENTION_TOKEN": registration.token,
    }
    plan = HermesAttention().prepare(context(short_dir / "launch", env=env))
    assert isinstance(plan, AttachmentPlan)
    mirror = Path(plan.env[BUNDLED_ENV])
    process = subprocess.Popen(["hermes", "-z", "hi"], env={**env, **plan.env}, cwd=short_dir,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        done = threading.Event()

        def wait_for_turn() -> None:
            while grid.attention(registration.terminal) != "working":
                if process.poll() is not None:
                    return
                threading.Event().wait(0.1)
            done.set()

        watcher = threading.Thread(target=wait_for_turn, daemon=True)
        watcher.start()
        watcher.join(90)
        assert done.is_set()
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    log = stderr.decode("utf-8", "replace")
    assert f"Loading plugin '{PLUGIN_NAME}' (source=bundled, kind=backend, path={mirror}" in log
    assert f"Plugin {PLUGIN_NAME} registered hook: pre_llm_call" in log
