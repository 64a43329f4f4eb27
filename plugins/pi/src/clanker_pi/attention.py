"""Pi attention: a launch-owned extension loaded with ``--extension <file>``.

Checked against pi 0.73.1 (``@mariozechner/pi-coding-agent``) and 1.3.0
(``@earendil-works/pi-coding-agent``), docs/harnesses/pi.md, "Attention":

- ``--extension``/``-e <path>`` loads one extension file (any number of times);
  the file is imported through jiti, so the shipped ES module
  (``attention_extension.mjs``) loads as it is, and plain ``node`` runs it too.
- ``--no-extensions`` only turns off *discovery*: explicit ``-e`` paths still
  load (``pi --help``: "explicit -e paths still work"; verified live). So it is
  not a conflict: the user's own extensions stay off, clanker's file loads.
- Pi runs a subcommand when it is the first argument (0.73.1: ``install``,
  ``remove``, ``uninstall``, ``update``, ``list``, ``config``; 1.3.0 adds
  ``auth`` and ``mcp``); an option in front of it would turn it into a prompt.
  Such a launch runs no agent, so attention is declined (``None``) and the argv
  is left as it is. (On 0.73.1 a prompt that starts with ``auth`` or ``mcp`` is
  declined too: the word cannot be told from the newer subcommand.)

The extension reads the grid's socket, terminal and credential from the
environment the attachment already sets, so nothing is added to it here. On an
SSH host that environment says ``CLANKER_ATTENTION_TRANSPORT=tty`` and names
the launch's credential file (``CLANKER_ATTENTION_CREDENTIAL``) instead, and the
extension writes its deliveries to its terminal as OSC frames.
"""

from __future__ import annotations

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

__all__ = ["EXTENSION", "EXTENSION_NAME", "SUBCOMMANDS", "PiAttention"]

EXTENSION: Final = Path(__file__).with_name("attention_extension.mjs")
"""The extension source shipped in this package: Pi's event mapping, with the marker line
where the shared terminal transport goes (:func:`clanker.attention.extension_source.combined`)."""
EXTENSION_NAME: Final = "clanker-attention.mjs"
"""Its name inside the launch's private directory."""

SUBCOMMANDS: Final = frozenset(
    {"install", "remove", "uninstall", "update", "list", "config", "auth", "mcp"}
)
"""Words pi treats as a subcommand when they come first (0.73.1, and 1.3.0's additions)."""


class PiAttention:
    """Adds clanker's extension to a Pi launch, right after the executable."""

    def __init__(self) -> None:
        self.interpreter: Path | None = None  # the extension reports from inside pi
        # The extension binds the root itself at `session_start` (pi's own session id,
        # before any turn), so a pre-validated id adds nothing; and a bare id that pi
        # finds in another project makes pi offer to fork it into a new id, which a
        # pre-bound root would then refuse.
        self.resume_preserves_session_id = False
        # It writes only the extension, in the private directory: it wires a launch on
        # an SSH host too (clanker.launch.attention.SSH_ATTENTION).
        self.runs_over_ssh = True

    def prepare(self, context: AttachmentContext) -> AttachmentPlan | Declined:
        executable, *arguments = context.argv
        if arguments and arguments[0] in SUBCOMMANDS:
            # A subcommand, not an agent: nothing to observe.
            return Declined(reason=f"`pi {arguments[0]}` runs no agent, so there is no state "
                                   "to show")
        require_grid_route(context.env)
        # The one file pi loads, 0600 from its creation.
        target = private_file(context, EXTENSION_NAME, combined(EXTENSION))
        # First, so a subcommand word never follows an option of ours, and the
        # model, session and user flags that come after keep their order.
        return AttachmentPlan(argv=(executable, "--extension", str(target), *arguments))

implementation = PiAttention
