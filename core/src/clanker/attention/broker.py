"""The attention broker: the single lifecycle authority of one grid.

A :class:`Broker` correlates canonical lifecycle events
(:class:`~clanker.attention.envelope.Envelope`) per registered terminal and
publishes revisioned :class:`Snapshot` values of independent semantic facts:
the runtime (``unverified | idle | running | failed``), a pending input request,
the last completion and the last outcome, the bound root session and the
reported location. It never publishes UI concepts
(:mod:`~clanker.attention.presentation` derives those) and never branches on a
harness: every provider reaches it through the same envelope.

The invariants it keeps (each answered with a :class:`Decision`):

- Only a root ``turn_started`` (or an identity-only root ``session_started``)
  binds an unbound registration; a completion or input event never does.
- A ``child`` event is ``ignored-child``; an event without a scope (unknown
  subject) is ``rejected-ambiguous``. Neither changes anything.
- Once a root is bound, another session cannot change it (``rejected-mismatch``).
- Turn, input and completion events need a ``turnId`` (else
  ``rejected-ambiguous``). Completion and input events settle or mark only the
  live turn; a completed, interrupted, failed or superseded turn is retired
  (a bounded list) and can neither settle nor restart (``ignored-stale``).
- ``input_resolved`` clears only an outstanding wait of the live turn, and a
  wait with an ``inputId`` only when the resolution carries the same one. A
  turn may have several waits (up to :data:`MAX_WAITS`, then none clears until
  a boundary): the newest is shown, and it needs input until all are resolved.
- ``session_continued`` moves the bound root to the continuation it names only
  when ``continuesSessionId`` is the bound root; turn, input and runtime stay.
- ``session_ended`` clears the root, turn and pending input and keeps the
  registration (and the location); ``agent_exited`` retires the registration
  (a tombstone, like :meth:`Broker.retire`).
- A ``cwd`` moves the location (canonicalized lexically: POSIX, ``normpath``,
  no trailing slash) in the same revision as its event's own change, when that
  event is accepted or a duplicate (a duplicate that moves is then accepted);
  an ignored or rejected event moves nothing. So only the bound root (or any
  root event on an unbound registration) can move it.
- An event that would change nothing is a ``duplicate``. Only an accepted change
  takes a new revision.

Revisions come from one counter per broker, so a terminal's revision strictly
increases across re-registration and retirement (and never goes back even once a
tombstone is forgotten); they are not consecutive per terminal.

Apart from lifecycle, the broker keeps one health figure per terminal: how many
of its hook transactions *failed closed* (the hook bridge's running count,
:meth:`Broker.record_failed_closed`). It is not a lifecycle fact, so it takes no
revision; :meth:`Broker.explain` and the grid's terminal entries show it.

The broker is pure: no IO, no threads, no timers. Time comes from ``clock``
and is only recorded, never used to decide. ``CLANKER_DEBUG_ATTENTION=1`` logs
one bounded line per applied envelope (safe metadata only).
"""

from __future__ import annotations

import enum
import os
import posixpath
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final, Self

import attrs
from attrs import field, frozen
from cattrs.preconf.json import JsonConverter

from clanker._logging import get_logger
from clanker.attention.envelope import (
    Envelope,
    LifecycleEvent,
    Scope,
    check_id,
    register_camel_case,
    register_enum,
    structure_wire,
)
from clanker.converters import BoundaryError, make_boundary_converter

__all__ = [
    "MAX_RECENT_DECISIONS",
    "MAX_RETIRED_TURNS",
    "MAX_TOMBSTONES",
    "MAX_WAITS",
    "Broker",
    "Completion",
    "Decision",
    "Outcome",
    "OutcomeKind",
    "PendingRequest",
    "Revision",
    "Runtime",
    "RuntimeState",
    "Snapshot",
    "canonical_location",
]

MAX_WAITS: Final = 16
"""Outstanding waits one turn keeps; past it the turn needs input until a boundary."""

