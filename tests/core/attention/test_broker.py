"""The broker's lifecycle invariants, one example each (the state machine explores the rest)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest

from clanker.attention.broker import (
    MAX_RECENT_DECISIONS,
    MAX_RETIRED_TURNS,
    MAX_TOMBSTONES,
    MAX_WAITS,
    Broker,
    Completion,
    Decision,
    Outcome,
    OutcomeKind,
    PendingRequest,
    Revision,
    Runtime,
    RuntimeState,
    Snapshot,
    canonical_location,
)
from clanker.attention.envelope import Envelope, LifecycleEvent, Scope
from clanker.converters import BoundaryError

E = LifecycleEvent
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ROOT = "root-session-0001"
OTHER = "other-session-0002"
TERMINAL = "term-1"
TURN_EVENTS = [E.TURN_STARTED, E.TURN_COMPLETED, E.TURN_INTERRUPTED, E.TURN_FAILED,
               E.INPUT_REQUESTED, E.INPUT_RESOLVED]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def ev(
    event: LifecycleEvent,
    session: str = ROOT,
    turn: str | None = None,
    *,
    scope: Scope | None = Scope.ROOT,
    input_id: str | None = None,
    continues: str | None = None,
    cwd: str | None = None,
) -> Envelope:
    return Envelope(event=event, session_id=session, scope=scope, turn_id=turn,
                    input_id=input_id, continues_session_id=continues, cwd=cwd)


class Harness:
    """A broker with one registered terminal and a recording listener."""

    def __init__(self, trusted: str | None = None) -> None:
        self.heard: list[Revision] = []
        self.broker = Broker(listener=self.heard.append, clock=Clock())
        self.broker.register(TERMINAL, trusted_root_session_id=trusted)

    def apply(self, envelope: Envelope) -> Decision:
        return self.broker.apply(TERMINAL, envelope)

    @property
    def revision(self) -> Revision:
        current = self.broker.snapshot(TERMINAL)
        assert current is not None
        return current

    @property
    def snap(self) -> Snapshot:
        snapshot = self.revision.snapshot
        assert snapshot is not None
        return snapshot

    def start(self, turn: str = "t1", session: str = ROOT) -> None:
        assert self.apply(ev(E.TURN_STARTED, session, turn)) is Decision.ACCEPTED

    def unchanged_by(self, envelope: Envelope, decision: Decision) -> None:
        before, heard = self.revision, len(self.heard)
        assert self.apply(envelope) is decision
        assert self.revision == before
        assert len(self.heard) == heard


@pytest.fixture
def h() -> Harness:
    return Harness()


# ------------------------------------------------------------------ registration


def test_a_registration_starts_unverified_and_unbound(h: Harness) -> None:
    assert h.snap == Snapshot()
    assert h.snap.runtime.state is RuntimeState.UNVERIFIED
    assert h.heard == [h.revision]


def test_a_trusted_root_binds_at_registration_and_excludes_other_sessions() -> None:
    h = Harness(trusted=ROOT)
    assert h.snap.root_session_id == ROOT
    assert h.snap.runtime.state is RuntimeState.UNVERIFIED  # until the harness reports
    h.unchanged_by(ev(E.TURN_STARTED, OTHER, "t1"), Decision.REJECTED_MISMATCH)
    h.unchanged_by(ev(E.SESSION_STARTED, OTHER), Decision.REJECTED_MISMATCH)
    h.start("t1", ROOT)


def test_registration_refuses_unusable_ids() -> None:
    broker = Broker()
    with pytest.raises(ValueError, match="terminal"):
        broker.register("")
    with pytest.raises(ValueError, match="trusted_root_session_id"):
        broker.register("t", trusted_root_session_id="a\nb")
    assert broker.snapshots() == []


def test_an_unknown_terminal_changes_nothing() -> None:
    broker = Broker()
    assert broker.apply("nobody", ev(E.TURN_STARTED, ROOT, "t1")) is Decision.UNKNOWN_TERMINAL
    assert broker.snapshot("nobody") is None
    assert broker.explain("nobody") is None
    assert broker.retire("nobody") is None


def test_re_registration_starts_fresh_and_the_revision_keeps_increasing(h: Harness) -> None:
    h.start("t1")
    before = h.revision.revision
    again = h.broker.register(TERMINAL)
    assert again.revision > before
    assert again.snapshot == Snapshot()
    assert h.broker.snapshots() == [again]
    # a fresh registration forgets retired turns: a new process may reuse its epochs
    assert h.apply(ev(E.TURN_STARTED, ROOT, "t1")) is Decision.ACCEPTED


# ----------------------------------------------------------------------- binding


def test_a_root_turn_start_binds_an_unbound_registration(h: Harness) -> None:
    h.start("t1", ROOT)
    assert h.snap.root_session_id == ROOT
    assert h.snap.runtime == Runtime(state=RuntimeState.RUNNING, turn_id="t1",
                                     started_at=T0 + timedelta(seconds=1))


def test_session_started_binds_identity_only() -> None:
    h = Harness()
    assert h.apply(ev(E.SESSION_STARTED, ROOT)) is Decision.ACCEPTED
    assert h.snap == Snapshot(runtime=Runtime(state=RuntimeState.IDLE), root_session_id=ROOT)
    h.unchanged_by(ev(E.SESSION_STARTED, ROOT), Decision.DUPLICATE)
    h.unchanged_by(ev(E.SESSION_STARTED, OTHER), Decision.REJECTED_MISMATCH)
    h.start("t1")
    h.unchanged_by(ev(E.SESSION_STARTED, ROOT), Decision.DUPLICATE)  # never touches a turn
    assert h.snap.runtime.state is RuntimeState.RUNNING


def test_session_started_verifies_a_trusted_root() -> None:
    h = Harness(trusted=ROOT)
    assert h.apply(ev(E.SESSION_STARTED, ROOT)) is Decision.ACCEPTED
    assert h.snap.runtime.state is RuntimeState.IDLE


@pytest.mark.parametrize("event", [E.TURN_COMPLETED, E.TURN_INTERRUPTED, E.TURN_FAILED,
                                   E.INPUT_REQUESTED, E.INPUT_RESOLVED])
def test_completion_and_input_events_never_bind(h: Harness, event: LifecycleEvent) -> None:
    h.unchanged_by(ev(event, ROOT, "t1", input_id="i"), Decision.IGNORED_STALE)
    assert h.snap.root_session_id is None


@pytest.mark.parametrize("event", list(LifecycleEvent))
def test_child_events_never_change_anything(h: Harness, event: LifecycleEvent) -> None:
    h.start("t1")
    envelope = ev(event, ROOT, "t1", scope=Scope.CHILD, input_id="i", cwd="/elsewhere",
                  continues=ROOT if event is E.SESSION_CONTINUED else None)
    h.unchanged_by(envelope, Decision.IGNORED_CHILD)


@pytest.mark.parametrize("event", list(LifecycleEvent))
def test_events_of_unknown_scope_are_ambiguous(h: Harness, event: LifecycleEvent) -> None:
    h.start("t1")
    envelope = ev(event, ROOT, "t1", scope=None, input_id="i", cwd="/elsewhere",
                  continues=ROOT if event is E.SESSION_CONTINUED else None)
    h.unchanged_by(envelope, Decision.REJECTED_AMBIGUOUS)


@pytest.mark.parametrize("event", [e for e in LifecycleEvent if e is not E.AGENT_EXITED])
def test_another_session_cannot_touch_a_bound_root(h: Harness, event: LifecycleEvent) -> None:
    h.start("t1")
    h.apply(ev(E.INPUT_REQUESTED, ROOT, "t1", input_id="i"))
    envelope = ev(event, OTHER, "t1", input_id="i", cwd="/elsewhere",
                  continues=OTHER if event is E.SESSION_CONTINUED else None)
    h.unchanged_by(envelope, Decision.REJECTED_MISMATCH)


@pytest.mark.parametrize("event", TURN_EVENTS)
def test_turn_identity_is_mandatory(h: Harness, event: LifecycleEvent) -> None:
    h.start("t1")
    h.unchanged_by(ev(event, ROOT, None, input_id="i"), Decision.REJECTED_AMBIGUOUS)


# ------------------------------------------------------------------------- turns


def test_a_completion_settles_only_the_live_turn(h: Harness) -> None:
    h.start("t1")
    h.unchanged_by(ev(E.TURN_COMPLETED, ROOT, "never-started"), Decision.IGNORED_STALE)
    assert h.apply(ev(E.TURN_COMPLETED, ROOT, "t1")) is Decision.ACCEPTED
    revision = h.revision.revision
    assert h.snap.runtime == Runtime(state=RuntimeState.IDLE)
    assert h.snap.last_completion == Completion(turn_id="t1", at=T0 + timedelta(seconds=2),
                                                revision=revision)
    assert h.snap.last_outcome == Outcome(kind=OutcomeKind.COMPLETED, turn_id="t1",
                                          at=T0 + timedelta(seconds=2), revision=revision)


def test_a_late_completion_of_a_superseded_turn_cannot_settle_the_next(h: Harness) -> None:
    h.start("A")
    h.start("B")  # A is superseded, so retired
    h.unchanged_by(ev(E.TURN_COMPLETED, ROOT, "A"), Decision.IGNORED_STALE)
    assert h.snap.runtime.turn_id == "B"
    assert h.snap.last_completion is None


@pytest.mark.parametrize("ending", [E.TURN_COMPLETED, E.TURN_INTERRUPTED, E.TURN_FAILED])
def test_a_retired_turn_cannot_restart(h: Harness, ending: LifecycleEvent) -> None:
    h.start("t1")
    h.apply(ev(ending, ROOT, "t1"))
    h.unchanged_by(ev(E.TURN_STARTED, ROOT, "t1"), Decision.IGNORED_STALE)


def test_a_superseded_turn_cannot_restart(h: Harness) -> None:
    h.start("A")
    h.start("B")
    h.unchanged_by(ev(E.TURN_STARTED, ROOT, "A"), Decision.IGNORED_STALE)


def test_a_repeated_start_of_the_live_turn_is_a_duplicate(h: Harness) -> None:
    h.start("t1")
    h.unchanged_by(ev(E.TURN_STARTED, ROOT, "t1"), Decision.DUPLICATE)


def test_a_repeated_settlement_is_a_duplicate_and_a_different_one_is_stale(h: Harness) -> None:
    h.start("t1")
    h.apply(ev(E.TURN_INTERRUPTED, ROOT, "t1"))
    h.unchanged_by(ev(E.TURN_INTERRUPTED, ROOT, "t1"), Decision.DUPLICATE)
    h.unchanged_by(ev(E.TURN_COMPLETED, ROOT, "t1"), Decision.IGNORED_STALE)  # Stop after Interrupt


def test_new_work_never_clears_the_last_completion(h: Harness) -> None:
    h.start("t1")
    h.apply(ev(E.TURN_COMPLETED, ROOT, "t1"))
    completion = h.snap.last_completion
    h.start("t2")
    h.apply(ev(E.TURN_INTERRUPTED, ROOT, "t2"))
    assert h.snap.last_completion == completion
    assert h.snap.last_outcome is not None
    assert h.snap.last_outcome.kind is OutcomeKind.INTERRUPTED


def test_an_interruption_returns_to_idle_without_a_completion(h: Harness) -> None:
    h.start("t1")
    assert h.apply(ev(E.TURN_INTERRUPTED, ROOT, "t1")) is Decision.ACCEPTED
    assert h.snap.runtime == Runtime(state=RuntimeState.IDLE)
    assert h.snap.last_completion is None
    assert h.snap.root_session_id == ROOT


def test_a_failure_is_failed_until_the_next_turn(h: Harness) -> None:
    h.start("t1")
    started = h.snap.runtime.started_at
    assert h.apply(ev(E.TURN_FAILED, ROOT, "t1")) is Decision.ACCEPTED
    assert h.snap.runtime == Runtime(state=RuntimeState.FAILED, turn_id="t1", started_at=started)
    assert h.snap.last_completion is None
    assert h.snap.last_outcome is not None
    assert h.snap.last_outcome.kind is OutcomeKind.FAILED
    h.start("t2")
    assert h.snap.runtime.state is RuntimeState.RUNNING


# ------------------------------------------------------------------------- input


def test_an_input_wait_is_resolved_only_by_its_own_input_id(h: Harness) -> None:
    h.start("t1")
    assert h.apply(ev(E.INPUT_REQUESTED, ROOT, "t1", input_id="p1")) is Decision.ACCEPTED
    assert h.snap.pending_request == PendingRequest(input_id="p1", turn_id="t1",
                                                    requested_at=T0 + timedelta(seconds=2))
    h.unchanged_by(ev(E.INPUT_REQUESTED, ROOT, "t1", input_id="p1"), Decision.DUPLICATE)
    h.unchanged_by(ev(E.INPUT_RESOLVED, ROOT, "t1", input_id="p2"), Decision.IGNORED_STALE)
    h.unchanged_by(ev(E.INPUT_RESOLVED, ROOT, "t1"), Decision.IGNORED_STALE)
    assert h.apply(ev(E.INPUT_RESOLVED, ROOT, "t1", input_id="p1")) is Decision.ACCEPTED
    assert h.snap.pending_request is None
    assert h.snap.runtime.state is RuntimeState.RUNNING
    h.unchanged_by(ev(E.INPUT_RESOLVED, ROOT, "t1", input_id="p1"), Decision.DUPLICATE)


def test_a_wait_without_an_input_id_is_cleared_by_any_resolution_of_its_turn(h: Harness) -> None:
    h.start("t1")
    h.apply(ev(E.INPUT_REQUESTED, ROOT, "t1"))
    assert h.apply(ev(E.INPUT_RESOLVED, ROOT, "t1", input_id="whatever")) is Decision.ACCEPTED
    assert h.snap.pending_request is None


def test_a_resolution_without_a_wait_changes_nothing(h: Harness) -> None:
    h.start("t1")
    h.unchanged_by(ev(E.INPUT_RESOLVED, ROOT, "t1", input_id="p"), Decision.IGNORED_STALE)


def test_input_events_need_the_live_turn(h: Harness) -> None:
    h.start("A")
    h.apply(ev(E.TURN_COMPLETED, ROOT, "A"))
    h.unchanged_by(ev(E.INPUT_REQUESTED, ROOT, "A", input_id="p"), Decision.IGNORED_STALE)
    h.start("B")
    h.unchanged_by(ev(E.INPUT_REQUESTED, ROOT, "A", input_id="p"), Decision.IGNORED_STALE)
    h.unchanged_by(ev(E.INPUT_REQUESTED, ROOT, "C", input_id="p"), Decision.IGNORED_STALE)


def test_several_waits_need_input_until_every_one_is_resolved(h: Harness) -> None:
    h.start("t1")
    h.apply(ev(E.INPUT_REQUESTED, ROOT, "t1", input_id="p1"))
    assert h.apply(ev(E.INPUT_REQUESTED, ROOT, "t1", input_id="p2")) is Decision.ACCEPTED
    assert h.snap.pending_request is not None
    assert h.snap.pending_request.input_id == "p2"  # the newest is shown
    assert h.apply(ev(E.INPUT_RESOLVED, ROOT, "t1", input_id="p2")) is Decision.ACCEPTED
    assert h.snap.pending_request is not None
    assert h.snap.pending_request.input_id == "p1"  # still waiting for the first
    assert h.apply(ev(E.INPUT_RESOLVED, ROOT, "t1", input_id="p1")) is Decision.ACCEPTED
    assert h.snap.pending_request is None


def test_past_the_wait_bound_nothing_resolves_until_a_boundary(h: Harness) -> None:
    h.start("t1")
    for n in range(MAX_WAITS + 1):
        h.apply(ev(E.INPUT_REQUESTED, ROOT, "t1", input_id=f"p{n}"))
    for n in range(MAX_WAITS + 1):
        h.apply(ev(E.INPUT_RESOLVED, ROOT, "t1", input_id=f"p{n}"))
    assert h.snap.pending_request is not None
    assert h.apply(ev(E.TURN_COMPLETED, ROOT, "t1")) is Decision.ACCEPTED
    assert h.snap.pending_request is None


def test_a_late_settlement_of_a_retired_turn_moves_nothing(h: Harness) -> None:
    h.start("A")
    h.apply(ev(E.TURN_COMPLETED, ROOT, "A", cwd="/a"))
    h.apply(ev(E.TURN_STARTED, ROOT, "B", cwd="/b"))
    h.unchanged_by(ev(E.TURN_COMPLETED, ROOT, "A", cwd="/a"), Decision.IGNORED_STALE)
    assert h.snap.location == "/b"


@pytest.mark.parametrize("ending", [E.TURN_STARTED, E.TURN_COMPLETED, E.TURN_INTERRUPTED,
                                    E.TURN_FAILED, E.SESSION_ENDED])
def test_a_turn_boundary_clears_the_wait(h: Harness, ending: LifecycleEvent) -> None:
    h.start("t1")
    h.apply(ev(E.INPUT_REQUESTED, ROOT, "t1", input_id="p"))
    turn = "t2" if ending is E.TURN_STARTED else "t1"
    assert h.apply(ev(ending, ROOT, turn)) is Decision.ACCEPTED
    assert h.snap.pending_request is None


# --------------------------------------------------------------------- sessions


def test_a_continuation_moves_the_root_and_keeps_the_turn_and_wait(h: Harness) -> None:
    h.start("t1")
    h.apply(ev(E.INPUT_REQUESTED, ROOT, "t1", input_id="p"))
    before = h.snap
    assert h.apply(ev(E.SESSION_CONTINUED, OTHER, continues=ROOT)) is Decision.ACCEPTED
    assert h.snap == Snapshot(runtime=before.runtime, pending_request=before.pending_request,
                              root_session_id=OTHER)
    h.unchanged_by(ev(E.SESSION_CONTINUED, OTHER, continues=ROOT), Decision.DUPLICATE)
    h.unchanged_by(ev(E.TURN_COMPLETED, ROOT, "t1"), Decision.REJECTED_MISMATCH)  # the old id
    assert h.apply(ev(E.INPUT_RESOLVED, OTHER, "t1", input_id="p")) is Decision.ACCEPTED
    assert h.apply(ev(E.TURN_COMPLETED, OTHER, "t1")) is Decision.ACCEPTED


def test_a_continuation_must_name_the_bound_root(h: Harness) -> None:
    h.unchanged_by(ev(E.SESSION_CONTINUED, OTHER, continues=ROOT), Decision.REJECTED_MISMATCH)
    h.start("t1")
    h.unchanged_by(ev(E.SESSION_CONTINUED, OTHER, continues="third"),
                   Decision.REJECTED_MISMATCH)
    h.unchanged_by(ev(E.SESSION_CONTINUED, OTHER), Decision.REJECTED_AMBIGUOUS)


def test_a_retired_turn_stays_retired_across_a_continuation(h: Harness) -> None:
    h.start("t1")
    h.apply(ev(E.TURN_COMPLETED, ROOT, "t1"))
    h.apply(ev(E.SESSION_CONTINUED, OTHER, continues=ROOT))
    h.unchanged_by(ev(E.TURN_STARTED, OTHER, "t1"), Decision.IGNORED_STALE)


def test_session_end_clears_identity_and_keeps_the_registration(h: Harness) -> None:
    h.start("t1")
    h.apply(ev(E.TURN_COMPLETED, ROOT, "t1", cwd="/work/a"))
    h.start("t2")
    h.apply(ev(E.INPUT_REQUESTED, ROOT, "t2", input_id="p"))
    completion = h.snap.last_completion
    assert h.apply(ev(E.SESSION_ENDED, ROOT)) is Decision.ACCEPTED
    assert h.snap == Snapshot(
        runtime=Runtime(state=RuntimeState.UNVERIFIED),
        last_completion=completion,
        last_outcome=Outcome(kind=OutcomeKind.SESSION_ENDED, turn_id="t2",
                             at=T0 + timedelta(seconds=5), revision=h.revision.revision),
        location="/work/a",
    )
    assert h.broker.snapshots() == [h.revision]
    h.unchanged_by(ev(E.SESSION_ENDED, ROOT), Decision.DUPLICATE)
    h.unchanged_by(ev(E.TURN_COMPLETED, ROOT, "t2"), Decision.IGNORED_STALE)
    h.start("n1", OTHER)  # another session binds in the same terminal
    assert h.snap.root_session_id == OTHER
    assert h.snap.location == "/work/a"


def test_session_end_of_another_session_is_a_mismatch(h: Harness) -> None:
    h.unchanged_by(ev(E.SESSION_ENDED, ROOT), Decision.REJECTED_MISMATCH)  # nothing bound
    h.start("t1")
    h.unchanged_by(ev(E.SESSION_ENDED, OTHER), Decision.REJECTED_MISMATCH)


def test_agent_exit_publishes_a_tombstone(h: Harness) -> None:
    h.start("t1")
    before = h.revision.revision
    assert h.apply(ev(E.AGENT_EXITED, "launcher")) is Decision.ACCEPTED
    assert h.heard[-1] == Revision(terminal=TERMINAL, revision=h.heard[-1].revision, snapshot=None)
    assert h.heard[-1].revision > before
    assert h.broker.snapshot(TERMINAL) == h.heard[-1]
    assert h.broker.snapshots() == []
    h.unchanged_by(ev(E.TURN_COMPLETED, ROOT, "t1"), Decision.UNKNOWN_TERMINAL)
    assert h.broker.retire(TERMINAL) is None


def test_retire_publishes_a_tombstone_once(h: Harness) -> None:
    tombstone = h.broker.retire(TERMINAL)
    assert tombstone is not None
    assert tombstone.snapshot is None
    assert h.heard[-1] == tombstone
    assert h.broker.retire(TERMINAL) is None
    again = h.broker.register(TERMINAL)
    assert again.revision > tombstone.revision


# ---------------------------------------------------------------------- location


def test_a_cwd_rides_in_the_same_revision_as_its_event(h: Harness) -> None:
    heard = len(h.heard)
    assert h.apply(ev(E.TURN_STARTED, ROOT, "t1", cwd="/work/./a/b/../c/")) is Decision.ACCEPTED
    assert len(h.heard) == heard + 1
    assert h.snap.location == "/work/a/c"
    assert h.snap.runtime.state is RuntimeState.RUNNING


def test_a_location_only_change_gets_its_own_revision(h: Harness) -> None:
    h.start("t1")
    assert h.apply(ev(E.LOCATION_CHANGED, ROOT, cwd="/w")) is Decision.ACCEPTED
    assert h.snap.location == "/w"
    h.unchanged_by(ev(E.LOCATION_CHANGED, ROOT, cwd="/w/"), Decision.DUPLICATE)
    assert h.apply(ev(E.TURN_STARTED, ROOT, "t1", cwd="/x")) is Decision.ACCEPTED  # new cwd
    assert h.snap.location == "/x"
    h.unchanged_by(ev(E.LOCATION_CHANGED, ROOT), Decision.REJECTED_AMBIGUOUS)


def test_an_unbound_registration_may_move_without_binding(h: Harness) -> None:
    assert h.apply(ev(E.LOCATION_CHANGED, ROOT, cwd="/w")) is Decision.ACCEPTED
    assert h.snap.location == "/w"
    assert h.snap.root_session_id is None


def test_a_refused_event_never_moves_the_location(h: Harness) -> None:
    h.start("t1")
    h.apply(ev(E.TURN_COMPLETED, ROOT, "t1", cwd="/a"))
    h.unchanged_by(ev(E.TURN_COMPLETED, ROOT, "old", cwd="/stale"), Decision.IGNORED_STALE)
    h.unchanged_by(ev(E.LOCATION_CHANGED, OTHER, cwd="/other"), Decision.REJECTED_MISMATCH)
    h.unchanged_by(ev(E.LOCATION_CHANGED, ROOT, cwd="/child", scope=Scope.CHILD),
                   Decision.IGNORED_CHILD)
    assert h.snap.location == "/a"


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [("/", "/"), ("//", "/"), ("//srv/x", "/srv/x"), ("///a//b/", "/a/b"), ("/a/../..", "/"),
     ("/a/./b/.", "/a/b"), ("/a b/ç", "/a b/ç")],
)
def test_locations_are_canonical_posix_paths(raw: str, canonical: str) -> None:
    assert canonical_location(raw) == canonical


# ---------------------------------------------------------------- revisions, api


def test_the_listener_hears_exactly_the_accepted_changes(h: Harness) -> None:
    decisions = [
        h.apply(envelope)
        for envelope in [
            ev(E.TURN_STARTED, ROOT, "t1"), ev(E.TURN_STARTED, ROOT, "t1"),
            ev(E.TURN_STARTED, OTHER, "x"), ev(E.TURN_STARTED, ROOT, "c", scope=Scope.CHILD),
            ev(E.TURN_COMPLETED, ROOT, "t0"), ev(E.TURN_COMPLETED, ROOT, "t1"),
            ev(E.TURN_COMPLETED, ROOT, "t1"),
        ]
    ]
    accepted = decisions.count(Decision.ACCEPTED)
    assert accepted == 2
    assert len(h.heard) == 1 + accepted
    revisions = [r.revision for r in h.heard]
    assert revisions == sorted(set(revisions))
    assert h.heard[-1] == h.revision


def test_old_tombstones_are_forgotten_and_revisions_still_increase() -> None:
    broker = Broker()
    first = broker.register("first")
    tombstone = broker.retire("first")
    assert tombstone is not None
    for n in range(MAX_TOMBSTONES):
        broker.register(f"t{n}")
        broker.retire(f"t{n}")
    assert broker.snapshot("first") is None  # forgotten: memory stays bounded
    assert broker.snapshot(f"t{MAX_TOMBSTONES - 1}") is not None
    again = broker.register("first")
    assert again.revision > tombstone.revision > first.revision


def test_revisions_increase_across_terminals_and_registrations() -> None:
    broker = Broker()
    a = broker.register("a")
    b = broker.register("b")
    assert b.revision > a.revision
    assert {r.terminal for r in broker.snapshots()} == {"a", "b"}


def test_snapshots_round_trip_through_json(h: Harness) -> None:
    h.start("t1")
    h.apply(ev(E.INPUT_REQUESTED, ROOT, "t1", input_id="p", cwd="/w"))
    revisions = [h.revision]
    h.apply(ev(E.TURN_COMPLETED, ROOT, "t1"))
    revisions.append(h.revision)
    revisions.append(h.broker.retire(TERMINAL) or h.revision)
    for revision in revisions:
        wire = json.loads(json.dumps(revision.to_json()))
        assert Revision.from_json(wire) == revision
    assert revisions[0].to_json()["snapshot"] == {
        "runtime": {"state": "running", "turnId": "t1", "startedAt": "2026-11-30T12:00:01+00:00"},
        "pendingRequest": {"inputId": "p", "turnId": "t1",
                           "requestedAt": "2026-11-30T12:00:02+00:00"},
        "lastCompletion": None, "lastOutcome": None, "rootSessionId": ROOT, "location": "/w",
    }


@pytest.mark.parametrize(
    "change",
    [
        {"extra": 1},
        {"revision": "3"},
        {"snapshot": {"runtime": {"state": "running", "turnId": None, "startedAt": None}}},
        {"snapshot": {"runtime": {"state": "sleeping"}}},
        {"snapshot": {"runtime": {"state": "idle"}, "location": 3}},
    ],
)
def test_revision_json_is_strict(change: dict[str, object]) -> None:
    wire: dict[str, object] = {"terminal": "t", "revision": 3, "snapshot": None} | change
    with pytest.raises(BoundaryError):
        Revision.from_json(wire)


def test_explain_shows_truncated_ids_and_a_bounded_history(h: Harness) -> None:
    long_session = "S" * 40
    h.apply(ev(E.TURN_STARTED, long_session, "T" * 40))
    for n in range(MAX_RECENT_DECISIONS + 5):
        h.apply(ev(E.TURN_STARTED, OTHER, f"x{n}"))
    explained = h.broker.explain(TERMINAL)
    assert explained is not None
    text = json.dumps(explained)
    assert "S" * 9 not in text
    assert "T" * 9 not in text
    assert explained["rootSession"] == "S" * 8
    assert explained["runtime"] == "running"
    recent = explained["recent"]
    assert isinstance(recent, list)
    assert len(recent) == MAX_RECENT_DECISIONS
    assert recent[-1]["decision"] == "rejected-mismatch"


def test_explain_a_tombstone(h: Harness) -> None:
    h.broker.retire(TERMINAL)
    explained = h.broker.explain(TERMINAL)
    assert explained is not None
    assert explained["live"] is False
    assert explained["runtime"] is None


def test_the_retired_turn_list_is_bounded(h: Harness) -> None:
    for n in range(MAX_RETIRED_TURNS * 2):
        h.start(f"t{n}")
    explained = h.broker.explain(TERMINAL)
    assert explained is not None
    assert explained["retiredTurns"] == MAX_RETIRED_TURNS
    h.unchanged_by(ev(E.TURN_STARTED, ROOT, f"t{MAX_RETIRED_TURNS * 2 - 2}"),
                   Decision.IGNORED_STALE)


def test_the_debug_log_is_one_bounded_line_per_envelope(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CLANKER_DEBUG_ATTENTION", "1")
    caplog.set_level(logging.INFO, logger="clanker.attention.broker")
    broker = Broker()
    broker.register(TERMINAL)
    secret_session, secret_turn = "sessionSECRETSECRET", "turnidSECRETSECRET"
    broker.apply(TERMINAL, Envelope(event=E.TURN_STARTED, scope=Scope.ROOT,
                                    session_id=secret_session, turn_id=secret_turn,
                                    native_event="UserPromptSubmit", cwd="/private/place"))
    broker.apply("nobody", ev(E.TURN_COMPLETED, ROOT, "t"))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert "decision=accepted" in lines[0]
    assert "native=UserPromptSubmit" in lines[0]
    assert "sessionS " in lines[0] and "turnidSE " in lines[0]
    assert "SECRET" not in "".join(lines)
    assert "/private" not in "".join(lines)
    assert "decision=unknown-terminal" in lines[1]


def test_no_debug_log_without_the_switch(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="clanker.attention.broker")
    broker = Broker()
    broker.register(TERMINAL)
    broker.apply(TERMINAL, ev(E.TURN_STARTED, ROOT, "t1"))
    assert caplog.records == []


# --------------------------------------------------------- failed-closed transactions


def test_the_failed_closed_count_is_the_highest_heard_and_no_revision(h: Harness) -> None:
    before, heard = h.revision, len(h.heard)
    assert h.broker.failed_closed(TERMINAL) == 0
    h.broker.record_failed_closed(TERMINAL, 3)
    h.broker.record_failed_closed(TERMINAL, 2)  # an older report, arriving late
    assert h.broker.failed_closed(TERMINAL) == 3
    explained = h.broker.explain(TERMINAL)
    assert explained is not None
    assert explained["failedClosed"] == 3
    # A health figure, not lifecycle: nothing is published.
    assert (h.revision, len(h.heard)) == (before, heard)


def test_the_failed_closed_count_belongs_to_one_registration(h: Harness) -> None:
    h.broker.record_failed_closed("nobody", 5)
    assert h.broker.failed_closed("nobody") == 0
    h.broker.record_failed_closed(TERMINAL, 2)
    h.broker.register(TERMINAL)  # a new launch: a new bridge state, a new count
    assert h.broker.failed_closed(TERMINAL) == 0
    h.broker.record_failed_closed(TERMINAL, 1)
    h.broker.retire(TERMINAL)
    h.broker.record_failed_closed(TERMINAL, 4)
    assert h.broker.failed_closed(TERMINAL) == 0
    explained = h.broker.explain(TERMINAL)
    assert explained is not None
    assert explained["failedClosed"] == 0
