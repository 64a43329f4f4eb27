"""Pi's guidance: ``--append-system-prompt <launch-owned file>``.

Checked against @mariozechner/pi-coding-agent 0.73.1 (docs/harnesses/pi.md,
"Guidance"):

- ``--append-system-prompt`` may be given several times; Pi reads each value
  as a file when one exists at that path (else as text) and appends them all,
  in order, separated by a blank line. So a user's own flags stay, and ours is
  one more.
- Without any such flag Pi appends ``<cwd>/.pi/APPEND_SYSTEM.md`` (else
  ``<agent dir>/APPEND_SYSTEM.md``); with one, it no longer looks for that
  file. When the file exists, its path is passed first, as Pi would have used
  it, so the user's text stays in the prompt.

The text is written to the launch's private directory and passed by path:
argv carries no guidance text.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from typing import Final

from clanker.launch.capability import AttachmentContext, AttachmentPlan

__all__ = ["APPEND_FLAG", "GUIDANCE_FILE_NAME", "PiGuidance"]

APPEND_FLAG: Final = "--append-system-prompt"
GUIDANCE_FILE_NAME: Final = "clanker-guidance.md"
_APPEND_FILE: Final = "APPEND_SYSTEM.md"


class PiGuidance:
    """Adds one ``--append-system-prompt`` to a Pi launch, keeping the user's own."""

    def prepare(self, context: AttachmentContext, text: str) -> AttachmentPlan | None:
        added: list[str] = []
        if APPEND_FLAG not in context.argv:
            # Our flag would switch Pi's own discovery of the user's file off.
            discovered = _discovered(context)
            if discovered is not None:
                added += [APPEND_FLAG, discovered]
        target = context.private_dir / GUIDANCE_FILE_NAME
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        added += [APPEND_FLAG, str(target)]
        # Right after the executable: Pi reads options anywhere, and there no
        # value-taking option of the user's can swallow ours.
        argv = (context.argv[0], *added, *context.argv[1:])
        return AttachmentPlan(argv=argv)


def _agent_dir(env: Mapping[str, str]) -> str | None:
    home = env.get("HOME", "")
    configured = env.get("PI_CODING_AGENT_DIR", "")
    if configured:
        if configured == "~" or configured.startswith("~/"):
            return (home + configured[1:]) if home else None
        return configured
    return posixpath.join(home, ".pi", "agent") if home else None


def _discovered(context: AttachmentContext) -> str | None:
    """The APPEND_SYSTEM.md Pi would append for this launch, if there is one."""
    candidates = [posixpath.join(context.cwd, ".pi", _APPEND_FILE)]
    agent_dir = _agent_dir(context.env)
    if agent_dir is not None:
        candidates.append(posixpath.join(posixpath.join(context.cwd, agent_dir), _APPEND_FILE))
    for path in candidates:
        if context.files.stat(path) is not None:  # Pi's existsSync follows links
            return path
    return None

implementation = PiGuidance
