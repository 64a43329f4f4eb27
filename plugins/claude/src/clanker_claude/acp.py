"""Claude Code over ACP, through its adapter ``claude-agent-acp``
(verified with @zed-industries/claude-agent-acp 0.23.1 and, under its current name,
@agentclientprotocol/claude-agent-acp 0.101.0)."""

from __future__ import annotations

from typing import Final

from clanker.acp.capability import AcpServer

__all__ = ["ClaudeAcp"]


# Read by the adapter from every session's opening ``_meta`` (0.101.0): ``false``
# keeps bypass out of the session's mode catalog and off Claude Code's command line.
# Without it the adapter allows bypass, which Claude Code refuses to start with as
# root, so a session could not even be opened there.
NO_BYPASS: Final = {"claudeCode": {"options": {"allowDangerouslySkipPermissions": False}}}


class ClaudeAcp:
    """The adapter offers ``allow_always`` options that write permanent rules and
    plan-exit options that switch to bypass modes: clanker's ladder never picks them,
    and each session is opened with bypass not allowed at all."""

    def server(self) -> AcpServer:
        return AcpServer(argv=("claude-agent-acp",),
                         install_hint="npm install -g @agentclientprotocol/claude-agent-acp",
                         session_meta=NO_BYPASS)

implementation = ClaudeAcp
