"""JSON-RPC 2.0 over newline-delimited frames: clanker's own, on asyncio.

One reader task takes frames in the order they arrive. A notification's
handler runs synchronously inside that loop, so ``session/update`` frames are
applied strictly in arrival order; a request from the agent
(``session/request_permission``) is handed to its handler as its own task, so
several can be pending at once, but each is started in arrival order. Every
frame, in both directions and whatever it holds, is passed to ``observe``
first (the transcript): an unknown method or a frame that is not JSON is kept,
never silently lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

from clanker._logging import get_logger
from clanker.acp.wire import encode

__all__ = [
    "METHOD_NOT_FOUND",
    "AgentExited",
    "Connection",
    "Direction",
    "RemoteError",
]

_log = get_logger(__name__)

METHOD_NOT_FOUND: Final = -32601
_INTERNAL: Final = -32603

Direction = str  # "out" (to the agent) or "in" (from it)
Frame = dict[str, Any]


class LineChannel(Protocol):
    async def read_line(self) -> bytes | None: ...
    async def write_line(self, line: bytes) -> None: ...


class RemoteError(Exception):
    """The agent answered a request with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: object = None) -> None:
        self.code = code
        self.remote_message = message
        self.data = data
        super().__init__(f"{code}: {message}")


class AgentExited(Exception):
    """The agent's output ended (it exited or closed stdout) with requests pending."""


Observer = Callable[[Direction, "Frame | str"], None]
NotificationHandler = Callable[[str, Any], None]
RequestHandler = Callable[[str, Any], Awaitable[Any]]


class Connection:
    """One JSON-RPC peer over ``channel``. Start it with :meth:`run` in a task."""

    def __init__(self, channel: LineChannel, *, observe: Observer,
                 on_notification: NotificationHandler, on_request: RequestHandler) -> None:
        self._channel = channel
        self._observe = observe
        self._on_notification = on_notification
        self._on_request = on_request
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._handlers: set[asyncio.Task[None]] = set()
        self._write_lock = asyncio.Lock()
        self.received = 0
        """Frames received so far (an idle bound watches it move)."""
        self.invalid_frames = 0
        """Lines that were not a JSON-RPC object (kept in the transcript as text)."""
        self.closed = False

    # -- sending ---------------------------------------------------------

    async def _send(self, frame: Frame) -> None:
        self._observe("out", frame)
        data = encode(frame)
        async with self._write_lock:
            try:
                await self._channel.write_line(data)
            except (ConnectionError, RuntimeError) as exc:
                raise AgentExited("the agent's input is closed") from exc

    async def request(self, method: str, params: object) -> Any:
        """Send a request and return its result; raise :class:`RemoteError` or
        :class:`AgentExited`. The caller bounds the wait."""
        answer = await self.send_request(method, params)
        try:
            return await answer
        finally:
            answer.cancel()  # abandoned (the caller was cancelled): nobody waits for it

    async def send_request(self, method: str, params: object) -> asyncio.Future[Any]:
        """Send a request; return, once it is written, the future of its result
        (which raises :class:`RemoteError` or :class:`AgentExited`). Whoever gets it
        awaits or cancels it."""
        if self.closed:
            raise AgentExited("the agent's output ended")
        request_id = self._next_id
        future = self._expect(request_id)
        try:
            await self._send({"jsonrpc": "2.0", "id": request_id, "method": method,
                              "params": params})
        except BaseException:
            future.cancel()
            raise
        return future

    def written_request(self, frame: Frame) -> asyncio.Future[Any]:
        """The future of the result of ``frame``, a request written to the agent
        before this connection existed (and not observed here: the writer records
        it). Its id must be the one :meth:`send_request` would have given it."""
        if frame.get("id") != self._next_id:
            raise ValueError(f"written_request: id {frame.get('id')!r}, expected {self._next_id}")
        return self._expect(self._next_id)

    def _expect(self, request_id: int) -> asyncio.Future[Any]:
        self._next_id = request_id + 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        future.add_done_callback(lambda _: self._pending.pop(request_id, None))
        return future

    async def notify(self, method: str, params: object) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def _respond(self, request_id: object, *, result: object = None,
                       error: Frame | None = None) -> None:
        frame: Frame = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            frame["error"] = error
        else:
            frame["result"] = result
        with contextlib.suppress(AgentExited):  # the agent is gone: nobody to answer
            await self._send(frame)

    # -- receiving -------------------------------------------------------

    async def run(self) -> None:
        """Read frames until the agent's output ends; then fail what is pending."""
        try:
            while (line := await self._channel.read_line()) is not None:
                try:
                    self._dispatch(line)
                except Exception:  # a handler's bug loses that frame, not the connection
                    _log.exception("a frame from the agent could not be handled")
        finally:
            self.closed = True
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(AgentExited("the agent's output ended"))

    def _dispatch(self, line: bytes) -> None:
        self.received += 1
        text = line.decode("utf-8", errors="replace")
        try:
            frame = json.loads(text)
        except ValueError:
            frame = None
        if not isinstance(frame, dict):
            if text.strip():
                self.invalid_frames += 1
                self._observe("in", text)
            return
        self._observe("in", frame)
        method = frame.get("method")
        if isinstance(method, str):
            if "id" in frame:
                self._start_handler(frame["id"], method, frame.get("params"))
            else:
                self._on_notification(method, frame.get("params"))
            return
        request_id = frame.get("id")
        future = self._pending.get(request_id) if isinstance(request_id, int) else None
        if future is None or future.done():
            return  # an answer to nothing we asked: kept in the transcript only
        error = frame.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            message = error.get("message")
            future.set_exception(RemoteError(
                code if isinstance(code, int) else _INTERNAL,
                message if isinstance(message, str) else "", error.get("data")))
        else:
            future.set_result(frame.get("result"))

    def _start_handler(self, request_id: object, method: str, params: object) -> None:
        async def handle() -> None:
            try:
                result = await self._on_request(method, params)
            except RemoteError as exc:
                await self._respond(request_id, error={"code": exc.code,
                                                       "message": exc.remote_message})
            except Exception:  # a bug here must not leave the agent waiting for ever
                _log.exception("handling %s failed", method)
                await self._respond(request_id, error={"code": _INTERNAL,
                                                       "message": "client error"})
            else:
                await self._respond(request_id, result=result)

        task = asyncio.get_running_loop().create_task(handle())
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)

    async def aclose(self) -> None:
        """Cancel the request handlers still running."""
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
