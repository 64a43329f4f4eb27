"""The checkout re-homing contract, as far as it is settled: which strategy
moves a live conversation into an isolated worktree. No service calls it yet.
"""

from __future__ import annotations

import enum
from typing import Protocol, runtime_checkable

__all__ = ["CheckoutRehomeCapability", "RehomeStrategy"]


class RehomeStrategy(enum.StrEnum):
    """How a harness continues the same conversation in another directory."""

    HOT_REPLACE = "hot-replace"
    """The running harness is replaced by one resumed in the new checkout."""
    AFTER_TURN = "after-turn"
    """The move happens when the current turn has ended."""


@runtime_checkable
class CheckoutRehomeCapability(Protocol):
    """The strategy one harness supports."""

    strategy: RehomeStrategy