MAX_RETIRED_TURNS: Final = 64
"""Retired (session, turn) pairs remembered per terminal."""
MAX_RECENT_DECISIONS: Final = 16
"""Decisions remembered per terminal for :meth:`Broker.explain`."""
MAX_TOMBSTONES: Final = 1024
"""Retired terminals remembered (their tombstone revision) before being forgotten."""
SHOWN_ID_LENGTH: Final = 8
"""Ids are truncated to this many characters in logs and explanations."""

log = get_logger(__name__)


class Decision(enum.StrEnum):
    ACCEPTED = "accepted"  # a semantic change: a new revision was published
    DUPLICATE = "duplicate"  # valid, but it changes nothing
    IGNORED_CHILD = "ignored-child"  # a child's event never changes the pane
    IGNORED_STALE = "ignored-stale"  # not for the live turn (retired, superseded, unknown)
    REJECTED_MISMATCH = "rejected-mismatch"  # another session than the bound root
    REJECTED_AMBIGUOUS = "rejected-ambiguous"  # unknown scope, or a required id is missing
    UNKNOWN_TERMINAL = "unknown-terminal"  # not registered, or retired


class RuntimeState(enum.StrEnum):
    UNVERIFIED = "unverified"  # no lifecycle evidence yet (or the session ended)
    IDLE = "idle"  # a root session is up and no turn is running
    RUNNING = "running"  # a root turn is live
    FAILED = "failed"  # the last turn failed; until the next turn starts


class OutcomeKind(enum.StrEnum):
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    FAILED = "failed"
    SESSION_ENDED = "session-ended"


def _runtime_consistent(instance: Runtime, _: Any, state: RuntimeState) -> None:
    has_turn = state in (RuntimeState.RUNNING, RuntimeState.FAILED)
    if has_turn != (instance.turn_id is not None) or has_turn != (instance.started_at is not None):
        raise BoundaryError(f"runtime {state.value} must carry a turn id and start time exactly "
                            "when running or failed")


@frozen(kw_only=True)
class Runtime:
    state: RuntimeState = field(validator=_runtime_consistent)
    turn_id: str | None = None
    """The live turn (running), or the turn that failed (failed)."""
    started_at: datetime | None = None


UNVERIFIED: Final = Runtime(state=RuntimeState.UNVERIFIED)
IDLE: Final = Runtime(state=RuntimeState.IDLE)


@frozen(kw_only=True)
class PendingRequest:
    """An outstanding wait for a person, owned by the live turn."""

    input_id: str | None
    turn_id: str
    requested_at: datetime


@frozen(kw_only=True)
class Completion:
    """The last accepted foreground completion; new work never clears it."""

    turn_id: str
    at: datetime
    revision: int
    """The revision that recorded it (what a seen-watermark is compared with)."""


@frozen(kw_only=True)
class Outcome:
    """How the latest turn (or session) ended."""

    kind: OutcomeKind
    turn_id: str | None
    at: datetime
    revision: int


class _Wire:
    """The published types' JSON form: camelCase keys, ISO 8601 times."""

    __slots__ = ()

    def to_json(self) -> dict[str, object]:
        """Return the JSON-able form."""
        data: dict[str, object] = _CONVERTER.unstructure(self)
        return data

    @classmethod
    def from_json(cls, obj: object) -> Self:
        """Structure :meth:`to_json` output; raise :class:`BoundaryError` otherwise."""
        return structure_wire(_CONVERTER, obj, cls, BoundaryError)


@frozen(kw_only=True)
class Snapshot(_Wire):
    """The published semantic facts about one registered terminal."""

    runtime: Runtime = UNVERIFIED
    pending_request: PendingRequest | None = None
    last_completion: Completion | None = None
    last_outcome: Outcome | None = None
    root_session_id: str | None = None
    location: str | None = None
    """Where the root agent last reported working (canonical absolute POSIX path)."""


@frozen(kw_only=True)
class Revision(_Wire):
    """One published state of a terminal; ``snapshot is None`` is a tombstone."""

    terminal: str
    revision: int
    snapshot: Snapshot | None


def _bound_elsewhere(root: str | None, session: str) -> bool:
    """Whether a terminal whose root is ``root`` is bound to another session than ``session``."""
    return root is not None and root != session


