"""The ``codex app-server`` conversation every stdio probe starts with.

Newline-delimited JSON-RPC without the ``"jsonrpc"`` field, over
``codex app-server`` (stdio is its default listener; plain, so it works on
every version and matches upstream's own test client)::

    -> {"id": 1, "method": "initialize", "params": {"clientInfo": ..., "capabilities": null}}
    <- {"id": 1, "result": {...}}      (notifications may come before or after)
    -> {"method": "initialized"}

after which the probe sends its own requests. Models and usage both open the
server through :func:`app_server_request` and :func:`start`, and read answers
with :func:`answer`: the handshake lives here only.

A conversation that waits for a notification while it may still have to send
a request (a sign-in waits for ``account/login/completed`` and may have to
cancel) goes through :class:`Connection` instead: one pump task is the only
reader of the session and hands each response to the request with its id and
each notification to whoever waits for one, so no answer is ever read by the
wrong waiter.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final

import clanker
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, LineSession
from clanker.execution.jsonlines import read_matching, send

__all__ = [
    "INITIALIZE_ID",
    "MAX_SKIPPED",
    "Connection",
    "answer",
    "app_server_request",
    "error_code",
    "fail",
    "parse_initialize_response",
    "result_of",
    "start",
]

INITIALIZE_ID: Final = 1
# The app server interleaves notifications (config warnings, remote-control
# status, account updates) and may send requests of its own; none of them
# answers ours, and none is ever answered.
MAX_SKIPPED: Final = 2000
_TIMEOUT: Final = 30.0


def fail(kind: ErrorKind, detail: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(kind, detail, harness="codex")


def app_server_request(
    timeout: float = _TIMEOUT, env: Mapping[str, str] | None = None, *,
    attended: bool = False,
) -> CommandRequest:
    """Return the one command every app-server probe runs: ``codex app-server``
    (``attended``: it waits for the person, a sign-in, up to 300 s)."""
    return CommandRequest(command="codex", args=("app-server",), timeout=timeout, env=env,
                          attended=attended)


def error_code(response: Mapping[str, Any]) -> int | None:
    """The JSON-RPC ``error.code`` of a response, when it is an integer."""
    error = response.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def result_of(response: Mapping[str, Any], method: str) -> dict[str, Any]:
    """Return the ``result`` object of a response; an ``error`` is command-failed."""
    if "error" in response:
        # The server's message can quote config or account details: only the code leaves.
        code = error_code(response)
        suffix = f" {code}" if code is not None else ""
        raise fail(ErrorKind.COMMAND_FAILED, f"{method} error{suffix}")
    result = response.get("result")
    if not isinstance(result, dict):
        raise fail(ErrorKind.PARSE_FAILURE, f"{method} answered without a result object")
    return result


def parse_initialize_response(response: Mapping[str, Any]) -> None:
    """Check an ``initialize`` response; its content (user agent, paths) is not needed."""
    result_of(response, "initialize")


def _is_response_to(request_id: int) -> Callable[[dict[str, Any]], bool]:
    # A server request carries an id of its own numbering and a method; a response has none.
    return lambda message: message.get("id") == request_id and "method" not in message


async def answer(session: LineSession, request_id: int) -> dict[str, Any]:
    """Read up to the response to ``request_id``, skipping (never answering) the rest."""
    return await read_matching(
        session, _is_response_to(request_id), harness="codex", max_skipped=MAX_SKIPPED
    )


def _initialize_params() -> dict[str, Any]:
    return {
        "clientInfo": {"name": "clanker", "title": "clanker", "version": clanker.__version__},
        "capabilities": None,
    }


async def start(session: LineSession) -> None:
    """``initialize`` -> its response -> ``initialized``."""
    await send(session, {"id": INITIALIZE_ID, "method": "initialize",
                         "params": _initialize_params()})
    parse_initialize_response(await answer(session, INITIALIZE_ID))
    await send(session, {"method": "initialized"})


_ABSENT: Final = object()


class Connection:
    """One app-server conversation over ``session``, with a single read pump.

    Use as ``async with Connection(session) as connection:``. Requests are
    numbered from :data:`INITIALIZE_ID`; :meth:`request` returns the whole
    response (``result`` or ``error``), :meth:`notification` the next
    notification that matches. Server requests are never answered (as in
    :func:`answer`). The end of output, a line that is not a JSON object, or
    more than :data:`MAX_SKIPPED` notifications nobody waits for fails every
    waiter with the same typed error, and every later call too.
    """

    def __init__(self, session: LineSession) -> None:
        self._session = session
        self._next_id = INITIALIZE_ID
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._notifications: list[dict[str, Any]] = []
        self._arrived = asyncio.Event()
        self._failure: HarnessCapabilityError | None = None
        self._pump: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Connection:
        self._pump = asyncio.create_task(self._read())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump

    # -- the pump ----------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            while True:
                line = await self._session.read_line()
                if line is None:
                    raise fail(ErrorKind.COMMAND_FAILED, "the server ended before answering")
                self._dispatch(_message(line))
        except HarnessCapabilityError as exc:
            self._stop(exc)

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" in message:
            if "id" in message:
                return  # a server request: never answered, and it answers nothing of ours
            if len(self._notifications) >= MAX_SKIPPED:
                raise fail(ErrorKind.PARSE_FAILURE,
                           f"more than {MAX_SKIPPED} notifications nobody waited for")
            self._notifications.append(message)
            self._arrived.set()
            return
        request_id = message.get("id")
        future = self._pending.pop(request_id, None) if type(request_id) is int else None
        if future is not None and not future.done():
            future.set_result(message)
        # A response to nothing we asked (or asked and gave up on) is dropped.

    def _stop(self, failure: HarnessCapabilityError) -> None:
        self._failure = failure
        for future in self._pending.values():
            if not future.done():
                future.set_exception(failure)
        self._pending.clear()
        self._arrived.set()

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure

    # -- the API -----------------------------------------------------------------------

    async def request(self, method: str, params: object = _ABSENT) -> dict[str, Any]:
        """Send ``method`` (with ``params`` unless absent) and return its response."""
        self._check()
        request_id, self._next_id = self._next_id, self._next_id + 1
        message: dict[str, Any] = {"id": request_id, "method": method}
        if params is not _ABSENT:
            message["params"] = params
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await send(self._session, message)
            return await future
        finally:
            self._pending.pop(request_id, None)

    async def notify(self, method: str) -> None:
        """Send the client notification ``method`` (no params, no answer)."""
        self._check()
        await send(self._session, {"method": method})

    async def notification(self, matches: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """Return the next notification for which ``matches`` is true; drop the others."""
        while True:
            while self._notifications:
                message = self._notifications.pop(0)
                if matches(message):
                    return message
            self._check()
            self._arrived.clear()
            await self._arrived.wait()

    async def initialize(self) -> None:
        """``initialize`` -> its response -> ``initialized``, as :func:`start` does."""
        parse_initialize_response(await self.request("initialize", _initialize_params()))
        await self.notify("initialized")


def _message(line: str) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: absurdly nested input
        message = None
    if not isinstance(message, dict):
        raise fail(ErrorKind.PARSE_FAILURE, "a line that is not a JSON object")
    return message
