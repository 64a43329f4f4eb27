"""The request sent to a harness: instructions plus the bounded change."""

from __future__ import annotations

from typing import Final

from clanker.commit.gitcontext import ChangeContext
from clanker.commit.message import SUBJECT_LIMIT, Style

__all__ = ["PROMPT_LIMIT", "build_prompt"]

# Structured stdin (a JSON message) can grow escaped text; this leaves room
# within every harness's stdin bound.
PROMPT_LIMIT: Final = 96 * 1024


def build_prompt(change: ChangeContext, style: Style) -> str:
    """Return the prompt; never longer than :data:`PROMPT_LIMIT` characters."""
    parts = [
        "Write a git commit message for the uncommitted change described below.",
        "Do not run commands or use tools: everything you need is here.",
        f"Reply with the commit message only: a subject line of at most {SUBJECT_LIMIT} "
        "characters, then optionally a blank line and a body explaining why, wrapped at 72 "
        "columns. No quotes, no code fences, no commentary before or after.",
        style.instruction,
    ]
    if change.recent_subjects:
        parts.append("Recent subjects in this repository (match their tone):\n"
                     + "\n".join(f"  {s}" for s in change.recent_subjects))
    parts.append("Changed paths (git status):\n" + "\n".join(f"  {s}" for s in change.status))
    if change.patch:
        parts.append("Changes to tracked files:\n" + change.patch)
    if change.untracked:
        parts.append("New files:\n" + change.untracked)
    if change.omitted:
        parts.append("Left out to keep this short:\n"
                     + "\n".join(f"  {o}" for o in change.omitted))
    prompt = "\n\n".join(parts)
    if len(prompt) > PROMPT_LIMIT:
        marker = "\n\n[... the rest of the change is cut ...]"
        prompt = prompt[: PROMPT_LIMIT - len(marker)] + marker
    return prompt
