"""clanker plugin for Pi (``pi``, npm ``@mariozechner/pi-coding-agent``).

Verified against pi 0.73.1: see docs/harnesses/pi.md.
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
from clanker_pi.attention import PiAttention
from clanker_pi.commit import PiCommit
from clanker_pi.launch import PiLaunch
from clanker_pi.models import PiModels
from clanker_pi.sessions import PiSessions

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
        id=HarnessId("pi"),
        display_name="Pi",
        executable="pi",
        capabilities={
            Capability.LAUNCH, Capability.MODELS, Capability.SESSIONS, Capability.COMMIT,
            Capability.ATTENTION,
        },
        # `--session` and `--fork` are native root flags; the spec resumes and
        # forks Pi sessions over SSH as well. Verified locally.
        resume=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        fork=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        install_hint="npm install -g @mariozechner/pi-coding-agent",
        homepage="https://www.npmjs.com/package/@mariozechner/pi-coding-agent",
    )


@hookimpl
def clanker_launch() -> PiLaunch:
    return PiLaunch()


@hookimpl
def clanker_models() -> PiModels:
    return PiModels()


@hookimpl
def clanker_sessions() -> PiSessions:
    return PiSessions()


@hookimpl
def clanker_commit() -> PiCommit:
    return PiCommit()


@hookimpl
def clanker_attention() -> PiAttention:
    return PiAttention()
