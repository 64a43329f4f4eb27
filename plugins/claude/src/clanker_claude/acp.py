"""Claude Code over ACP, through its adapter ``claude-agent-acp``
(verified with @zed-industries/claude-agent-acp 0.23.1)."""

from __future__ import annotations

from clanker.acp.capability import AcpServer

__all__ = ["ClaudeAcp"]


class ClaudeAcp:
    """The adapter offers ``allow_always`` options that write permanent rules and
    plan-exit options that switch to bypass modes: clanker's ladder never picks them."""

    def server(self) -> AcpServer:
        return AcpServer(argv=("claude-agent-acp",),
                         install_hint="npm install -g @zed-industries/claude-agent-acp")

implementation = ClaudeAcp
