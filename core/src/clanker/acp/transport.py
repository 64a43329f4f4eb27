"""The agent's process: ACP frames on its stdio, its stderr in a bounded log.

One pump turns stdout into lines under a 2 MiB bound: a longer line is dropped
whole (up to its newline) and counted, never buffered and never fatal. The
line queue is bounded too, so a client that falls behind slows the agent down
through the pipe instead of growing memory. Another pump drains stderr from the
start (a chatty agent never blocks on a full pipe) into a 0600 log file that
stops growing at :data:`STDERR_LOG_MAX`; what it holds is never rendered.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Final

from clanker.acp import early
from clanker.acp.wire import INITIALIZE_TIMEOUT
from clanker.execution.process import Child, adopt, spawn, terminate
from clanker.execution.request import CommandRequest

__all__ = ["INITIALIZE_TIMEOUT", "MAX_LINE", "STDERR_LOG_MAX", "AgentProcess"]


MAX_LINE: Final = 2 * 1024 * 1024
STDERR_LOG_MAX: Final = 1024 * 1024
_CHUNK: Final = 64 * 1024
_QUEUE: Final = 256
_EOF: Final = None


class AgentProcess:
    """A started ACP agent. Use :meth:`start`; always :meth:`close` it."""

    def __init__(self, child: Child, log: IO[bytes],
                 redact: Callable[[bytes], bytes] = bytes, first_line: bytes | None = None
                 ) -> None:
        self._child = child
        self.first_line = first_line if child.first_input_at is not None else None
        """The line written to the agent's stdin as it started (``None``: none was)."""
        self._log = log
        self._redact = redact
        self._lines: asyncio.Queue[bytes | None] = asyncio.Queue(_QUEUE)
        self._ended = False
        self.dropped_lines = 0
        """How many stdout lines were over :data:`MAX_LINE` and dropped."""
        self._pumps = [asyncio.create_task(self._pump_stdout()),
                       asyncio.create_task(self._pump_stderr())]

    @classmethod
    async def start(cls, argv: Sequence[str], env: Mapping[str, str], cwd: str,
                    stderr_log: Path, redact: Callable[[bytes], bytes] = bytes,
                    first_line: bytes | None = None) -> AgentProcess:
        """Start ``argv`` in ``cwd`` with exactly ``env`` (clanker credentials are
        stripped on the way); ``redact`` cleans each stderr line before it is logged.
        ``first_line`` is written to its stdin at once, before the start is
        confirmed (:attr:`first_line_at` says when). Raises ``binary-unavailable``
        when it cannot start.

        The agent the early start (:mod:`clanker.acp.early`) started before the
        CLI loaded is taken instead when it is this very command: the same argv,
        environment, directory and first line."""
        request = CommandRequest(command=argv[0], args=tuple(argv[1:]), cwd=cwd)
        fd = os.open(stderr_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        log = os.fdopen(fd, "wb")
        line = first_line + b"\n" if first_line is not None else None
        try:
            started = early.take(argv, env, cwd, line)
            if started is not None:
                child = await adopt(request, started.process, started.report_read,
                                    first_input_at=started.written_at)
            else:
                child = await spawn(request, env, stdin_pipe=True, first_input=line)
        except BaseException:
            log.close()
            raise
        return cls(child, log, redact, first_line)

    @property
    def first_line_at(self) -> float | None:
        """When :attr:`first_line` was written (``None``: it was not)."""
        return self._child.first_input_at

    @property
    def pid(self) -> int:
        return self._child.pid

    @property
    def returncode(self) -> int | None:
        return self._child.returncode

    async def _pump_stdout(self) -> None:
        pending = bytearray()
        skipping = False  # inside a line that is over the bound
        try:
            while chunk := await self._child.stdout.read(_CHUNK):
                start = 0
                while (newline := chunk.find(b"\n", start)) >= 0:
                    if skipping:
                        skipping = False
                    elif len(pending) + newline - start > MAX_LINE:
                        self.dropped_lines += 1
                    else:
                        pending += chunk[start:newline]
                        await self._lines.put(bytes(pending))
                    pending.clear()
                    start = newline + 1
                if not skipping:
                    pending += chunk[start:]
                    if len(pending) > MAX_LINE:
                        self.dropped_lines += 1
                        pending.clear()
                        skipping = True
            if pending and not skipping:
                await self._lines.put(bytes(pending))
        finally:
            self._ended = True
            with contextlib.suppress(asyncio.QueueFull):  # full: read_line sees _ended
                self._lines.put_nowait(_EOF)

    async def _pump_stderr(self) -> None:
        # Redacted a line at a time, so a secret is never split across two writes
        # (a line longer than a chunk is cut there, the one place it could be).
        written = 0
        pending = b""
        while chunk := await self._child.stderr.read(_CHUNK):
            pending += chunk
            cut = pending.rfind(b"\n") + 1 if len(pending) <= _CHUNK else len(pending)
            ready, pending = pending[:cut], pending[cut:]
            written = self._log_stderr(ready, written)
        self._log_stderr(pending, written)

    def _log_stderr(self, data: bytes, written: int) -> int:
        if not data or written >= STDERR_LOG_MAX:
            return written
        part = self._redact(data)[: STDERR_LOG_MAX - written]
        with contextlib.suppress(OSError):
            self._log.write(part)
            self._log.flush()
        return written + len(part)

    async def read_line(self) -> bytes | None:
        """The next stdout line (without its newline), or ``None`` once stdout ended."""
        if self._ended and self._lines.empty():
            return None
        line = await self._lines.get()
        if line is _EOF:
            with contextlib.suppress(asyncio.QueueFull):
                self._lines.put_nowait(_EOF)  # sticky
        return line

    async def write_line(self, line: bytes) -> None:
        """Send one frame. Raises :class:`ConnectionError` once the agent closed stdin."""
        stdin = self._child.stdin
        assert stdin is not None
        if stdin.is_closing():
            raise ConnectionResetError("the agent's input is closed")
        stdin.write(line + b"\n")
        await stdin.drain()

    async def exited(self) -> int:
        return await self._child.exited()

    async def close(self) -> None:
        """Stop the agent's tree (SIGTERM, then SIGKILL) and release everything. Idempotent."""
        try:
            await terminate(self._child)
        finally:
            for task in self._pumps:
                task.cancel()
            await asyncio.gather(*self._pumps, return_exceptions=True)
            self._log.close()
