"""The launch contract: what a provider implements to start its harness, and
what a launch hands a provider's attachment (attention today).

A plugin imports its launch types from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from attrs import field, frozen

from clanker.environment import HostFiles
from clanker.execution import CommandRequest, CommandResult
from clanker.launch.request import (
    LaunchOperation,
    LaunchPlan,
    LaunchRequest,
    SessionTarget,
    split_user_flags,
)
from clanker.launch.version import parse_version_output

__all__ = [
    "AttachmentContext",
    "AttachmentPlan",
    "LaunchCapability",
    "LaunchOperation",
    "LaunchPlan",
    "LaunchRequest",
    "SessionTarget",
    "parse_version_output",
    "split_user_flags",
]


@runtime_checkable
class LaunchCapability(Protocol):
    """Owns the executable, base arguments, model flag and harness environment."""

    def build(self, request: LaunchRequest) -> LaunchPlan:
        """Return the exact command for a fresh launch, resume or fork.

        ``request.user_flags`` must appear verbatim, contiguous and in order.
        Called only for operations the descriptor declares, over a transport it
        allows; session ids have already passed :meth:`validate_session_id`.
        """
        ...

    def validate_session_id(self, raw: str) -> str:
        """Return ``raw`` (normalized) if it has this harness's session-id syntax.

        Raise :class:`ValueError` otherwise. Syntax only: whether the session
        exists is the sessions capability's question.
        """
        ...

    def version_request(self) -> CommandRequest:
        """Return the command that prints the installed version."""
        ...

    def parse_version(self, result: CommandResult) -> str:
        """Return the version from ``result`` or raise ``parse-failure``."""
        ...


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
