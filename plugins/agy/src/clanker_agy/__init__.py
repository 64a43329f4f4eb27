"""clanker plugin for the Antigravity CLI (``agy``).

Written from the spec and public material, never run here (agy is not on npm
or PyPI): see docs/harnesses/agy.md.
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
from clanker_agy.attention import AgyAttention
from clanker_agy.commit import AgyCommit
from clanker_agy.launch import AgyLaunch
from clanker_agy.models import AgyModels
from clanker_agy.sessions import AgySessions
from clanker_agy.usage import AgyUsage

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
        id=HarnessId("agy"),
        display_name="Antigravity CLI",
        executable="agy",
        capabilities={
            Capability.COMMIT, Capability.LAUNCH, Capability.MODELS, Capability.SESSIONS,
            Capability.USAGE, Capability.ATTENTION,
        },
        # `--conversation=ID` resumes wherever agy keeps the conversation. agy
        # has no fork on the command line (only /fork inside the TUI); as in
        # the spec, a local fork continues the conversation itself, and over
        # SSH there is none.
        resume=OperationSupport(Support.NATIVE, {Transport.LOCAL, Transport.SSH}),
        fork=OperationSupport(Support.EMULATED, {Transport.LOCAL}),
        install_hint="curl -fsSL https://antigravity.google/cli/install.sh | bash",
        homepage="https://antigravity.google",
    )


@hookimpl
def clanker_commit() -> AgyCommit:
    # Not tool-free and not non-persisting: see AgyCommit and
    # docs/harnesses/agy.md, "Commit messages".
    return AgyCommit()


@hookimpl
def clanker_launch() -> AgyLaunch:
    return AgyLaunch()


@hookimpl
def clanker_models() -> AgyModels:
    return AgyModels()


@hookimpl
def clanker_sessions() -> AgySessions:
    return AgySessions()


@hookimpl
def clanker_usage() -> AgyUsage:
    return AgyUsage()


@hookimpl
def clanker_attention() -> AgyAttention:
    # A persistent plugin of clanker's in agy's plugin directory, inert outside
    # clanker's launches: see AgyAttention and docs/harnesses/agy.md, "Attention".
    return AgyAttention()
