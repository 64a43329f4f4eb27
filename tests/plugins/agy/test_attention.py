"""Antigravity attention: the hook interpreter, the guard and the persistent owned plugin.

**Never checked against a real agy**: agy cannot be installed on this machine (see
docs/harnesses/agy.md, "Attention"). The payloads in tests/fixtures/agy/attention are
synthetic, written from the spec (agy 1.2.12/1.2.14) and public descriptions of agy's
hooks (the README there names them). These tests show that clanker's side does what
the spec says with payloads of that shape: the interpreter's mapping, the guard as a
real process (inert without a launch, forwarding with one), the plugin's atomic,
idempotent installation that never takes a directory it does not own, and prepare().
Whether agy loads the plugin, runs its commands through a shell with the launch's
environment, and sends these fields, is not shown by anything here.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clanker.attention.capability import (
    AttachmentContext,
    AttachmentPlan,
    Declined,
)
from clanker.environment.remote_resources import HostPlugin
from clanker.launch.attention import write_hook_command
from clanker.testing.attending import run_interpreter
from clanker.testing.attention import (
    Envelopes,
    fixture_payload,
    interpret_function,
    load_interpreter,
)
from clanker.testing.doubles import attachment_context
from clanker_agy.attention import (
    ASK_MATCHER,
    GUARD,
    HOOK_EVENTS,
    HOOK_TIMEOUT_SECONDS,
    INTERPRETER,
    MARKER,
    MARKER_FILE,
    PLUGIN_NAME,
    AgyAttention,
    install_plugin,
    plugin_dir,
    plugin_files,
)
from tests.helpers import launch_hooked

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agy" / "attention"
ROOT = "d6b9f466-8d4d-4b93-adbe-9bdb0b6df587"
OTHER = "0b7e2c51-3f9a-4c1e-9d2b-6a8f4e1c7d30"
CWD = "/home/u/src/repo"


_EVENTS_BY_PREFIX = {"pre-invocation": "PreInvocation", "pre-tool-use": "PreToolUse",
                     "post-tool-use": "PostToolUse", "stop": "Stop"}


INTERPRETER_MODULE = load_interpreter(INTERPRETER)
interpret = interpret_function(INTERPRETER_MODULE)


def native(name: str, **changes: object) -> dict[str, Any]:
    """agy's own payload from a fixture, with ``changes`` (``None`` removes a key)."""
    return fixture_payload(FIXTURES, name, **changes)


def event_of(name: str) -> str:
    return _EVENTS_BY_PREFIX[name.split(".")[0]]


def wrapped(name: str, **changes: object) -> dict[str, Any]:
    """What the guard hands the bridge: the event it was declared for, and agy's payload."""
    return {"agyHookEvent": event_of(name), "payload": native(name, **changes)}


def run(items: list[str | dict[str, Any]], state: dict[str, object] | None = None
        ) -> tuple[list[Envelopes], dict[str, object]]:
    """Feed payloads (or fixture names) in order, threading the state as the bridge does."""
    return run_interpreter(interpret, [wrapped(i) if isinstance(i, str) else i for i in items],
                           state, max_state=2048)


def events(envelopes: Envelopes) -> list[tuple[object, ...]]:
    return [(e["event"], e.get("inputId")) for e in envelopes]


# -- the interpreter ------------------------------------------------------------------------


def test_hook_stdout_is_agys_neutral_answer() -> None:
    assert INTERPRETER_MODULE.HOOK_STDOUT == "{}"


def test_the_first_model_call_starts_a_turn_and_binds_the_conversation() -> None:
    envelopes, state = interpret(wrapped("pre-invocation.first"), {})
    assert len(envelopes) == 1
    turn = envelopes[0]["turnId"]
    assert envelopes == [{"event": "turn_started", "scope": "root", "sessionId": ROOT,
                          "turnId": turn, "cwd": CWD, "nativeEvent": "PreInvocation"}]
    assert isinstance(turn, str) and turn.startswith("agy-") and len(turn) == 20
    assert state == {"v": 1, "c": ROOT, "t": turn}


def test_every_turn_gets_a_fresh_epoch_even_from_lost_state() -> None:
    turns = set()
    state: dict[str, object] = {}
    for _ in range(20):
        envelopes, state = interpret(wrapped("pre-invocation.first"), state)
        turns.add(envelopes[0]["turnId"])
        envelopes, _ = interpret(wrapped("pre-invocation.first"), {})  # poisoned: afresh
        turns.add(envelopes[0]["turnId"])
    assert len(turns) == 40


def test_later_model_calls_of_a_turn_report_nothing() -> None:
    out, state = run(["pre-invocation.first", "pre-invocation.later"])
    assert out[1] == []
    assert state["t"] == out[0][0]["turnId"]
    for number in (1, 7, True, False, 0.0, "0", None, -1):
        item = wrapped("pre-invocation.first", invocationNum=number)
        assert interpret(item, dict(state)) == ([], state)


