"""Codex attention: the hook interpreter (from captured payloads) and launch preparation."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from clanker.attention.capability import (
    AttachmentContext,
    AttachmentPlan,
    Declined,
)
from clanker.testing.attending import run_interpreter
from clanker.testing.attention import load_interpreter
from clanker.testing.doubles import attachment_context
from clanker_codex.attention import (
    HOOK_COMMAND,
    HOOK_EVENTS,
    HOOK_TIMEOUT_SECONDS,
    REVIEW_NOTICE,
    TRUSTED_HASHES,
    CodexAttention,
    hook_arguments,
    hook_key,
    review_notice,
)
from clanker_codex.attention import INTERPRETER as INTERPRETER_FILE
from clanker_codex.launch import CodexLaunch

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "codex" / "attention"
SESSION = "01a2f00d-0000-7000-8000-000000000001"
TURN_1 = "01a2f00d-1111-7000-8000-000000000001"
TURN_2 = "01a2f00d-1111-7000-8000-000000000002"
CWD = "/home/user/project"


INTERPRETER = load_interpreter(INTERPRETER_FILE)


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def live() -> list[dict[str, Any]]:
    payloads: list[dict[str, Any]] = fixture("live-app-server.json")
    return payloads


def built(name: str) -> dict[str, Any]:
    payload: dict[str, Any] = fixture("schema-built.json")[name]
    return payload


class Run:
    """Feeds payloads through the interpreter, threading its state like the bridge."""

    def __init__(self) -> None:
        self.state: dict[str, object] = {}
        self.envelopes: list[dict[str, object]] = []

    def feed(self, *payloads: dict[str, Any]) -> list[dict[str, object]]:
        batches, self.state = run_interpreter(INTERPRETER.interpret, payloads, self.state)
        out: list[dict[str, object]] = [e for batch in batches for e in batch]
        self.envelopes += out
        return out


def events(envelopes: Iterable[dict[str, object]]) -> list[tuple[object, ...]]:
    return [(e["event"], e.get("turnId"), e.get("inputId")) for e in envelopes]


def by_event(payloads: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [p for p in payloads if p["hook_event_name"] == name]


def payload(name: str, turn: str = TURN_1, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "session_id": SESSION, "turn_id": turn, "cwd": CWD, "hook_event_name": name,
        "model": "gpt-6.2-sol", "permission_mode": "default", "transcript_path": None,
    }
    base.update(fields)
    return base


def pre(call: str, command: str, turn: str = TURN_1) -> dict[str, Any]:
    return payload("PreToolUse", turn, tool_name="Bash", tool_input={"command": command},
                   tool_use_id=call)


def permission(command: str, turn: str = TURN_1) -> dict[str, Any]:
    return payload("PermissionRequest", turn, tool_name="Bash",
                   tool_input={"command": command, "description": "why"})


def post(call: str, command: str, turn: str = TURN_1) -> dict[str, Any]:
    return payload("PostToolUse", turn, tool_name="Bash", tool_input={"command": command},
                   tool_response="ok\n", tool_use_id=call)


def started(run: Run, turn: str = TURN_1) -> None:
    run.feed(payload("UserPromptSubmit", turn, prompt="go"))


# -- the live capture ------------------------------------------------------------------------


def test_the_live_run_maps_to_the_lifecycle() -> None:
    run = Run()
    run.feed(*live())
    assert [
        (e["event"], e.get("scope"), e.get("turnId"), e.get("inputId"), e.get("cwd"),
         e.get("nativeEvent"))
        for e in run.envelopes
    ] == [
        ("session_started", "root", None, None, None, "SessionStart"),
        ("turn_started", "root", TURN_1, None, CWD, "UserPromptSubmit"),
        # two identical calls, one PermissionRequest each: one wait, one request
        ("input_requested", "root", TURN_1, "permission-1", None, "PermissionRequest"),
        # the declined call never gets a PostToolUse: the wait lasts until Stop
        ("turn_completed", "root", TURN_1, None, CWD, "Stop"),
        ("turn_started", "root", TURN_2, None, CWD, "UserPromptSubmit"),
        ("turn_interrupted", "root", TURN_2, None, CWD, "Interrupt"),
        ("session_ended", "root", None, None, CWD, "SessionEnd"),
    ]
    assert {e["sessionId"] for e in run.envelopes} == {SESSION}


def test_identical_parallel_calls_resolve_once_both_finish() -> None:
    payloads = live()
    first, second = (p["tool_use_id"] for p in by_event(payloads, "PreToolUse")[:2])
    run = Run()
    run.feed(*payloads[:6])  # start, prompt, two PreToolUse, two PermissionRequest
    assert events(run.envelopes)[-1] == ("input_requested", TURN_1, "permission-1")
    assert run.feed(post(first, "echo hi")) == []
    assert events(run.feed(post(second, "echo hi"))) == [
        ("input_resolved", TURN_1, "permission-1"),
    ]


def test_the_live_request_fingerprint_matches_its_calls() -> None:
    payloads = live()
    calls = {INTERPRETER.fingerprint(p["tool_name"], p["tool_input"])
             for p in by_event(payloads, "PreToolUse")[:2]}
    requests = {INTERPRETER.fingerprint(p["tool_name"], p["tool_input"])
                for p in by_event(payloads, "PermissionRequest")}
    assert calls == requests
    assert len(calls) == 1
    [fp] = calls
    assert len(fp) == 16 and int(fp, 16) >= 0


def test_an_approved_call_resolves_and_the_next_wait_gets_a_new_id() -> None:
    run = Run()
    started(run)
    run.feed(pre("a", "make"), permission("make"))
    assert events(run.feed(post("a", "make"))) == [("input_resolved", TURN_1, "permission-1")]
    run.feed(pre("b", "make test"))
    assert events(run.feed(permission("make test"))) == [
        ("input_requested", TURN_1, "permission-2"),
    ]
    assert events(run.feed(post("b", "make test"))) == [
        ("input_resolved", TURN_1, "permission-2"),
    ]


def test_one_request_for_several_waits_and_one_resolution_when_none_remain() -> None:
    run = Run()
    started(run)
    run.feed(pre("a", "one"), pre("b", "two"))
    assert events(run.feed(permission("one"), permission("two"))) == [
        ("input_requested", TURN_1, "permission-1"),
    ]
    assert run.feed(post("a", "one")) == []
    assert events(run.feed(post("b", "two"))) == [("input_resolved", TURN_1, "permission-1")]


def test_an_unrelated_call_finishing_does_not_resolve_a_wait() -> None:
    run = Run()
    started(run)
    run.feed(pre("a", "rm -rf build"), pre("b", "ls"), permission("rm -rf build"))
    assert run.feed(post("b", "ls")) == []
    assert events(run.feed(post("a", "rm -rf build"))) == [
        ("input_resolved", TURN_1, "permission-1"),
    ]


def test_a_request_matching_no_started_call_fails_closed_until_stop() -> None:
    run = Run()
    started(run)
    run.feed(pre("a", "ls"))
    assert events(run.feed(permission("curl example.org"))) == [
        ("input_requested", TURN_1, "permission-1"),
    ]
    assert run.feed(post("a", "ls")) == []
    assert events(run.feed(payload("Stop", last_assistant_message="x",
                                   stop_hook_active=False))) == [
        ("turn_completed", TURN_1, None),
    ]
    # The next turn starts clean.
    started(run, TURN_2)
    run.feed(pre("c", "ls", TURN_2), permission("ls", TURN_2))
    assert events(run.feed(post("c", "ls", TURN_2))) == [
        ("input_resolved", TURN_2, "permission-2"),
    ]


def test_a_declined_call_keeps_the_wait_until_interrupt() -> None:
    run = Run()
    started(run)
    run.feed(pre("a", "x"), pre("b", "x"), permission("x"), permission("x"), post("a", "x"))
    assert events(run.envelopes)[-1] == ("input_requested", TURN_1, "permission-1")
    assert events(run.feed(payload("Interrupt"))) == [("turn_interrupted", TURN_1, None)]
    # A late PostToolUse of the interrupted turn changes nothing.
    assert run.feed(post("b", "x")) == []


def test_overflow_at_seventeen_live_waits_resolves_only_at_a_boundary() -> None:
    run = Run()
    started(run)
    commands = [f"cmd {i}" for i in range(17)]
    for i, command in enumerate(commands):
        run.feed(pre(f"c{i}", command))
    requested = run.feed(*(permission(c) for c in commands))
    assert events(requested) == [("input_requested", TURN_1, "permission-1")]
    assert run.state.get("over") is True
    assert run.feed(*(post(f"c{i}", c) for i, c in enumerate(commands))) == []
    assert events(run.feed(payload("UserPromptSubmit", TURN_2, prompt="next"))) == [
        ("turn_started", TURN_2, None),
    ]
    assert "over" not in run.state


def test_sixteen_live_waits_are_not_overflow() -> None:
    run = Run()
    started(run)
    commands = [f"cmd {i}" for i in range(16)]
    for i, command in enumerate(commands):
        run.feed(pre(f"c{i}", command))
    run.feed(*(permission(c) for c in commands))
    assert "over" not in run.state
    assert len(run.state["waits"]) == 16  # type: ignore[arg-type]
    resolved = run.feed(*(post(f"c{i}", c) for i, c in enumerate(commands)))
    assert events(resolved) == [("input_resolved", TURN_1, "permission-1")]


def test_started_calls_are_trimmed_to_32_and_a_trimmed_call_fails_closed() -> None:
    run = Run()
    started(run)
    for i in range(40):
        run.feed(pre(f"c{i}", f"cmd {i}"))
    assert len(run.state["calls"]) == 32  # type: ignore[arg-type]
    # c0 was trimmed: its request binds to nothing and can only end at a boundary.
    assert events(run.feed(permission("cmd 0"))) == [("input_requested", TURN_1, "permission-1")]
    assert run.feed(post("c0", "cmd 0")) == []


def test_done_ids_are_trimmed_to_64() -> None:
    run = Run()
    started(run)
    for i in range(70):
        run.feed(pre(f"c{i}", f"cmd {i}"), post(f"c{i}", f"cmd {i}"))
    assert len(run.state["done"]) == 64  # type: ignore[arg-type]
    assert "calls" not in run.state


def test_a_repeated_hook_run_is_ignored() -> None:
    run = Run()
    started(run)
    run.feed(pre("a", "x"), post("a", "x"), pre("a", "x"), permission("x"))
    # "a" already finished, so the request matches no unfinished call.
    assert run.feed(post("a", "x")) == []


def test_the_state_holds_only_digests_and_ids() -> None:
    run = Run()
    run.feed(*live()[:9])
    text = json.dumps(run.state)
    for secret in ("echo", "command", "probe", "run it", "exec-", CWD, "Bash"):
        assert secret not in text
    for envelope in run.envelopes:
        assert set(envelope) <= {"event", "scope", "sessionId", "turnId", "inputId", "cwd",
                                 "nativeEvent"}


def test_fresh_state_mid_turn_adopts_the_turn_and_still_reports_the_wait() -> None:
    run = Run()
    assert events(run.feed(permission("x"))) == [("input_requested", TURN_1, "permission-1")]
    # Nothing was bound, so nothing but a boundary ends it.
    run.feed(pre("a", "x"))
    assert run.feed(post("a", "x")) == []


def test_a_request_of_another_turn_is_reported_without_touching_the_tracked_one() -> None:
    run = Run()
    started(run)
    run.feed(pre("a", "x"), permission("x"))
    assert events(run.feed(permission("y", TURN_2))) == [
        ("input_requested", TURN_2, "permission-2"),
    ]
    assert events(run.feed(post("a", "x"))) == [("input_resolved", TURN_1, "permission-1")]


def test_a_compaction_session_start_keeps_the_open_wait() -> None:
    run = Run()
    started(run)
    run.feed(pre("a", "x"), permission("x"))
    assert events(run.feed(built("SessionStart (compact)"))) == [
        ("session_started", None, None),
    ]
    assert events(run.feed(post("a", "x"))) == [("input_resolved", TURN_1, "permission-1")]


@pytest.mark.parametrize(
    "name",
    ["SubagentStart", "SubagentStop", "UserPromptSubmit (child)", "PreToolUse (child)",
     "PermissionRequest (child)", "PostToolUse (child)", "PreCompact"],
)
def test_child_and_unused_events_report_nothing_and_keep_state(name: str) -> None:
    run = Run()
    started(run)
    before = copy.deepcopy(run.state)
    assert run.feed(built(name)) == []
    assert run.state == before


def test_a_child_permission_does_not_disturb_the_root_wait() -> None:
    run = Run()
    started(run)
    run.feed(pre("a", "echo hi"), permission("echo hi"))
    run.feed(built("PreToolUse (child)"), built("PermissionRequest (child)"),
             built("PostToolUse (child)"))
    assert events(run.feed(post("a", "echo hi"))) == [
        ("input_resolved", TURN_1, "permission-1"),
    ]


def test_resume_reports_the_same_session() -> None:
    first = Run()
    first.feed(*live())
    for name in ("live-app-server-resume.json", "live-tui-resume.json"):
        payloads = fixture(name)
        assert payloads[0]["source"] == "resume"
        run = Run()
        run.feed(*payloads)
        assert [e["event"] for e in run.envelopes][:3] == [
            "session_started", "turn_started", "turn_completed",
        ]
        assert {e["sessionId"] for e in run.envelopes} == {SESSION}


def test_no_cwd_on_waits_and_an_unusable_cwd_is_dropped() -> None:
    run = Run()
    bad = run.feed(payload("UserPromptSubmit", prompt="x", cwd="relative/dir"))
    assert bad == [{"event": "turn_started", "scope": "root", "sessionId": SESSION,
                    "turnId": TURN_1, "nativeEvent": "UserPromptSubmit"}]
    long = run.feed(payload("Stop", cwd="/" + "d" * 1024))
    assert "cwd" not in long[0]
    run.feed(pre("a", "x"))
    assert all("cwd" not in e for e in run.feed(permission("x"), post("a", "x")))


def test_events_without_the_ids_they_need_report_nothing() -> None:
    run = Run()
    for name in ("UserPromptSubmit", "Stop", "Interrupt", "PermissionRequest"):
        assert run.feed({k: v for k, v in payload(name).items() if k != "turn_id"}) == []
    assert run.feed(payload("SessionStart", session_id="")) == []
    assert run.feed(payload("SessionStart", session_id="x" * 257)) == []
    assert run.feed(payload("SessionStart", session_id="bad\nid")) == []


def test_a_corrupt_state_is_treated_as_fresh() -> None:
    for state in ({"v": 1, "calls": "x"}, {"v": 1, "waits": {"zz": []}}, {"v": 2},
                  {"v": 1, "calls": [[1, 2]]}, {"v": 1, "n": -5}):
        envelopes, new = INTERPRETER.interpret(permission("x"), state)
        assert events(envelopes) == [("input_requested", TURN_1, "permission-1")]
        assert new["v"] == 1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
field_values = st.one_of(json_values, st.sampled_from([SESSION, TURN_1, TURN_2, "a", CWD]))
payloads = st.fixed_dictionaries(
    {"hook_event_name": st.sampled_from([*HOOK_EVENTS, "SubagentStop", "Other"]) | json_values},
    optional={
        key: field_values
        for key in ("session_id", "turn_id", "cwd", "tool_name", "tool_input", "tool_use_id",
                    "agent_id", "source", "reason")
    },
)
states = st.one_of(
    st.dictionaries(st.text(max_size=6), json_values, max_size=6),
    st.fixed_dictionaries({"v": st.just(1)}, optional={
        "n": json_values | st.integers(), "s": field_values, "t": field_values,
        "calls": json_values, "done": json_values, "waits": json_values, "req": field_values,
        "stuck": json_values, "over": json_values,
    }),
)


# -- preparing a launch ------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path) -> Path:
    directory = tmp_path / "codex-home"
    directory.mkdir()
    return directory


def context(home: Path, tmp_path: Path, *, argv: tuple[str, ...] = ("codex",),
            user_flags: tuple[str, ...] = (), command: str = "/run/clanker/a/hook",
            **env: str) -> AttachmentContext:
    private = tmp_path / "private"
    private.mkdir(exist_ok=True)
    return attachment_context(
        argv=argv + user_flags,
        env={"HOME": str(tmp_path), "CODEX_HOME": str(home),
             "CLANKER_ATTENTION_COMMAND": command, **env},
        cwd=str(tmp_path),
        private_dir=private,
        user_flags=user_flags,
    )


def attention(tmp_path: Path) -> CodexAttention:
    return CodexAttention(policy_file=tmp_path / "no-policy.toml")


def test_the_hooks_go_right_after_the_executable(home: Path, tmp_path: Path) -> None:
    session = "01a22b86-c7d0-79e0-b3c0-03c56f3ce14a"
    from clanker.launch.request import LaunchRequest, SessionTarget
    argv = CodexLaunch().build(LaunchRequest(
        cwd="/w", model="gpt-6.2-sol", operation="resume",  # type: ignore[arg-type]
        session=SessionTarget(native_id=session), user_flags=("--search",),
    )).argv
    plan = attention(tmp_path).prepare(context(home, tmp_path, argv=argv[:-1],
                                               user_flags=("--search",)))
    assert isinstance(plan, AttachmentPlan)
    assert plan.argv == ("codex", *hook_arguments(), "-m", "gpt-6.2-sol", "-C", "/w",
                         "resume", session, "--search")
    assert dict(plan.env) == {}


def test_the_definition_is_identical_for_every_launch(home: Path, tmp_path: Path) -> None:
    one = attention(tmp_path).prepare(context(home, tmp_path, command="/run/a/hook"))
    two = attention(tmp_path).prepare(context(home, tmp_path, command="/run/b/other"))
    assert one is not None and two is not None
    assert one.argv == two.argv == ("codex", *hook_arguments())
    assert not any("/run/" in word for word in one.argv)


def test_the_arguments_are_one_command_hook_per_event() -> None:
    import tomllib
    arguments = hook_arguments()
    assert arguments[0::2] == ("-c",) * len(HOOK_EVENTS)
    for event, assignment in zip(HOOK_EVENTS, arguments[1::2], strict=True):
        key, _, value = assignment.partition("=")
        assert key == f"hooks.{event}"
        assert tomllib.loads(f"v = {value}")["v"] == [{"hooks": [{
            "type": "command", "command": HOOK_COMMAND, "timeout": HOOK_TIMEOUT_SECONDS,
        }]}]
    assert HOOK_COMMAND == '"$CLANKER_ATTENTION_COMMAND"'
    assert "--dangerously-bypass-hook-trust" not in arguments


def test_hook_review_bookkeeping_is_not_a_conflict(home: Path, tmp_path: Path) -> None:
    (home / "config.toml").write_text(
        'model = "gpt-6.2-sol"\n[profiles.fast]\nmodel = "x"\n[features]\nhooks = true\n'
        '[hooks.state."/<session-flags>/config.toml:stop:0:0"]\n'
        'trusted_hash = "sha256:8ae21fd53d57187a5595d8c3b75a067728561bb680f945e1a8aae8e4c2bf6813"\n'
    )
    assert attention(tmp_path).prepare(context(home, tmp_path)) is not None


# -- the one-time review: Codex's own record of it ---------------------------------------------


def trust_entries(*, off: Iterable[str] = (), missing: Iterable[str] = (),
                  **hashes: str) -> str:
    """``[hooks.state]`` as Codex writes it after "Trust all and continue" (and ``enabled =
    false`` for what the person turned off in /hooks); ``hashes`` overrides an event's."""
    lines = []
    for event in HOOK_EVENTS:
        if event in missing:
            continue
        lines += [f'[hooks.state."{hook_key(event)}"]',
                  f'trusted_hash = "{hashes.get(event, TRUSTED_HASHES[event])}"']
        if event in off:
            lines.append("enabled = false")
    return "\n".join(lines) + "\n"


