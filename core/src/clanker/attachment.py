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

__all__ = ["AttachmentContext", "AttachmentPlan", "Declined"]


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
    notice: str | None = None
    """One safe sentence the person should read before the harness starts (a
    one-time step the harness asks of them, say), or ``None``."""


@frozen(kw_only=True)
class Declined:
    """The attachment cannot take part without overriding the user's own setup.

    ``reason`` is one safe sentence for the person: which of their options or
    settings owns what the attachment needs, and how to keep the attachment
    (it never quotes a secret or a file's contents).
    """

    reason: str = field()

    @reason.validator
    def _sentence(self, _: object, value: str) -> None:
        if not isinstance(value, str) or not value.strip() or "\n" in value or len(value) > 300:
            raise ValueError("reason: one line of at most 300 characters")