def test_a_fully_idle_stop_completes_the_turn() -> None:
    out, state = run(["pre-invocation.first", "stop.idle"])
    turn = out[0][0]["turnId"]
    assert out[1] == [{"event": "turn_completed", "scope": "root", "sessionId": ROOT,
                       "turnId": turn, "nativeEvent": "Stop"}]
    assert state == {"v": 1, "c": ROOT}
    # Another Stop with no turn open: nothing.
    assert interpret(wrapped("stop.idle"), state) == ([], state)


@pytest.mark.parametrize("name", ["stop.busy", "stop.without-fully-idle"])
def test_a_stop_with_background_work_never_completes(name: str) -> None:
    out, state = run(["pre-invocation.first", name])
    assert out[1] == []
    assert state["t"] == out[0][0]["turnId"]
    for value in (1, "true", None, [True]):
        assert interpret(wrapped("stop.idle", fullyIdle=value), dict(state))[0] == []


def test_an_error_stop_is_a_completion_and_the_error_stays_out() -> None:
    # The spec maps only fullyIdle: an error is not read (never forwarded either).
    out, _ = run(["pre-invocation.first", "stop.error"])
    assert events(out[1]) == [("turn_completed", None)]
    assert "RESOURCE_EXHAUSTED" not in json.dumps(out)


def test_the_next_turn_starts_afresh() -> None:
    out, state = run(["pre-invocation.first", "pre-tool-use.ask-question", "stop.idle",
                      "pre-invocation.first", "post-tool-use.ask-question"])
    assert out[3][0]["turnId"] != out[0][0]["turnId"]
    assert out[4] == []  # the old turn's wait ended with it
    assert state == {"v": 1, "c": ROOT, "t": out[3][0]["turnId"]}


def test_a_new_first_call_supersedes_an_unfinished_turn() -> None:
    # A Stop agy never sent (or a hook that timed out): the next turn still starts.
    out, _ = run(["pre-invocation.first", "pre-tool-use.ask-question", "pre-invocation.first"])
    assert events(out[2]) == [("turn_started", None)]


# -- waits ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("pre", "post", "step"), [
    ("pre-tool-use.ask-question", "post-tool-use.ask-question", "step-5"),
    ("pre-tool-use.ask-permission", "post-tool-use.ask-permission.denied", "step-7"),
    ("pre-tool-use.notify-user", "post-tool-use.null-tool-call", "step-9"),
])
def test_an_ask_tool_is_a_wait_resolved_by_its_own_post_tool_use(pre: str, post: str,
                                                                 step: str) -> None:
    out, state = run(["pre-invocation.first", pre, pre, post, post, "stop.idle"])
    turn = out[0][0]["turnId"]
    assert out[1] == [{"event": "input_requested", "scope": "root", "sessionId": ROOT,
                       "turnId": turn, "inputId": step, "nativeEvent": "PreToolUse"}]
    assert out[2] == []  # the same step again: still one wait
    assert out[3] == [{"event": "input_resolved", "scope": "root", "sessionId": ROOT,
                       "turnId": turn, "inputId": step, "nativeEvent": "PostToolUse"}]
    assert out[4] == []
    assert events(out[5]) == [("turn_completed", None)]
    assert state == {"v": 1, "c": ROOT}


def test_overlapping_waits_resolve_once_none_is_open() -> None:
    out, state = run(["pre-invocation.first", "pre-tool-use.ask-question",
                      "pre-tool-use.ask-permission", "post-tool-use.ask-question",
                      "post-tool-use.ask-permission.denied"])
    assert [events(e) for e in out[1:]] == [
        [("input_requested", "step-5")], [], [], [("input_resolved", "step-5")]]
    assert "w" not in state and "r" not in state


def test_other_tools_and_other_steps_resolve_nothing() -> None:
    out, state = run([
        "pre-invocation.first", "pre-tool-use.run-command", "pre-tool-use.ask-question",
        wrapped("post-tool-use.ask-question", stepIdx=6),
        wrapped("post-tool-use.ask-question", toolCall={"name": "run_command"}),
        wrapped("post-tool-use.ask-question", stepIdx=None),
    ])
    assert out[1] == []  # run_command keeps agy's own permission handling
    assert events(out[2]) == [("input_requested", "step-5")]
    assert out[3:] == [[], [], []]
    assert state["r"] == "step-5"


def test_a_wait_without_a_step_lasts_until_the_turn_ends() -> None:
    out, state = run(["pre-invocation.first",
                      wrapped("pre-tool-use.ask-question", stepIdx=None),
                      "pre-tool-use.ask-permission", "post-tool-use.ask-permission.denied",
                      "stop.idle"])
    assert events(out[1]) == [("input_requested", "ask")]
    assert out[2] == [] and out[3] == []  # fail closed: that wait cannot be matched
    assert events(out[4]) == [("turn_completed", None)]
    assert state == {"v": 1, "c": ROOT}


