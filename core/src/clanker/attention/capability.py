"""The attention contract: what a provider implements to report what its agent is doing.

A plugin imports its attention types from here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

from clanker.attachment import AttachmentContext, AttachmentPlan, Declined

if TYPE_CHECKING:
    from clanker.environment.remote_resources import HostPlugin

__all__ = ["COMMAND_VARIABLE", "CREDENTIAL_VARIABLE", "TRANSPORT_VARIABLE", "AttachmentContext",
           "AttachmentPlan", "AttentionCapability", "Declined", "HostPlugin", "grid_route",
           "hook_command", "private_file", "require_grid_route"]


def __getattr__(name: str) -> object:
    # A persistent plugin on an SSH host is described only by SSH launches: its
    # module (and what it imports) loads with the first of them, not with the contract.
    if name == "HostPlugin":
        from clanker.environment.remote_resources import HostPlugin

        return HostPlugin
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

TRANSPORT_VARIABLE: Final = "CLANKER_ATTENTION_TRANSPORT"
"""``tty`` on an SSH host: deliveries are written to the harness's terminal as OSC frames."""
CREDENTIAL_VARIABLE: Final = "CLANKER_ATTENTION_CREDENTIAL"
"""On an SSH host, for a harness that reports from inside its own process: the path of
the launch's credential file there (its terminal and token, 0600)."""


COMMAND_VARIABLE: Final = "CLANKER_ATTENTION_COMMAND"
"""The hook bridge's command, set for a launch whose provider has an interpreter: what
the harness's hooks run for each native event."""


def hook_command(env: Mapping[str, str]) -> str:
    """Return the launch environment's hook command (:data:`COMMAND_VARIABLE`).

    Raises :class:`ValueError` when the environment has none: the attachment sets it
    for every launch whose provider names an interpreter.
    """
    command = env.get(COMMAND_VARIABLE)
    if not command:
        raise ValueError("attention: the launch environment has no hook command")
    return command


def private_file(context: AttachmentContext, name: str, data: bytes) -> Path:
    """Write ``data`` as the new file ``name`` in the launch's private directory, 0600
    from its creation, and return its path.

    A file of that name already there raises :class:`FileExistsError` (it is never
    written through or replaced).
    """
    path = context.private_dir / name
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)
    return path


_SOCKET_ROUTE: Final = (
    "CLANKER_ATTENTION_SOCKET", "CLANKER_ATTENTION_TERMINAL", "CLANKER_ATTENTION_TOKEN")


def _unset(env: Mapping[str, str]) -> list[str]:
    names = (CREDENTIAL_VARIABLE,) if env.get(TRANSPORT_VARIABLE) == "tty" else _SOCKET_ROUTE
    return [name for name in names if not env.get(name)]


def grid_route(env: Mapping[str, str]) -> bool:
    """Whether a launch environment tells an in-process extension where to deliver: the
    grid's socket with the terminal's credential (a local launch), or the terminal
    transport with its credential file (a launch on an SSH host)."""
    return not _unset(env)


def require_grid_route(env: Mapping[str, str]) -> None:
    """Raise :class:`ValueError` naming what the launch environment lacks when it has no
    :func:`grid_route`: the attachment cannot be wired without it."""
    unset = _unset(env)
    if unset:
        where = "" if env.get(TRANSPORT_VARIABLE) == "tty" else \
            " (or, on a host, its terminal transport)"
        raise ValueError(f"attention: the launch environment lacks {', '.join(unset)}{where}")


@runtime_checkable
class AttentionCapability(Protocol):
    """Turns one harness's native events into canonical lifecycle events."""

    interpreter: Path | None
    """The standard-library-only interpreter file the hook bridge loads, or ``None``
    when the harness reports from inside its own process (a plugin or extension)."""

    resume_preserves_session_id: bool
    """A resume keeps the native session id, so an id clanker validated in trusted
    storage may bind the root before the harness's first event."""

    def prepare(self, context: AttachmentContext) -> AttachmentPlan | Declined:
        """Wire native events into this launch.

        :class:`Declined` means a configuration conflict: the user owns the
        hooks or settings this would need, so attention is unavailable for
        this launch (never a failed launch), and its reason says which and how
        to keep attention. Raise only for an operational failure.
        """
        ...
