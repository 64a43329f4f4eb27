"""The models contract: what a provider implements to list the models its
harness accepts, and what a listing hands it.

A plugin imports its models types from here.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from attrs import frozen

from clanker.environment import HostContext
from clanker.models.types import Model, model_text

__all__ = ["Model", "ModelsCapability", "ModelsContext", "model_text"]


@frozen(kw_only=True)
class ModelsContext(HostContext):
    """What a model discovery may use: the environment's bound pieces, never a process."""

    refresh: bool = False
    """Ask the harness for a live catalog rather than its own cache."""


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