def notice(home: Path, tmp_path: Path, config: str | None,
           user_flags: tuple[str, ...] = ()) -> str | None:
    if config is not None:
        (home / "config.toml").write_text(config)
    plan = attention(tmp_path).prepare(context(home, tmp_path, user_flags=user_flags))
    assert isinstance(plan, AttachmentPlan)
    assert plan.argv == ("codex", *hook_arguments(), *user_flags)
    return plan.notice


def test_the_hashes_are_codexs_for_these_definitions() -> None:
    # hooks/list of `codex <hook_arguments()> app-server` (0.171.0): each key's currentHash.
    recorded = fixture("hooks-list.json")["result"]["data"][0]["hooks"]
    assert {h["key"]: h["currentHash"] for h in recorded} == {
        hook_key(event): TRUSTED_HASHES[event] for event in HOOK_EVENTS}
    assert sorted(TRUSTED_HASHES) == sorted(HOOK_EVENTS)
    # The hashes are of exactly these definitions: change one, capture them again.
    handler = '[{hooks=[{type="command",command="\\"$CLANKER_ATTENTION_COMMAND\\"",timeout=3}]}]'
    assert hook_arguments() == tuple(
        word for event in HOOK_EVENTS for word in ("-c", f"hooks.{event}={handler}"))


