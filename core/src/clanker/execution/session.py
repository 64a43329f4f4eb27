"""A bounded, line-oriented stdio session with a child process.

The session moves UTF-8 lines and knows no protocol and no harness. Two pump
tasks drain stdout and stderr from the start, so a chatty child can never block
on a full pipe, and both are capped cumulatively (which also bounds an
unterminated line). One deadline bounds the whole lifetime.

When the command exits, what it left running is ended and the pipes are
closed once they are drained (or after a grace, when something out of reach
still holds them): ``read_line`` then reports EOF, not a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable
from types import TracebackType
from typing import Final, Self, TypeVar

from attrs import frozen

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution.process import Child, release, terminate
from clanker.execution.request import MAX_SESSION_INPUT, CommandRequest

__all__ = ["CommandSession", "DisposedOnExit", "SessionExit"]

_CHUNK: Final = 64 * 1024
_EOF: Final = object()
_T = TypeVar("_T")


@frozen
class SessionExit:
    """How a session's process ended: a non-zero exit is a result, not an error."""

    stderr: str
    exit_code: int


class DisposedOnExit:
    """``async with session:`` disposes ``session`` when the block ends, however it ends."""

    async def dispose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.dispose()


class CommandSession(DisposedOnExit):
    """Write lines to a child's stdin and read lines from its stdout.

    Use as ``async with await transport.open(request) as session:``; leaving
    the block disposes the session (terminates and reaps the child).
    """

    def __init__(self, child: Child, request: CommandRequest) -> None:
        assert child.stdin is not None
        self._child = child
        self._command = request.command
        self._cap = request.max_output_bytes
        self._lines: asyncio.Queue[str | object] = asyncio.Queue()
        self._stderr = bytearray()
        self._input_total = 0
        self._input_closed = False
        self._failure: HarnessCapabilityError | None = None
        self._disposed = False
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + request.timeout
        self._timeout = request.timeout
        self._pumps = [
            asyncio.create_task(self._pump_stdout(child.stdout)),
            asyncio.create_task(self._pump_stderr(child.stderr)),
        ]
        self._settler = asyncio.create_task(self._settle())
        self._watchdog = loop.call_at(self._deadline, self._expire)

    # -- pumps -----------------------------------------------------------

    async def _pump_stdout(self, stream: asyncio.StreamReader) -> None:
        pending = bytearray()
        total = 0
        try:
            while chunk := await stream.read(_CHUNK):
                total += len(chunk)
                if total > self._cap:
                    self._fail(ErrorKind.OUTPUT_LIMIT, f"stdout over {self._cap} bytes")
                    return
                pending += chunk
                while (newline := pending.find(b"\n")) >= 0:
                    line = bytes(pending[:newline]).removesuffix(b"\r")
                    del pending[: newline + 1]
                    self._lines.put_nowait(line.decode("utf-8", errors="replace"))
            if pending:
                tail = bytes(pending).removesuffix(b"\r")
                self._lines.put_nowait(tail.decode("utf-8", errors="replace"))
        finally:
            self._lines.put_nowait(_EOF)

    async def _pump_stderr(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(_CHUNK):
            if len(self._stderr) + len(chunk) > self._cap:
                self._fail(ErrorKind.OUTPUT_LIMIT, f"stderr over {self._cap} bytes")
                return
            self._stderr += chunk

    async def _settle(self) -> None:
        """Once the command exits, end what it left and let the pumps reach EOF."""
        await self._child.exited()
        await release(self._child, self._pumps)

    # -- failure ---------------------------------------------------------

    def _fail(self, kind: ErrorKind, detail: str) -> None:
        if self._failure is None:
            self._failure = HarnessCapabilityError(kind, f"{self._command}: {detail}")
        self._lines.put_nowait(_EOF)  # wake a waiting reader
        if self._child.returncode is None:
            # Stop the whole tree now (the reaper ends what left the group); dispose() reaps it.
            self._child.signal_tree(signal.SIGTERM)

    def _expire(self) -> None:
        self._fail(ErrorKind.TIMEOUT, f"session over {self._timeout:g}s")

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._disposed:
            raise HarnessCapabilityError(ErrorKind.ABORTED, f"{self._command}: session disposed")

    # -- the API ---------------------------------------------------------

    async def write_line(self, line: str) -> None:
        """Send ``line`` plus a newline. Lines cannot contain CR, LF or NUL."""
        self._check()
        if any(c in line for c in "\r\n\0"):
            raise ValueError("write_line: a line cannot contain CR, LF or NUL")
        if self._input_closed:
            raise HarnessCapabilityError(ErrorKind.COMMAND_FAILED, "input already closed")
        data = line.encode("utf-8") + b"\n"
        self._input_total += len(data)
        if self._input_total > MAX_SESSION_INPUT:
            self._fail(ErrorKind.INPUT_LIMIT, f"input over {MAX_SESSION_INPUT} bytes")
            self._check()
        stdin = self._child.stdin
        assert stdin is not None
        try:
            stdin.write(data)
            await self._bounded(stdin.drain())
        except (BrokenPipeError, ConnectionResetError) as exc:
            self._check()
            raise HarnessCapabilityError(
                ErrorKind.COMMAND_FAILED, f"{self._command} closed its input", cause=exc
            ) from exc

    async def read_line(self) -> str | None:
        """Return the next stdout line without its line ending, or ``None`` at clean EOF."""
        self._check()
        item = await self._bounded(self._lines.get())
        if item is _EOF:
            self._lines.put_nowait(_EOF)  # EOF is sticky
            self._check()
            return None
        assert isinstance(item, str)
        return item

    async def close_input(self) -> None:
        """End stdin (idempotent). Closing input does not declare success."""
        if self._input_closed:
            return
        self._input_closed = True
        stdin = self._child.stdin
        assert stdin is not None
        stdin.close()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            await stdin.wait_closed()

    async def wait(self) -> SessionExit:
        """Wait for the process to exit and the pumps to finish; return how it ended."""
        self._check()
        await self.close_input()
        exit_code = await self._bounded(self._child.exited())
        await self._bounded(asyncio.shield(self._settler))
        await self._bounded(asyncio.gather(*self._pumps))
        self._check()
        return SessionExit(self._stderr.decode("utf-8", errors="replace"), exit_code)

    async def dispose(self) -> None:
        """Terminate (if still running) and reap. Idempotent; safe in ``finally``."""
        if self._disposed:
            return
        self._disposed = True
        self._watchdog.cancel()
        try:
            await terminate(self._child)  # also ends what an exited command left behind
        finally:
            tasks = [*self._pumps, self._settler]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _bounded(self, awaitable: Awaitable[_T]) -> _T:
        """Await ``awaitable`` but give up at the session deadline."""
        remaining = self._deadline - asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(max(remaining, 0)):
                return await awaitable
        except TimeoutError:
            self._expire()
            self._check()
            raise  # unreachable: _check raised
