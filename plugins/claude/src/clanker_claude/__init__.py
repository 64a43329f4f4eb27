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
    package=__name__,
)
