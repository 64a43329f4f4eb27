"""Hermes's guidance: ``HERMES_EPHEMERAL_SYSTEM_PROMPT`` in the launch's environment.

Read from hermes-agent 0.19.0's source (docs/harnesses/hermes.md, "Guidance"):
the classic interactive CLI (``cli.py``) takes its ephemeral system prompt
from that variable, else from ``agent.system_prompt`` in ``config.yaml``, and
adds it after the system prompt Hermes builds (``effective + "\\n\\n" +
ephemeral``); it is never stored with the session. The variable therefore
replaces a ``system_prompt`` of the user's, and the TUI (``--tui``,
``HERMES_TUI=1``, ``display.interface: tui``) does not read it: in those
cases guidance is not delivered.
"""

from __future__ import annotations

import re
from typing import Final

from clanker.errors import HarnessCapabilityError
from clanker.launch.capability import AttachmentContext, AttachmentPlan
from clanker_hermes.sessions import hermes_home

__all__ = ["PROMPT_VARIABLE", "HermesGuidance"]

PROMPT_VARIABLE: Final = "HERMES_EPHEMERAL_SYSTEM_PROMPT"
_MAX_CONFIG: Final = 1 << 20
# Text-level checks on config.yaml (no YAML parser here): any `system_prompt`
# key, or an interface set to tui, anywhere in the file, counts. One match too
# many only leaves guidance out.
_SYSTEM_PROMPT: Final = re.compile(r"^\s*[\"']?system_prompt[\"']?\s*:", re.MULTILINE)
_TUI: Final = re.compile(r"^\s*[\"']?interface[\"']?\s*:\s*[\"']?tui\b",
                         re.MULTILINE | re.IGNORECASE)


class HermesGuidance:
    """Sets the ephemeral system prompt when the user has none and the CLI will read it."""

    def prepare(self, context: AttachmentContext, text: str) -> AttachmentPlan | None:
        if (context.env.get(PROMPT_VARIABLE) or context.env.get("HERMES_TUI") == "1"
                or "--tui" in context.argv or not _config_leaves_room(context)):
            return None
        return AttachmentPlan(env={PROMPT_VARIABLE: text})


def _config_leaves_room(context: AttachmentContext) -> bool:
    """Whether the user's config.yaml has no system prompt and no TUI default."""
    try:
        home = hermes_home(context.env, context.files)
    except HarnessCapabilityError:
        return False  # Hermes would refuse to start
    if home is None:
        return False
    config = home / "config.yaml"
    data = context.files.read_small(config, _MAX_CONFIG)
    if data is None:
        # Absent leaves room; present but unreadable is unknown.
        return context.files.stat(config) is None
    body = data.decode("utf-8", "replace")
    return not (_SYSTEM_PROMPT.search(body) or _TUI.search(body))
