"""clanker plugin for Hermes Agent (``hermes``, PyPI ``hermes-agent``).

Verified against hermes-agent 0.19.0: see docs/harnesses/hermes.md.
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
from clanker_hermes.attention import HermesAttention
from clanker_hermes.guidance import HermesGuidance
from clanker_hermes.launch import HermesLaunch
from clanker_hermes.models import HermesModels
from clanker_hermes.sessions import HermesSessions
from clanker_hermes.usage import HermesUsage

__all__ = ["plugin"]

plugin = define_harness(
    HarnessDescriptor(
        id=HarnessId("hermes"),
        display_name="Hermes Agent",
        executable="hermes",
        # `--resume ID` exists; there is no fork on the command line (only
        # inside a running session). Resume was verified locally only.
        resume=OperationSupport(Support.NATIVE, {Transport.LOCAL}),
        fork=None,
        install_hint="pip install hermes-agent (its TUI also needs node on PATH)",
        homepage="https://pypi.org/project/hermes-agent/",
    ),
    launch=HermesLaunch,
    models=HermesModels,
    sessions=HermesSessions,
    attention=HermesAttention,
    usage=HermesUsage,
    guidance=HermesGuidance,
)
