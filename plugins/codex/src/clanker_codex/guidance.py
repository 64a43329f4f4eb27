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
from clanker_codex.overrides import (
    CONFIG_FLAGS,
    SYSTEM_CONFIG,
    Unreadable,
    config_layers,
    insert_top_level,
    option_values,
    override_key,
    read_config,
    toml_string,
    words_before_prompt,
)
from clanker_codex.sessions import codex_home

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
        words = words_before_prompt(context.user_flags)
        if any(override_key(value)[0] == KEY for value in option_values(words, CONFIG_FLAGS)):
            return None
        home = codex_home(context.env)
        if home is None:
            return None  # which configuration Codex reads cannot be told
        try:
            for path in config_layers(home, context.cwd, context.user_flags,
                                      system=self._system):
                config = read_config(context.files, path)
                if config is not None and KEY in config:
                    return None
        except Unreadable:
            return None
        return AttachmentPlan(argv=insert_top_level(
            context.argv, ("-c", f"{KEY}={toml_string(text)}")))

implementation = CodexGuidance
