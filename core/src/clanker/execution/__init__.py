"""Bounded command execution: what runs is the provider's, where and how is ours.

Two forms, one validation (:class:`CommandRequest`):

* one-shot: ``await executor.run(request) -> CommandResult``;
* stdio session: ``await session_executor.open(request) -> CommandSession``
  for line-oriented protocols (JSON-RPC handshakes and the like).

Providers are handed objects satisfying :class:`CommandExecutor` /
:class:`SessionExecutor`; they never learn which transport runs them.

The transport and the session (:class:`LocalTransport`, :class:`CommandSession`,
:class:`SessionExit`) import :mod:`asyncio`; they load when first named, so
what only needs these protocols or a request (binary lookup, the registry,
``clanker harnesses`` with nothing installed) runs without it.
"""

from __future__ import annotations

import importlib
from types import TracebackType
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

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

if TYPE_CHECKING:
    from clanker.execution.local import LocalTransport
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

_LAZY: Final = {"LocalTransport": "clanker.execution.local",
                "CommandSession": "clanker.execution.session",
                "SessionExit": "clanker.execution.session"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
