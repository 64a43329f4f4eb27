"""Claude Code moves by hot replacement: ``claude --resume <id>`` started in
the target checkout while the first process still runs.

Claude has no target-directory option; the launch directory decides where the
resumed conversation works. By id it finds sessions of the cwd's project and
its git worktrees, and by transcript path from anywhere (docs/harnesses/claude.md),
so a worktree of the same repository, or the main checkout from one, finds the
conversation. It has no writer lock, so nothing is retried.
"""

from __future__ import annotations

from clanker.checkouts.capability import RehomeStrategy

__all__ = ["ClaudeRehome"]


class ClaudeRehome:
    strategy = RehomeStrategy.HOT_REPLACE

    def resume_flags(self, target: str, user_flags: tuple[str, ...]) -> tuple[str, ...]:
        return user_flags

    def is_transient_contention(self, output: str) -> bool:
        return False

implementation = ClaudeRehome
