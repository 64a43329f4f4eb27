"""OpenCode moves after the turn, with its own relocation: once the root turn is
idle and the first process is retired, the conversation's recorded directory is
moved with ``POST /experimental/control-plane/move-session`` on a transient
``opencode serve``, then ``opencode --session <id>`` resumes it there.

``opencode --session`` ignores the launch directory and ``--dir``: it runs in the
directory the conversation records, so resuming alone never re-homes it. The
move keeps the session id and touches no file (``moveChanges`` is never sent);
OpenCode refuses a directory of another project (400) and changes nothing then
(docs/harnesses/opencode.md). It has no writer-lock contention to retry.

Its TUI is slow to draw: 7.5 s to the first output of a fresh ``opencode`` in the
sandbox, 10 s for ``--session <unknown id>`` (which then prints ``Session not found``
and exits 1 at once, so clanker's default observation window refuses it). A resume
may therefore take 45 s to print anything.
"""

from __future__ import annotations

import json
from typing import Final

from clanker.checkouts.capability import RehomeStrategy, RelocationRequest

__all__ = ["MOVE_SESSION", "OpenCodeRehome"]

MOVE_SESSION: Final = "/experimental/control-plane/move-session"


class OpenCodeRehome:
    strategy = RehomeStrategy.AFTER_TURN
    first_output_within = 45.0

    def resume_flags(self, target: str, user_flags: tuple[str, ...]) -> tuple[str, ...]:
        # The recorded directory decides, and the relocation has moved it to target.
        return user_flags

    def is_transient_contention(self, output: str) -> bool:
        return False

    def relocation(self, native_id: str, target: str) -> RelocationRequest:
        return RelocationRequest(
            argv=("opencode", "serve"), host_flag="--hostname", port_flag="--port",
            password_variable="OPENCODE_SERVER_PASSWORD",  # noqa: S106 (a variable name)
            username="opencode",
            # The user name the server expects, whatever the person's own shell says.
            env=(("OPENCODE_SERVER_USERNAME", "opencode"),),
            ready_path="/session", path=MOVE_SESSION,
            body=json.dumps({"sessionID": native_id, "destination": {"directory": target}}),
            success=frozenset({204}),
        )

implementation = OpenCodeRehome