def _make_converter() -> JsonConverter:
    converter = make_boundary_converter()
    for kind in (RuntimeState, OutcomeKind):
        register_enum(converter, kind)
    for cls in (Runtime, PendingRequest, Completion, Outcome, Snapshot, Revision):
        register_camel_case(converter, cls)
    return converter


_CONVERTER: Final = _make_converter()


def canonical_location(cwd: str) -> str:
    """Canonicalize an absolute POSIX path lexically (no symlinks, no trailing slash)."""
    path = posixpath.normpath(cwd)
    # normpath keeps exactly two leading slashes (POSIX leaves them to the system).
    return "/" + path.lstrip("/")


def _short(value: str | None) -> str | None:
    return None if value is None else value[:SHOWN_ID_LENGTH]


_SETTLE_OUTCOMES: Final = {
    LifecycleEvent.TURN_COMPLETED: OutcomeKind.COMPLETED,
    LifecycleEvent.TURN_INTERRUPTED: OutcomeKind.INTERRUPTED,
    LifecycleEvent.TURN_FAILED: OutcomeKind.FAILED,
}


_Recent = tuple[str, str | None, str | None, str | None, Decision, int]
"""(event, native event, session id, turn id, decision, revision after it)."""


class _Entry:
    """One terminal's private correlation state (the snapshot is only part of it)."""

    __slots__ = (
        "continued_from",
        "ended_session",
        "failed_closed",
        "last_resolved",
        "live",
        "published",
        "recent",
        "retired",
        "snapshot",
        "turn_session",
        "waits",
        "waits_overflow",
        "waits_turn",
    )

    def __init__(self, published: Revision, recent: deque[_Recent]) -> None:
        self.published = published
        self.snapshot: Snapshot = published.snapshot or Snapshot()
        self.live = published.snapshot is not None
        self.recent = recent
        # (session, turn) pairs that can no longer settle or restart, oldest first.
        self.retired: dict[tuple[str, str], None] = {}
        self.turn_session: str | None = None  # the session the live turn started under
        # Both are only consulted to recognise a redelivery; session_ended resets the
        # first and sets the second, and only session_ended unbinds a registration.
        self.continued_from: str | None = None  # the root before the last continuation
        self.ended_session: str | None = None  # the root the last session_ended cleared
        self.last_resolved: tuple[str, str | None] | None = None  # (turn, input id)
        # The live turn's outstanding waits (input id -> requested at), oldest first:
        # one is shown, and the pane needs input until every one is resolved.
        self.waits: dict[str | None, datetime] = {}
        self.waits_turn: str | None = None
        self.waits_overflow = False
        self.failed_closed = 0  # the highest failed-closed count this registration reported

    def waits_of(self, turn: str) -> dict[str | None, datetime]:
        """The outstanding waits of ``turn`` (a turn boundary forgets the others)."""
        if self.waits_turn != turn or self.snapshot.pending_request is None:
            self.waits, self.waits_turn, self.waits_overflow = {}, turn, False
        return self.waits

    def shown_wait(self, turn: str) -> PendingRequest | None:
        """The newest outstanding wait, or ``None`` when none is left."""
        if not self.waits:
            return (self.snapshot.pending_request
                    if self.waits_overflow else None)
        input_id, requested_at = next(reversed(self.waits.items()))
        return PendingRequest(input_id=input_id, turn_id=turn, requested_at=requested_at)

    def retire_turn(self, turn_id: str, *sessions: str | None) -> None:
        for session in sessions:
            if session is not None:
                self.retired.pop((session, turn_id), None)
                self.retired[(session, turn_id)] = None
        while len(self.retired) > MAX_RETIRED_TURNS:
            del self.retired[next(iter(self.retired))]


def _now() -> datetime:
    return datetime.now(UTC)


def _debug_enabled() -> bool:
    return os.environ.get("CLANKER_DEBUG_ATTENTION", "") not in ("", "0")


