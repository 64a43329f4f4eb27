"""Fixtures the plugins' tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from clanker.testing.attention import GridDouble
from tests.helpers import GRID_TOKEN


@pytest.fixture
def grid(short_dir: Path) -> Iterator[GridDouble]:
    """A grid socket double taking :data:`GRID_TOKEN`, closed after the test."""
    double = GridDouble(short_dir / "g.sock", token=GRID_TOKEN)
    try:
        yield double
    finally:
        double.close()
