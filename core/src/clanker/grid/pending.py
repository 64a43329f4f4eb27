"""Pending moves: a create or a complete from a harness whose conversation moves only
once its turn has ended (the ``after-turn`` rehome strategy) is recorded here, one per
terminal, until the attention broker settles that terminal's root turn.

What counts is the broker's own published state, never the agent's word: the first
root-turn outcome recorded after the request (a revision newer than the one the
terminal had when it asked) decides. ``completed`` triggers the move; ``interrupted``,
``failed`` and ``session-ended`` cancel it, and so does the terminal's tombstone (the
agent exited) or its retirement. A cancelled move keeps the checkout it created.
"""

from __future__ import annotations

import enum
from datetime import datetime

from attrs import frozen

from clanker.attention.broker import OutcomeKind, Revision

__all__ = ["Decision", "PendingMove", "PendingMoves"]


@frozen(kw_only=True)
class PendingMove:
    """One scheduled move: where the conversation goes once its turn has ended."""

    terminal: str
    session: str
    """The root session the broker had bound when the move was asked for."""
    target: str
    """Where the resume runs (the worktree, or the caller's directory inside it)."""
    path: str
    """The worktree's root, as the create recorded it."""
    branch: str
    after_revision: int
    """The terminal's published revision when the move was asked for."""
    requested_at: datetime
    kind: str = "create"
    """``create`` (into the worktree) or ``complete`` (back to the main checkout, then
    the worktree completed)."""
    main: str = ""
    """The main checkout (a ``complete``'s destination repository)."""
    delete_branch: bool = False
    discard_ignored: bool = False


class Decision(enum.StrEnum):
    """What a published revision means for a terminal's pending move."""

    WAIT = "wait"
    TRIGGER = "trigger"
    CANCEL = "cancel"


_CANCELLING = {
    OutcomeKind.INTERRUPTED: "the turn was interrupted",
    OutcomeKind.FAILED: "the turn failed",
    OutcomeKind.SESSION_ENDED: "the session ended",
}


def decide(move: PendingMove, revision: Revision) -> tuple[Decision, str]:
    """What ``revision`` of ``move``'s terminal means for it, and why (for a notice)."""
    snapshot = revision.snapshot
    if snapshot is None:
        return Decision.CANCEL, "the agent exited"
    outcome = snapshot.last_outcome
    if outcome is None or outcome.revision <= move.after_revision:
        return Decision.WAIT, ""
    if outcome.kind is OutcomeKind.COMPLETED:
        return Decision.TRIGGER, "the turn completed"
    return Decision.CANCEL, _CANCELLING[outcome.kind]


class PendingMoves:
    """The scheduled moves of one grid, at most one per terminal (event-loop thread)."""

    def __init__(self) -> None:
        self._moves: dict[str, PendingMove] = {}

    def schedule(self, move: PendingMove) -> bool:
        """Record ``move``; ``False`` (nothing recorded) when its terminal has one."""
        if move.terminal in self._moves:
            return False
        self._moves[move.terminal] = move
        return True

    def of(self, terminal: str) -> PendingMove | None:
        return self._moves.get(terminal)

    def pop(self, terminal: str) -> PendingMove | None:
        return self._moves.pop(terminal, None)

    def all(self) -> dict[str, PendingMove]:
        return dict(self._moves)
