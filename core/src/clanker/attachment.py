"""What a provider is handed, and answers, when a launch attachment asks it to take part.

Attention today, and the agent bridge and guidance, each add to a launch
through its harness's own mechanism; they share these two types (the
lifecycle that composes them is :mod:`clanker.launch.attachments`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

from attrs import field, frozen

from clanker.environment import HostFiles
from clanker.execution import CommandRequest, CommandResult

__all__ = ["AttachmentContext", "AttachmentPlan"]


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


def _freeze(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(value or {}))


@frozen(kw_only=True, hash=False)
class AttachmentContext:
    """One launch, as a provider sees it when an attachment asks it to take part."""

    argv: tuple[str, ...] = field(converter=_strings)
    """The launch argv so far: the executable, its arguments and the user's flags."""
    env: Mapping[str, str] = field(converter=_freeze)
    """The complete child environment so far, the attachment's own variables included."""
    cwd: str
    """The directory the harness starts in."""
    private_dir: Path
    """A launch-owned 0700 directory, removed on dispose: generated files go here."""
    user_flags: tuple[str, ...] = field(default=(), converter=_strings)
    """The user's own flags, to notice one that owns what the attachment needs."""
    files: HostFiles = field(repr=False)
    """The launch host's files, to read the user's configuration."""
    run: Callable[[CommandRequest], CommandResult] = field(repr=False)
    """Runs one bounded command where the harness will run (blocking)."""


@frozen(kw_only=True, hash=False)
class AttachmentPlan:
    """What a provider adds to a launch for one attachment."""

    argv: tuple[str, ...] | None = field(default=None)
    """The complete new argv, or ``None`` to keep the one in the context."""
    env: Mapping[str, str] = field(default=None, converter=_freeze)
    """Environment additions."""
