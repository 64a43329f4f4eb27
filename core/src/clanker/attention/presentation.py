"""What a person sees for one terminal, derived from the broker's facts alone.

:func:`derive_attention` is pure: a revision and the viewer's seen-watermark
(the highest revision the viewer has acknowledged for that terminal) in, one
:class:`Attention` out. Whether something was seen never changes lifecycle; it
only decides whether a completion still reads as ``done``.

Precedence: needs input, then working, then failed, then an unseen completion
that is also the latest outcome (an interruption, failure or session end after
it means there is nothing fresh to report), then idle. A terminal with no
lifecycle evidence yet (``unverified``) and a tombstone (a retired terminal)
are ``unknown``: a retired terminal shows no state, it is gone.
"""

from __future__ import annotations

import enum

from clanker.attention.broker import OutcomeKind, Revision, RuntimeState, Snapshot

__all__ = ["Attention", "derive_attention"]


class Attention(enum.StrEnum):
    NEEDS_INPUT = "needs-input"  # a person is being waited for
    WORKING = "working"  # a turn is running
    FAILED = "failed"  # the last turn failed (no badge, no jump target)
    DONE = "done"  # a completion the viewer has not seen yet
    IDLE = "idle"  # a session is up and nothing is fresh
    UNKNOWN = "unknown"  # no evidence yet, or the terminal is retired


def derive_attention(revision: Revision, seen_revision: int) -> Attention:
    """Project ``revision`` into what to show, given the viewer's seen-watermark."""
    snapshot = revision.snapshot
    if snapshot is None:
        return Attention.UNKNOWN
    if snapshot.pending_request is not None:
        return Attention.NEEDS_INPUT
    state = snapshot.runtime.state
    if state is RuntimeState.RUNNING:
        return Attention.WORKING
    if state is RuntimeState.FAILED:
        return Attention.FAILED
    if _unseen_completion(snapshot, seen_revision):
        return Attention.DONE
    return Attention.IDLE if state is RuntimeState.IDLE else Attention.UNKNOWN


def _unseen_completion(snapshot: Snapshot, seen_revision: int) -> bool:
    completion = snapshot.last_completion
    outcome = snapshot.last_outcome
    return (
        completion is not None
        and outcome is not None
        and outcome.kind is OutcomeKind.COMPLETED
        and outcome.revision == completion.revision
        and completion.revision > seen_revision
    )