def test_past_the_wait_bound_only_a_boundary_resolves() -> None:
    items: list[str | dict[str, Any]] = ["pre-invocation.first"]
    items += [wrapped("pre-tool-use.ask-question", stepIdx=i) for i in range(20)]
    items += [wrapped("post-tool-use.ask-question", stepIdx=i) for i in range(20)]
    out, state = run(items)
    assert sum(len(e) for e in out[1:]) == 1  # the first request only
    assert state["o"] is True and "w" not in state
    out, _ = run(["stop.idle"], state)
    assert events(out[0]) == [("turn_completed", None)]


def test_waits_before_any_turn_report_nothing() -> None:
    assert run(["pre-tool-use.ask-question", "post-tool-use.ask-question", "stop.idle"]
               )[0] == [[], [], []]
    # A bound conversation with no open turn: still nothing.
    assert interpret(wrapped("pre-tool-use.ask-question"), {"v": 1, "c": ROOT})[0] == []


# -- the root conversation ------------------------------------------------------------------


def test_other_conversations_never_speak_for_the_root() -> None:
    out, state = run(["pre-invocation.first", "pre-invocation.subagent",
                      "pre-tool-use.ask-question.subagent", "stop.subagent",
                      "pre-tool-use.ask-question", "stop.subagent", "stop.idle"])
    turn = out[0][0]["turnId"]
    assert out[1:4] == [[], [], []]
    assert events(out[4]) == [("input_requested", "step-5")]
    assert out[5] == []
    assert out[6][0]["turnId"] == turn and out[6][0]["sessionId"] == ROOT
    assert state == {"v": 1, "c": ROOT}


def test_the_first_conversation_stays_bound_after_a_switch() -> None:
    # agy has no end event: a conversation switched to in the TUI is never the root.
    out, state = run(["pre-invocation.first", "stop.idle",
                      wrapped("pre-invocation.first", conversationId=OTHER),
                      wrapped("stop.idle", conversationId=OTHER)])
    assert out[2:] == [[], []]
    assert state == {"v": 1, "c": ROOT}


def test_the_location_is_the_one_workspace() -> None:
    def cwd(paths: object) -> object:
        envelopes, _ = interpret(wrapped("pre-invocation.first", workspacePaths=paths), {})
        return envelopes[0].get("cwd")

    assert cwd([CWD]) == CWD
    assert cwd([CWD + "/"]) == CWD
    assert cwd(["file:///home/u/src/my%20repo"]) == "/home/u/src/my repo"
    assert cwd(["file://localhost/home/u/src/repo"]) == CWD
    unusable: list[object] = [
        [], [CWD, "/home/u/src/lib"], ["relative"], ["file://host/x"], ["vscode-remote://ssh/x"],
        ["/tab\there"], ["/" + "x" * 1100], [5], CWD, None, {},
    ]
    for paths in unusable:
        assert cwd(paths) is None
    envelopes, _ = interpret(wrapped("pre-invocation.two-workspaces"), {})
    assert "cwd" not in envelopes[0]


def test_events_without_a_usable_conversation_report_nothing() -> None:
    state: dict[str, object] = {"v": 1, "c": ROOT, "t": "agy-0011223344556677"}
    for name in ("pre-invocation.first", "pre-tool-use.ask-question",
                 "post-tool-use.ask-question", "stop.idle"):
        for conversation in (None, "", 5, "x" * 257, "a\nb"):
            item = wrapped(name, conversationId=conversation)
            if conversation is None:
                item["payload"].pop("conversationId", None)
            assert interpret(item, dict(state)) == ([], state)


def test_unknown_or_unwrapped_events_report_nothing() -> None:
    state: dict[str, object] = {"v": 1, "c": ROOT, "t": "agy-0011223344556677"}
    for event in ("PostInvocation", "SessionStart", "pretooluse", "", None, 5):
        item = {"agyHookEvent": event, "payload": native("stop.idle")}
        assert interpret(item, dict(state)) == ([], state)
    assert interpret(native("stop.idle"), dict(state)) == ([], state)  # not wrapped
    assert interpret({"agyHookEvent": "Stop", "payload": [1]}, dict(state)) == ([], state)


# No payload content reaches envelopes or state: the contract (test_contract.py, with
# PRIVATE_TEXTS below).
PRIVATE_TEXTS = ("database", "Postgres", "secret-build-dir", "denied", "plan is ready",
                 "plan.md", "Subagent question", "RESOURCE_EXHAUSTED", "transcript", "gemini-",
                 "brain", "NO_TOOL_CALL", "Delete")
NAMES = sorted(p.stem for p in FIXTURES.glob("*.json"))
RUN = ["pre-invocation.first", *NAMES, "pre-invocation.first", "pre-tool-use.ask-question",
       "pre-tool-use.ask-permission", "stop.error"]


def test_the_state_holds_only_its_own_keys() -> None:
    _, state = run(list(RUN))
    assert set(state) <= {"v", "c", "t", "w", "r", "o"}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
