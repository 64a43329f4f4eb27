"""The guidance contract: how a harness receives the launch-scoped instruction
text through its own mechanism, leaving the user's own instructions alone. A
``--bridge`` launch calls it with :func:`clanker.guidance.text.guidance_text`
(:mod:`clanker.launch.harness_bridge`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from clanker.attachment import AttachmentContext, AttachmentPlan

__all__ = ["AttachmentContext", "AttachmentPlan", "GuidanceCapability"]


@runtime_checkable
class GuidanceCapability(Protocol):
    """Delivers one instruction text to one launch."""

    def prepare(self, context: AttachmentContext, text: str) -> AttachmentPlan | None:
        """Return the launch additions, or ``None`` when delivering would replace the
        user's own instructions."""
        ...
