"""Codex and the launch's guidance: ``-c developer_instructions=<TOML string>``.

Checked against Codex CLI 0.171.0 (docs/harnesses/codex.md, "Guidance"): the
override becomes a developer message of every request, and it *replaces* a
``developer_instructions`` set in ``config.toml`` or the selected profile's
file (it does not add to it). So the guidance is delivered only when no layer
and no ``-c`` of the user's sets the key; a configuration file that cannot be
read counts as setting it. Nothing is written anywhere: the project's
``AGENTS.md`` and the user's files stay untouched.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from clanker.launch.capability import AttachmentPlan
from clanker_codex.overrides import SYSTEM_CONFIG, insert_top_level, toml_string, user_sets

if TYPE_CHECKING:
    from clanker.launch.capability import AttachmentContext

__all__ = ["KEY", "CodexGuidance"]

KEY = "developer_instructions"


class CodexGuidance:
    """Gives a Codex launch the guidance as developer instructions, unless the user has some."""

    def __init__(self, *, system_config: Path | None = None) -> None:
        self._system = system_config if system_config is not None else SYSTEM_CONFIG

    def prepare(self, context: AttachmentContext, text: str) -> AttachmentPlan | None:
        if not text.strip() or "\0" in text:
            raise ValueError("guidance: the text is empty or holds a NUL character")
        if user_sets(context, system=self._system, override=lambda key: key[0] == KEY,
                     layer=lambda config: KEY in config):
            return None
        return AttachmentPlan(argv=insert_top_level(
            context.argv, ("-c", f"{KEY}={toml_string(text)}")))

implementation = CodexGuidance
