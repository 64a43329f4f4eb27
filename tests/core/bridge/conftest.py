"""What the bridge's launch tests share: clanker's directories in a short-pathed home
(the grid's socket must fit), with the grid it starts stopped afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def home(grid_home: Path) -> Path:
    return grid_home