def test_before_any_review_the_launch_says_how_to_trust_the_hooks(
    home: Path, tmp_path: Path
) -> None:
    assert notice(home, tmp_path, None) == REVIEW_NOTICE
    assert notice(home, tmp_path, 'model = "gpt-6.2-sol"\n') == REVIEW_NOTICE
    assert REVIEW_NOTICE == (
        "Codex runs clanker's hooks only once you trust them: choose \"Trust all and "
        "continue\" when Codex asks (or trust them in /hooks), or this agent shows as unknown")
    assert "\n" not in REVIEW_NOTICE and len(REVIEW_NOTICE) <= 300


def test_after_trust_all_there_is_nothing_to_say(home: Path, tmp_path: Path) -> None:
    # What Codex 0.171.0's "Trust all and continue" wrote into a throwaway home (live).
    captured = (FIXTURES / "config-after-trust-all.toml").read_text()
    assert notice(home, tmp_path, captured) is None
    assert notice(home, tmp_path, trust_entries()) is None


def test_one_trusted_hook_is_not_a_review(home: Path, tmp_path: Path) -> None:
    # Live: PreToolUse trusted in /hooks, then turned off; the other seven never reviewed.
    captured = (FIXTURES / "config-after-one-trusted-then-off.toml").read_text()
    assert notice(home, tmp_path, captured) == REVIEW_NOTICE


