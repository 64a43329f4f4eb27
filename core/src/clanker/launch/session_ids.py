"""Checking a session id a user typed, before any harness runs with it."""

from __future__ import annotations

import re
from typing import Final

__all__ = ["LOWERCASE_UUID", "checked_session_id"]

LOWERCASE_UUID: Final = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
)
"""A canonical UUID in lower case, any version: the ids most harnesses mint."""


def checked_session_id(raw: str, pattern: re.Pattern[str], problem: str) -> str:
    """``raw`` when ``pattern`` matches all of it, else ``ValueError(problem)``: the body
    of a provider's ``validate_session_id`` (the launch plan turns the error into an
    invalid-session-id failure)."""
    if pattern.fullmatch(raw) is None:
        raise ValueError(problem)
    return raw
