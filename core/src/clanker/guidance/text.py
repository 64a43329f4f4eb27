"""The launch's guidance: one short instruction telling an agent what it may ask the
host for, built from what its bridge credential was granted.

The same text goes to the harness through its own launch-scoped channel (the
``guidance`` capability) and into the MCP endpoint's ``instructions``. It is
discoverability, never security: the grant decides what an agent may do, and a
capability not granted is not mentioned.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from clanker.bridge.declaration import HostCapability

__all__ = ["MAX_GUIDANCE_TEXT", "guidance_text"]

MAX_GUIDANCE_TEXT: Final = 4096
"""The whole text's bound: well inside what every channel (a flag's value, an MCP
``instructions`` field) carries."""


def guidance_text(granted: Iterable[HostCapability], *, mcp: bool) -> str | None:
    """The instruction for a launch granted ``granted`` (``None`` when nothing is).

    ``mcp``: the harness was also handed the MCP endpoint, so the same requests
    are its tools. Capabilities are named in order of name; each adds its own
    ``guidance`` sentence, if it has one, while the text stays within
    :data:`MAX_GUIDANCE_TEXT`.
    """
    capabilities = sorted(granted, key=lambda capability: capability.name)
    if not capabilities:
        return None
    names = ", ".join(capability.name for capability in capabilities)
    parts = [
        "clanker started this session, and you may ask the host for things through it: "
        f"{names}.",
        "Run `clanker cmd list --json` to see what each does and takes, then "
        "`clanker cmd run NAME --json '{...}'` to ask.",
    ]
    if mcp:
        parts.append("The same requests are the tools of the MCP server named clanker.")
    text = " ".join(parts)
    for capability in capabilities:
        if capability.guidance is not None and \
                len(text) + 1 + len(capability.guidance) <= MAX_GUIDANCE_TEXT:
            text += " " + capability.guidance
    return text
