"""OpenCode's guidance: a launch-owned instructions file, listed in the launch's
``OPENCODE_CONFIG_CONTENT`` ``instructions``.

Checked against opencode-ai 1.18.33 (docs/harnesses/opencode.md, "Guidance"):
OpenCode joins ``instructions`` across its configuration layers (each layer's
entries after the earlier ones', duplicates dropped), so the user's own
entries, ``AGENTS.md`` and the rest stay, and the file's text is added to the
system prompt as ``Instructions from: <path>``. Nothing is written outside the
launch's private directory.
"""

from __future__ import annotations

import os
from typing import Final

from clanker.launch.capability import AttachmentContext, AttachmentPlan
from clanker_opencode.layers import CONFIG_VARIABLE, Unreadable, encode, launch_document

__all__ = ["GUIDANCE_FILE_NAME", "OpenCodeGuidance"]

GUIDANCE_FILE_NAME: Final = "clanker-guidance.md"


class OpenCodeGuidance:
    """Appends one launch-owned instructions file to the launch's configuration."""

    def prepare(self, context: AttachmentContext, text: str) -> AttachmentPlan | None:
        try:
            document = launch_document(context.env)
        except Unreadable:
            return None  # a user document clanker cannot rewrite without loss
        listed = document.get("instructions", [])
        if not isinstance(listed, list) or not all(isinstance(e, str) for e in listed):
            return None
        target = context.private_dir / GUIDANCE_FILE_NAME
        # OpenCode globs an absolute entry's base name inside its directory: a
        # name without pattern characters matches exactly this file.
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        merged = {**document, "instructions": [*listed, str(target)]}
        return AttachmentPlan(env={CONFIG_VARIABLE: encode(merged)})

implementation = OpenCodeGuidance
