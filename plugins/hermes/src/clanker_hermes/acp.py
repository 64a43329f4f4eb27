"""Hermes Agent's ACP server: ``hermes acp`` (verified with hermes-agent 0.19.0)."""

from __future__ import annotations

from clanker.acp.capability import AcpServer

__all__ = ["HermesAcp"]


class HermesAcp:
    """``hermes acp`` needs the package's ``acp`` extra; without it the command
    exits at once (clanker reports that it never answered ``initialize``)."""

    def server(self) -> AcpServer:
        return AcpServer(argv=("hermes", "acp"), install_hint="pip install 'hermes-agent[acp]'")

implementation = HermesAcp
