"""The shared usage-value readers."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given

from clanker.testing.strategies import json_values
from clanker.usage.parsing import epoch_milliseconds, finite_number, label_text, offset_timestamp


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3.0), (2.5, 2.5), (True, None), (float("nan"), None), (float("inf"), None),
     (10**400, None), ("3", None), (None, None)],
)
def test_finite_number(value: object, expected: float | None) -> None:
    assert finite_number(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("Codex · 5 hour", "Codex · 5 hour"), ("", None), ("  ", None), ("a\nb", None),
     ("\x1b[31m", None), (5, None)],
)
def test_label_text(value: object, expected: str | None) -> None:
    assert label_text(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-11-30T14:00:00Z", datetime(2026, 11, 30, 14, tzinfo=UTC)),
        ("2026-11-30T16:00:00+02:00", datetime(2026, 11, 30, 14, tzinfo=UTC)),
        ("2026-11-30T14:00:00.123456789Z", datetime(2026, 11, 30, 14, 0, 0, 123456, tzinfo=UTC)),
        ("2026-11-30T14:00:00", None),
        ("2026-11-30 14:00:00+00:00", None),
        ("2026-13-30T14:00:00Z", None),
        ("0001-01-01T00:00:00+01:00", None),
        (1796025320, None),
    ],
)
def test_offset_timestamp(value: object, expected: datetime | None) -> None:
    assert offset_timestamp(value) == expected


def test_epoch_milliseconds_refuses_seconds() -> None:
    assert epoch_milliseconds(1796025320000) == datetime.fromtimestamp(1796025320, UTC)
    assert epoch_milliseconds(1796025320) is None
    assert epoch_milliseconds(True) is None


@given(json_values())
def test_readers_never_raise(value: object) -> None:
    finite_number(value)
    label_text(value)
    offset_timestamp(value)
    epoch_milliseconds(value)
