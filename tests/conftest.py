"""Suite-wide isolation: no test depends on the machine it runs on."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from clanker.envvars import is_credential_variable


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A fresh directory under /tmp, for Unix sockets: an ``AF_UNIX`` path holds at
    most 107 bytes, and pytest's own ``tmp_path`` can be longer."""
    path = Path(tempfile.mkdtemp(prefix="ck-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(autouse=True)
def isolated_clanker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point CLANKER_HOME at a fresh directory and drop inherited clanker variables."""
    home = tmp_path_factory.mktemp("clanker-home")
    saved = dict(os.environ)
    for name in list(os.environ):
        if name.upper().startswith("CLANKER_") or is_credential_variable(name):
            del os.environ[name]
    os.environ["CLANKER_HOME"] = str(home)
    try:
        yield home
    finally:
        _stop_grid(home)
        os.environ.clear()
        os.environ.update(saved)


def _stop_grid(home: Path) -> None:
    """Stop a grid daemon a test started (a launch starts one on demand)."""
    if not (home / "run" / "grid").exists():
        return
    from clanker.grid.daemon import stop
    from clanker.paths import clanker_paths

    stop(clanker_paths({"CLANKER_HOME": str(home)}))
