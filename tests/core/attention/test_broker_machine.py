"""The broker against a small reference model, under arbitrary interleavings.

The model below is written from the lifecycle contract, independently of the
broker's code: a plain record per terminal and one function per event. Every
step checks the broker's decision and snapshot against it, plus invariants that
hold whatever the model says (revisions, listener, child and unknown scope,
retired turns, input ids, completions).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import product
from typing import TypeVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from clanker.attention.broker import Broker, Decision, OutcomeKind, Revision, RuntimeState
from clanker.attention.envelope import Envelope, LifecycleEvent, Scope
from clanker.attention.presentation import Attention, derive_attention

E = LifecycleEvent
D = Decision
T = TypeVar("T")
TERMINALS = ("a", "b")
SESSIONS = ("s1", "s2", "s3")
TURNS = ("t1", "t2", "t3", "t4")
INPUTS = (None, "i1", "i2")
CANONICAL = {"/w": "/w", "/w/": "/w", "/x/../w": "/w", "//w": "/w", "/y/./": "/y", "/": "/"}
NEEDS_TURN = {E.TURN_STARTED, E.TURN_COMPLETED, E.TURN_INTERRUPTED, E.TURN_FAILED,
              E.INPUT_REQUESTED, E.INPUT_RESOLVED}
SETTLES = {E.TURN_COMPLETED: "completed", E.TURN_INTERRUPTED: "interrupted",
           E.TURN_FAILED: "failed"}


@dataclass
class Model:
    """One terminal as the contract describes it."""

    live: bool = False
    root: str | None = None
    state: str = "unverified"
    turn: str | None = None  # the running turn, or the failed one
    turn_session: str | None = None  # the session that turn started under
    pending: tuple[str | None, str] | None = None  # (shown input id, turn)
    waits: list[str | None] = field(default_factory=list)  # the turn's open waits
    completion: str | None = None  # the turn of the last completion
    outcome: tuple[str, str | None] | None = None  # (kind, turn)
    location: str | None = None
    dead: dict[str, set[str]] = field(default_factory=dict)  # session -> retired turns
    continued_from: str | None = None
    ended: str | None = None
    resolved: tuple[str, str | None] | None = None
    fresh_outcome: bool = False
    fresh_completion: bool = False

    def facts(self) -> tuple[object, ...]:
        return (self.live, self.root, self.state, self.turn, self.pending, self.completion,
                self.outcome, self.location)

    def kill(self, turn: str, *sessions: str | None) -> None:
        for session in sessions:
            if session is not None:
                self.dead.setdefault(session, set()).add(turn)

    def bind(self, session: str) -> None:
        self.root, self.ended, self.continued_from = session, None, None

    def live_turn(self, e: Envelope) -> D | None:
        if self.root is None:
            return D.IGNORED_STALE
        if self.root != e.session_id:
            return D.REJECTED_MISMATCH
        if self.state != "running" or self.turn != e.turn_id:
            return D.IGNORED_STALE
        return None


def expect(m: Model, e: Envelope) -> D:
    """Apply ``e`` to ``m`` (in place) and return the decision the contract requires."""
    m.fresh_outcome = m.fresh_completion = False
    if not m.live:
        return D.UNKNOWN_TERMINAL
    if e.scope is Scope.CHILD:
        return D.IGNORED_CHILD
    if e.scope is None:
        return D.REJECTED_AMBIGUOUS
    if e.event is E.AGENT_EXITED:
        m.live = False  # a tombstone: nothing is live any more
        return D.ACCEPTED
    if (
        (e.event in NEEDS_TURN and e.turn_id is None)
        or (e.event is E.SESSION_CONTINUED and e.continues_session_id is None)
        or (e.event is E.LOCATION_CHANGED and e.cwd is None)
    ):
        return D.REJECTED_AMBIGUOUS
    before = m.facts()
    refused = _handle(m, e)
    if refused is not None:
        return refused
    if e.cwd is not None:
        m.location = CANONICAL[e.cwd]
    return D.ACCEPTED if m.facts() != before else D.DUPLICATE


def _handle(m: Model, e: Envelope) -> D | None:
    s, t = e.session_id, e.turn_id
    foreign = m.root is not None and m.root != s
    if e.event in (E.SESSION_STARTED, E.TURN_STARTED, E.LOCATION_CHANGED) and foreign:
        return D.REJECTED_MISMATCH
    if e.event is E.SESSION_STARTED:
        if m.root is None:
            m.bind(s)
        if m.state == "unverified":
            m.state = "idle"
    elif e.event is E.TURN_STARTED:
        assert t is not None
        if t in m.dead.get(s, set()):
            return D.IGNORED_STALE
        if not (m.state == "running" and m.turn == t):
            if m.state == "running":
                assert m.turn is not None
                m.kill(m.turn, m.turn_session, m.root)
            if m.root is None:
                m.bind(s)
            m.state, m.turn, m.turn_session, m.pending = "running", t, s, None
    elif e.event in SETTLES:
        refused = m.live_turn(e)
        if (refused is D.IGNORED_STALE and m.root == s and m.outcome == (SETTLES[e.event], t)
                and m.state != "running"):
            return D.DUPLICATE  # the same settlement again: it moves nothing
        if refused is not None:
            return refused
        assert t is not None
        m.kill(t, m.turn_session, m.root)
        kind = SETTLES[e.event]
        m.state = "failed" if kind == "failed" else "idle"
        m.turn = t if kind == "failed" else None
        m.turn_session, m.pending, m.outcome, m.fresh_outcome = None, None, (kind, t), True
        if kind == "completed":
            m.completion, m.fresh_completion = t, True
    elif e.event is E.INPUT_REQUESTED:
        refused = m.live_turn(e)
        if refused is not None:
            return refused
        assert t is not None
        if m.pending is None:
            m.waits = []
        if e.input_id not in m.waits:
            m.waits.append(e.input_id)
        m.pending = (m.waits[-1], t)
    elif e.event is E.INPUT_RESOLVED:
        refused = m.live_turn(e)
        if refused is not None:
            return refused
        if m.pending is None:
            return None if m.resolved == (t, e.input_id) else D.IGNORED_STALE
        if e.input_id not in m.waits and None not in m.waits:
            return D.IGNORED_STALE
        assert t is not None
        m.waits = [w for w in m.waits if w not in (e.input_id, None)]
        m.pending = (m.waits[-1], t) if m.waits else None
        m.resolved = (t, e.input_id)
    elif e.event is E.SESSION_CONTINUED:
        old = e.continues_session_id
        if m.root == s and old in (m.root, m.continued_from):
            return None  # delivered again
        if m.root is None or old != m.root:
            return D.REJECTED_MISMATCH
        m.dead.setdefault(s, set()).update(m.dead.get(old, set()))
        m.root, m.continued_from = s, old
    elif e.event is E.SESSION_ENDED:
        if m.root is None:
            return D.DUPLICATE if s == m.ended else D.REJECTED_MISMATCH
        if foreign:
            return D.REJECTED_MISMATCH
        running = m.turn if m.state == "running" else None
        if running is not None:
            m.kill(running, m.turn_session, m.root)
        m.outcome, m.fresh_outcome = ("session-ended", running), True
        m.state, m.turn, m.turn_session, m.pending = "unverified", None, None, None
        m.root, m.ended, m.continued_from = None, s, None
    return None


# agent_exited ends the terminal, so it is drawn rarely; scope is mostly root.
EVENTS = [e for e in LifecycleEvent if e is not E.AGENT_EXITED] * 4 + [E.AGENT_EXITED]
SCOPES = [Scope.ROOT, Scope.ROOT, Scope.ROOT, Scope.CHILD, None]
TURN_LIFE = [E.TURN_STARTED, E.INPUT_REQUESTED, E.INPUT_REQUESTED, E.INPUT_RESOLVED,
             E.INPUT_RESOLVED, E.TURN_COMPLETED, E.TURN_INTERRUPTED, E.TURN_FAILED]
FRESH_TURNS = 12
"""Fresh turn ids per run; with TURNS and SESSIONS this stays below MAX_RETIRED_TURNS
(48 < 64 retired pairs), so the broker's bound never forgets what the model remembers."""


