"""clanker plugin for Claude Code (``claude``, npm ``@anthropic-ai/claude-code``).

Verified against Claude Code 2.1.197: see docs/harnesses/claude.md.
"""

from __future__ import annotations

from clanker.plugin import (
    HarnessDescriptor,
    HarnessId,
    OperationSupport,
    Support,
    Transport,
    define_harness,
)
from clanker_claude.accounts import ClaudeAccounts
from clanker_claude.attention import ClaudeAttention
from clanker_claude.commit import ClaudeCommit
from clanker_claude.launch import ClaudeLaunch
from clanker_claude.models import ClaudeModels
from clanker_claude.sessions import ClaudeSessions
from clanker_claude.usage import ClaudeUsage

__all__ = ["plugin"]

plugin = define_harness(
    HarnessDescriptor(
        id=HarnessId("claude"),
        display_name="Claude Code",
        executable="claude",
        # `--resume ID` and `--resume ID --fork-session` read the host's own
        # transcripts, so they work wherever Claude Code runs.
        resume=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        fork=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        install_hint="npm install -g @anthropic-ai/claude-code",
        homepage="https://github.com/anthropics/claude-code",
    ),
    launch=ClaudeLaunch,
    models=ClaudeModels,
    sessions=ClaudeSessions,
    attention=ClaudeAttention,
    usage=ClaudeUsage,
    accounts=ClaudeAccounts,
    commit=ClaudeCommit,
)
