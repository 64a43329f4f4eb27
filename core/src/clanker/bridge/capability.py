"""The agent-bridge contract: how a harness is handed clanker's one loopback
MCP endpoint at launch. The provider owns only how its CLI receives the
server; the server, credential and capabilities are shared code's. A ``--bridge``
launch calls it after the bridge step
(:mod:`clanker.launch.harness_bridge`).
"""

from __future__ import annotations

import re
from typing import Final, Protocol, runtime_checkable

from attrs import field, frozen

from clanker.attachment import AttachmentContext, AttachmentPlan

__all__ = ["AgentBridgeCapability", "AttachmentContext", "AttachmentPlan", "BridgeEndpoint"]


_LOOPBACK: Final = re.compile(r"http://(127\.0\.0\.1|localhost):[1-9][0-9]{0,4}/[!-~]*")
_VARIABLE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SERVER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def _loopback(_: object, __: object, value: str) -> None:
    if not isinstance(value, str) or _LOOPBACK.fullmatch(value) is None:
        raise ValueError("bridge: the endpoint is not a loopback HTTP URL")


def _server(_: object, __: object, value: str) -> None:
    if not isinstance(value, str) or _SERVER.fullmatch(value) is None:
        raise ValueError("bridge: the server name is not a plain name")


def _variable(_: object, __: object, value: str) -> None:
    # A harness expands the variable by its name: only a plain name is one.
    if not isinstance(value, str) or _VARIABLE.fullmatch(value) is None:
        raise ValueError("bridge: the token variable is not a variable name")


@frozen(kw_only=True)
class BridgeEndpoint:
    """The shared server as a provider may reference it: never the token itself. Its
    values are checked here, so a provider may put them into a harness's
    configuration as they are."""

    url: str = field(validator=_loopback)
    """The loopback MCP URL (``http://127.0.0.1:<port>/...``)."""
    server_name: str = field(validator=_server)
    """The name the server is registered under in the harness (letters, digits, ``_``,
    ``.`` and ``-``)."""
    token_variable: str = field(validator=_variable)
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
