"""Driving a discovery without an event loop.

A listing of file stores on this machine never waits on anything but its own
offloaded work, which an :attr:`~clanker.sessions.capability.SessionsContext.inline`
context runs at once: its ``discover`` coroutine then finishes on its first step,
and the process needs neither :mod:`asyncio` (some 7 MB with the :mod:`ssl` it
imports) nor a thread to run it. What does need a loop (a command, a wait)
raises :class:`~clanker.sessions.capability.NeedsEventLoop`, and the caller lists
with one instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, TypeVar

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.sessions.capability import NeedsEventLoop

if TYPE_CHECKING:
    from clanker.execution import CommandRequest, CommandResult

__all__ = ["LookupOnly", "finish"]

_T = TypeVar("_T")


def finish(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """The coroutine's result when it finishes without waiting on anything; raises
    :class:`NeedsEventLoop` (the coroutine closed) when it waits."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()  # it waited on something only an event loop can give
    raise NeedsEventLoop


class _Raising:
    """Awaited, raises ``error``: a plain awaitable rather than a coroutine, so that one
    a provider asked for but never awaited leaves no coroutine behind unawaited."""

    def __init__(self, error: BaseException) -> None:
        self._error = error

    def __await__(self) -> Generator[Any, None, Any]:
        raise self._error
        yield  # a generator: what `await` needs


class LookupOnly:
    """The executor of an inline discovery, which runs nothing: a command that is not
    installed fails as the real executor's does (``binary-unavailable``, the command as
    its detail); any other needs the event loop, and so does one whose request sets
    its own ``PATH`` (``locate`` searches the environment's).

    ``locate`` finds a command as the real executor would (``None``: not installed)."""

    def __init__(self, locate: Callable[[str], str | None]) -> None:
        self._locate = locate

    def run(self, request: CommandRequest) -> Awaitable[CommandResult]:
        if "PATH" in request.env or self._locate(request.command) is not None:
            return _Raising(NeedsEventLoop())
        return _Raising(HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE, request.command))