@pytest.mark.parametrize("event", HOOK_EVENTS)
def test_a_hook_missing_or_with_another_hash_needs_a_review(
    home: Path, tmp_path: Path, event: str
) -> None:
    # Another hash: Codex shows it as "changed" and does not run it.
    changed = trust_entries(**{event: "sha256:" + "0" * 64})
    assert notice(home, tmp_path, changed) == REVIEW_NOTICE
    assert notice(home, tmp_path, trust_entries(missing=[event])) == REVIEW_NOTICE


def test_a_hook_turned_off_in_hooks_is_named(home: Path, tmp_path: Path) -> None:
    assert notice(home, tmp_path, trust_entries(off=["Stop"])) == (
        "clanker's Stop hook is turned off in Codex's /hooks: turn it back on there, or "
        "this agent's state can be wrong")
    assert notice(home, tmp_path, trust_entries(off=["PreToolUse", "PostToolUse"])) == (
        "clanker's PreToolUse, PostToolUse hooks are turned off in Codex's /hooks: turn them "
        "back on there, or this agent's state can be wrong")


@pytest.mark.parametrize(
    "state",
    [
        '[hooks]\nstate = "nonsense"\n',
        '[hooks]\nstate = []\n',
        '[hooks.state]\n"/<session-flags>/config.toml:stop:0:0" = "sha256:x"\n',
        '[hooks.state."/<session-flags>/config.toml:stop:0:0"]\ntrusted_hash = 7\n',
        '[hooks.state."/<session-flags>/config.toml:stop:0:0"]\nenabled = true\n',
    ],
)
def test_a_record_that_is_not_codexs_shape_counts_as_not_reviewed(
    home: Path, tmp_path: Path, state: str
) -> None:
    assert notice(home, tmp_path, state) == REVIEW_NOTICE


