"""clanker plugin for Codex CLI (``codex``, npm ``@openai/codex``).

Verified against Codex CLI 0.171.0: see docs/harnesses/codex.md.
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
from clanker_codex.attention import CodexAttention
from clanker_codex.commit import CodexCommit
from clanker_codex.launch import CodexLaunch
from clanker_codex.models import CodexModels
from clanker_codex.sessions import CodexSessions
from clanker_codex.usage import CodexUsage

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
        id=HarnessId("codex"),
        display_name="Codex CLI",
        executable="codex",
        capabilities={
            Capability.LAUNCH, Capability.MODELS, Capability.SESSIONS, Capability.COMMIT,
            Capability.USAGE, Capability.ATTENTION,
        },
        # `codex resume ID` and `codex fork ID` are native subcommands that
        # read the host's own rollouts, so they work wherever Codex runs.
        resume=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        fork=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        install_hint="npm install -g @openai/codex",
        homepage="https://github.com/openai/codex",
    )


@hookimpl
def clanker_launch() -> CodexLaunch:
    return CodexLaunch()


@hookimpl
def clanker_models() -> CodexModels:
    return CodexModels()


@hookimpl
def clanker_sessions() -> CodexSessions:
    return CodexSessions()


@hookimpl
def clanker_commit() -> CodexCommit:
    return CodexCommit()


@hookimpl
def clanker_usage() -> CodexUsage:
    return CodexUsage()


@hookimpl
def clanker_attention() -> CodexAttention:
    return CodexAttention()
