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
    package=__name__,
)
