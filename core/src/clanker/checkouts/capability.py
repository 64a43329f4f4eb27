"""The checkout re-homing contract: how a provider lets a live conversation
continue in another checkout of the same repository.

The provider declares *when* the move may happen (:class:`RehomeStrategy`) and
*how* its resume is pointed at the target (:meth:`CheckoutRehomeCapability.resume_flags`);
shared code builds the ordinary resume request its launch capability already
answers (:func:`clanker.checkouts.rehome.rehome_request`), started in the
target directory, and never asks which harness it is talking to.
"""

from __future__ import annotations

import enum
from typing import Protocol, runtime_checkable

__all__ = ["CheckoutRehomeCapability", "RehomeStrategy"]


class RehomeStrategy(enum.StrEnum):
    """How a harness continues the same conversation in another directory."""

    HOT_REPLACE = "hot-replace"
    """A second process resumes the conversation in the target while the first
    still runs; the first is retired only once the second is proven."""
    AFTER_TURN = "after-turn"
    """The move waits for the current root turn to end, the first process is
    retired, then the conversation is resumed in the target."""


@runtime_checkable
class CheckoutRehomeCapability(Protocol):
    """What one harness declares so clanker can move its conversation."""

    strategy: RehomeStrategy

    def resume_flags(self, target: str, user_flags: tuple[str, ...]) -> tuple[str, ...]:
        """Return the flags the resume in ``target`` runs with.

        ``target`` is an absolute directory clanker owns (never model input)
        and is always the resume's working directory. A harness whose launch
        directory decides returns ``user_flags`` unchanged; one with a target
        option replaces any the person passed with one naming ``target``.
        """
        ...

    def is_transient_contention(self, output: str) -> bool:
        """Say whether a failed resume's ``output`` is a brief writer-lock
        contention worth retrying (a bounded, provider-named set of messages);
        ``False`` for everything else."""
        ...
