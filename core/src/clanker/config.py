"""The user's clanker settings: ``config.toml`` in the config directory.

Read strictly: an unknown key or a wrong type is an error that names it, not
a silently ignored setting. A missing file is the default configuration.

    [commit]
    harness = "zed"          # default harness for `clanker commit-message`
    model = "zed-large"      # optional; the harness's own default otherwise
    style = "conventional"   # "plain" (default) or "conventional"
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Final

from attrs import frozen

from clanker.converters import BoundaryError, make_boundary_converter, structure
from clanker.storage import UnusableFileError, read_own_file

__all__ = ["CONFIG_FILE", "CommitSettings", "ConfigError", "Settings", "load_settings"]

CONFIG_FILE: Final = "config.toml"
_MAX_CONFIG: Final = 256 * 1024
_converter = make_boundary_converter()


class ConfigError(ValueError):
    """The configuration file exists but cannot be used; the message says why."""


@frozen(kw_only=True)
class CommitSettings:
    harness: str | None = None
    model: str | None = None
    style: str | None = None


@frozen(kw_only=True)
class Settings:
    commit: CommitSettings = CommitSettings()


def load_settings(config_dir: Path) -> Settings:
    """Read ``config_dir/config.toml``; raise :class:`ConfigError` naming the problem.

    The file is read as clanker's own (:func:`~clanker.storage.read_own_file`):
    a link, FIFO, socket, directory or oversized file is an error, never a hang.
    """
    path = config_dir / CONFIG_FILE
    try:
        raw = read_own_file(path, max_bytes=_MAX_CONFIG)
    except UnusableFileError as exc:
        raise ConfigError(str(exc)) from exc
    if raw is None:
        return Settings()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    except RecursionError as exc:  # tomllib recurses once per level of nesting
        raise ConfigError(f"{path}: nested too deeply") from exc
    try:
        return structure(_converter, data, Settings)
    except BoundaryError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