def test_no_configuration_at_all_is_not_reviewed() -> None:
    assert review_notice(None) == REVIEW_NOTICE
    assert review_notice({"hooks": "x"}) == REVIEW_NOTICE


def test_an_entry_that_is_not_true_for_enabled_is_turned_off() -> None:
    config = {"hooks": {"state": {hook_key(e): {"trusted_hash": TRUSTED_HASHES[e],
                                                "enabled": "no" if e == "Stop" else True}
                                  for e in HOOK_EVENTS}}}
    assert (review_notice(config) or "").startswith("clanker's Stop hook is turned off")


def test_the_users_own_bypass_needs_no_review(home: Path, tmp_path: Path) -> None:
    bypass = ("--dangerously-bypass-hook-trust",)
    assert notice(home, tmp_path, None, user_flags=bypass) is None
    # After `--` it is a prompt word, as Codex reads it.
    assert notice(home, tmp_path, None, user_flags=("--", *bypass)) == REVIEW_NOTICE


def test_the_record_is_only_read(home: Path, tmp_path: Path) -> None:
    config = home / "config.toml"
    config.write_text('model = "x"\n')
    before = (config.read_bytes(), config.stat().st_mtime_ns)
    assert notice(home, tmp_path, None) == REVIEW_NOTICE
    assert (config.read_bytes(), config.stat().st_mtime_ns) == before
    assert sorted(p.name for p in home.iterdir()) == ["config.toml"]


