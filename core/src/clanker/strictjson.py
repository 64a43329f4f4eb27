"""JSON as a trust boundary reads it: no ``NaN`` or ``Infinity``, no key twice.

Python's parser accepts both by default (a repeated key silently keeps the last
value), which lets two readers of one message disagree about what it says.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["loads"]


def _no_constants(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError("duplicate key")
        result[key] = value
    return result


def loads(text: str) -> Any:
    """Parse ``text`` strictly; ``ValueError`` for anything else (``RecursionError``
    for absurd nesting, as :func:`json.loads` raises it)."""
    return json.loads(text, parse_constant=_no_constants, object_pairs_hook=_unique_keys)
