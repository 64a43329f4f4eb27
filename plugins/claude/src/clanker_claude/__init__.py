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
    launch="clanker_claude.launch:ClaudeLaunch",
    models="clanker_claude.models:ClaudeModels",
    sessions="clanker_claude.sessions:ClaudeSessions",
    attention="clanker_claude.attention:ClaudeAttention",
    usage="clanker_claude.usage:ClaudeUsage",
    commit="clanker_claude.commit:ClaudeCommit",
    agent_bridge="clanker_claude.bridge:ClaudeBridge",
    guidance="clanker_claude.guidance:ClaudeGuidance",
    accounts="clanker_claude.accounts:ClaudeAccounts",
    acp="clanker_claude.acp:ClaudeAcp",
    checkout_rehome="clanker_claude.rehome:ClaudeRehome",
)
