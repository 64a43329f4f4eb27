"""How long a Unix socket's path may be.

Its own module so that asking whether a grid runs (``clanker status`` in a
shell prompt) needs neither the wire protocol nor its client.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Final

from clanker.grid.errors import GridPathError

__all__ = ["MAX_SOCKET_PATH", "check_socket_path"]

MAX_SOCKET_PATH: Final = 103 if sys.platform == "darwin" else 107
"""The longest AF_UNIX path in bytes (``sun_path`` less its terminating NUL)."""


def check_socket_path(path: Path | str) -> Path:
    """Return ``path`` as a :class:`Path` if it fits in a Unix socket address.

    Raises :class:`~clanker.grid.errors.GridPathError` otherwise (set
    ``CLANKER_HOME`` or ``XDG_RUNTIME_DIR`` to somewhere shorter).
    """
    path = Path(path)
    size = len(os.fsencode(path))
    if size > MAX_SOCKET_PATH:
        raise GridPathError(
            f"the grid socket path is {size} bytes; Unix sockets allow at most "
            f"{MAX_SOCKET_PATH} ({path})"
        )
    return path
