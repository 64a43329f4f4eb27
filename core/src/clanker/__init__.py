"""clanker: terminal coding agents behind one plugin registry.

A plugin writes ``from clanker import hookimpl``. Importing ``clanker`` loads no
plugin and no third-party module; the registry loads entry points on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["__version__", "hookimpl"]

if TYPE_CHECKING:
    from clanker.hookspecs import hookimpl


def __getattr__(name: str) -> Any:
    # Lazy so that `clanker --version` does not import pluggy.
    if name == "hookimpl":
        from clanker.hookspecs import hookimpl

        return hookimpl
    raise AttributeError(f"module 'clanker' has no attribute {name!r}")