@pytest.mark.parametrize(
    "config",
    [
        '[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = "command"\ncommand = "echo"\n',
        '[[hooks.PreCompact]]\n[[hooks.PreCompact.hooks]]\ntype = "command"\ncommand = "x"\n',
        'hooks = "nonsense"\n',
        'profile = "work"\n',
        '[features]\nhooks = false\n',
        'model = [unclosed\n',
        'model = "x"\nmodel = "y"\n',
    ],
)
def test_user_config_conflicts(home: Path, tmp_path: Path, config: str) -> None:
    (home / "config.toml").write_text(config)
    assert isinstance(attention(tmp_path).prepare(context(home, tmp_path)), Declined)


def test_an_empty_hooks_table_defines_nothing(home: Path, tmp_path: Path) -> None:
    (home / "config.toml").write_text("[hooks]\n")
    assert attention(tmp_path).prepare(context(home, tmp_path)) is not None


def test_unreadable_config_is_a_conflict(home: Path, tmp_path: Path) -> None:
    config = home / "config.toml"
    config.write_bytes(b'model = "\xff"\n')
    assert isinstance(attention(tmp_path).prepare(context(home, tmp_path)), Declined)
    config.write_text("# " + "x" * (1 << 20) + "\n")
    assert isinstance(attention(tmp_path).prepare(context(home, tmp_path)), Declined)
    config.unlink()
    config.mkdir()
    assert isinstance(attention(tmp_path).prepare(context(home, tmp_path)), Declined)


