"""Real git repositories in temporary directories, and a Trash that is not the user's."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clanker.checkouts.service import CheckoutService
from clanker.environment.local import LocalEnvironment

_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def git(cwd: Path | str, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                          check=True, timeout=60)
    return done.stdout


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """HOME and XDG_DATA_HOME in the test's directory: git's global configuration and
    the Trash are throwaway ones (send2trash reads XDG_DATA_HOME when it is imported,
    so its module is reloaded on the way in and out)."""
    home = tmp_path / "home"
    (home / ".local" / "share").mkdir(parents=True)
    saved = dict(os.environ)
    os.environ.update(_GIT_ENV, HOME=str(home), XDG_DATA_HOME=str(home / ".local" / "share"),
                      GIT_CONFIG_GLOBAL=str(home / ".gitconfig"))
    _reload_trash()
    try:
        yield home
    finally:
        os.environ.clear()
        os.environ.update(saved)
        _reload_trash()


def _reload_trash() -> None:
    module = sys.modules.get("send2trash.plat_other")
    if module is not None:
        importlib.reload(module)


@pytest.fixture
def trash(home: Path) -> Path:
    """Where a trashed checkout lands: ``files/`` of the throwaway freedesktop Trash."""
    import send2trash
    import send2trash.plat_other

    importlib.reload(send2trash.plat_other)
    # A reload re-runs the module in the same namespace, which the function reads.
    assert send2trash.send2trash.__globals__ is vars(send2trash.plat_other), \
        "not the freedesktop trash"
    assert send2trash.plat_other.HOMETRASH.startswith(str(home))
    return home / ".local" / "share" / "Trash" / "files"


def make_repository(where: Path) -> Path:
    where.mkdir(parents=True)
    git(where, "init", "-q", "-b", "main")
    (where / "app.py").write_text("print('v1')\n")
    (where / ".gitignore").write_text("build/\n*.log\n.env\n")
    git(where, "add", "-A")
    git(where, "commit", "-q", "-m", "Start")
    return where


@pytest.fixture
def repo(tmp_path: Path, home: Path) -> Path:
    return make_repository(tmp_path / "project")


@pytest.fixture
def service(tmp_path: Path, home: Path) -> CheckoutService:
    return CheckoutService(environment=LocalEnvironment(), state_dir=tmp_path / "state")
