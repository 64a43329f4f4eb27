"""OpenCode attention: a launch-owned server plugin loaded through ``OPENCODE_CONFIG_CONTENT``.

Checked against opencode-ai 1.18.33 (docs/harnesses/opencode.md, "Attention"):

- ``OPENCODE_CONFIG_CONTENT`` is one more configuration layer, merged after the
  user's global and project files (``plugin`` lists are concatenated, every
  other key of theirs is kept), so ``{"plugin": ["file://<plugin>"]}`` adds
  clanker's plugin without replacing anything of theirs.
- The plugin (``attention_plugin.mjs``, written with core's shared transport
  into the launch's private directory) runs inside OpenCode's server, receives
  its bus events, and delivers lifecycle envelopes to the grid itself: there is
  no hook command and no interpreter.
- What the user owns decides instead of clanker: their own
  ``OPENCODE_CONFIG_CONTENT`` (one variable cannot hold two documents),
  ``OPENCODE_CONFIG_DIR`` (a configuration directory of theirs), and ``--pure``
  or ``OPENCODE_PURE`` (no external plugins at all). Each is a conflict:
  attention is unavailable for that launch.
- On an SSH host the plugin is installed in the launch's directory there, the
  ``file://`` URI in ``OPENCODE_CONFIG_CONTENT`` names it there, and it writes
  its deliveries to its terminal as OSC frames
  (``CLANKER_ATTENTION_TRANSPORT=tty``, the credential in the file
  ``CLANKER_ATTENTION_CREDENTIAL`` names).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from clanker.attention.capability import (
    AttachmentContext,
    AttachmentPlan,
    Declined,
    private_file,
    require_grid_route,
)
from clanker.attention.extension_source import combined

__all__ = ["CONFIG_VARIABLE", "PLUGIN_FILE_NAME", "PLUGIN_SOURCE", "OpenCodeAttention",
           "plugin_config"]

PLUGIN_SOURCE: Final = Path(__file__).with_name("attention_plugin.mjs")
"""The plugin, shipped as package data. ``.mjs``: an ES module to Bun and Node alike. It holds
OpenCode's event mapping, with the marker line where the shared terminal transport goes
(:func:`clanker.attention.extension_source.combined`)."""
PLUGIN_FILE_NAME: Final = "clanker-attention.mjs"
CONFIG_VARIABLE: Final = "OPENCODE_CONFIG_CONTENT"

_OWNED_VARIABLES: Final = (CONFIG_VARIABLE, "OPENCODE_CONFIG_DIR")
_PURE_VARIABLE: Final = "OPENCODE_PURE"
_PURE_FLAG: Final = "--pure"
_FALSE: Final = frozenset({"0", "false"})


def plugin_config(plugin: Path) -> str:
    """The ``OPENCODE_CONFIG_CONTENT`` document that loads ``plugin`` and nothing else."""
    return json.dumps({"plugin": [plugin.as_uri()]}, separators=(",", ":"))


class OpenCodeAttention:
    """Loads clanker's plugin into an OpenCode launch, unless the user owns its configuration."""

    def __init__(self) -> None:
        # In-process source: the plugin delivers envelopes itself.
        self.interpreter: Path | None = None
        # `opencode -s ID` continues the same session (live: the resumed run's
        # session.status events carry the same id), so a validated id may
        # bind the root before the first event.
        self.resume_preserves_session_id = True
        # It writes only the plugin, in the private directory, and reads only the
        # environment: it wires a launch on an SSH host too, where the plugin writes its
        # frames to its terminal (clanker.launch.attention.SSH_ATTENTION).
        self.runs_over_ssh = True

    def prepare(self, context: AttachmentContext) -> AttachmentPlan | Declined:
        conflict = _conflict(context.env, context.user_flags)
        if conflict is not None:
            return Declined(reason=conflict)
        require_grid_route(context.env)
        # The one file opencode loads.
        target = private_file(context, PLUGIN_FILE_NAME, combined(PLUGIN_SOURCE))
        return AttachmentPlan(env={CONFIG_VARIABLE: plugin_config(target)})


def _conflict(env: Mapping[str, str], flags: Iterable[str]) -> str | None:
    """Why the user's setup leaves no room for clanker's plugin, or ``None``."""
    for name in _OWNED_VARIABLES:
        if env.get(name):  # opencode reads only a non-empty value
            return (f"your own {name} is set, and clanker adds its plugin through that "
                    "variable; unset it to see this agent's state")
    pure = env.get(_PURE_VARIABLE, "")
    if (pure and pure.strip().lower() not in _FALSE) or _pure_flag(flags):
        return "opencode runs no plugins in pure mode; launch without it to see this agent's state"
    return None


def _pure_flag(flags: Iterable[str]) -> bool:
    """``--pure`` (or ``--pure=<not false>``) among the user's options."""
    for word in flags:
        if word == "--":
            return False  # the rest are positional words
        if word == _PURE_FLAG:
            return True
        if (word.startswith(_PURE_FLAG + "=")
                and word[len(_PURE_FLAG) + 1:].strip().lower() not in _FALSE):
            return True
    return False

implementation = OpenCodeAttention