agy_payloads = st.fixed_dictionaries(
    {"conversationId": st.sampled_from([ROOT, OTHER, ""]) | json_values},
    optional={"invocationNum": st.sampled_from([0, 1]) | json_values,
              "stepIdx": st.sampled_from([5, 7]) | json_values,
              "toolCall": st.fixed_dictionaries(
                  {"name": st.sampled_from(["ask_question", "run_command"]) | json_values})
              | json_values,
              "fullyIdle": st.booleans() | json_values,
              "workspacePaths": st.lists(st.sampled_from([CWD, "rel"]) | st.text(), max_size=2)
              | json_values},
)
wrapped_payloads = st.fixed_dictionaries({
    "agyHookEvent": st.sampled_from([*HOOK_EVENTS, "SessionStart"]) | json_values,
    "payload": agy_payloads | json_values,
})
states = st.fixed_dictionaries(
    {"v": st.sampled_from([1]) | json_values},
    optional={"c": st.sampled_from([ROOT]) | json_values,
              "t": st.sampled_from(["agy-0011223344556677"]) | json_values,
              "w": st.lists(st.sampled_from(["step-5", "step-x", "5"]) | json_values,
                            max_size=20) | json_values,
              "r": st.sampled_from(["step-5", "ask", "other"]) | json_values,
              "o": json_values},
) | json_values


@settings(max_examples=200, deadline=None)
@given(sequence=st.lists(st.sampled_from(sorted(p.stem for p in FIXTURES.glob("*.json"))),
                         max_size=25))
def test_every_resolution_follows_an_open_request_of_the_live_turn(sequence: list[str]) -> None:
    state: dict[str, object] = {}
    live: str | None = None
    open_request: str | None = None
    bound: object = None
    for name in sequence:
        envelopes, state = interpret(wrapped(name), state)
        for envelope in envelopes:
            bound = envelope["sessionId"] if bound is None else bound
            assert envelope["sessionId"] == bound  # the first conversation stays the root
            kind = envelope["event"]
            if kind == "turn_started":
                live, open_request = cast(str, envelope["turnId"]), None
            elif kind == "turn_completed":
                assert envelope["turnId"] == live
                live, open_request = None, None
            elif kind == "input_requested":
                assert envelope["turnId"] == live and open_request is None
                open_request = cast(str, envelope["inputId"])
            elif kind == "input_resolved":
                assert envelope["turnId"] == live and envelope["inputId"] == open_request
                open_request = None


# -- the guard, as a real process -----------------------------------------------------------


@pytest.fixture
def launch_files() -> Iterator[dict[str, Any]]:
    """A launch's resources: a private dir with a recording command, a state dir and a
    listening socket (short path: AF_UNIX)."""
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="agy-"))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        private = root / "private"
        private.mkdir(mode=0o700)
        (private / "state").mkdir(mode=0o700)
        record = root / "forwarded"
        command = private / "hook"
        command.write_text(f"#!/bin/sh\ncat > '{record}'\necho bridge-output\necho oops >&2\n")
        command.chmod(0o700)
        listener.bind(str(root / "s"))
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "CLANKER_ATTENTION_COMMAND": str(command),
            "CLANKER_ATTENTION_INTERPRETER": str(INTERPRETER),
            "CLANKER_ATTENTION_SOCKET": str(root / "s"),
            "CLANKER_ATTENTION_TERMINAL": "t-1",
            "CLANKER_ATTENTION_TOKEN": "ab" * 32,
            "CLANKER_ATTENTION_STATE": str(private / "state"),
        }
        yield {"root": root, "env": env, "record": record, "command": command}
    finally:
        listener.close()
        shutil.rmtree(root, ignore_errors=True)


def guard(event: str, env: dict[str, str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["/bin/sh", str(GUARD), event], input=stdin, env=env,
                          capture_output=True, timeout=30, check=False)


PAYLOAD = json.dumps(native("stop.idle")).encode()


@pytest.mark.parametrize("event", [*HOOK_EVENTS, "SessionStart", ""])
def test_the_guard_is_inert_outside_a_launch(event: str) -> None:
    done = guard(event, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, PAYLOAD)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"{}\n", b"")


def test_the_guard_forwards_the_wrapped_payload_and_still_answers_neutrally(
        launch_files: dict[str, Any]) -> None:
    for event in HOOK_EVENTS:
        done = guard(event, launch_files["env"], PAYLOAD)
        assert (done.returncode, done.stdout, done.stderr) == (0, b"{}\n", b"")
        forwarded = json.loads(launch_files["record"].read_bytes())
        assert forwarded == {"agyHookEvent": event, "payload": native("stop.idle")}


def test_the_guard_forwards_bytes_it_cannot_parse_unchanged(
        launch_files: dict[str, Any]) -> None:
    done = guard("Stop", launch_files["env"], b"not json")
    assert done.stdout == b"{}\n"
    assert launch_files["record"].read_bytes() == b'{"agyHookEvent":"Stop","payload":not json}'