def test_a_hooks_json_is_a_conflict(home: Path, tmp_path: Path) -> None:
    (home / "hooks.json").write_text('{"hooks": {}}')
    assert isinstance(attention(tmp_path).prepare(context(home, tmp_path)), Declined)


def test_managed_hooks_only_is_a_conflict(home: Path, tmp_path: Path) -> None:
    policy = tmp_path / "requirements.toml"
    policy.write_text("allow_managed_hooks_only = true\n")
    assert isinstance(CodexAttention(policy_file=policy).prepare(context(home, tmp_path)), Declined)
    policy.write_text("allow_managed_hooks_only = false\n")
    assert CodexAttention(policy_file=policy).prepare(context(home, tmp_path)) is not None


@pytest.mark.parametrize(
    "flags",
    [
        ("-p", "work"), ("-pwork",), ("--profile", "work"), ("--profile=work",),
        ("-c", "hooks.Stop=[]"), ("-chooks.Stop=[]",), ("--config", "hooks={}"),
        ("--config=hooks.state.x.enabled=false",), ("-c", "profile=work"),
        ("-c", ' profile = "work"'), ("-c", '"hooks".Stop=[]'),
        ("-c", "features.hooks=false"), ("--disable", "hooks"), ("--disable=hooks",),
        ("--search", "-c", "model=x", "-p", "w"),
    ],
)
def test_flags_that_own_hooks_or_profiles_conflict(
    home: Path, tmp_path: Path, flags: tuple[str, ...]
) -> None:
    plan = attention(tmp_path).prepare(context(home, tmp_path, user_flags=flags))
    assert isinstance(plan, Declined)
    # The reason names the option the person passed, so they know what to drop.
    assert any(option in plan.reason for option in ("--profile", "-c ", "--disable"))


@pytest.mark.parametrize(
    "flags",
    [
        ("-c", "model=x"), ("--enable", "hooks"), ("--search",), ("-C", "/w"),
        ("--", "-p", "a prompt"), ("--dangerously-bypass-hook-trust",),
    ],
)
def test_other_flags_do_not_conflict(home: Path, tmp_path: Path, flags: tuple[str, ...]) -> None:
    assert attention(tmp_path).prepare(context(home, tmp_path, user_flags=flags)) is not None


def test_codex_home_defaults_to_dot_codex_and_must_be_known(tmp_path: Path) -> None:
    default = tmp_path / ".codex"
    default.mkdir()
    (default / "hooks.json").write_text("{}")
    ctx = context(default, tmp_path)
    env = {k: v for k, v in ctx.env.items() if k != "CODEX_HOME"}
    ctx = attachment_context(argv=ctx.argv, env=env, cwd=ctx.cwd, private_dir=ctx.private_dir)
    assert isinstance(attention(tmp_path).prepare(ctx), Declined)  # ~/.codex/hooks.json was found
    relative = context(default, tmp_path, CODEX_HOME="relative/home")
    assert isinstance(attention(tmp_path).prepare(relative), Declined)


