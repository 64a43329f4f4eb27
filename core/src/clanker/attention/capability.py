"""The attention contract: what a provider implements to report what its agent is doing.

A plugin imports its attention types from here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from clanker.attachment import AttachmentContext, AttachmentPlan, Declined

__all__ = ["AttachmentContext", "AttachmentPlan", "AttentionCapability", "Declined"]


@runtime_checkable
class AttentionCapability(Protocol):
    """Turns one harness's native events into canonical lifecycle events."""

    interpreter: Path | None
    """The standard-library-only interpreter file the hook bridge loads, or ``None``
    when the harness reports from inside its own process (a plugin or extension)."""

    resume_preserves_session_id: bool
    """A resume keeps the native session id, so an id clanker validated in trusted
    storage may bind the root before the harness's first event."""

    def prepare(self, context: AttachmentContext) -> AttachmentPlan | Declined:
        """Wire native events into this launch.

        :class:`Declined` means a configuration conflict: the user owns the
        hooks or settings this would need, so attention is unavailable for
        this launch (never a failed launch), and its reason says which and how
        to keep attention. Raise only for an operational failure.
        """
        ...
