"""The agent-bridge contract: how a harness is handed clanker's one loopback
MCP endpoint at launch. The provider owns only how its CLI receives the
server; the server, credential and capabilities are shared code's. A ``--bridge``
launch calls it after the bridge step
(:mod:`clanker.launch.harness_bridge`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from attrs import frozen

from clanker.attachment import AttachmentContext, AttachmentPlan

__all__ = ["AgentBridgeCapability", "AttachmentContext", "AttachmentPlan", "BridgeEndpoint"]


@frozen(kw_only=True)
class BridgeEndpoint:
    """The shared server as a provider may reference it: never the token itself."""

    url: str
    """The loopback MCP URL."""
    server_name: str
    """The name the server is registered under in the harness."""
    token_variable: str
    """The environment variable that holds the launch's bearer token."""


@runtime_checkable
class AgentBridgeCapability(Protocol):
    """Attaches the shared MCP endpoint to one launch through the harness's own channel."""

    def prepare(
        self, context: AttachmentContext, endpoint: BridgeEndpoint
    ) -> AttachmentPlan | None:
        """Return the launch additions, or ``None`` when the user already owns this
        server name or channel (the bridge is then not attached)."""
        ...