class Broker:
    """Applies lifecycle envelopes to registered terminals (see the module notes).

    ``listener`` hears every new revision (registration, accepted change,
    tombstone) synchronously, after the broker's state already holds it; an
    exception it raises propagates to the caller. Not thread-safe: one owner
    (the grid's event loop) calls it.
    """

    def __init__(
        self,
        *,
        listener: Callable[[Revision], None] | None = None,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self._listener = listener
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._tombstones: dict[str, None] = {}  # retired terminal ids, oldest first
        self._sequence = 0
        self._debug = _debug_enabled()

    # ------------------------------------------------------------ registration

    def register(self, terminal: str, *, trusted_root_session_id: str | None = None) -> Revision:
        """Register (or replace the registration of) ``terminal``; publish its first state.

        ``trusted_root_session_id`` is a session id clanker itself validated in
        trusted storage for a resume that keeps it: it binds the root at once.
        The runtime stays ``unverified`` until the harness reports. A
        replacement starts from fresh state; only the revision carries over.
        """
        check_id(terminal, "terminal")
        if trusted_root_session_id is not None:
            check_id(trusted_root_session_id, "trusted_root_session_id")
        old = self._entries.get(terminal)
        recent: deque[_Recent] = (
            old.recent if old is not None else deque(maxlen=MAX_RECENT_DECISIONS)
        )
        self._tombstones.pop(terminal, None)
        snapshot = Snapshot(root_session_id=trusted_root_session_id)
        entry = _Entry(self._next(terminal, snapshot), recent)
        self._entries[terminal] = entry
        recent.append(("register", None, None, None, Decision.ACCEPTED,
                       entry.published.revision))
        self._notify(entry.published)
        return entry.published

    def retire(self, terminal: str) -> Revision | None:
        """Retire ``terminal``: publish its tombstone. ``None`` if it is not registered."""
        entry = self._entries.get(terminal)
        if entry is None or not entry.live:
            return None
        self._tombstone(terminal, entry)
        entry.recent.append(("retire", None, None, None, Decision.ACCEPTED,
                             entry.published.revision))
        self._notify(entry.published)
        return entry.published

    def record_failed_closed(self, terminal: str, count: int) -> None:
        """Note that ``count`` of ``terminal``'s hook transactions have failed closed in all.

        The count is a running total, so the highest one heard is kept and
        reports may arrive in any order. Publishes nothing: it is not lifecycle.
        """
        entry = self._entries.get(terminal)
        if entry is not None and entry.live and count > entry.failed_closed:
            entry.failed_closed = count

    def failed_closed(self, terminal: str) -> int:
        """How many of ``terminal``'s hook transactions failed closed (0 if unknown)."""
        entry = self._entries.get(terminal)
        return entry.failed_closed if entry is not None and entry.live else 0

    def snapshot(self, terminal: str) -> Revision | None:
        """The latest revision of ``terminal`` (a tombstone once retired), else ``None``."""
        entry = self._entries.get(terminal)
        return None if entry is None else entry.published

    def snapshots(self) -> list[Revision]:
        """The latest revision of every live registration."""
        return [entry.published for entry in self._entries.values() if entry.live]

    # ------------------------------------------------------------------ events

    def apply(self, terminal: str, envelope: Envelope) -> Decision:
        """Apply one envelope from ``terminal``; the listener hears an accepted change."""
        entry = self._entries.get(terminal)
        if entry is None or not entry.live:
            decision = Decision.UNKNOWN_TERMINAL
        elif envelope.scope is not Scope.ROOT:
            decision = (
                Decision.IGNORED_CHILD
                if envelope.scope is Scope.CHILD
                else Decision.REJECTED_AMBIGUOUS
            )
        else:
            decision = self._HANDLERS[envelope.event](self, terminal, entry, envelope)
        if entry is not None:
            # Raw references only (explain() truncates): this is the hot path.
            entry.recent.append((envelope.event, envelope.native_event, envelope.session_id,
                                 envelope.turn_id, decision, entry.published.revision))
        if self._debug:
            log.info(
                "attention terminal=%s native=%s session=%s turn=%s event=%s decision=%s",
                terminal[:64], envelope.native_event or "-", _short(envelope.session_id),
                _short(envelope.turn_id) or "-", envelope.event.value, decision.value,
            )
        return decision

    def explain(self, terminal: str) -> dict[str, object] | None:
        """Why ``terminal`` is in its state: truncated ids, states and recent decisions."""
        entry = self._entries.get(terminal)
        if entry is None:
            return None
        snap = entry.snapshot
        pending = snap.pending_request
        outcome = snap.last_outcome
        completion = snap.last_completion
        return {
            "terminal": terminal,
            "live": entry.live,
            "revision": entry.published.revision,
            "runtime": snap.runtime.state.value if entry.live else None,
            "turn": _short(snap.runtime.turn_id) if entry.live else None,
            "rootSession": _short(snap.root_session_id) if entry.live else None,
            "pendingRequest": None if pending is None or not entry.live else {
                "inputId": _short(pending.input_id), "turn": _short(pending.turn_id)},
            "lastOutcome": None if outcome is None or not entry.live else {
                "kind": outcome.kind.value, "turn": _short(outcome.turn_id),
                "revision": outcome.revision},
            "lastCompletion": None if completion is None or not entry.live else {
                "turn": _short(completion.turn_id), "revision": completion.revision},
            "hasLocation": entry.live and snap.location is not None,
            "retiredTurns": len(entry.retired),
            "failedClosed": entry.failed_closed if entry.live else 0,
            "recent": [
                {"event": str(event), "nativeEvent": native, "session": _short(session),
                 "turn": _short(turn), "decision": str(decision), "revision": revision}
                for event, native, session, turn, decision, revision in entry.recent
            ],
        }

    # --------------------------------------------------------------- internals

    def _next(self, terminal: str, snapshot: Snapshot | None) -> Revision:
        self._sequence += 1
        return Revision(terminal=terminal, revision=self._sequence, snapshot=snapshot)

    def _notify(self, revision: Revision) -> None:
        if self._listener is not None:
            self._listener(revision)

    def _commit(self, terminal: str, entry: _Entry, snapshot: Snapshot, envelope: Envelope
                ) -> Decision:
        """Publish ``snapshot``, at the location ``envelope`` reports (if any), unless
        that changes nothing."""
        snapshot = self._located(snapshot, envelope)
        if snapshot == entry.snapshot:
            return Decision.DUPLICATE
        entry.snapshot = snapshot
        entry.published = self._next(terminal, snapshot)
        self._notify(entry.published)
        return Decision.ACCEPTED

    def _tombstone(self, terminal: str, entry: _Entry) -> None:
        entry.live = False
        entry.snapshot = Snapshot()
        entry.retired.clear()
        entry.published = self._next(terminal, None)
        self._tombstones[terminal] = None
        while len(self._tombstones) > MAX_TOMBSTONES:
            forgotten = next(iter(self._tombstones))
            del self._tombstones[forgotten]
            del self._entries[forgotten]

    @staticmethod
    def _located(snapshot: Snapshot, envelope: Envelope) -> Snapshot:
        if envelope.cwd is None:
            return snapshot
        location = canonical_location(envelope.cwd)
        if location == snapshot.location:
            return snapshot
        return attrs.evolve(snapshot, location=location)

    def _session_started(self, terminal: str, entry: _Entry, envelope: Envelope) -> Decision:
        snap = entry.snapshot
        root = snap.root_session_id
        if _bound_elsewhere(root, envelope.session_id):
            return Decision.REJECTED_MISMATCH
        if root is None or snap.runtime.state is RuntimeState.UNVERIFIED:
            snap = attrs.evolve(
                snap,
                root_session_id=envelope.session_id,
                runtime=IDLE if snap.runtime.state is RuntimeState.UNVERIFIED else snap.runtime,
            )
        return self._commit(terminal, entry, snap, envelope)

    def _turn_started(self, terminal: str, entry: _Entry, envelope: Envelope) -> Decision:
        turn = envelope.turn_id
        if turn is None:
            return Decision.REJECTED_AMBIGUOUS
        snap = entry.snapshot
        root = snap.root_session_id
        session = envelope.session_id
        if _bound_elsewhere(root, session):
            return Decision.REJECTED_MISMATCH
        if (session, turn) in entry.retired:
            return Decision.IGNORED_STALE
        runtime = snap.runtime
        if runtime.state is RuntimeState.RUNNING:
            if runtime.turn_id == turn:
                return self._commit(terminal, entry, snap, envelope)
            assert runtime.turn_id is not None
            entry.retire_turn(runtime.turn_id, entry.turn_session, root)  # superseded
        entry.turn_session = session
        snap = attrs.evolve(
            snap,
            runtime=Runtime(state=RuntimeState.RUNNING, turn_id=turn, started_at=self._clock()),
            pending_request=None,
            root_session_id=session,
        )
        return self._commit(terminal, entry, snap, envelope)

    def _live_turn(self, entry: _Entry, envelope: Envelope) -> Decision | None:
        """``None`` when ``envelope`` is for the live turn of the bound root, else why not."""
        if envelope.turn_id is None:
            return Decision.REJECTED_AMBIGUOUS
        snap = entry.snapshot
        if snap.root_session_id is None:
            return Decision.IGNORED_STALE  # nothing is live, and this never binds
        if snap.root_session_id != envelope.session_id:
            return Decision.REJECTED_MISMATCH
        runtime = snap.runtime
        if runtime.state is not RuntimeState.RUNNING or runtime.turn_id != envelope.turn_id:
            return Decision.IGNORED_STALE
        return None

    def _turn_settled(self, terminal: str, entry: _Entry, envelope: Envelope) -> Decision:
        kind = _SETTLE_OUTCOMES[envelope.event]
        refused = self._live_turn(entry, envelope)
        if refused is not None:
            outcome = entry.snapshot.last_outcome
            if (
                refused is Decision.IGNORED_STALE
                and outcome is not None
                and outcome.kind is kind
                and outcome.turn_id == envelope.turn_id
                and entry.snapshot.root_session_id == envelope.session_id
                and entry.snapshot.runtime.state is not RuntimeState.RUNNING
            ):
                # The same settlement, delivered again: it changes nothing, not even
                # the location (a newer report may have moved it since).
                return Decision.DUPLICATE
            return refused
        snap = entry.snapshot
        turn = snap.runtime.turn_id
        assert turn is not None
        entry.retire_turn(turn, entry.turn_session, snap.root_session_id)
        entry.turn_session = None
        revision = self._sequence + 1
        now = self._clock()
        outcome = Outcome(kind=kind, turn_id=turn, at=now, revision=revision)
        if kind is OutcomeKind.FAILED:
            runtime = Runtime(state=RuntimeState.FAILED, turn_id=turn,
                              started_at=snap.runtime.started_at)
        else:
            runtime = IDLE
        snap = attrs.evolve(
            snap,
            runtime=runtime,
            pending_request=None,
            last_completion=(
                Completion(turn_id=turn, at=now, revision=revision)
                if kind is OutcomeKind.COMPLETED
                else snap.last_completion
            ),
            last_outcome=outcome,
        )
        return self._commit(terminal, entry, snap, envelope)

    def _live_waits(
        self, entry: _Entry, envelope: Envelope
    ) -> tuple[str, dict[str | None, datetime]] | Decision:
        """The live turn and its outstanding waits when ``envelope`` is for that turn,
        else why not (see :meth:`_live_turn`)."""
        refused = self._live_turn(entry, envelope)
        if refused is not None:
            return refused
        turn = envelope.turn_id
        assert turn is not None
        return turn, entry.waits_of(turn)

    def _show_waits(self, terminal: str, entry: _Entry, envelope: Envelope, turn: str
                    ) -> Decision:
        """Commit the snapshot whose pending request is ``turn``'s newest outstanding wait."""
        snap = attrs.evolve(entry.snapshot, pending_request=entry.shown_wait(turn))
        return self._commit(terminal, entry, snap, envelope)

    def _input_requested(self, terminal: str, entry: _Entry, envelope: Envelope) -> Decision:
        live = self._live_waits(entry, envelope)
        if isinstance(live, Decision):
            return live
        turn, waits = live
        if envelope.input_id not in waits:
            if len(waits) >= MAX_WAITS:
                entry.waits_overflow = True  # past the bound nothing resolves until a boundary
            else:
                waits[envelope.input_id] = self._clock()
        return self._show_waits(terminal, entry, envelope, turn)

    def _input_resolved(self, terminal: str, entry: _Entry, envelope: Envelope) -> Decision:
        live = self._live_waits(entry, envelope)
        if isinstance(live, Decision):
            return live
        turn, waits = live
        if not waits:
            if entry.last_resolved == (turn, envelope.input_id):  # delivered again
                return self._commit(terminal, entry, entry.snapshot, envelope)
            return Decision.IGNORED_STALE  # no wait is outstanding
        if envelope.input_id not in waits and None not in waits:
            return Decision.IGNORED_STALE  # it resolves no wait of this turn
        # A wait without an id is cleared by any resolution of its turn.
        waits.pop(envelope.input_id, None)
        waits.pop(None, None)
        entry.last_resolved = (turn, envelope.input_id)
        return self._show_waits(terminal, entry, envelope, turn)

    def _session_continued(self, terminal: str, entry: _Entry, envelope: Envelope) -> Decision:
        old = envelope.continues_session_id
        if old is None:
            return Decision.REJECTED_AMBIGUOUS
        snap = entry.snapshot
        root = snap.root_session_id
        new = envelope.session_id
        if root is not None and root == new and old in (root, entry.continued_from):
            return self._commit(terminal, entry, snap, envelope)  # redelivery
        if root is None or old != root:
            return Decision.REJECTED_MISMATCH
        # A retired turn of the old root stays retired under the new one.
        for _, turn in [key for key in entry.retired if key[0] == old]:
            entry.retire_turn(turn, new)
        entry.continued_from = old
        snap = attrs.evolve(snap, root_session_id=new)
        return self._commit(terminal, entry, snap, envelope)

    def _session_ended(self, terminal: str, entry: _Entry, envelope: Envelope) -> Decision:
        snap = entry.snapshot
        root = snap.root_session_id
        session = envelope.session_id
        if root is None:
            if session != entry.ended_session:
                return Decision.REJECTED_MISMATCH
            return Decision.DUPLICATE  # delivered again: moves nothing, not even the location
        if root != session:
            return Decision.REJECTED_MISMATCH
        runtime = snap.runtime
        turn = runtime.turn_id if runtime.state is RuntimeState.RUNNING else None
        if turn is not None:
            entry.retire_turn(turn, entry.turn_session, root)
        entry.turn_session = None
        entry.continued_from = None
        entry.ended_session = session
        snap = attrs.evolve(
            snap,
            runtime=UNVERIFIED,
            pending_request=None,
            last_outcome=Outcome(kind=OutcomeKind.SESSION_ENDED, turn_id=turn,
                                 at=self._clock(), revision=self._sequence + 1),
            root_session_id=None,
        )
        return self._commit(terminal, entry, snap, envelope)

    def _location_changed(self, terminal: str, entry: _Entry, envelope: Envelope) -> Decision:
        if envelope.cwd is None:
            return Decision.REJECTED_AMBIGUOUS
        root = entry.snapshot.root_session_id
        if _bound_elsewhere(root, envelope.session_id):
            return Decision.REJECTED_MISMATCH
        return self._commit(terminal, entry, entry.snapshot, envelope)

    def _agent_exited(self, terminal: str, entry: _Entry, envelope: Envelope) -> Decision:
        # The launcher reports its own child's exit: no native session proves anything here.
        self._tombstone(terminal, entry)
        self._notify(entry.published)
        return Decision.ACCEPTED

    _HANDLERS: Final[dict[LifecycleEvent, Callable[[Broker, str, _Entry, Envelope], Decision]]] = {
        LifecycleEvent.SESSION_STARTED: _session_started,
        LifecycleEvent.TURN_STARTED: _turn_started,
        LifecycleEvent.TURN_COMPLETED: _turn_settled,
        LifecycleEvent.TURN_INTERRUPTED: _turn_settled,
        LifecycleEvent.TURN_FAILED: _turn_settled,
        LifecycleEvent.INPUT_REQUESTED: _input_requested,
        LifecycleEvent.INPUT_RESOLVED: _input_resolved,
        LifecycleEvent.SESSION_CONTINUED: _session_continued,
        LifecycleEvent.SESSION_ENDED: _session_ended,
        LifecycleEvent.LOCATION_CHANGED: _location_changed,
        LifecycleEvent.AGENT_EXITED: _agent_exited,
    }
