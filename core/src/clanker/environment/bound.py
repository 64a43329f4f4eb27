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


class _Bound:
    """The variables every request gets, with the last word over the request's own."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = MappingProxyType(dict(env))

    def _bound(self, request: CommandRequest) -> CommandRequest:
        return evolve(request, env={**request.env, **self._env})


class BoundExecutor(_Bound):
    """Runs each request through ``executor`` with ``env`` added."""

    def __init__(self, executor: CommandExecutor, env: Mapping[str, str]) -> None:
        super().__init__(env)
        self._executor = executor

    async def run(self, request: CommandRequest) -> CommandResult:
        return await self._executor.run(self._bound(request))


class BoundSessionExecutor(_Bound):
    """Opens each session through ``sessions`` with ``env`` added."""

    def __init__(self, sessions: SessionExecutor, env: Mapping[str, str]) -> None:
        super().__init__(env)
        self._sessions = sessions

    async def open(self, request: CommandRequest) -> LineSession:
        return await self._sessions.open(self._bound(request))
