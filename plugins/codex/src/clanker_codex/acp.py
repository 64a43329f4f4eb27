"""Codex over ACP, through its adapter ``codex-acp``
(verified with @zed-industries/codex-acp 0.16.0)."""

from __future__ import annotations

from clanker.acp.capability import AcpServer

__all__ = ["CodexAcp"]


class CodexAcp:
    """``codex-acp`` reads the same ``CODEX_HOME`` as the Codex CLI (the account's home)."""

    def server(self) -> AcpServer:
        return AcpServer(argv=("codex-acp",),
                         install_hint="npm install -g @zed-industries/codex-acp")

implementation = CodexAcp
