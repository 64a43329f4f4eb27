"""What a launch asks for, and the exact command a provider answers with."""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from attrs import field, frozen

from clanker.descriptor import SessionOperation, Transport
from clanker.envvars import ENV_NAME_PATTERN, is_credential_variable

__all__ = [
    "LaunchOperation",
    "LaunchPlan",
    "LaunchRequest",
    "SessionTarget",
    "split_user_flags",
]


class LaunchOperation(enum.StrEnum):
    """A fresh conversation, or a continuation of an existing one."""

    FRESH = "fresh"
    RESUME = "resume"
    FORK = "fork"

    @property
    def session_operation(self) -> SessionOperation | None:
        return None if self is LaunchOperation.FRESH else SessionOperation(self.value)


def split_user_flags(raw: str) -> tuple[str, ...]:
    """Split a stored flag string on whitespace, the one documented rule.

    No quoting is interpreted: flags stay opaque, and a value that needs spaces
    belongs on the command line after ``--``, where the shell has already split it.
    """
    return tuple(raw.split())


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


def _check_flags(_: object, __: object, value: tuple[str, ...]) -> None:
    for index, flag in enumerate(value):
        if not isinstance(flag, str) or not flag or "\0" in flag:
            raise ValueError(f"user_flags[{index}]: must be a non-empty string without NUL")


def _check_optional_text(_: object, attribute: object, value: Any) -> None:
    if value is None:
        return
    name = getattr(attribute, "name", "value")
    if not isinstance(value, str) or not value or "\0" in value or value != value.strip():
        raise ValueError(f"{name}: must be non-empty, without NUL or surrounding whitespace")


@frozen(kw_only=True)
class SessionTarget:
    """The conversation a resume or fork continues.

    ``native_id`` is the harness's own id. ``store_path`` is set only when
    clanker itself re-found the session in trusted storage (the sessions
    capability); a caller-supplied path is never authority.
    """

    native_id: str = field(validator=_check_optional_text)
    store_path: str | None = field(default=None, validator=_check_optional_text)


@frozen(kw_only=True)
class LaunchRequest:
    """Everything a provider needs to build a launch command."""

    operation: LaunchOperation = field(default=LaunchOperation.FRESH, converter=LaunchOperation)
    transport: Transport = field(default=Transport.LOCAL, converter=Transport)
    model: str | None = field(default=None, validator=_check_optional_text)
    session: SessionTarget | None = None
    user_flags: tuple[str, ...] = field(default=(), converter=_strings, validator=_check_flags)
    cwd: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.operation is LaunchOperation.FRESH) != (self.session is None):
            raise ValueError("session: required for resume/fork and forbidden for a fresh launch")
        if self.cwd is not None and not os.path.isabs(self.cwd):
            raise ValueError("cwd: must be an absolute path")


def _freeze_env(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(value or {}))


def _check_env(_: object, __: object, value: Mapping[str, str]) -> None:
    for name, val in value.items():
        if ENV_NAME_PATTERN.fullmatch(name) is None or is_credential_variable(name):
            raise ValueError(f"env: {name!r} cannot be set by a provider")
        if "\0" in val:
            raise ValueError(f"env[{name}]: contains a NUL byte")


@frozen(kw_only=True, hash=False)
class LaunchPlan:
    """The exact command a provider built: ``argv[0]`` is the bare executable."""

    argv: tuple[str, ...] = field(converter=_strings)
    env: Mapping[str, str] = field(default=None, converter=_freeze_env, validator=_check_env)

    @argv.validator
    def _check_argv(self, _: object, value: tuple[str, ...]) -> None:
        if not value or not all(isinstance(a, str) and "\0" not in a for a in value):
            raise ValueError("argv: must be non-empty strings without NUL")
