"""Launch-owned private directories: where an attachment puts what it generates.

Each is a fresh 0700 directory under the runtime directory's ``launches/``,
holding the pid of the launch that owns it, and is removed when the launch
is disposed. A launch killed before it could dispose leaves its directory
behind; the next launch's sweep removes every directory whose owner is gone,
so nothing a launch generated outlives it for long (and no attachment writes
a credential into one: they reference variables by name).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Final

from clanker.paths import ClankerPaths, runtime_directory

__all__ = ["LAUNCHER_FILE", "private_directory", "remove_directory", "sweep_orphans"]

LAUNCHER_FILE: Final = "launcher.pid"
"""In each launch directory: the pid of the launch that owns it."""


def private_directory(paths: ClankerPaths, prefix: str) -> Path:
    """Create a launch-owned 0700 directory (the ``launches/`` parent checked to be
    ours alone, orphans swept first), holding this process's pid."""
    from clanker.grid.daemon import secure_directory

    launches = runtime_directory(paths, create=True) / "launches"
    # A harness runs what an attachment puts here: the directory must be ours alone.
    secure_directory(launches)
    sweep_orphans(launches)
    directory = Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir=launches))
    try:
        (directory / LAUNCHER_FILE).write_text(str(os.getpid()))
    except BaseException:
        remove_directory(directory)
        raise
    return directory


def remove_directory(directory: Path) -> None:
    """Remove a launch directory and everything in it (never raises)."""
    with contextlib.suppress(OSError):
        shutil.rmtree(directory)


def sweep_orphans(launches: Path) -> None:
    """Remove launch directories whose launcher is gone (killed before it could dispose).

    A directory without a readable launcher pid is left alone: it may be one
    being created right now.
    """
    for directory in launches.iterdir():
        try:
            pid = int((directory / LAUNCHER_FILE).read_text())
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(directory, ignore_errors=True)
        except (OSError, ValueError):
            continue  # not ours to judge, or alive under another user
