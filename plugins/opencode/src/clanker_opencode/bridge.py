"""OpenCode's agent bridge: clanker's MCP endpoint as one more remote server, through
the launch's ``OPENCODE_CONFIG_CONTENT``.

Checked against opencode-ai 1.18.33 (docs/harnesses/opencode.md, "Agent bridge"):

- ``mcp`` is merged key by key across OpenCode's configuration layers, so an
  ``mcp.<name>`` entry in ``OPENCODE_CONFIG_CONTENT`` adds a server beside the
  user's own (``opencode mcp list`` showed both connected).
- ``{env:NAME}`` is replaced in ``OPENCODE_CONFIG_CONTENT``'s text before it is
  parsed, so the ``Authorization`` header names the token's variable and
  OpenCode reads the value from its own environment.
- ``oauth: false`` turns OpenCode's OAuth auto-detection off (its schema: "Set
  to false to disable OAuth auto-detection"): the bearer header is the whole
  authentication, and there is no OAuth server to find.

The variable holds one document: whatever an earlier step (attention's
plugin) or the user's own environment put there is kept as it is, and the
server is added to it.
"""

from __future__ import annotations

from typing import Any

from clanker.bridge.capability import BridgeEndpoint
from clanker.launch.capability import AttachmentContext, AttachmentPlan
from clanker_opencode.layers import (
    CONFIG_VARIABLE,
    Unreadable,
    encode,
    launch_document,
    user_layers,
)

__all__ = ["OpenCodeAgentBridge", "server_entry"]


def server_entry(endpoint: BridgeEndpoint) -> dict[str, Any]:
    """The ``mcp`` entry for the endpoint: the token by its variable's name only."""
    return {
        "type": "remote",
        "url": endpoint.url,
        "headers": {"Authorization": f"Bearer {{env:{endpoint.token_variable}}}"},
        "oauth": False,
    }


class OpenCodeAgentBridge:
    """Adds the endpoint to the launch's ``OPENCODE_CONFIG_CONTENT``, unless the user
    already has a server of that name."""

    def prepare(
        self, context: AttachmentContext, endpoint: BridgeEndpoint
    ) -> AttachmentPlan | None:
        try:
            document = launch_document(context.env)
            if _defines(document, endpoint.server_name):
                return None
            for _path, layer in user_layers(context):
                if _defines(layer, endpoint.server_name):
                    return None
        except Unreadable:
            # What the user configured is unknown: adding a server of the same
            # name could replace theirs.
            return None
        servers = document.get("mcp", {})
        if not isinstance(servers, dict):
            return None
        merged = {**document, "mcp": {**servers, endpoint.server_name: server_entry(endpoint)}}
        return AttachmentPlan(env={CONFIG_VARIABLE: encode(merged)})


def _defines(layer: Any, name: str) -> bool:
    """Whether one configuration layer has an MCP server called ``name``, or holds
    something under ``mcp`` that is not a table of servers (unknown: assume it does)."""
    if not isinstance(layer, dict) or "mcp" not in layer:
        return False
    servers = layer["mcp"]
    return not isinstance(servers, dict) or name in servers

implementation = OpenCodeAgentBridge
