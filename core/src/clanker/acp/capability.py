"""The ACP contract: how to start a harness as an Agent Client Protocol server
over stdio. No service calls it yet.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from clanker.execution import CommandRequest

__all__ = ["AcpCapability"]


@runtime_checkable
class AcpCapability(Protocol):
    """Starts the harness speaking ACP on stdin/stdout."""

    def server_command(self, model: str | None) -> CommandRequest:
        """Return the command that serves ACP on stdin/stdout."""
        ...
