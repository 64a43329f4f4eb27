"""Codex and clanker's MCP endpoint: two ``-c`` overrides naming the token's variable.

Checked against Codex CLI 0.171.0 (docs/harnesses/codex.md, "Agent bridge"):

- ``-c mcp_servers.<name>.url="<url>"`` with
  ``-c mcp_servers.<name>.bearer_token_env_var="<VARIABLE>"`` adds a Streamable
  HTTP server beside the user's own (``codex mcp list`` shows both); Codex reads
  the variable when it connects and sends ``Authorization: Bearer <value>``, so
  the token is only ever in the child's environment.
- Overrides merge key by key: a server of the same name in any configuration
  layer would be taken over (its ``url`` replaced), so then nothing is attached.
  The name on the command line (``-c mcp_servers.<name>...`` or a whole
  ``-c mcp_servers=...``) is the user's too.
- A configuration file that exists but cannot be read as TOML (or is too big)
  counts as owning the name: what it says cannot be told, and Codex itself
  refuses to start on a malformed ``config.toml``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from clanker.launch.capability import AttachmentPlan
from clanker_codex.overrides import (
    SYSTEM_CONFIG,
    insert_top_level,
    toml_key,
    toml_string,
    user_sets,
)

if TYPE_CHECKING:
    from clanker.bridge.capability import BridgeEndpoint
    from clanker.launch.capability import AttachmentContext

__all__ = ["CodexBridge", "bridge_arguments"]



def bridge_arguments(endpoint: BridgeEndpoint) -> tuple[str, ...]:
    """The two overrides: the endpoint's URL and the *name* of the token's variable."""
    key = f"mcp_servers.{toml_key(endpoint.server_name)}"
    return ("-c", f"{key}.url={toml_string(endpoint.url)}",
            "-c", f"{key}.bearer_token_env_var={toml_string(endpoint.token_variable)}")


class CodexBridge:
    """Adds clanker's MCP endpoint to a Codex launch, unless the user owns the name."""

    def __init__(self, *, system_config: Path | None = None) -> None:
        self._system = system_config if system_config is not None else SYSTEM_CONFIG

    def prepare(self, context: AttachmentContext, endpoint: BridgeEndpoint
                ) -> AttachmentPlan | None:
        if endpoint.token_variable not in context.env:
            raise ValueError("bridge: the launch environment has no bridge token")
        name = endpoint.server_name
        if user_sets(context, system=self._system,
                     override=lambda key: _names_server_key(key, name),
                     layer=lambda config: _names_server(config, name)):
            return None
        return AttachmentPlan(argv=insert_top_level(context.argv, bridge_arguments(endpoint)))


def _names_server_key(key: list[str], name: str) -> bool:
    # A whole `-c mcp_servers=...` replaces the table, the name's server with it.
    return key[0] == "mcp_servers" and (len(key) == 1 or key[1] == name)


def _names_server(config: dict[str, object], name: str) -> bool:
    servers = config.get("mcp_servers")
    if servers is None:
        return False
    # Something other than a table cannot be told apart from the user's own server.
    return not isinstance(servers, dict) or name in servers

implementation = CodexBridge
