"""Oh My Pi's guidance: ``--append-system-prompt=<launch-owned file>``, when the user
has no appended prompt of their own.

Checked against @oh-my-pi/pi-coding-agent 18.2.3 (docs/harnesses/omp.md,
"Guidance"): OMP keeps one ``--append-system-prompt`` value (a second one
replaces the first), reads it as a file when one exists at that path, and
only without the flag does it look for an ``APPEND_SYSTEM.md`` of the user's
(``.omp``, ``.pi``, ``.claude``, ``.codex``, ``.gemini``, in the project and
in the home directory). Either way our flag would replace the user's text,
so guidance is not delivered then.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from typing import Final

from clanker.launch.capability import AttachmentContext, AttachmentPlan

__all__ = ["APPEND_FLAG", "GUIDANCE_FILE_NAME", "OmpGuidance"]

APPEND_FLAG: Final = "--append-system-prompt"
GUIDANCE_FILE_NAME: Final = "clanker-guidance.md"
_APPEND_FILE: Final = "APPEND_SYSTEM.md"
_BASES: Final = (".omp", ".pi", ".claude", ".codex", ".gemini")
_CWD_FLAG: Final = "--cwd"


class OmpGuidance:
    """Adds ``--append-system-prompt`` to an OMP launch when nothing of the user's uses it."""

    def prepare(self, context: AttachmentContext, text: str) -> AttachmentPlan | None:
        for word in context.argv:
            if word in (APPEND_FLAG, _CWD_FLAG) or word.startswith(
                    (APPEND_FLAG + "=", _CWD_FLAG + "=")):
                # Theirs would be replaced; another project directory (--cwd)
                # has APPEND_SYSTEM.md files this check does not look at.
                return None
        if any(context.files.stat(path) is not None for path in _user_files(context)):
            return None
        target = context.private_dir / GUIDANCE_FILE_NAME
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        # After `omp launch`, before the user's words: one token, so no option of
        # theirs that takes a value can swallow it.
        at = 2 if context.argv[1:2] == ("launch",) else 1
        argv = (*context.argv[:at], f"{APPEND_FLAG}={target}", *context.argv[at:])
        return AttachmentPlan(argv=argv)


def _user_files(context: AttachmentContext) -> Iterator[str]:
    """Every APPEND_SYSTEM.md OMP could pick up for this launch (a superset: one more
    place looked at only means guidance is left out)."""
    for base in _BASES:
        yield posixpath.join(context.cwd, base, _APPEND_FILE)
    home = context.env.get("HOME", "")
    homes = [posixpath.join(home, ".omp", "agent"), posixpath.join(home, ".pi", "agent"),
             posixpath.join(home, ".claude"), posixpath.join(home, ".codex"),
             posixpath.join(home, ".gemini")] if home else []
    for name in ("PI_CODING_AGENT_DIR", "CLAUDE_CONFIG_DIR"):
        if context.env.get(name):
            homes.append(context.env[name])
    for directory in homes:
        yield posixpath.join(directory, _APPEND_FILE)

implementation = OmpGuidance
