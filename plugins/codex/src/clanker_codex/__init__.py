"""clanker plugin for Codex CLI (``codex``, npm ``@openai/codex``).

Verified against Codex CLI 0.171.0: see docs/harnesses/codex.md.
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
        id=HarnessId("codex"),
        display_name="Codex CLI",
        executable="codex",
        # `codex resume ID` and `codex fork ID` are native subcommands that
        # read the host's own rollouts, so they work wherever Codex runs.
        resume=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        fork=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        install_hint="npm install -g @openai/codex",
        homepage="https://github.com/openai/codex",
    ),
    package=__name__,
)
