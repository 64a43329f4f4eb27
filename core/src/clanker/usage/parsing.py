"""Small, strict readers for the values quota reports are made of.

Every usage parser needs the same few judgements: is this a finite number
(not a boolean, not NaN, not an integer too large for a float), printable
text, a timestamp that states its offset (never read as local time), an
epoch in milliseconds (and not seconds). They live here once.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Final

__all__ = ["epoch_milliseconds", "finite_number", "label_text", "offset_timestamp"]

_ISO_WITH_OFFSET: Final = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?"
    r"(?:Z|[+-][0-9]{2}:[0-9]{2})"
)
# Milliseconds since the epoch between 1973 and 5138: a value in seconds is
# below the range and is refused instead of being read as January 1970.
_EPOCH_MS_RANGE: Final = (10**11, 10**14)


def finite_number(value: object) -> float | None:
    """Return a JSON number as a finite float; booleans, NaN, inf and huge integers are not."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def label_text(value: object) -> str | None:
    """Return printable, non-blank text, else ``None``."""
    if isinstance(value, str) and value.strip() and value.isprintable():
        return value
    return None


def offset_timestamp(value: object) -> datetime | None:
    """Read an ISO 8601 / RFC 3339 time that carries ``Z`` or an offset, as UTC."""
    if not isinstance(value, str) or _ISO_WITH_OFFSET.fullmatch(value) is None:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def epoch_milliseconds(value: object) -> datetime | None:
    """Read milliseconds since the epoch; values that look like seconds are refused."""
    number = finite_number(value)
    low, high = _EPOCH_MS_RANGE
    if number is None or not low <= number < high:
        return None
    return datetime.fromtimestamp(number / 1000, tz=UTC)
