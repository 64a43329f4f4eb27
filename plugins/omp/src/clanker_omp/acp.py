"""Oh My Pi's ACP server: ``omp acp`` (verified with @oh-my-pi/pi-coding-agent 18.2.3)."""

from __future__ import annotations

from clanker.acp.capability import AcpServer

__all__ = ["OmpAcp"]


class OmpAcp:
    """``omp acp``: it asks permission for every tool call, so clanker's ladder decides."""

    def server(self) -> AcpServer:
        return AcpServer(argv=("omp", "acp"),
                         install_hint="npm install -g @oh-my-pi/pi-coding-agent")

implementation = OmpAcp
