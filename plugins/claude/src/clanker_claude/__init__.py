"""clanker plugin for Claude Code (``claude``, npm ``@anthropic-ai/claude-code``).

Verified against Claude Code 2.1.197: see docs/harnesses/claude.md.
"""

from __future__ import annotations

from clanker import hookimpl
from clanker.descriptor import (
    Capability,
    HarnessDescriptor,
    OperationSupport,
    Support,
    Transport,
)
from clanker.ids import HarnessId
from clanker_claude.attention import ClaudeAttention
from clanker_claude.commit import ClaudeCommit
from clanker_claude.launch import ClaudeLaunch
from clanker_claude.models import ClaudeModels
from clanker_claude.sessions import ClaudeSessions
from clanker_claude.usage import ClaudeUsage

__all__ = [
    "clanker_attention",
    "clanker_commit",
    "clanker_descriptor",
    "clanker_launch",
    "clanker_models",
    "clanker_sessions",
    "clanker_usage",
]


@hookimpl
def clanker_descriptor() -> HarnessDescriptor:
    return HarnessDescriptor(
        id=HarnessId("claude"),
        display_name="Claude Code",
        executable="claude",
        capabilities={
            Capability.LAUNCH, Capability.MODELS, Capability.SESSIONS, Capability.COMMIT,
            Capability.USAGE, Capability.ATTENTION,
        },
        # `--resume ID` and `--resume ID --fork-session` read the host's own
        # transcripts, so they work wherever Claude Code runs.
        resume=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        fork=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        install_hint="npm install -g @anthropic-ai/claude-code",
        homepage="https://github.com/anthropics/claude-code",
    )


@hookimpl
def clanker_launch() -> ClaudeLaunch:
    return ClaudeLaunch()


@hookimpl
def clanker_models() -> ClaudeModels:
    return ClaudeModels()


@hookimpl
def clanker_sessions() -> ClaudeSessions:
    return ClaudeSessions()


@hookimpl
def clanker_commit() -> ClaudeCommit:
    return ClaudeCommit()


@hookimpl
def clanker_usage() -> ClaudeUsage:
    return ClaudeUsage()


@hookimpl
def clanker_attention() -> ClaudeAttention:
    return ClaudeAttention()
