"""The in-process attention extensions' shared JavaScript, combined into each harness's file.

An in-process extension (a JavaScript module a harness loads) maps its harness's own events
to envelopes; every such extension delivers them the same way: along the route its launch
environment names, one deliver request per batch, to the grid's socket or, on an SSH host
(its credential in the launch's credential file), as an OSC frame on the process's terminal.
That transport is written once, in ``extension_transport.js`` (package data beside this
module); each extension source holds :data:`MARKER` as one line where it goes. A provider
writes :func:`combined` of its source into the launch's private directory, so the harness
still loads exactly one file, and the host step ships that staged file as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["MARKER", "TRANSPORT", "ExtensionSourceError", "combined"]

TRANSPORT: Final = Path(__file__).with_name("extension_transport.js")
"""The shared transport: a fragment of an ES module (no import or export of its own)."""
MARKER: Final = b"// @clanker-attention-transport (clanker/attention/extension_transport.js)\n"
"""The line of an extension source that :func:`combined` replaces with the transport."""


class ExtensionSourceError(ValueError):
    """An extension source that does not hold the marker line exactly once."""


def combined(source: Path) -> bytes:
    """The extension ``source`` with the shared transport in place of its marker line.

    Raises :class:`ExtensionSourceError` when the marker is not a whole line of it exactly
    once (a second transport would redeclare its functions, none would leave them missing).
    """
    text = source.read_bytes()
    lines = text.splitlines(keepends=True)
    count = lines.count(MARKER)
    if count != 1:
        raise ExtensionSourceError(
            f"attention extension {source}: the transport marker line must appear exactly "
            f"once, found {count}")
    at = lines.index(MARKER)
    return b"".join((*lines[:at], TRANSPORT.read_bytes(), *lines[at + 1:]))
