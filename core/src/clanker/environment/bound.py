"""Executors bound to a few variables: every command they run gets them.

A managed account is a home the harness is pointed at by one variable. A
provider probing usage or listing sessions for that account is handed these
instead of the environment's own executors, so each of its commands runs
under that home without the provider learning a path or a variable name
(the bound variables have the last word over the request's own).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from attrs import evolve

from clanker.execution import (
    CommandExecutor,
    CommandRequest,
    CommandResult,
    LineSession,
    SessionExecutor,
)

__all__ = ["BoundExecutor", "BoundSessionExecutor"]


class BoundExecutor:
    """Runs each request through ``executor`` with ``env`` added."""

    def __init__(self, executor: CommandExecutor, env: Mapping[str, str]) -> None:
        self._executor = executor
        self._env = MappingProxyType(dict(env))

    async def run(self, request: CommandRequest) -> CommandResult:
        return await self._executor.run(evolve(request, env={**request.env, **self._env}))


class BoundSessionExecutor:
    """Opens each session through ``sessions`` with ``env`` added."""

    def __init__(self, sessions: SessionExecutor, env: Mapping[str, str]) -> None:
        self._sessions = sessions
        self._env = MappingProxyType(dict(env))

    async def open(self, request: CommandRequest) -> LineSession:
        return await self._sessions.open(evolve(request, env={**request.env, **self._env}))