# Envelopes are drawn as one or two choices from precomputed field combinations:
# far fewer draws per step than field by field, so the machine stays fast.
_CORE = list(product(EVENTS, ("s1", "s1", "s1", *SESSIONS), SCOPES,
                     (None, "t1", "t1", "t2", *TURNS)))
_EXTRAS = list(product(INPUTS, (None, None, *CANONICAL), (None, *SESSIONS)))
_ONE_TURN = list(product(TURN_LIFE, [Scope.ROOT] * 6 + SCOPES, (None, *INPUTS),
                         (None, None, *CANONICAL)))


def _envelope(core: tuple[E, str, Scope | None, str | None],
              extras: tuple[str | None, str | None, str | None]) -> Envelope:
    event, session, scope, turn = core
    input_id, cwd, continues = extras
    return Envelope(event=event, session_id=session, scope=scope, turn_id=turn,
                    input_id=input_id, cwd=cwd,
                    continues_session_id=continues if event is E.SESSION_CONTINUED else None)


def _pick(options: list[T]) -> st.SearchStrategy[T]:
    # An index, not sampled_from: a short repr for a long list (warnings are errors).
    return st.integers(0, len(options) - 1).map(lambda i: options[i])


envelopes = st.builds(_envelope, _pick(_CORE), _pick(_EXTRAS))


