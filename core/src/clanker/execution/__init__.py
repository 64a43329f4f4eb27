"""Bounded command execution: what runs is the provider's, where and how is ours.

Two forms, one validation (:class:`CommandRequest`):

* one-shot: ``await executor.run(request) -> CommandResult``;
* stdio session: ``await session_executor.open(request) -> CommandSession``
  for line-oriented protocols (JSON-RPC handshakes and the like).

Providers are handed objects satisfying :class:`CommandExecutor` /
:class:`SessionExecutor`; they never learn which transport runs them.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, runtime_checkable

from clanker.execution.local import LocalTransport
from clanker.execution.request import (
    ATTENDED_TIMEOUT,
    DEFAULT_MAX_OUTPUT,
    DEFAULT_TIMEOUT,
    INFERENCE_TIMEOUT,
    MAX_OUTPUT,
    MAX_SESSION_INPUT,
    MAX_TIMEOUT,
    CommandRequest,
    CommandResult,
)
from clanker.execution.session import CommandSession, SessionExit

__all__ = [
    "ATTENDED_TIMEOUT",
    "DEFAULT_MAX_OUTPUT",
    "DEFAULT_TIMEOUT",
    "INFERENCE_TIMEOUT",
    "MAX_OUTPUT",
    "MAX_SESSION_INPUT",
    "MAX_TIMEOUT",
    "CommandExecutor",
    "CommandRequest",
    "CommandResult",
    "CommandSession",
    "LineSession",
    "LocalTransport",
    "SessionExecutor",
    "SessionExit",
]


@runtime_checkable
class CommandExecutor(Protocol):
    """Runs one bounded command to completion."""

    async def run(self, request: CommandRequest) -> CommandResult: ...


@runtime_checkable
class LineSession(Protocol):
    """A bounded line-oriented stdio session (see :class:`CommandSession`)."""

    async def write_line(self, line: str) -> None: ...
    async def read_line(self) -> str | None: ...
    async def close_input(self) -> None: ...
    async def wait(self) -> SessionExit: ...
    async def dispose(self) -> None: ...
    async def __aenter__(self) -> LineSession: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class SessionExecutor(Protocol):
    """Opens a bounded line-oriented stdio session."""

    async def open(self, request: CommandRequest) -> LineSession: ...
