"""Oh My Pi attention: a launch-owned extension loaded with ``--extension <file>``.

Checked against omp 18.2.3 (docs/harnesses/omp.md, "Attention"):

- ``omp launch --extension <path>`` imports the file (a ``.js``/``.ts`` module whose default
  export is the extension factory) beside the user's own extensions; ``--extension`` may be
  given many times. The extension runs inside omp's process and delivers lifecycle envelopes
  to the grid's socket itself, so there is no interpreter for the hook bridge.
- ``--trusted-extension`` cannot be combined with ``--extension`` (omp exits 2 with a usage
  error): the user who passes it decides exactly which extensions run, so it is a conflict
  and attention is unavailable for that launch. ``--no-extensions`` only stops discovery:
  omp still loads an explicit ``--extension`` (verified), so it is not a conflict.
- A resume keeps the session id (``--resume <id>`` reopens and appends to the same session,
  and the extension sees that id), so a validated id may bind the root.
- On an SSH host the environment says ``CLANKER_ATTENTION_TRANSPORT=tty`` and names the
  launch's credential file (``CLANKER_ATTENTION_CREDENTIAL``); the extension then writes its
  deliveries to its terminal as OSC frames.
"""

from __future__ import annotations

from collections.abc import Iterable
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

__all__ = ["EXTENSION", "EXTENSION_FILE_NAME", "OmpAttention", "conflicting_flag"]

EXTENSION: Final = Path(__file__).with_name("attention_extension.js")
"""The extension source shipped in this package: omp's event mapping, with the marker line
where the shared terminal transport goes (:func:`clanker.attention.extension_source.combined`)."""
EXTENSION_FILE_NAME: Final = "clanker-attention.js"
"""Its name in the launch's private directory (omp names the extension after the file)."""

_SUBCOMMAND: Final = "launch"
_CONFLICTING_FLAGS: Final = ("--trusted-extension",)


def conflicting_flag(flags: Iterable[str]) -> str | None:
    """The first user flag that decides exactly which extensions run, or ``None``."""
    for word in flags:
        if word == "--":
            return None  # the rest are prompt words
        for flag in _CONFLICTING_FLAGS:
            if word == flag or word.startswith(flag + "="):
                return flag
    return None


class OmpAttention:
    """Adds clanker's extension to an ``omp launch``, unless the user decides extensions."""

    def __init__(self) -> None:
        self.interpreter: Path | None = None  # in-process: the extension delivers itself
        self.resume_preserves_session_id = True
        # It writes only the extension, in the private directory: it wires a launch on
        # an SSH host too (clanker.launch.attention.SSH_ATTENTION).
        self.runs_over_ssh = True

    def prepare(self, context: AttachmentContext) -> AttachmentPlan | Declined:
        flag = conflicting_flag(context.user_flags)
        if flag is not None:
            return Declined(reason=f"{flag} decides exactly which extensions omp runs; launch "
                                   "without it to see this agent's state")
        require_grid_route(context.env)
        # The one file omp loads, 0600 from its creation.
        target = private_file(context, EXTENSION_FILE_NAME, combined(EXTENSION))
        # Right after `launch` (omp's flags are all root flags of it), so the
        # user's flags stay last, together and in their order.
        argv = context.argv
        at = 2 if len(argv) > 1 and argv[1] == _SUBCOMMAND else 1
        return AttachmentPlan(argv=(*argv[:at], "--extension", str(target), *argv[at:]))

implementation = OmpAttention
