"""Claude Code attention: the hook interpreter against payloads captured from (or built
from the schemas of) Claude Code 2.1.197, and the launch-owned ``--settings`` file
(tests/fixtures/claude/attention)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clanker.attention.capability import AttachmentPlan, Declined
from clanker.testing.attending import run_interpreter
from clanker.testing.attention import (
    Envelopes,
    fixture_payload,
    interpret_function,
    load_interpreter,
)
from clanker.testing.doubles import attachment_context
from clanker_claude.attention import (
    HOOK_EVENTS,
    HOOK_TIMEOUT_SECONDS,
    INTERPRETER,
    MAX_SETTINGS_BYTES,
    SETTINGS_FILE,
    ClaudeAttention,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "claude" / "attention"
SESSION = "2bd84788-1866-4763-ad83-f2741628502f"
PROMPT = "5f0c9a3e-7d21-4b8e-9c46-0e1f2a3b4c5d"
NEXT_PROMPT = "0c1d2e3f-4a5b-4c6d-8e7f-901a2b3c4d5e"
CWD = "/home/u/src/repo"



INTERPRETER_MODULE = load_interpreter(INTERPRETER)
interpret = interpret_function(INTERPRETER_MODULE)


def payload(name: str, **changes: object) -> dict[str, Any]:
    return fixture_payload(FIXTURES, name, **changes)


def run(items: list[str | dict[str, Any]], state: dict[str, object] | None = None
        ) -> tuple[list[Envelopes], dict[str, object]]:
    """Feed payloads (or fixture names) in order, threading the state as the bridge does."""
    return run_interpreter(interpret, [payload(i) if isinstance(i, str) else i for i in items],
                           state, max_state=1024)


def events(envelopes: Envelopes) -> list[tuple[object, ...]]:
    return [(e["event"], e.get("turnId"), e.get("inputId")) for e in envelopes]


# -- the interpreter: one mapping per native event ---------------------------------------


def test_hook_stdout_is_nothing() -> None:
    # A UserPromptSubmit/SessionStart hook's stdout would reach the model's context;
    # a PermissionRequest hook decides only through JSON, so empty stdout is neutral.
    assert INTERPRETER_MODULE.HOOK_STDOUT == ""


@pytest.mark.parametrize("name", ["session-start.startup", "session-start.resume"])
def test_session_start_binds_identity_and_reports_the_location(name: str) -> None:
    envelopes, state = interpret(payload(name), {})
    assert envelopes == [
        {"event": "session_started", "scope": "root", "sessionId": SESSION,
         "nativeEvent": "SessionStart"},
        {"event": "location_changed", "scope": "root", "sessionId": SESSION, "cwd": CWD,
         "nativeEvent": "SessionStart"},
    ]
    assert state == {}


def test_user_prompt_submit_starts_the_turn_named_by_prompt_id() -> None:
    envelopes, state = interpret(payload("user-prompt-submit"), {})
    assert envelopes == [{"event": "turn_started", "scope": "root", "sessionId": SESSION,
                          "turnId": PROMPT, "cwd": CWD, "nativeEvent": "UserPromptSubmit"}]
    assert state == {"turn": PROMPT, "waiting": False}


def test_stop_completes_the_turn_and_closes_its_wait() -> None:
    envelopes, state = interpret(payload("stop"), {"turn": PROMPT, "waiting": True})
    assert envelopes == [{"event": "turn_completed", "scope": "root", "sessionId": SESSION,
                          "turnId": PROMPT, "cwd": CWD, "nativeEvent": "Stop"}]
    assert state == {"turn": PROMPT, "waiting": False}


@pytest.mark.parametrize("name", ["stop-failure.server-error",
                                  "stop-failure.authentication-failed"])
def test_stop_failure_is_a_failed_turn_without_the_error(name: str) -> None:
    envelopes, _ = interpret(payload(name), {"turn": PROMPT, "waiting": True})
    assert envelopes == [{"event": "turn_failed", "scope": "root", "sessionId": SESSION,
                          "turnId": PROMPT, "cwd": CWD, "nativeEvent": "StopFailure"}]
    text = json.dumps(envelopes)
    assert "API Error" not in text and "login" not in text and "error" not in text


def test_session_end_ends_the_session_and_forgets_the_turn() -> None:
    envelopes, state = interpret(payload("session-end"), {"turn": PROMPT, "waiting": True})
    assert envelopes == [{"event": "session_ended", "scope": "root", "sessionId": SESSION,
                          "cwd": CWD, "nativeEvent": "SessionEnd"}]
    assert state == {}
    # No prompt yet (the session ended before any input): still a session boundary.
    envelopes, _ = interpret(payload("session-end", prompt_id=None), {})
    assert [e["event"] for e in envelopes] == ["session_ended"]


def test_cwd_changed_reports_the_new_directory() -> None:
    envelopes, state = interpret(payload("cwd-changed"), {"turn": PROMPT, "waiting": True})
    assert envelopes == [{"event": "location_changed", "scope": "root", "sessionId": SESSION,
                          "cwd": "/home/u/src/repo/docs", "nativeEvent": "CwdChanged"}]
    assert state == {"turn": PROMPT, "waiting": True}


def test_unsubscribed_and_unknown_events_report_nothing() -> None:
    for event in ("Notification", "PostToolUse", "SubagentStop", "PreToolUse", "Nope"):
        state = {"turn": PROMPT, "waiting": True}
        assert interpret(payload("stop", hook_event_name=event), dict(state)) == ([], state)


# -- the permission lifecycle -------------------------------------------------------------


def test_one_wait_per_prompt_resolved_by_its_batch() -> None:
    out, state = run([
        "user-prompt-submit",
        "permission-request",
        "permission-request",  # a second dialog in the same batch: still one wait
        "post-tool-batch",
        "post-tool-batch",  # nothing left to resolve
        "permission-request",  # the next batch asks again: a new wait
        "post-tool-batch.denied",  # a denied call resolves with its batch
        "stop",
    ])
    assert [events(e) for e in out] == [
        [("turn_started", PROMPT, None)],
        [("input_requested", PROMPT, "permission")],
        [],
        [("input_resolved", PROMPT, "permission")],
        [],
        [("input_requested", PROMPT, "permission")],
        [("input_resolved", PROMPT, "permission")],
        [("turn_completed", PROMPT, None)],
    ]
    assert state == {"turn": PROMPT, "waiting": False}


def test_a_batch_without_a_wait_resolves_nothing() -> None:
    out, _ = run(["user-prompt-submit", "post-tool-batch", "stop"])
    assert [events(e) for e in out][1] == []


def test_a_batch_of_another_prompt_does_not_resolve_the_wait() -> None:
    batch = payload("post-tool-batch", prompt_id=NEXT_PROMPT)
    out, state = run(["user-prompt-submit", "permission-request", batch])
    assert out[2] == []
    assert state == {"turn": PROMPT, "waiting": True}


def test_a_new_prompt_replaces_an_open_wait() -> None:
    prompt = payload("user-prompt-submit", prompt_id=NEXT_PROMPT)
    out, state = run(["user-prompt-submit", "permission-request", prompt,
                      "post-tool-batch", payload("permission-request", prompt_id=NEXT_PROMPT)])
    assert out[3] == []  # the old prompt's batch: its wait ended with its turn
    assert events(out[4]) == [("input_requested", NEXT_PROMPT, "permission")]
    assert state == {"turn": NEXT_PROMPT, "waiting": True}


def test_a_wait_is_still_reported_on_fresh_or_poisoned_state() -> None:
    envelopes, state = interpret(payload("permission-request"), {})
    assert events(envelopes) == [("input_requested", PROMPT, "permission")]
    assert state == {"turn": PROMPT, "waiting": True}
    # ...but with no state nothing is resolved (fail closed until a turn boundary).
    assert interpret(payload("post-tool-batch"), {}) == ([], {})


@pytest.mark.parametrize("name", ["permission-request.subagent", "post-tool-batch.subagent"])
def test_subagent_events_are_ignored(name: str) -> None:
    out, state = run(["user-prompt-submit", "permission-request", name])
    assert out[2] == []
    assert state == {"turn": PROMPT, "waiting": True}  # the root wait is untouched


def test_any_agent_id_makes_an_event_a_subagent_event() -> None:
    for agent_id in ("a1", "", 7, {}, []):
        for name in ("user-prompt-submit", "stop", "session-end", "cwd-changed",
                     "session-start.startup", "stop-failure.server-error"):
            assert interpret(payload(name, agent_id=agent_id), {}) == ([], {})
    # agent_type alone is the main thread of an --agent session.
    envelopes, _ = interpret(payload("user-prompt-submit", agent_type="reviewer"), {})
    assert [e["scope"] for e in envelopes] == ["root"]


@pytest.mark.parametrize("name", ["user-prompt-submit", "permission-request", "post-tool-batch",
                                  "stop", "stop-failure.server-error"])
@pytest.mark.parametrize("prompt_id", [None, "", 5, "x" * 257, "a\nb"])
def test_turn_events_without_a_usable_prompt_id_report_nothing(name: str,
                                                                prompt_id: object) -> None:
    state: dict[str, object] = {"turn": PROMPT, "waiting": True}
    changes = {"prompt_id": prompt_id} if prompt_id is not None else {"prompt_id": None}
    assert interpret(payload(name, **changes), dict(state)) == ([], state)


def test_an_unusable_cwd_is_left_out_not_the_event() -> None:
    for cwd in ("relative/dir", "/tab\there", "/" + "x" * 1024, 5, None):
        envelopes, _ = interpret(payload("user-prompt-submit", cwd=cwd), {})
        assert [e["event"] for e in envelopes] == ["turn_started"]
        assert "cwd" not in envelopes[0]
    assert interpret(payload("cwd-changed", new_cwd="docs"), {}) == ([], {})


# No payload content reaches envelopes or state: the contract (test_contract.py, with
# PRIVATE_TEXTS below).
PRIVATE_TEXTS = ("rm -rf", "README", "secret file text", "Remove the build", "transcript",
                 "Removed the", "API Error", "toolu_", 'hi"')
RUN = ["session-start.startup", "user-prompt-submit", "permission-request", "post-tool-batch",
       "permission-request", "post-tool-batch.denied", "cwd-changed", "stop",
       "stop-failure.server-error", "session-end"]


def test_the_state_holds_only_the_turn_and_the_wait() -> None:
    state: dict[str, object] = {}
    for name in RUN:
        _, state = interpret(payload(name), state)
        assert set(state) <= {"turn", "waiting"}
        assert all(isinstance(v, str | bool) for v in state.values())


# -- malformed input never raises ---------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
field_names = st.sampled_from([
    "hook_event_name", "session_id", "prompt_id", "agent_id", "cwd", "new_cwd", "tool_name",
    "tool_input", "tool_calls",
])
event_names = st.sampled_from([*HOOK_EVENTS, "SubagentStop", "PostToolUse", ""])
near_payloads = st.fixed_dictionaries(
    {"hook_event_name": event_names,
     "session_id": st.sampled_from([SESSION, "", "x" * 300]) | json_values},
    optional={"prompt_id": st.sampled_from([PROMPT, NEXT_PROMPT]) | json_values,
              "cwd": st.sampled_from([CWD, "rel"]) | json_values,
              "new_cwd": json_values, "agent_id": json_values},
) | st.dictionaries(field_names, json_values)
states = st.fixed_dictionaries(
    {}, optional={"turn": st.sampled_from([PROMPT]) | json_values, "waiting": json_values},
) | json_values


@settings(max_examples=200, deadline=None)
@given(sequence=st.lists(st.sampled_from([
    "user-prompt-submit", "permission-request", "post-tool-batch", "stop",
    "stop-failure.server-error", "session-end", "permission-request.subagent",
    "post-tool-batch.subagent", "cwd-changed", "session-start.startup",
]), max_size=20), next_prompt=st.booleans())
def test_every_resolution_follows_an_open_request_of_its_turn(sequence: list[str],
                                                               next_prompt: bool) -> None:
    state: dict[str, object] = {}
    open_turn: str | None = None
    for name in sequence:
        item = payload(name)
        if next_prompt and "prompt_id" in item and name == "user-prompt-submit":
            item["prompt_id"] = NEXT_PROMPT
        envelopes, state = interpret(item, state)
        for envelope in envelopes:
            if envelope["event"] == "input_requested":
                assert open_turn != envelope["turnId"]
                open_turn = cast(str, envelope["turnId"])
            elif envelope["event"] == "input_resolved":
                assert open_turn == envelope["turnId"]
                open_turn = None
            elif envelope["event"] in {"turn_started", "turn_completed", "turn_failed",
                                       "session_ended"}:
                open_turn = None


# -- prepare(): the launch-owned settings file --------------------------------------------


@pytest.fixture
def launch(tmp_path: Path) -> dict[str, Any]:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    cwd = tmp_path / "work dir"
    cwd.mkdir()
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    policy = tmp_path / "policy"
    return {"home": home, "cwd": cwd, "private": private, "policy": policy,
            "command": str(private / "hook with 'quote'")}


def prepare(launch: dict[str, Any], *, flags: tuple[str, ...] = (),
            env: dict[str, str] | None = None,
            argv: tuple[str, ...] = ("claude", "--model", "sonnet")) -> AttachmentPlan | None:
    environ = {"HOME": str(launch["home"]), "CLAUDE_CONFIG_DIR": str(launch["home"] / ".claude"),
               "CLANKER_ATTENTION_COMMAND": launch["command"], **(env or {})}
    (launch["private"] / SETTINGS_FILE).unlink(missing_ok=True)  # one launch per call
    context = attachment_context(argv=(*argv, *flags), env=environ, cwd=str(launch["cwd"]),
                               private_dir=launch["private"], user_flags=flags)
    return ClaudeAttention(policy_dir=launch["policy"]).prepare(context)


def test_prepare_writes_only_clankers_hooks_and_adds_settings_first(
        launch: dict[str, Any]) -> None:
    flags = ("--add-dir", "/a", "/b", "--permission-mode", "plan")
    plan = prepare(launch, flags=flags)
    assert isinstance(plan, AttachmentPlan)
    path = launch["private"] / SETTINGS_FILE
    assert plan.argv == ("claude", "--settings", str(path), "--model", "sonnet", *flags)
    assert dict(plan.env) == {}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    written = json.loads(path.read_text())
    assert list(written) == ["hooks"]
    assert set(written["hooks"]) == {
        "SessionStart", "UserPromptSubmit", "PermissionRequest", "PostToolBatch", "Stop",
        "StopFailure", "SessionEnd", "CwdChanged",
    }
    quoted = "'" + launch["command"].replace("'", "'\"'\"'") + "'"
    for matchers in written["hooks"].values():
        assert matchers == [{"hooks": [{"type": "command", "command": quoted,
                                        "timeout": HOOK_TIMEOUT_SECONDS}]}]
    assert HOOK_TIMEOUT_SECONDS == 3


def test_prepare_keeps_the_users_settings_untouched(launch: dict[str, Any]) -> None:
    user = launch["home"] / ".claude" / "settings.json"
    user.write_text('{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}}')
    before = user.read_bytes(), user.stat().st_mtime_ns
    assert prepare(launch) is not None
    assert (user.read_bytes(), user.stat().st_mtime_ns) == before


@pytest.mark.parametrize("flags", [
    ("--bare",), ("--safe-mode",), ("--settings", "/mine.json"), ("--settings={}",),
    ("--add-dir", "/a", "--settings", '{"hooks": {}}'), ("-p", "hi", "--bare"),
])
def test_flags_that_own_the_settings_decline(launch: dict[str, Any],
                                             flags: tuple[str, ...]) -> None:
    plan = prepare(launch, flags=flags)
    assert isinstance(plan, Declined)
    # It names the option that caused it, so the person knows what to drop.
    named = [w.partition("=")[0] for w in flags if w.startswith("--") and w != "--add-dir"]
    assert any(option in plan.reason for option in named)
    assert not (launch["private"] / SETTINGS_FILE).exists()


def test_flag_words_after_double_dash_are_prompt_text(launch: dict[str, Any]) -> None:
    assert isinstance(prepare(launch, flags=("--", "--bare", "--settings")), AttachmentPlan)


@pytest.mark.parametrize("variable", ["CLAUDE_CODE_SIMPLE", "CLAUDE_CODE_SAFE_MODE"])
@pytest.mark.parametrize(("value", "declined"), [
    ("1", True), ("true", True), (" Yes ", True), ("on", True), ("0", False), ("", False),
    ("false", False),
])
def test_variables_that_skip_hooks_decline(launch: dict[str, Any], variable: str, value: str,
                                           declined: bool) -> None:
    assert isinstance(prepare(launch, env={variable: value}), Declined) is declined


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize("where", ["user", "project", "local"])
def test_disable_all_hooks_in_a_loaded_source_declines(launch: dict[str, Any],
                                                       where: str) -> None:
    path = {
        "user": launch["home"] / ".claude" / "settings.json",
        "project": launch["cwd"] / ".claude" / "settings.json",
        "local": launch["cwd"] / ".claude" / "settings.local.json",
    }[where]
    _write(path, '{"disableAllHooks": true}')
    assert isinstance(prepare(launch), Declined)
    # A source the user leaves out with --setting-sources does not count.
    others = ",".join(s for s in ("user", "project", "local") if s != where)
    assert prepare(launch, flags=("--setting-sources", others)) is not None
    assert prepare(launch, flags=(f"--setting-sources={others}",)) is not None
    assert prepare(launch, flags=("--setting-sources", "")) is not None
    assert isinstance(prepare(launch, flags=("--setting-sources", f"{others},{where}")), Declined)
    _write(path, '{"disableAllHooks": false, "hooks": {}}')
    assert prepare(launch) is not None


@pytest.mark.parametrize("text", [
    "{not json", "[]", '"disableAllHooks"', '{"disableAllHooks": "true"}',
    '{"disableAllHooks": null}', "\ufeff{", "",
])
def test_unreadable_user_settings_decline(launch: dict[str, Any], text: str) -> None:
    _write(launch["home"] / ".claude" / "settings.json", text)
    assert isinstance(prepare(launch), Declined)


def test_oversized_or_odd_settings_files_decline(launch: dict[str, Any]) -> None:
    settings_path = launch["cwd"] / ".claude" / "settings.json"
    _write(settings_path, "{" + " " * MAX_SETTINGS_BYTES + "}")
    assert isinstance(prepare(launch), Declined)
    settings_path.unlink()
    settings_path.mkdir()
    assert isinstance(prepare(launch), Declined)
    settings_path.rmdir()
    os.mkfifo(settings_path)  # never blocks: opened without waiting for a writer
    assert isinstance(prepare(launch), Declined)


def test_a_relative_config_dir_is_the_launch_directorys(launch: dict[str, Any]) -> None:
    _write(launch["cwd"] / "cfg" / "settings.json", '{"disableAllHooks": true}')
    assert isinstance(prepare(launch, env={"CLAUDE_CONFIG_DIR": "cfg"}), Declined)
    assert prepare(launch, env={"CLAUDE_CONFIG_DIR": "elsewhere"}) is not None


def test_without_config_dir_the_home_directory_is_read(launch: dict[str, Any]) -> None:
    _write(launch["home"] / ".claude" / "settings.json", '{"disableAllHooks": true}')
    context = attachment_context(
        argv=("claude",), env={"HOME": str(launch["home"]),
                               "CLANKER_ATTENTION_COMMAND": launch["command"]},
        cwd=str(launch["cwd"]), private_dir=launch["private"])
    assert isinstance(ClaudeAttention(policy_dir=launch["policy"]).prepare(context), Declined)


@pytest.mark.parametrize("policy", [
    {"disableAllHooks": True}, {"allowManagedHooksOnly": True},
    {"strictPluginOnlyCustomization": True}, {"strictPluginOnlyCustomization": ["hooks"]},
])
@pytest.mark.parametrize("drop_in", [False, True])
def test_managed_policy_that_keeps_only_its_hooks_declines(
        launch: dict[str, Any], policy: dict[str, object], drop_in: bool) -> None:
    name = "managed-settings.d/10-org.json" if drop_in else "managed-settings.json"
    _write(launch["policy"] / name, json.dumps(policy))
    assert isinstance(prepare(launch), Declined)


def test_harmless_or_malformed_policy(launch: dict[str, Any]) -> None:
    _write(launch["policy"] / "managed-settings.json",
           '{"strictPluginOnlyCustomization": ["skills"], "disableAllHooks": false}')
    _write(launch["policy"] / "managed-settings.d" / ".hidden.json", "{broken")
    _write(launch["policy"] / "managed-settings.d" / "notes.txt", "{broken")
    assert prepare(launch) is not None
    _write(launch["policy"] / "managed-settings.d" / "20-x.json", "{broken")
    assert isinstance(prepare(launch), Declined)


def test_a_launch_without_the_hook_command_is_an_operational_failure(
        launch: dict[str, Any]) -> None:
    context = attachment_context(argv=("claude",), env={"HOME": str(launch["home"])},
                               cwd=str(launch["cwd"]), private_dir=launch["private"])
    with pytest.raises(ValueError, match="hook command"):
        ClaudeAttention(policy_dir=launch["policy"]).prepare(context)


# -- the real CLI, when it is installed ---------------------------------------------------


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("claude") is None, reason="claude is not installed")
def test_real_launch_runs_our_hook_beside_the_users(tmp_path: Path) -> None:
    """``-p`` without an account: Claude fires SessionStart, UserPromptSubmit,
    StopFailure (not logged in) and SessionEnd, making no request."""
    home, work, private = tmp_path / "home", tmp_path / "work", tmp_path / "private"
    for directory in (home / ".claude", work, private):
        directory.mkdir(parents=True)
    captured, user_log = tmp_path / "captured", tmp_path / "user.log"
    captured.mkdir()
    hook = private / "hook"
    hook.write_text(f'#!/bin/sh\ncat > "$(mktemp {captured}/XXXXXXXX)"\n')
    hook.chmod(0o700)
    # The user's own hook (user-level settings): it must still run.
    (home / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"SessionEnd": [
        {"hooks": [{"type": "command", "command": f"echo ran >> {user_log}"}]}]}}))
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("CLAUDE_", "ANTHROPIC_", "CLANKER_"))}
    environ.update(HOME=str(home), CLAUDE_CONFIG_DIR=str(home / ".claude"),
                   ANTHROPIC_BASE_URL="http://127.0.0.1:9", DISABLE_TELEMETRY="1",
                   DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                   CLANKER_ATTENTION_COMMAND=str(hook))
    flags = ("-p", "hello")
    plan = ClaudeAttention(policy_dir=tmp_path / "no-policy").prepare(attachment_context(
        argv=("claude", *flags), env=environ, cwd=str(work), private_dir=private,
        user_flags=flags))
    assert isinstance(plan, AttachmentPlan) and plan.argv is not None
    subprocess.run(plan.argv, cwd=work, env=environ, stdin=subprocess.DEVNULL,
                   capture_output=True, timeout=120, check=False)
    payloads = [json.loads(p.read_text()) for p in captured.iterdir()]
    assert user_log.read_text() == "ran\n"  # merged, not replaced
    by_event = {p["hook_event_name"]: p for p in payloads}
    assert {"SessionStart", "UserPromptSubmit", "SessionEnd"} <= set(by_event)
    ordered = [by_event[e] for e in ("SessionStart", "UserPromptSubmit", "StopFailure",
                                     "SessionEnd") if e in by_event]
    out, _ = run(cast(list[str | dict[str, Any]], ordered))
    got = [e["event"] for batch in out for e in batch]
    assert got[:3] == ["session_started", "location_changed", "turn_started"]
    assert got[-1] == "session_ended"
    assert "prompt_id" in by_event["UserPromptSubmit"]