def test_a_missing_hook_command_is_an_operational_failure(home: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="hook command"):
        attention(tmp_path).prepare(context(home, tmp_path, command=""))


# -- the real CLI, when it is installed ---------------------------------------------------------


def _hooks_list(codex: str, home: Path, cwd: Path, arguments: tuple[str, ...]) -> Any:
    """``codex <arguments> app-server``: initialize, then ``hooks/list`` for ``cwd``."""
    requests = [
        {"id": 1, "method": "initialize", "params": {
            "clientInfo": {"name": "clanker-test", "title": "clanker-test", "version": "0"},
            "capabilities": None}},
        {"method": "initialized"},
        {"id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}},
    ]
    reply = None
    with subprocess.Popen(
        [codex, *arguments, "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, cwd=cwd, text=True,
        env={**os.environ, "CODEX_HOME": str(home)},
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        try:
            for request in requests[:2]:
                process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            for line in process.stdout:
                message = json.loads(line)
                if message.get("id") == 1:
                    process.stdin.write(json.dumps(requests[2]) + "\n")
                    process.stdin.flush()
                elif message.get("id") == 2:
                    reply = message
                    break
            process.stdin.close()
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    return reply


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("codex") is None, reason="codex is not installed")
def test_real_codex_parses_the_hook_arguments(tmp_path: Path) -> None:
    codex = shutil.which("codex")
    assert codex is not None
    home = tmp_path / "codex-home"
    home.mkdir()
    reply = _hooks_list(codex, home, tmp_path, hook_arguments())
    assert reply is not None and "result" in reply
    [entry] = reply["result"]["data"]
    assert entry["warnings"] == [] and entry["errors"] == []
    hooks = entry["hooks"]
    names = {event: event[0].lower() + event[1:] for event in HOOK_EVENTS}
    assert sorted(h["eventName"] for h in hooks) == sorted(names.values())
    for hook in hooks:
        assert hook["source"] == "sessionFlags"
        assert hook["handlerType"] == "command"
        assert hook["command"] == HOOK_COMMAND
        assert hook["timeoutSec"] == HOOK_TIMEOUT_SECONDS
        assert hook["matcher"] is None
        assert hook["key"].startswith("/<session-flags>/config.toml:")
        assert hook["trustStatus"] == "untrusted"
    version = subprocess.run([codex, "--version"], capture_output=True, text=True,
                             timeout=60, check=False).stdout
    if version.strip() == "codex-cli 0.171.0":
        # The definition hashes as in the capture (another home, another day): the
        # trust a review records keeps matching, so one review persists.
        recorded = fixture("hooks-list.json")["result"]["data"][0]["hooks"]
        assert {h["eventName"]: h["currentHash"] for h in hooks} == {
            h["eventName"]: h["currentHash"] for h in recorded
        }


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("codex") is None, reason="codex is not installed")
def test_real_codex_agrees_with_the_review_notice(tmp_path: Path) -> None:
    """Codex's own verdict (``hooks/list`` ``trustStatus``) and the notice agree, for the
    record a review writes and for one hook turned off."""
    codex = shutil.which("codex")
    assert codex is not None
    home = tmp_path / "codex-home"
    home.mkdir()
    cases: list[tuple[str | None, set[tuple[str, bool]], str | None]] = [
        (None, {("untrusted", True)}, REVIEW_NOTICE),
        (trust_entries(), {("trusted", True)}, None),
        (trust_entries(off=["Stop"]), {("trusted", True), ("trusted", False)},
         "clanker's Stop hook is turned off"),
        (trust_entries(**{"Stop": "sha256:" + "0" * 64}),
         {("trusted", True), ("modified", True)}, REVIEW_NOTICE),
    ]
    for config, verdicts, said in cases:
        if config is not None:
            (home / "config.toml").write_text(config)
        reply = _hooks_list(codex, home, tmp_path, hook_arguments())
        assert reply is not None and "result" in reply
        hooks = reply["result"]["data"][0]["hooks"]
        assert {(h["trustStatus"], h["enabled"]) for h in hooks} == verdicts
        plan = CodexAttention(policy_file=tmp_path / "no-policy.toml").prepare(
            context(home, tmp_path))
        assert isinstance(plan, AttachmentPlan)
        if said is None:
            assert plan.notice is None
        else:
            assert plan.notice is not None and plan.notice.startswith(said)
