"""The user's clanker settings: ``config.toml`` in the config directory.

Read strictly: an unknown key or a wrong type is an error that names it, not
a silently ignored setting. A missing file is the default configuration.

    [commit]
    harness = "zed"          # default harness for `clanker commit-message`
    model = "zed-large"      # optional; the harness's own default otherwise
    style = "conventional"   # "plain" (default) or "conventional"

    [bridge]
    harnesses = ["zed"]      # launch these with the bridge on (`--no-bridge` turns it off)

    [coder.approvals]        # the approval ladder's levels by tool kind (docs/guide/coder.md)
    edit = "ask-every-time"  # automatic, ask-once or ask-every-time; the refuse row is fixed
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Final

from attrs import field, frozen

from clanker.converters import BoundaryError, make_boundary_converter, structure
from clanker.ids import is_harness_id
from clanker.storage import UnusableFileError, read_own_file

__all__ = [
    "CONFIG_FILE",
    "BridgeSettings",
    "CoderSettings",
    "CommitSettings",
    "ConfigError",
    "Settings",
    "load_settings",
]

CONFIG_FILE: Final = "config.toml"
_MAX_CONFIG: Final = 256 * 1024
_converter = make_boundary_converter()


def _strings(value: object, _: object) -> tuple[str, ...]:
    # A TOML string is not a list of its characters.
    if type(value) is not list or not all(type(v) is str for v in value):
        raise TypeError("expected a list of strings")
    return tuple(value)


_converter.register_structure_hook_func(lambda kind: kind == tuple[str, ...], _strings)


class ConfigError(ValueError):
    """The configuration file exists but cannot be used; the message says why."""


@frozen(kw_only=True)
class CommitSettings:
    harness: str | None = None
    model: str | None = None
    style: str | None = None


def _harness_ids(_: object, __: object, value: tuple[str, ...]) -> None:
    for harness in value:
        if not is_harness_id(harness):
            raise ValueError("bridge.harnesses: each entry must be a harness id")
    if len(set(value)) != len(value):
        raise ValueError("bridge.harnesses: each harness once")


@frozen(kw_only=True)
class BridgeSettings:
    harnesses: tuple[str, ...] = field(default=(), validator=_harness_ids)
    """The harnesses launched with the bridge unless ``--no-bridge`` says otherwise."""


def _approvals(_: object, __: object, value: dict[str, str]) -> None:
    from clanker.acp.policy import TOOL_KINDS, Level  # only when a [coder] table is there

    for kind, level in value.items():
        if kind not in TOOL_KINDS:
            raise ValueError(f"coder.approvals: unknown tool kind {kind!r} "
                             f"(known: {', '.join(sorted(TOOL_KINDS))})")
        if level not in {member.value for member in Level}:
            raise ValueError(f"coder.approvals.{kind}: must be one of "
                             f"{', '.join(member.value for member in Level)}")


@frozen(kw_only=True)
class CoderSettings:
    approvals: dict[str, str] = field(factory=dict, validator=_approvals)
    """Levels by tool kind over the default ladder; the refuse row cannot be changed."""


@frozen(kw_only=True)
class Settings:
    commit: CommitSettings = CommitSettings()
    bridge: BridgeSettings = BridgeSettings()
    coder: CoderSettings = CoderSettings()


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
        raise ConfigError(f"{path}: {_reason(exc)}") from exc


def _reason(exc: BoundaryError) -> str:
    """A validator's own message (it names the setting) where there is one, else cattrs'."""
    pending: list[BaseException] = [exc.__cause__] if exc.__cause__ is not None else []
    while pending:
        error = pending.pop()
        if isinstance(error, BaseExceptionGroup):
            pending.extend(error.exceptions)
        elif type(error) is ValueError and str(error).startswith(("bridge.", "coder.")):
            return str(error)
    return str(exc)
