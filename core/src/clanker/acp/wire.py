"""How a frame is written on the wire, and the frame every session starts with.

The standard library only: ``clanker coder``'s early start
(:mod:`clanker.acp.early`) writes ``initialize`` with it before asyncio and the
client are imported, and the client (:mod:`clanker.acp.connection`) encodes
every frame with the same function, so the bytes the agent got first are the
bytes the transcript says were sent.
"""

from __future__ import annotations

import json
from typing import Any, Final

from clanker import __version__

__all__ = ["INITIALIZE_ID", "INITIALIZE_TIMEOUT", "PROTOCOL_VERSION", "encode",
           "initialize_request"]

PROTOCOL_VERSION: Final = 1
INITIALIZE_TIMEOUT: Final = 60.0
"""How long an agent may take to answer ``initialize`` (a Bun or Node start on a busy host)."""
INITIALIZE_ID: Final = 0
"""The id of ``initialize``: the first request of every connection."""


def encode(frame: dict[str, Any]) -> bytes:
    """One frame as the line sent (without its newline)."""
    return json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def initialize_request() -> dict[str, Any]:
    """The ``initialize`` request: protocol v1, the ``fs`` and ``terminal`` client
    capabilities off (the agent does its own file and shell work, so every effect
    reaches clanker as a permission request)."""
    params = {"protocolVersion": PROTOCOL_VERSION,
              "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False},
                                     "terminal": False},
              "clientInfo": {"name": "clanker", "version": __version__}}
    return {"jsonrpc": "2.0", "id": INITIALIZE_ID, "method": "initialize", "params": params}
