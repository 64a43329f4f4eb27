"""clanker plugin for Hermes Agent (``hermes``, PyPI ``hermes-agent``).

Verified against hermes-agent 0.19.0: see docs/harnesses/hermes.md.
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
from clanker_hermes.attention import HermesAttention
from clanker_hermes.launch import HermesLaunch
from clanker_hermes.models import HermesModels
from clanker_hermes.sessions import HermesSessions
from clanker_hermes.usage import HermesUsage

__all__ = [
    "clanker_attention",
    "clanker_descriptor",
    "clanker_launch",
    "clanker_models",
    "clanker_sessions",
    "clanker_usage",
]


@hookimpl
def clanker_descriptor() -> HarnessDescriptor:
    return HarnessDescriptor(
        id=HarnessId("hermes"),
        display_name="Hermes Agent",
        executable="hermes",
        capabilities={
            Capability.LAUNCH, Capability.MODELS, Capability.SESSIONS, Capability.USAGE,
            Capability.ATTENTION,
        },
        # `--resume ID` exists; there is no fork on the command line (only
        # inside a running session). Resume was verified locally only.
        resume=OperationSupport(Support.NATIVE, {Transport.LOCAL}),
        fork=None,
        install_hint="pip install hermes-agent (its TUI also needs node on PATH)",
        homepage="https://pypi.org/project/hermes-agent/",
    )


@hookimpl
def clanker_attention() -> HermesAttention:
    return HermesAttention()


@hookimpl
def clanker_launch() -> HermesLaunch:
    return HermesLaunch()


@hookimpl
def clanker_models() -> HermesModels:
    return HermesModels()


@hookimpl
def clanker_sessions() -> HermesSessions:
    return HermesSessions()


@hookimpl
def clanker_usage() -> HermesUsage:
    return HermesUsage()
