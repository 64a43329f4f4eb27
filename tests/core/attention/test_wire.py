"""One wire schema: the hook bridge's sanitizer and the grid's parser agree on every envelope.

Both read :mod:`clanker.attention.wire`. The bridge repairs what it may (it
leaves out unknown keys, nulls and a bad droppable field) and drops the rest;
the grid refuses anything that is not exactly right. Agreeing means: the
bridge passes an envelope through untouched exactly when the grid accepts it;
it drops one exactly when the grid refuses what is left of it once the
repairable parts are gone; and what it sends, the grid reads back unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from clanker.attention import hook, wire
from clanker.attention.envelope import (
    Envelope,
    EnvelopeError,
    LifecycleEvent,
    Scope,
    camel,
    parse_envelope,
)
from clanker.grid import protocol

printable = st.characters(blacklist_categories=("C", "Z")) | st.just(" ")
unprintable = st.sampled_from(["\x00", "\n", "\t", "\x1b", "\u2028", "\ud800"])


def _with(text: st.SearchStrategy[str], bad: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """``text`` with one unprintable character put somewhere in it."""
    return st.tuples(text, bad, st.integers(0, 8)).map(
        lambda parts: parts[0][: parts[2]] + parts[1] + parts[0][parts[2]:])


def _text(limit: int) -> st.SearchStrategy[str]:
    return st.text(printable, min_size=1, max_size=12) | st.text(
        printable, min_size=limit, max_size=limit)


not_strings = st.none() | st.booleans() | st.integers() | st.lists(st.text(max_size=3),
                                                                    max_size=2)
ids = _text(wire.MAX_ID_CHARS)
bad_ids = (st.just("") | st.text(printable, min_size=wire.MAX_ID_CHARS + 1,
                                 max_size=wire.MAX_ID_CHARS + 1)
           | _with(st.text(printable, max_size=12), unprintable) | not_strings)
labels = _text(wire.MAX_NATIVE_EVENT_CHARS)
bad_labels = (st.just("") | st.text(printable, min_size=wire.MAX_NATIVE_EVENT_CHARS + 1,
                                    max_size=wire.MAX_NATIVE_EVENT_CHARS + 8)
              | _with(st.text(printable, max_size=12), unprintable) | not_strings)
segments = st.text(printable.filter(lambda c: c != "/"), min_size=1, max_size=12)
cwds = (st.lists(segments, max_size=4).map(lambda parts: "/" + "/".join(parts))
        | st.just("/" + "a" * (wire.MAX_CWD_BYTES - 1))
        | st.just("/" + "é" * ((wire.MAX_CWD_BYTES - 2) // 2) + "a"))
bad_cwds = (segments | st.just("")  # relative
            | st.just("/" + "é" * (wire.MAX_CWD_BYTES // 2))  # over the bound in bytes
            | _with(st.just("/work/"), unprintable) | not_strings)
events = st.sampled_from(list(wire.EVENTS))
bad_events = st.sampled_from(["", "TURN_STARTED", "turn_begun", "agent exited"]) | not_strings
scopes = st.sampled_from(wire.SCOPES)
bad_scopes = st.sampled_from(["ROOT", "parent", ""]) | st.booleans() | st.integers()

GOOD: dict[str, st.SearchStrategy[Any]] = {
    "event": events, "scope": scopes, "sessionId": ids, "turnId": ids, "inputId": ids,
    "continuesSessionId": ids, "cwd": cwds, "nativeEvent": labels,
}
BAD: dict[str, st.SearchStrategy[Any]] = {
    "event": bad_events, "scope": bad_scopes, "sessionId": bad_ids, "turnId": bad_ids,
    "inputId": bad_ids, "continuesSessionId": bad_ids, "cwd": bad_cwds,
    "nativeEvent": bad_labels,
}
extra_keys = st.sampled_from(["prompt", "session_id", "tool_input", "Event", ""]) | st.text(
    max_size=10).filter(lambda key: key not in wire.FIELDS)


@st.composite
def candidates(draw: st.DrawFn) -> dict[str, Any]:
    """A valid envelope, often mutated: fields bad, absent, null or added."""
    item: dict[str, Any] = {}
    event = draw(events)
    for key in wire.KEYS:
        how = draw(st.sampled_from(
            ["good", "good", "good", "absent", "absent", "null", "bad"]
            if key not in wire.REQUIRED else ["good"] * 6 + ["absent", "null", "bad"]))
        if how == "good":
            value = event if key == "event" else draw(GOOD[key])
            if key == "continuesSessionId" and draw(st.booleans()):
                item["event"] = event = "session_continued"  # where it belongs, mostly
        elif how == "bad":
            value = draw(BAD[key])
        elif how == "null":
            value = None
        else:
            continue
        item[key] = value
    for key in draw(st.lists(extra_keys, max_size=2)):
        item[key] = draw(st.text(max_size=5) | not_strings)
    return json.loads(json.dumps(item))  # the grid reads what JSON carries


def _grid_accepts(item: dict[str, Any]) -> bool:
    try:
        parse_envelope(item)
    except EnvelopeError:
        return False
    return True


@settings(max_examples=1500)
@given(item=candidates())
def test_the_bridge_and_the_grid_accept_exactly_the_same_envelopes(item: dict[str, Any]) -> None:
    sent = hook.sanitize([item])
    # A null is as good as absent for a wire key; an unknown key is refused even when null.
    present = {key: value for key, value in item.items()
               if value is not None or key not in wire.FIELDS}
    if item.get("event") == "agent_exited":
        # clanker's launcher alone reports it: no interpreter may, whatever the grid takes.
        assert sent == []
        return
    # Untouched exactly when the grid takes it as it is.
    assert (sent == [present]) == _grid_accepts(item)
    # Dropped exactly when the grid refuses even what cannot be repaired away.
    core = {key: value for key, value in present.items()
            if key in wire.FIELDS and key not in wire.DROPPABLE}  # what cannot be left out
    assert (sent == []) == (not _grid_accepts(core))
    if sent:
        clean = sent[0]
        # What is sent is read back unchanged, key order included.
        assert parse_envelope(clean).to_wire() == clean
        assert list(clean) == [key for key in wire.KEYS if key in clean]
        # A repair only leaves things out: unknown keys, nulls, a bad droppable field.
        assert all(present[key] == value for key, value in clean.items())
        assert {key for key in present if key in wire.FIELDS} - set(clean) <= wire.DROPPABLE


def test_the_grid_takes_from_the_wire_what_the_bridge_never_sends() -> None:
    # agent_exited is on the wire (clanker's launcher); no source may report it.
    item = {"event": "agent_exited", "scope": "root", "sessionId": "s"}
    assert _grid_accepts(item)
    assert hook.sanitize([item]) == []
    assert wire.EVENTS["agent_exited"] == wire.LAUNCHER
    assert hook.EVENTS == wire.SOURCE_EVENTS == set(wire.EVENTS) - {"agent_exited"}


def test_the_grid_envelope_is_the_schema() -> None:
    fields = attrs.fields(Envelope)
    assert tuple(camel(field.name) for field in fields) == wire.KEYS
    assert {camel(field.name) for field in fields
            if field.default is attrs.NOTHING} == wire.REQUIRED
    assert [event.value for event in LifecycleEvent] == list(wire.EVENTS)
    assert tuple(scope.value for scope in Scope) == wire.SCOPES
    assert hook.ENVELOPE_KEYS == wire.KEYS
    assert protocol.MAX_ENVELOPES == hook.MAX_ENVELOPES == wire.MAX_ENVELOPES


def test_schema_messages_name_fields_never_values() -> None:
    secret = "hunter2\n"
    for key in wire.KEYS:
        reason = wire.problem(key, secret)
        assert reason is not None
        assert reason.startswith(key)
        assert "hunter2" not in reason
