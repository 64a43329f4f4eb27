"""What a provider implements to report attention, and what a launch hands it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Protocol, runtime_checkable

from attrs import field, frozen

__all__ = ["AttentionCapability", "AttentionContext", "AttentionPlan"]


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


def _freeze(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(value or {}))


@frozen(kw_only=True, hash=False)
class AttentionContext:
    """One launch, as the attention attachment sees it when it asks a provider."""

    argv: tuple[str, ...] = field(converter=_strings)
    """The launch argv so far: the executable, its arguments and the user's flags."""
    env: Mapping[str, str] = field(converter=_freeze)
    """The complete child environment so far, ``CLANKER_ATTENTION_*`` included."""
    cwd: str
    """The directory the harness starts in."""
    private_dir: Path
    """A launch-owned 0700 directory, removed on dispose: generated files go here."""
    user_flags: tuple[str, ...] = field(default=(), converter=_strings)
    """The user's own flags, to notice one that owns the settings attention needs."""


@frozen(kw_only=True, hash=False)
class AttentionPlan:
    """What a provider adds to a launch so its native events reach the hook bridge."""

    argv: tuple[str, ...] | None = field(default=None)
    """The complete new argv, or ``None`` to keep the one in the context."""
    env: Mapping[str, str] = field(default=None, converter=_freeze)
    """Environment additions."""


@runtime_checkable
class AttentionCapability(Protocol):
    """Turns one harness's native events into canonical lifecycle events."""

    interpreter: Path | None
    """The standard-library-only interpreter file the hook bridge loads, or ``None``
    when the harness reports from inside its own process (a plugin or extension)."""

    resume_preserves_session_id: bool
    """A resume keeps the native session id, so an id clanker validated in trusted
    storage may bind the root before the harness's first event."""

    def prepare(self, context: AttentionContext) -> AttentionPlan | None:
        """Wire native events into this launch.

        ``None`` means a configuration conflict: the user owns the hooks or
        settings this would need, so attention is unavailable for this launch
        (never a failed launch). Raise only for an operational failure.
        """
        ...
