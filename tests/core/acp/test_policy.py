"""The approval ladder as a pure policy, property-tested: whatever the agent
offers and asks, only allow_once / reject_once (or ``cancelled``) is ever
selected, bypass options never, and nothing widens without a rule that says so."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clanker.acp.policy import (
    DEFAULT_TABLE,
    TOOL_KINDS,
    Answer,
    Level,
    Option,
    PermissionRequest,
    Policy,
)

WORKSPACE = "/work/project"
OPTION_KINDS = ("allow_once", "allow_always", "reject_once", "reject_always", "weird")
option_ids = st.sampled_from(["allow", "a1", "exit-plan-bypass", "BypassPermissions",
                              "reject", "r", "exit-plan-accept-edits", "exit-plan-auto"])
options = st.builds(Option, option_ids, st.sampled_from(["Allow", "Bypass all", "No", ""]),
                    st.sampled_from(OPTION_KINDS))
kinds = st.one_of(st.none(), st.sampled_from(sorted(TOOL_KINDS)), st.text(max_size=8))
paths = st.sampled_from(["src/a.py", "/work/project/b", "../escape", "/etc/passwd", "."])
requests = st.builds(PermissionRequest, tool_kind=kinds, title=st.just("t"),
                     paths=st.lists(paths, max_size=2).map(tuple),
                     options=st.lists(options, max_size=5).map(tuple))
policies = st.builds(Policy, workspace=st.just(WORKSPACE), interactive=st.booleans(),
                     approved=st.frozensets(st.sampled_from(sorted(TOOL_KINDS))),
                     remembered=st.frozensets(st.sampled_from(sorted(TOOL_KINDS))))


def _selected(request: PermissionRequest, option_id: str | None) -> Option | None:
    return next((o for o in request.options if o.option_id == option_id), None)


@given(policies, requests)
def test_only_once_options_are_ever_selected(policy: Policy, request: PermissionRequest) -> None:
    decisions = [policy.decide(request)]
    decisions += [policy.answer(request, choice)[0] for choice in Answer]
    for decision in decisions:
        if decision.verdict == "ask":
            assert decision.option_id is None
            continue
        chosen = _selected(request, decision.option_id)
        if decision.option_id is None:
            assert decision.outcome() == {"outcome": "cancelled"}
            continue
        assert chosen is not None
        assert chosen.kind == ("allow_once" if decision.verdict == "allow" else "reject_once")
        assert not chosen.bypass


@given(policies, requests)
def test_a_mode_widening_approval_is_never_picked_without_the_person(
        policy: Policy, request: PermissionRequest) -> None:
    decision = policy.decide(request)
    chosen = _selected(request, decision.option_id)
    assert chosen is None or not chosen.escalates


def test_plan_exit_options_ask_and_warn() -> None:
    options = (Option("exit-plan-auto", "Yes, and auto-accept", "allow_once"),
               Option("exit-plan-accept-edits", "Yes, accept edits", "allow_once"),
               Option("exit-plan-bypass", "Yes, bypass", "allow_once"),
               Option("reject", "No", "reject_once"))
    request = PermissionRequest(tool_kind="read", title="", options=options)
    assert Policy(workspace=WORKSPACE, interactive=False).decide(request).option_id == "reject"
    asking = Policy(workspace=WORKSPACE, interactive=True).decide(request)
    assert (asking.verdict, asking.session_choice) == ("ask", False)
    assert asking.warning and "more permissive" in asking.warning
    chosen, _ = Policy(workspace=WORKSPACE, interactive=True).answer(request, Answer.ONCE)
    assert chosen.option_id == "exit-plan-auto"
    plain = (Option("allow", "Yes", "allow_once"), *options)
    mixed = PermissionRequest(tool_kind="read", title="", options=plain)
    assert Policy(workspace=WORKSPACE, interactive=False).decide(mixed).option_id == "allow"


@given(policies, requests)
def test_outside_the_workspace_is_always_refused(policy: Policy,
                                                 request: PermissionRequest) -> None:
    if any(p in ("../escape", "/etc/passwd") for p in request.paths):
        assert policy.decide(request).verdict in ("reject", "cancelled")


@given(requests)
def test_nothing_is_allowed_without_a_rule(request: PermissionRequest) -> None:
    policy = Policy(workspace=WORKSPACE, interactive=False)
    decision = policy.decide(request)
    if decision.verdict == "allow":
        assert request.tool_kind in ("read", "search", "think")


@given(requests)
def test_without_a_person_nothing_asks(request: PermissionRequest) -> None:
    policy = Policy(workspace=WORKSPACE, interactive=False, approved=frozenset(TOOL_KINDS))
    assert policy.decide(request).verdict != "ask"


def test_a_missing_or_unknown_kind_asks_every_time() -> None:
    policy = Policy(workspace=WORKSPACE, interactive=True)
    assert policy.level(None) is Level.ASK_EVERY_TIME
    assert policy.level("teleport") is Level.ASK_EVERY_TIME
    once = (Option("a", "Allow", "allow_once"), Option("r", "No", "reject_once"))
    for kind in (None, "teleport", "switch_mode"):
        decision = policy.decide(PermissionRequest(tool_kind=kind, title="", options=once))
        assert decision.verdict == "ask"
        assert not decision.session_choice


def test_session_approval_is_for_ask_once_kinds_only() -> None:
    once = (Option("a", "Allow", "allow_once"), Option("r", "No", "reject_once"))
    policy = Policy(workspace=WORKSPACE, interactive=True)
    edit = PermissionRequest(tool_kind="edit", title="", options=once)
    run = PermissionRequest(tool_kind="execute", title="", options=once)
    _, after = policy.answer(edit, Answer.SESSION)
    assert after.decide(edit).verdict == "allow"
    _, after_run = policy.answer(run, Answer.SESSION)
    assert after_run.decide(run).verdict == "ask"


def test_an_allow_offered_only_as_always_is_never_picked() -> None:
    always = (Option("allow-with-updates", "Always", "allow_always"),
              Option("reject", "No", "reject_once"))
    request = PermissionRequest(tool_kind="execute", title="", options=always)
    asking = Policy(workspace=WORKSPACE, interactive=True).decide(request)
    assert asking.verdict == "ask"
    assert asking.warning
    assert Policy(workspace=WORKSPACE, interactive=True).answer(
        request, Answer.ONCE)[0].option_id == "reject"
    assert Policy(workspace=WORKSPACE, interactive=False).decide(request).option_id == "reject"


def test_the_table_cannot_name_unknown_kinds() -> None:
    with pytest.raises(ValueError, match="unknown tool kinds"):
        Policy(workspace=WORKSPACE, interactive=False, table={"bypass": "automatic"})
    with pytest.raises(ValueError, match="unknown tool kinds"):
        Policy(workspace=WORKSPACE, interactive=False, approved=frozenset({"everything"}))
    assert dict(Policy(workspace=WORKSPACE, interactive=False).table) == dict(DEFAULT_TABLE)
