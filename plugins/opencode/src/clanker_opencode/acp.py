"""OpenCode's ACP server: ``opencode acp`` (verified with opencode-ai 1.18.33)."""

from __future__ import annotations

from clanker.acp.capability import AcpServer

__all__ = ["OpenCodeAcp"]


class OpenCodeAcp:
    """``opencode acp`` serves the working directory it is started in."""

    def server(self) -> AcpServer:
        return AcpServer(argv=("opencode", "acp"), install_hint="npm install -g opencode-ai")

implementation = OpenCodeAcp