@pytest.mark.parametrize("breakage", [
    "no-command", "relative-command", "command-gone", "command-not-executable",
    "other-interpreter", "interpreter-gone", "state-gone", "socket-gone", "no-terminal",
    "no-token", "no-socket-variable", "unknown-event",
])
def test_the_guard_is_inert_when_the_launch_resources_are_gone(
        launch_files: dict[str, Any], breakage: str, tmp_path: Path) -> None:
    env = dict(launch_files["env"])
    event = "Stop"
    if breakage == "no-command":
        del env["CLANKER_ATTENTION_COMMAND"]
    elif breakage == "relative-command":
        env["CLANKER_ATTENTION_COMMAND"] = "hook"
    elif breakage == "command-gone":
        launch_files["command"].unlink()
    elif breakage == "command-not-executable":
        launch_files["command"].chmod(0o600)
    elif breakage == "other-interpreter":
        other = tmp_path / "clanker_codex" / "attention_interpreter.py"
        other.parent.mkdir()
        other.write_text("")
        env["CLANKER_ATTENTION_INTERPRETER"] = str(other)
    elif breakage == "interpreter-gone":
        env["CLANKER_ATTENTION_INTERPRETER"] = "/nowhere/clanker_agy/attention_interpreter.py"
    elif breakage == "state-gone":
        shutil.rmtree(env["CLANKER_ATTENTION_STATE"])
    elif breakage == "socket-gone":
        os.unlink(env["CLANKER_ATTENTION_SOCKET"])
    elif breakage == "no-terminal":
        env["CLANKER_ATTENTION_TERMINAL"] = ""
    elif breakage == "no-token":
        del env["CLANKER_ATTENTION_TOKEN"]
    elif breakage == "no-socket-variable":
        del env["CLANKER_ATTENTION_SOCKET"]
    else:
        event = "PostInvocation"
    done = guard(event, env, PAYLOAD)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"{}\n", b"")
    assert not launch_files["record"].exists()


def test_the_guard_reaches_the_real_bridge(launch_files: dict[str, Any]) -> None:
    """The real hook command (``hook.py`` under ``python -I -S``) loads this interpreter
    through the guard and delivers to the socket: a one-shot grid double records it."""
    env = dict(launch_files["env"])
    env["CLANKER_ATTENTION_COMMAND"] = str(write_hook_command(launch_files["root"]))
    socket_path = env["CLANKER_ATTENTION_SOCKET"]
    os.unlink(socket_path)
    received: list[dict[str, Any]] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(socket_path)
        server.listen(1)
        server.settimeout(30)

        def serve() -> None:
            connection, _ = server.accept()
            with connection, connection.makefile("rwb") as stream:
                request = json.loads(stream.readline())
                received.append(request)
                stream.write(json.dumps({"v": 1, "ok": True,
                                         "decisions": ["accepted"]}).encode() + b"\n")
                stream.flush()

        thread = threading.Thread(target=serve)
        thread.start()
        done = guard("PreInvocation", env, json.dumps(native("pre-invocation.first")).encode())
        thread.join(30)
    assert (done.returncode, done.stdout) == (0, b"{}\n")
    [request] = received
    assert request["op"] == "deliver" and request["terminal"] == "t-1"
    [envelope] = request["envelopes"]
    assert envelope["event"] == "turn_started" and envelope["sessionId"] == ROOT
    assert envelope["cwd"] == CWD
    state = json.loads((Path(env["CLANKER_ATTENTION_STATE"]) / "state.json").read_text())
    assert state["c"] == ROOT and state["t"] == envelope["turnId"]


# -- the owned plugin -----------------------------------------------------------------------


def listing(directory: Path) -> dict[str, tuple[int, int, int]]:
    """Each entry's (mode, inode, mtime) — what a write would change."""
    return {p.name: (p.lstat().st_mode, p.lstat().st_ino, p.lstat().st_mtime_ns)
            for p in sorted(directory.iterdir())}


@pytest.fixture
def target(tmp_path: Path) -> Path:
    return tmp_path / "home" / ".gemini" / "config" / "plugins" / PLUGIN_NAME


