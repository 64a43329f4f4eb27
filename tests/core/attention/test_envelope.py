"""The wire envelope: strict parsing at the trust boundary, and a faithful wire form."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clanker.attention.envelope import (
    MAX_CWD_BYTES,
    MAX_ID_LENGTH,
    MAX_NATIVE_EVENT_LENGTH,
    Envelope,
    EnvelopeError,
    LifecycleEvent,
    Scope,
    parse_envelope,
)

GOOD = {"event": "turn_started", "scope": "root", "sessionId": "s-1", "turnId": "t-1"}

printable = st.characters(blacklist_categories=("C", "Z")) | st.just(" ")
ids = st.text(printable, min_size=1, max_size=40) | st.text(
    printable, min_size=MAX_ID_LENGTH, max_size=MAX_ID_LENGTH
)
cwds = st.lists(
    st.text(printable.filter(lambda c: c != "/"), min_size=1, max_size=12), max_size=5
).map(lambda parts: "/" + "/".join(parts))


@st.composite
def envelopes(draw: st.DrawFn) -> Envelope:
    event = draw(st.sampled_from(LifecycleEvent))
    return Envelope(
        event=event,
        session_id=draw(ids),
        scope=draw(st.none() | st.sampled_from(Scope)),
        turn_id=draw(st.none() | ids),
        input_id=draw(st.none() | ids),
        continues_session_id=(
            draw(st.none() | ids) if event is LifecycleEvent.SESSION_CONTINUED else None
        ),
        cwd=draw(st.none() | cwds),
        native_event=draw(
            st.none() | st.text(printable, min_size=1, max_size=MAX_NATIVE_EVENT_LENGTH)
        ),
    )


@settings(max_examples=60)
@given(envelope=envelopes())
def test_the_wire_form_round_trips_through_json(envelope: Envelope) -> None:
    wire = json.loads(json.dumps(envelope.to_wire()))
    assert parse_envelope(wire) == envelope


def test_the_wire_form_is_camel_case_and_leaves_absent_fields_out() -> None:
    envelope = Envelope(
        event=LifecycleEvent.SESSION_CONTINUED, scope=Scope.ROOT, session_id="new",
        continues_session_id="old", native_event="Compress",
    )
    assert envelope.to_wire() == {
        "event": "session_continued", "scope": "root", "sessionId": "new",
        "continuesSessionId": "old", "nativeEvent": "Compress",
    }
    assert all(type(value) is str for value in envelope.to_wire().values())


def test_a_minimal_envelope_parses_with_unknown_scope() -> None:
    envelope = parse_envelope({"event": "session_ended", "sessionId": "s"})
    assert envelope.scope is None
    assert parse_envelope({"event": "session_ended", "sessionId": "s", "scope": None}) == envelope


def test_a_missing_turn_id_parses_and_is_left_to_the_broker() -> None:
    # The broker answers rejected-ambiguous (tested there); parsing checks shape only.
    envelope = parse_envelope({"event": "turn_completed", "scope": "root", "sessionId": "s"})
    assert envelope.turn_id is None


@pytest.mark.parametrize(
    "obj",
    [
        None, [], "turn_started", 1,
        GOOD | {"extra": 1},
        {key: value for key, value in GOOD.items() if key != "event"},
        {key: value for key, value in GOOD.items() if key != "sessionId"},
        GOOD | {"event": "turn_begun"},
        GOOD | {"event": "TURN_STARTED"},
        GOOD | {"event": 1},
        GOOD | {"scope": "ROOT"},
        GOOD | {"scope": "parent"},
        GOOD | {"scope": True},
        GOOD | {"sessionId": ""},
        GOOD | {"sessionId": "x" * (MAX_ID_LENGTH + 1)},
        GOOD | {"sessionId": "a\nb"},
        GOOD | {"sessionId": 7},
        GOOD | {"sessionId": None},
        GOOD | {"turnId": ""},
        GOOD | {"turnId": 3},
        GOOD | {"turnId": "t\x1b[2J"},
        GOOD | {"inputId": ["p"]},
        GOOD | {"inputId": "x" * (MAX_ID_LENGTH + 1)},
        GOOD | {"continuesSessionId": "old"},  # only on session_continued
        GOOD | {"cwd": "relative/path"},
        GOOD | {"cwd": ""},
        GOOD | {"cwd": "/a\nb"},
        GOOD | {"cwd": "/" + "é" * MAX_CWD_BYTES},  # fewer characters than bytes
        GOOD | {"cwd": 5},
        GOOD | {"nativeEvent": ""},
        GOOD | {"nativeEvent": "x" * (MAX_NATIVE_EVENT_LENGTH + 1)},
        GOOD | {"nativeEvent": "Stop\x00"},
        {"event": "turn_started", "scope": "root", "session_id": "s"},  # snake case is not wire
    ],
)
def test_malformed_envelopes_are_refused(obj: object) -> None:
    with pytest.raises(EnvelopeError):
        parse_envelope(obj)


def test_a_cwd_at_the_byte_limit_parses() -> None:
    cwd = "/" + "a" * (MAX_CWD_BYTES - 1)
    assert parse_envelope(GOOD | {"cwd": cwd}).cwd == cwd


def test_an_envelope_error_is_a_value_error() -> None:
    assert issubclass(EnvelopeError, ValueError)


SECRET = "hunter2-do-not-echo"


@pytest.mark.parametrize(
    "obj",
    [
        GOOD | {"sessionId": SECRET + "\n"},
        GOOD | {"cwd": SECRET},
        GOOD | {"event": SECRET},
        GOOD | {"scope": SECRET},
        GOOD | {"turnId": SECRET + "\x07"},
        GOOD | {SECRET + " key": 1},
        GOOD | {"nativeEvent": SECRET * 5},
    ],
)
def test_errors_name_fields_never_values(obj: object) -> None:
    with pytest.raises(EnvelopeError) as caught:
        parse_envelope(obj)
    assert SECRET not in str(caught.value)
    assert "_" not in str(caught.value).replace("session_continued", "")  # wire names only


def test_errors_use_wire_names() -> None:
    with pytest.raises(EnvelopeError, match=r"\$\.sessionId"):
        parse_envelope(GOOD | {"sessionId": 3})


WIRE_KEYS = {"event", "scope", "sessionId", "turnId", "inputId", "continuesSessionId",
             "cwd", "nativeEvent"}


@given(key=st.text(max_size=20).filter(lambda key: key not in WIRE_KEYS))
def test_any_unknown_key_is_refused(key: str) -> None:
    with pytest.raises(EnvelopeError):
        parse_envelope(GOOD | {key: None})


def test_construction_validates_like_parsing() -> None:
    with pytest.raises(EnvelopeError):
        Envelope(event=LifecycleEvent.LOCATION_CHANGED, session_id="s", cwd="here")
    with pytest.raises(EnvelopeError):
        Envelope(event=LifecycleEvent.TURN_STARTED, session_id="s", continues_session_id="o")
    with pytest.raises(TypeError):
        Envelope(event="turn_started", session_id="s")  # type: ignore[arg-type]
