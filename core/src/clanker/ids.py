"""Harness identity: the one validated string every other part keys on."""

from __future__ import annotations

import re
from typing import NewType

__all__ = ["HARNESS_ID_PATTERN", "HarnessId", "is_harness_id", "parse_harness_id"]

HARNESS_ID_PATTERN = re.compile(r"[a-z][a-z0-9-]{1,31}")

HarnessId = NewType("HarnessId", str)
"""A syntactically valid harness id. Whether it is *known* is the registry's question."""


def is_harness_id(raw: object) -> bool:
    """Say whether ``raw`` has harness-id syntax (lowercase, 2 to 32 characters)."""
    return isinstance(raw, str) and HARNESS_ID_PATTERN.fullmatch(raw) is not None


def parse_harness_id(raw: object) -> HarnessId:
    """Return ``raw`` as a :data:`HarnessId` or raise :class:`ValueError` naming the rule."""
    if not is_harness_id(raw):
        raise ValueError(
            "a harness id is 2-32 characters of lowercase letters, digits and '-', "
            "starting with a letter"
        )
    return HarnessId(str(raw))