def test_a_fresh_install_writes_the_whole_plugin(target: Path) -> None:
    assert install_plugin(target) is True
    assert sorted(p.name for p in target.iterdir()) == [
        MARKER_FILE, "guard.sh", "hooks.json", "plugin.json"]
    assert (target / MARKER_FILE).read_bytes() == MARKER
    assert (target / "guard.sh").read_bytes() == GUARD.read_bytes()
    assert stat.S_IMODE((target / "guard.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((target / "hooks.json").stat().st_mode) == 0o644
    assert json.loads((target / "plugin.json").read_text())["name"] == PLUGIN_NAME
    hooks = json.loads((target / "hooks.json").read_text())
    guard_path = target / "guard.sh"
    assert list(hooks) == [PLUGIN_NAME]
    named = hooks[PLUGIN_NAME]
    assert list(named) == list(HOOK_EVENTS)
    for event in HOOK_EVENTS:
        handler = {"type": "command", "command": f"/bin/sh {guard_path} {event}",
                   "timeout": HOOK_TIMEOUT_SECONDS}
        if event in ("PreToolUse", "PostToolUse"):
            assert named[event] == [{"matcher": ASK_MATCHER, "hooks": [handler]}]
        else:
            assert named[event] == [handler]
    # No staging directory is left behind.
    assert [p.name for p in target.parent.iterdir()] == [PLUGIN_NAME]


def test_the_matcher_selects_exactly_the_ask_tools() -> None:
    import re

    pattern = re.compile(ASK_MATCHER)
    assert all(pattern.search(name) for name in INTERPRETER_MODULE.ASK_TOOLS)
    for name in ("run_command", "ask_questions", "xask_question", "notify_user2", ""):
        assert not pattern.search(name)


def test_a_path_with_spaces_is_quoted_for_the_shell(tmp_path: Path) -> None:
    directory = tmp_path / "my home" / PLUGIN_NAME
    assert install_plugin(directory)
    hooks = json.loads((directory / "hooks.json").read_text())
    command = hooks[PLUGIN_NAME]["Stop"][0]["command"]
    assert command == f"/bin/sh '{directory / 'guard.sh'}' Stop"
    done = subprocess.run(command, shell=True, input=b"{}", env={"PATH": "/usr/bin:/bin"},
                          capture_output=True, timeout=30, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"{}\n", b"")


def test_reinstalling_a_current_plugin_writes_nothing(target: Path) -> None:
    assert install_plugin(target)
    before = listing(target)
    assert install_plugin(target) is True
    assert listing(target) == before


def test_a_stale_plugin_is_refreshed_and_unknown_files_are_kept(target: Path) -> None:
    assert install_plugin(target)
    (target / "guard.sh").write_text("#!/bin/sh\necho old\n")
    (target / "hooks.json").chmod(0o600)
    (target / "notes.txt").write_text("the user's")
    (target / "plugin.json").unlink()
    assert install_plugin(target) is True
    assert (target / "guard.sh").read_bytes() == GUARD.read_bytes()
    assert stat.S_IMODE((target / "hooks.json").stat().st_mode) == 0o644
    assert (target / "plugin.json").is_file()
    assert (target / "notes.txt").read_text() == "the user's"
    assert not [p for p in target.iterdir() if p.name.endswith(".tmp")]


def _unowned(target: Path, kind: str) -> None:
    target.parent.mkdir(parents=True)
    if kind == "no-marker":
        target.mkdir()
        (target / "hooks.json").write_text('{"mine": {}}')
    elif kind == "other-marker":
        target.mkdir()
        (target / MARKER_FILE).write_bytes(MARKER + b"extra")
    elif kind == "marker-link":
        target.mkdir()
        real = target.parent / "real-marker"
        real.write_bytes(MARKER)
        (target / MARKER_FILE).symlink_to(real)
    elif kind == "marker-directory":
        target.mkdir()
        (target / MARKER_FILE).mkdir()
    elif kind == "file":
        target.write_text("not a directory")
    elif kind == "link":
        elsewhere = target.parent / "elsewhere"
        elsewhere.mkdir()
        (elsewhere / MARKER_FILE).write_bytes(MARKER)
        target.symlink_to(elsewhere)


@pytest.mark.parametrize("kind", ["no-marker", "other-marker", "marker-link",
                                  "marker-directory", "file", "link"])
def test_an_unowned_directory_is_refused_and_left_untouched(target: Path, kind: str) -> None:
    _unowned(target, kind)
    before = {str(p): (p.lstat().st_mode, p.lstat().st_mtime_ns,
                       p.read_bytes() if p.is_file() and not p.is_symlink() else None)
              for p in sorted(target.parent.rglob("*"))}
    assert install_plugin(target) is False
    after = {str(p): (p.lstat().st_mode, p.lstat().st_mtime_ns,
                      p.read_bytes() if p.is_file() and not p.is_symlink() else None)
             for p in sorted(target.parent.rglob("*"))}
    assert after == before


def test_a_link_in_place_of_a_plugin_file_is_refused(target: Path, tmp_path: Path) -> None:
    assert install_plugin(target)
    outside = tmp_path / "outside.json"
    outside.write_text("user content")
    (target / "hooks.json").unlink()
    (target / "hooks.json").symlink_to(outside)
    (target / "guard.sh").write_text("stale")
    assert install_plugin(target) is False
    assert outside.read_text() == "user content"
    assert (target / "guard.sh").read_text() == "stale"  # refused before any write


def test_concurrent_installs_end_with_one_current_plugin(target: Path) -> None:
    """Separate processes race for a missing plugin: every one succeeds, one directory,
    no staging left."""
    code = ("import sys; from pathlib import Path; from clanker_agy.attention import "
            "install_plugin; sys.exit(0 if install_plugin(Path(sys.argv[1])) else 3)")
    processes = [subprocess.Popen([sys.executable, "-c", code, str(target)])
                 for _ in range(6)]
    assert [p.wait(timeout=120) for p in processes] == [0] * 6
    assert sorted(p.name for p in target.parent.iterdir()) == [PLUGIN_NAME]
    reference = plugin_files(target)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == reference


def test_a_failed_staging_leaves_nothing(target: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import clanker_agy.attention as module

    def fail(path: Path, data: bytes, mode: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(module, "_write_new", fail)
    with pytest.raises(OSError, match="disk full"):
        install_plugin(target)
    assert list(target.parent.iterdir()) == []


# -- prepare() ------------------------------------------------------------------------------


def context(home: Path | None, private: Path, **env: str) -> AttachmentContext:
    environ = {"CLANKER_ATTENTION_COMMAND": str(private / "hook"), **env}
    if home is not None:
        environ["HOME"] = str(home)
    return attachment_context(argv=("agy", "--model=gemini-3.1-pro-low"), env=environ,
                            cwd=str(private), private_dir=private, user_flags=())


def test_prepare_installs_the_plugin_and_keeps_the_launch(tmp_path: Path) -> None:
    home, private = tmp_path / "home", tmp_path / "private"
    home.mkdir()
    private.mkdir(mode=0o700)
    plan = AgyAttention().prepare(context(home, private))
    assert isinstance(plan, AttachmentPlan)
    assert plan.argv is None and dict(plan.env) == {}
    directory = home / ".gemini" / "config" / "plugins" / PLUGIN_NAME
    assert plugin_dir({"HOME": str(home)}) == directory
    assert (directory / MARKER_FILE).read_bytes() == MARKER
    assert list(private.iterdir()) == []  # nothing launch-scoped: the plugin is persistent
    # A second launch: the same plugin, nothing rewritten.
    before = listing(directory)
    assert AgyAttention().prepare(context(home, private)) is not None
    assert listing(directory) == before


def test_prepare_declines_an_unowned_directory(tmp_path: Path) -> None:
    home, private = tmp_path / "home", tmp_path / "private"
    private.mkdir()
    directory = home / ".gemini" / "config" / "plugins" / PLUGIN_NAME
    directory.mkdir(parents=True)
    (directory / "hooks.json").write_text('{"the-users": {}}')
    assert isinstance(AgyAttention().prepare(context(home, private)), Declined)
    assert sorted(p.name for p in directory.iterdir()) == ["hooks.json"]


def test_prepare_without_a_usable_home_declines(tmp_path: Path) -> None:
    plan = AgyAttention().prepare(context(None, tmp_path, HOME="relative/home"))
    assert isinstance(plan, Declined)


def test_prepare_without_the_hook_command_is_an_operational_failure(tmp_path: Path) -> None:
    bare = attachment_context(argv=("agy",), env={"HOME": str(tmp_path)}, cwd=str(tmp_path),
                            private_dir=tmp_path)
    with pytest.raises(ValueError, match="hook command"):
        AgyAttention().prepare(bare)
    assert not (tmp_path / ".gemini").exists()


# -- end to end: `clanker launch agy` over a double that fires the plugin's hooks -----------

# How agy is described to find its hooks: the hooks.json of each plugin in
# ~/.gemini/config/plugins, run through a shell with agy's own environment.
LOCATOR = f'''
def hook_commands(argv):
    path = os.path.join(os.environ["HOME"], ".gemini", "config", "plugins",
                        "{PLUGIN_NAME}", "hooks.json")
    found = {{}}
    with open(path) as f:
        for event, handlers in json.load(f)["{PLUGIN_NAME}"].items():
            found[event] = (handlers[0]["hooks"][0] if "hooks" in handlers[0]
                            else handlers[0])["command"]
    return found
'''


def test_a_launch_reports_a_turn_with_a_question(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    names = ["pre-invocation.first", "pre-invocation.subagent", "pre-invocation.later",
             "pre-tool-use.ask-question", "post-tool-use.ask-question", "stop.busy",
             "stop.idle"]
    # The double picks each payload's command by `hook_event_name` (agy sends none; the
    # interpreter never reads it).
    payloads: list[object] = [{**native(name), "hook_event_name": event_of(name)}
                              for name in names]
    record, after = launch_hooked(tmp_path, "agy", LOCATOR, payloads,
                                  env={"HOME": str(home)})
    observations = cast(list[dict[str, Any]], record["observed"])
    observed = [(o["event"], o["attention"], o["location"]) for o in observations]
    assert observed == [
        ("PreInvocation", "working", CWD),
        ("PreInvocation", "working", CWD),  # another conversation's: not ours
        ("PreInvocation", "working", CWD),
        ("PreToolUse", "needs-input", CWD),
        ("PostToolUse", "working", CWD),
        ("Stop", "working", CWD),  # background work still runs
        ("Stop", "done", CWD),
    ]
    assert all(o["hooked"] and o["stdout"] == "{}\n" for o in observations)
    assert record["terminal"] and all(row["terminal"] != record["terminal"] for row in after)
    # The plugin stays after the launch, and is inert now that its launch is gone.
    directory = home / ".gemini" / "config" / "plugins" / PLUGIN_NAME
    assert (directory / MARKER_FILE).read_bytes() == MARKER
    command = json.loads((directory / "hooks.json").read_text())[PLUGIN_NAME]["Stop"][0][
        "command"]
    done = subprocess.run(command, shell=True, input=PAYLOAD, env={"PATH": "/usr/bin:/bin"},
                          capture_output=True, timeout=30, check=False)
    assert (done.returncode, done.stdout) == (0, b"{}\n")


# -- on an SSH host -------------------------------------------------------------------------


@pytest.fixture
def host_launch(tmp_path: Path) -> dict[str, Any]:
    """A launch directory as the host step makes it: ``hook`` (recording what it gets)
    and ``attention_interpreter.py`` beside a ``state`` directory, under clanker's
    directory in a home; the variables agy gets there (no credential among them)."""
    launch = tmp_path / ".local" / "state" / "clanker" / "attention" / "0123abcd"
    (launch / "state").mkdir(parents=True)
    record = tmp_path / "forwarded"
    hook = launch / "hook"
    hook.write_text(f"#!/bin/sh\ncat > '{record}'\necho bridge-output\n")
    hook.chmod(0o700)
    (launch / "attention_interpreter.py").write_bytes(INTERPRETER.read_bytes())
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "CLANKER_ATTENTION_COMMAND": str(hook),
           "CLANKER_ATTENTION_INTERPRETER": str(launch / "attention_interpreter.py")}
    return {"launch": launch, "env": env, "record": record}


def test_on_a_host_the_guard_forwards_to_the_launch_directory_s_hook(
        host_launch: dict[str, Any]) -> None:
    done = guard("Stop", host_launch["env"], PAYLOAD)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"{}\n", b"")
    assert json.loads(host_launch["record"].read_bytes()) == {
        "agyHookEvent": "Stop", "payload": native("stop.idle")}


@pytest.mark.parametrize("breakage", ["launch-gone", "state-gone", "elsewhere",
                                      "interpreter-elsewhere"])
def test_on_a_host_the_guard_is_inert_once_the_launch_is_gone(
        host_launch: dict[str, Any], breakage: str, tmp_path: Path) -> None:
    env = dict(host_launch["env"])
    launch: Path = host_launch["launch"]
    if breakage == "launch-gone":
        shutil.rmtree(launch)
    elif breakage == "state-gone":
        (launch / "state").rmdir()
    elif breakage == "elsewhere":  # the same shape outside clanker's directory on the host
        other = tmp_path / "other"
        shutil.copytree(launch, other)
        env["CLANKER_ATTENTION_COMMAND"] = str(other / "hook")
        env["CLANKER_ATTENTION_INTERPRETER"] = str(other / "attention_interpreter.py")
    else:
        env["CLANKER_ATTENTION_INTERPRETER"] = str(tmp_path / "attention_interpreter.py")
    done = guard("Stop", env, PAYLOAD)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"{}\n", b"")
    assert not host_launch["record"].exists()


def test_on_a_host_prepare_writes_nothing_here(tmp_path: Path) -> None:
    home, private = tmp_path / "home", tmp_path / "private"
    home.mkdir()
    private.mkdir(mode=0o700)
    plan = AgyAttention().prepare(context(home, private, CLANKER_ATTENTION_TRANSPORT="tty"))
    assert isinstance(plan, AttachmentPlan) and dict(plan.env) == {}
    assert list(home.iterdir()) == [] and list(private.iterdir()) == []


def test_the_host_plugin_is_the_local_plugin_for_the_host_s_home() -> None:
    plugin = AgyAttention().host_plugin("/home/box user")
    assert plugin.path == ".gemini/config/plugins/" + PLUGIN_NAME
    assert plugin.marker == MARKER_FILE and plugin.files[0][0] == MARKER_FILE
    files = {name: (data, mode) for name, data, mode in plugin.files}
    assert files == {name: (data, 0o755 if name == "guard.sh" else 0o644) for name, data
                     in plugin_files(Path("/home/box user") / plugin.path).items()}
    assert [name for name, _, _ in plugin.files][-1] == "hooks.json"


@pytest.mark.parametrize("path", ["../x", "/abs", "a//b", ".", "a/../b", ""])
def test_a_host_plugin_stays_below_the_home(path: str) -> None:
    with pytest.raises(ValueError, match="path"):
        HostPlugin(path=path, marker=".m", files=((".m", b"m", 0o644),))
