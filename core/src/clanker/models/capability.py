"""The models contract: what a provider implements to list the models its
harness accepts, and what a listing hands it.

A plugin imports its models types from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from attrs import field, frozen

from clanker.environment import HostFiles
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandExecutor, SessionExecutor
from clanker.models.types import Model, model_text

__all__ = ["Model", "ModelsCapability", "ModelsContext", "model_text"]


@frozen(kw_only=True)
class ModelsContext:
    """What a model discovery may use: the environment's bound pieces, never a process."""

    executor: CommandExecutor
    session_executor: SessionExecutor | None
    files: HostFiles = field(repr=False)
    environ: Mapping[str, str] = field(repr=False)
    refresh: bool = False

    def require_sessions(self, harness: str) -> SessionExecutor:
        """Return the session executor, or raise ``unsupported`` where there is none."""
        if self.session_executor is None:
            raise HarnessCapabilityError(
                ErrorKind.UNSUPPORTED, "listing needs a stdio session", harness=harness
            )
        return self.session_executor


@runtime_checkable
class ModelsCapability(Protocol):
    """Lists the models a harness accepts, through its own native command."""

    cache_ttl: float
    """Seconds a successful listing stays fresh for an ordinary read."""

    fallback: tuple[Model, ...]
    """The intentional static list shown when listing fails (may be empty)."""

    async def discover(self, context: ModelsContext) -> tuple[Model, ...]:
        """List models now. ``context.refresh`` asks the harness for a live catalog.

        Raise :class:`~clanker.errors.HarnessCapabilityError` on failure
        (``parse-failure`` for unrecognized output); never return an empty
        tuple to mean "it failed".
        """
        ...
