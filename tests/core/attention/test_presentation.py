"""What a person sees: a pure projection of the broker's facts and a seen-watermark."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clanker.attention.broker import (
    Broker,
    Completion,
    Outcome,
    OutcomeKind,
    PendingRequest,
    Revision,
    Runtime,
    RuntimeState,
    Snapshot,
)
from clanker.attention.envelope import Envelope, LifecycleEvent, Scope
from clanker.attention.presentation import Attention, derive_attention

AT = datetime(2026, 11, 30, 12, tzinfo=UTC)
RUNNING = Runtime(state=RuntimeState.RUNNING, turn_id="t", started_at=AT)
FAILED = Runtime(state=RuntimeState.FAILED, turn_id="t", started_at=AT)
IDLE = Runtime(state=RuntimeState.IDLE)


def rev(snapshot: Snapshot | None, revision: int = 10) -> Revision:
    return Revision(terminal="x", revision=revision, snapshot=snapshot)


def done(revision: int) -> Snapshot:
    return Snapshot(
        runtime=IDLE, root_session_id="s",
        last_completion=Completion(turn_id="t", at=AT, revision=revision),
        last_outcome=Outcome(kind=OutcomeKind.COMPLETED, turn_id="t", at=AT, revision=revision),
    )


def test_a_tombstone_is_unknown() -> None:
    assert derive_attention(rev(None), 0) is Attention.UNKNOWN


def test_an_unverified_terminal_is_unknown() -> None:
    assert derive_attention(rev(Snapshot()), 0) is Attention.UNKNOWN


def test_an_idle_session_is_idle() -> None:
    assert derive_attention(rev(Snapshot(runtime=IDLE, root_session_id="s")), 0) is Attention.IDLE


def test_a_wait_comes_before_everything() -> None:
    waiting = Snapshot(runtime=RUNNING, root_session_id="s",
                       pending_request=PendingRequest(input_id="p", turn_id="t", requested_at=AT))
    assert derive_attention(rev(waiting), 99) is Attention.NEEDS_INPUT


def test_working_comes_before_failed_and_done() -> None:
    snapshot = done(5)
    running = Snapshot(runtime=RUNNING, root_session_id="s",
                       last_completion=snapshot.last_completion,
                       last_outcome=snapshot.last_outcome)
    assert derive_attention(rev(running), 0) is Attention.WORKING


def test_failed_is_shown_until_the_next_turn_whether_seen_or_not() -> None:
    failed = Snapshot(runtime=FAILED, root_session_id="s",
                      last_outcome=Outcome(kind=OutcomeKind.FAILED, turn_id="t", at=AT,
                                           revision=7))
    assert derive_attention(rev(failed), 0) is Attention.FAILED
    assert derive_attention(rev(failed), 100) is Attention.FAILED


@pytest.mark.parametrize(("seen", "expected"), [(0, Attention.DONE), (4, Attention.DONE),
                                                (5, Attention.IDLE), (9, Attention.IDLE)])
def test_done_until_seen(seen: int, expected: Attention) -> None:
    assert derive_attention(rev(done(5)), seen) is expected


@pytest.mark.parametrize("kind", [OutcomeKind.INTERRUPTED, OutcomeKind.SESSION_ENDED])
def test_an_older_completion_never_resurfaces_as_done(kind: OutcomeKind) -> None:
    snapshot = done(5)
    later = Snapshot(runtime=IDLE, root_session_id="s", last_completion=snapshot.last_completion,
                     last_outcome=Outcome(kind=kind, turn_id="u", at=AT, revision=8))
    assert derive_attention(rev(later), 0) is Attention.IDLE


def test_through_the_broker() -> None:
    broker = Broker()
    broker.register("x")

    def apply(event: LifecycleEvent, turn: str | None = None, input_id: str | None = None) -> None:
        broker.apply("x", Envelope(event=event, scope=Scope.ROOT, session_id="s",
                                   turn_id=turn, input_id=input_id))

    def shown(seen: int = 0) -> Attention:
        current = broker.snapshot("x")
        assert current is not None
        return derive_attention(current, seen)

    assert shown() is Attention.UNKNOWN
    apply(LifecycleEvent.SESSION_STARTED)
    assert shown() is Attention.IDLE
    apply(LifecycleEvent.TURN_STARTED, "t1")
    assert shown() is Attention.WORKING
    apply(LifecycleEvent.INPUT_REQUESTED, "t1", "p")
    assert shown() is Attention.NEEDS_INPUT
    apply(LifecycleEvent.INPUT_RESOLVED, "t1", "p")
    assert shown() is Attention.WORKING
    apply(LifecycleEvent.TURN_COMPLETED, "t1")
    assert shown() is Attention.DONE
    current = broker.snapshot("x")
    assert current is not None
    assert shown(seen=current.revision) is Attention.IDLE
    apply(LifecycleEvent.TURN_STARTED, "t2")
    apply(LifecycleEvent.TURN_FAILED, "t2")
    assert shown() is Attention.FAILED
    apply(LifecycleEvent.SESSION_ENDED)
    assert shown() is Attention.UNKNOWN
    broker.retire("x")
    assert shown() is Attention.UNKNOWN


@given(
    pending=st.booleans(),
    state=st.sampled_from(RuntimeState),
    completion=st.none() | st.integers(1, 20),
    outcome=st.none() | st.tuples(st.sampled_from(OutcomeKind), st.integers(1, 20)),
    seen=st.integers(0, 25),
)
def test_the_precedence_holds_for_any_facts(
    pending: bool, state: RuntimeState, completion: int | None,
    outcome: tuple[OutcomeKind, int] | None, seen: int,
) -> None:
    has_turn = state in (RuntimeState.RUNNING, RuntimeState.FAILED)
    snapshot = Snapshot(
        runtime=Runtime(state=state, turn_id="t" if has_turn else None,
                        started_at=AT if has_turn else None),
        pending_request=PendingRequest(input_id=None, turn_id="t", requested_at=AT)
        if pending else None,
        last_completion=None if completion is None else Completion(turn_id="c", at=AT,
                                                                   revision=completion),
        last_outcome=None if outcome is None else Outcome(kind=outcome[0], turn_id="c", at=AT,
                                                          revision=outcome[1]),
    )
    shown = derive_attention(rev(snapshot, 30), seen)
    fresh_done = (completion is not None and outcome is not None
                  and outcome == (OutcomeKind.COMPLETED, completion) and completion > seen)
    if pending:
        assert shown is Attention.NEEDS_INPUT
    elif state is RuntimeState.RUNNING:
        assert shown is Attention.WORKING
    elif state is RuntimeState.FAILED:
        assert shown is Attention.FAILED
    elif fresh_done:
        assert shown is Attention.DONE
    else:
        assert shown is (Attention.IDLE if state is RuntimeState.IDLE else Attention.UNKNOWN)
