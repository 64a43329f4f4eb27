"""JSON that crosses a trust boundary goes through a strict converter.

Stored state, hook payloads, IPC and bridge input are structured with
``forbid_extra_keys`` and without type coercion: ``"1"`` is not an int, ``1``
is not a bool, an unknown key is an error. Errors become one readable message.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import cattrs
    from cattrs.preconf.json import JsonConverter

# cattrs is imported by the first converter made, not by importing this module:
# commands that define boundary types but never parse (``clanker status`` with no
# grid running) do not pay for it.

__all__ = ["BoundaryError", "make_boundary_converter", "structure"]

T = TypeVar("T")


class BoundaryError(ValueError):
    """Input at a trust boundary did not match the expected shape."""


def _exact(kind: type[Any]) -> Any:
    def hook(value: object, _: type[Any]) -> Any:
        # bool is an int subclass; it is never accepted as a number, nor 1 as a bool.
        if type(value) is not kind and not (kind is float and type(value) is int):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
        return kind(value) if kind is float else value

    return hook


def _str_enum(value: object, kind: type[Any]) -> Any:
    if type(value) is not str:
        raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
    return kind(value)


def _datetime(value: object, _: type[Any]) -> datetime:
    if not isinstance(value, str):
        raise TypeError(f"expected an ISO 8601 string, got {type(value).__name__}")
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError("timestamps must carry a time zone")
    return parsed


def make_boundary_converter() -> JsonConverter:
    """Return a new strict JSON converter (one per boundary, so hooks never leak)."""
    from cattrs.preconf.json import make_converter

    converter = make_converter(forbid_extra_keys=True, prefer_attrib_converters=False)
    for kind in (str, int, float, bool):
        converter.register_structure_hook(kind, _exact(kind))
    # A StrEnum is a str: without its own hook the str one above would take it and
    # hand back plain text. StrEnum precedes str in every such enum's MRO.
    converter.register_structure_hook(enum.StrEnum, _str_enum)
    converter.register_structure_hook(datetime, _datetime)
    converter.register_unstructure_hook(datetime, datetime.isoformat)
    return converter


def structure(converter: cattrs.Converter, data: object, cls: type[T]) -> T:
    """Structure ``data`` as ``cls`` or raise :class:`BoundaryError` with readable text."""
    try:
        return converter.structure(data, cls)
    except Exception as exc:
        import cattrs  # loaded already: the converter came from it

        if isinstance(exc, cattrs.BaseValidationError):
            message = "; ".join(cattrs.transform_error(exc))
        else:
            message = str(exc)
        raise BoundaryError(message) from exc
