"""Claude Code and the launch's guidance: ``--append-system-prompt=<text>``.

Checked against Claude Code 2.1.197 (docs/harnesses/claude.md, "Guidance"), by
reading the request a ``-p`` run sends to a loopback stand-in for the API:

- the text is appended to the system prompt, after the default one or after
  the user's own ``--system-prompt`` / ``--system-prompt-file`` (both kept);
- a second ``--append-system-prompt`` *replaces* the first (only the last one
  reaches the request), and ``--append-system-prompt`` beside
  ``--append-system-prompt-file`` is an error ("Please use only one").

So the guidance is delivered only when the user passes neither of the append
options; their own ``--system-prompt`` stays and the guidance follows it. The
``=`` form keeps a text that starts with ``-`` a value, and the option goes
right after the executable, where no variadic user option can take it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from clanker.launch.capability import AttachmentPlan

if TYPE_CHECKING:
    from clanker.launch.capability import AttachmentContext

__all__ = ["APPEND_FLAG", "ClaudeGuidance"]

APPEND_FLAG: Final = "--append-system-prompt"
_USER_CHANNELS: Final = (APPEND_FLAG, "--append-system-prompt-file")


class ClaudeGuidance:
    """Appends the guidance to a Claude launch's system prompt, unless the user appends."""

    def prepare(self, context: AttachmentContext, text: str) -> AttachmentPlan | None:
        if not text.strip() or "\0" in text:
            raise ValueError("guidance: the text is empty or holds a NUL character")
        for word in context.user_flags:
            if word == "--":
                break  # the rest are prompt words, as Claude reads them
            if word.partition("=")[0] in _USER_CHANNELS:
                return None
        executable, *rest = context.argv
        return AttachmentPlan(argv=(executable, f"{APPEND_FLAG}={text}", *rest))

implementation = ClaudeGuidance
