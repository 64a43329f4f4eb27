"""What the bridge's launch tests share: clanker's directories in a short-pathed home
(the grid's socket must fit), with the grid it starts stopped afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from clanker.grid import daemon
from clanker.paths import clanker_paths


@pytest.fixture
def home(short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("CLANKER_HOME", str(short_dir))
    try:
        yield short_dir
    finally:
        daemon.stop(clanker_paths())
