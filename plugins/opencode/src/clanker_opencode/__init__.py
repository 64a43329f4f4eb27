"""clanker plugin for OpenCode (``opencode``, npm ``opencode-ai``).

Verified against opencode-ai 1.18.33: see docs/harnesses/opencode.md.
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
from clanker_opencode.attention import OpenCodeAttention
from clanker_opencode.commit import OpenCodeCommit
from clanker_opencode.launch import OpenCodeLaunch
from clanker_opencode.models import OpenCodeModels
from clanker_opencode.sessions import OpenCodeSessions

__all__ = [
    "clanker_attention",
    "clanker_commit",
    "clanker_descriptor",
    "clanker_launch",
    "clanker_models",
    "clanker_sessions",
]


@hookimpl
def clanker_descriptor() -> HarnessDescriptor:
    return HarnessDescriptor(
        id=HarnessId("opencode"),
        display_name="OpenCode",
        executable="opencode",
        capabilities={
            Capability.LAUNCH, Capability.MODELS, Capability.SESSIONS, Capability.COMMIT,
            Capability.ATTENTION,
        },
        # `-s ID` and `-s ID --fork` are native and read opencode's own store on
        # the host it runs on; the spec resumes and forks over SSH as well.
        # Verified locally.
        resume=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        fork=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        install_hint="npm install -g opencode-ai",
        homepage="https://opencode.ai",
    )


@hookimpl
def clanker_launch() -> OpenCodeLaunch:
    return OpenCodeLaunch()


@hookimpl
def clanker_models() -> OpenCodeModels:
    return OpenCodeModels()


@hookimpl
def clanker_sessions() -> OpenCodeSessions:
    return OpenCodeSessions()


@hookimpl
def clanker_commit() -> OpenCodeCommit:
    return OpenCodeCommit()


@hookimpl
def clanker_attention() -> OpenCodeAttention:
    return OpenCodeAttention()
