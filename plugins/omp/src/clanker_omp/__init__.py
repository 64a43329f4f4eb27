"""clanker plugin for Oh My Pi (``omp``, npm ``@oh-my-pi/pi-coding-agent``).

Verified against omp 18.2.3: see docs/harnesses/omp.md.
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
from clanker_omp.attention import OmpAttention
from clanker_omp.commit import OmpCommit
from clanker_omp.launch import OmpLaunch
from clanker_omp.models import OmpModels
from clanker_omp.sessions import OmpSessions
from clanker_omp.usage import OmpUsage

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
        id=HarnessId("omp"),
        display_name="Oh My Pi",
        executable="omp",
        capabilities={
            Capability.LAUNCH, Capability.MODELS, Capability.SESSIONS, Capability.COMMIT,
            Capability.USAGE, Capability.ATTENTION,
        },
        # `--resume` and `--fork` are native (`--fork` is missing from --help
        # but parsed); the spec resumes and forks OMP sessions over SSH as
        # well. Verified locally.
        resume=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        fork=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        install_hint="npm install -g @oh-my-pi/pi-coding-agent (it runs on bun >= 1.3.14)",
        homepage="https://omp.sh",
    )


@hookimpl
def clanker_attention() -> OmpAttention:
    return OmpAttention()


@hookimpl
def clanker_launch() -> OmpLaunch:
    return OmpLaunch()


@hookimpl
def clanker_models() -> OmpModels:
    return OmpModels()


@hookimpl
def clanker_sessions() -> OmpSessions:
    return OmpSessions()


@hookimpl
def clanker_commit() -> OmpCommit:
    return OmpCommit()


@hookimpl
def clanker_usage() -> OmpUsage:
    return OmpUsage()