def one_turn(choice: tuple[E, Scope | None, str | None, str | None], session: str, turn: str,
             inputs: str | None) -> Envelope:
    """An event of one turn of one session: mostly root, mostly one input id."""
    event, scope, input_id, cwd = choice
    return Envelope(event=event, session_id=session, scope=scope, turn_id=turn,
                    input_id=input_id or inputs, cwd=cwd)


class BrokerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.heard: list[Revision] = []
        self.now = datetime(2026, 11, 30, tzinfo=UTC)
        self.broker = Broker(listener=self.heard.append, clock=self._tick)
        self.models = {terminal: Model() for terminal in TERMINALS}
        self.last: dict[str, Revision] = {}
        self.retired: dict[str, set[tuple[str | None, str]]] = {t: set() for t in TERMINALS}
        self.fresh = 0

    def _tick(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now

    def _published(self, terminal: str, heard: int) -> Revision:
        current = self.broker.snapshot(terminal)
        assert current is not None
        assert self.heard[heard:] == [current]
        previous = self.last.get(terminal)
        assert previous is None or current.revision > previous.revision
        self.last[terminal] = current
        return current

    @initialize()
    def register_every_terminal(self) -> None:
        for terminal in TERMINALS:
            self.register(terminal, None)

    @rule(terminal=st.sampled_from(TERMINALS), trusted=st.sampled_from((None, *SESSIONS)))
    def register(self, terminal: str, trusted: str | None) -> None:
        heard = len(self.heard)
        self.broker.register(terminal, trusted_root_session_id=trusted)
        self._published(terminal, heard)
        self.models[terminal] = Model(live=True, root=trusted)
        self.retired[terminal] = set()

    @rule(terminal=st.sampled_from(TERMINALS))
    def retire(self, terminal: str) -> None:
        heard = len(self.heard)
        tombstone = self.broker.retire(terminal)
        if not self.models[terminal].live:
            assert tombstone is None
            assert len(self.heard) == heard
            return
        assert tombstone is not None
        assert tombstone.snapshot is None
        assert self._published(terminal, heard) == tombstone
        self.models[terminal] = Model()

    @rule(
        terminal=st.sampled_from((*TERMINALS, *TERMINALS, *TERMINALS, "stranger")),
        batch=st.lists(envelopes, min_size=1, max_size=4),
    )
    def deliver(self, terminal: str, batch: list[Envelope]) -> None:
        """Arbitrary events: foreign sessions, children, unknown scope, missing ids."""
        for envelope in batch:
            self.apply(terminal, envelope)

    @rule(
        terminal=st.sampled_from(TERMINALS),
        turn=st.sampled_from((*TURNS, "fresh", "fresh", "fresh")),
        inputs=st.sampled_from((None, "i1", "i2")),
        started=st.integers(0, 3),
        choices=st.lists(_pick(_ONE_TURN), min_size=1, max_size=5),
    )
    def deliver_one_turn(
        self,
        terminal: str,
        turn: str,
        inputs: str | None,
        started: int,
        choices: list[tuple[E, Scope | None, str | None, str | None]],
    ) -> None:
        """One turn of the bound root: started (usually), then its events shuffled,
        repeated and mixed with children and unknown scope."""
        session = self.models[terminal].root or "s1"
        if turn == "fresh":
            self.fresh += 1
            turn = f"n{self.fresh}" if self.fresh <= FRESH_TURNS else TURNS[0]
        batch = [one_turn(choice, session, turn, inputs) for choice in choices]
        if started:
            batch.insert(0, Envelope(event=E.TURN_STARTED, scope=Scope.ROOT,
                                     session_id=session, turn_id=turn))
        for envelope in batch:
            self.apply(terminal, envelope)

    @rule(terminal=st.sampled_from(TERMINALS), new=st.sampled_from(SESSIONS))
    def continue_the_root(self, terminal: str, new: str) -> None:
        """A proven continuation of whatever root is bound (context compression)."""
        old = self.models[terminal].root or "s1"
        self.apply(terminal, Envelope(event=E.SESSION_CONTINUED, scope=Scope.ROOT,
                                      session_id=new, continues_session_id=old))

    def apply(self, terminal: str, envelope: Envelope) -> None:
        before = self.broker.snapshot(terminal)
        heard = len(self.heard)
        decision = self.broker.apply(terminal, envelope)
        after = self.broker.snapshot(terminal)
        model = self.models.get(terminal, Model())
        assert decision is expect(model, envelope), (envelope, model)

        # Invariants that hold whatever the model says.
        if decision is not D.ACCEPTED:
            assert after == before
            assert len(self.heard) == heard
            return
        assert envelope.scope is Scope.ROOT
        assert after is not None
        assert self._published(terminal, heard) == after
        assert before is not None
        assert before.snapshot is not None
        old, new = before.snapshot, after.snapshot
        if new is None:
            assert envelope.event is E.AGENT_EXITED
            return
        if new.last_completion != old.last_completion:
            assert envelope.event is E.TURN_COMPLETED
            assert new.last_completion is not None
            assert new.last_completion.revision == after.revision
        if new.last_outcome != old.last_outcome:
            assert new.last_outcome is not None
            assert new.last_outcome.revision == after.revision
        if old.pending_request is not None and new.pending_request is None and (
            envelope.event is E.INPUT_RESOLVED
        ):
            assert old.pending_request.input_id in (None, envelope.input_id)
        if new.location != old.location:
            assert envelope.cwd is not None
        retired = self.retired[terminal]
        if old.runtime.state is RuntimeState.RUNNING and (
            new.runtime.state is not RuntimeState.RUNNING
            or new.runtime.turn_id != old.runtime.turn_id
        ):
            assert old.runtime.turn_id is not None
            retired.add((old.root_session_id, old.runtime.turn_id))
        if new.runtime.state is RuntimeState.RUNNING and new.runtime != old.runtime:
            assert new.runtime.turn_id is not None
            assert (new.root_session_id, new.runtime.turn_id) not in retired
        if not model.fresh_outcome:
            assert new.last_outcome == old.last_outcome
        if not model.fresh_completion:
            assert new.last_completion == old.last_completion

    @invariant()
    def snapshots_agree_with_the_models(self) -> None:
        live = {r.terminal for r in self.broker.snapshots()}
        assert live == {t for t, m in self.models.items() if m.live}
        for terminal, m in self.models.items():
            revision = self.broker.snapshot(terminal)
            if not m.live:
                assert revision is None or revision.snapshot is None
                continue
            assert revision is not None
            snap = revision.snapshot
            assert snap is not None
            assert snap.root_session_id == m.root
            assert snap.runtime.state.value == m.state
            assert snap.runtime.turn_id == m.turn
            pending = snap.pending_request
            assert (None if pending is None else (pending.input_id, pending.turn_id)) == m.pending
            completion = snap.last_completion
            assert (None if completion is None else completion.turn_id) == m.completion
            outcome = snap.last_outcome
            assert (None if outcome is None else (outcome.kind.value, outcome.turn_id)) == (
                m.outcome
            )
            assert snap.location == m.location
            # presentation is total, and Done is never an outcome other than the latest
            attention = derive_attention(revision, 0)
            if attention is Attention.DONE:
                assert outcome is not None
                assert outcome.kind is OutcomeKind.COMPLETED


TestBrokerMachine = BrokerMachine.TestCase
# Each step delivers a batch of up to six events, so 100 runs of 40 steps explore
# more interleavings than the step count suggests and still take a few seconds.
TestBrokerMachine.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)
