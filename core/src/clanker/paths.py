"""Where clanker keeps its files.

Every directory comes from platformdirs, unless ``CLANKER_HOME`` is set: then
all of them live under it (``config``, ``cache``, ``state``, ``run``), so a
test or a script can isolate everything with one variable.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path

from attrs import frozen

__all__ = ["ClankerPaths", "clanker_paths"]

APP_NAME = "clanker"


@frozen(kw_only=True)
class ClankerPaths:
    """The four directory roots clanker uses. None of them is created here."""

    config: Path
    cache: Path
    state: Path
    runtime: Path


def clanker_paths(environ: Mapping[str, str] | None = None) -> ClankerPaths:
    """Resolve the directory roots for ``environ`` (default: this process's)."""
    environ = os.environ if environ is None else environ
    home = environ.get("CLANKER_HOME")
    if home:
        root = Path(home).expanduser().absolute()
        return ClankerPaths(
            config=root / "config", cache=root / "cache", state=root / "state", runtime=root / "run"
        )
    import platformdirs  # deferred: only commands that touch files pay for it

    dirs = platformdirs.PlatformDirs(APP_NAME, appauthor=False)
    with warnings.catch_warnings():
        # Without XDG_RUNTIME_DIR platformdirs falls back to a per-user /tmp
        # directory and warns; the grid checks that directory's ownership itself.
        warnings.simplefilter("ignore")
        runtime = Path(dirs.user_runtime_dir)
    return ClankerPaths(
        config=Path(dirs.user_config_dir),
        cache=Path(dirs.user_cache_dir),
        state=Path(dirs.user_state_dir),
        runtime=runtime,
    )
