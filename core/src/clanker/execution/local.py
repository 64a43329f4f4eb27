"""Run bounded commands on this machine."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution.process import Child, read_capped, release, spawn, terminate
from clanker.execution.request import CommandRequest, CommandResult
from clanker.execution.session import CommandSession

__all__ = ["LocalTransport"]


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


async def _feed(child: Child, data: bytes | None) -> None:
    stdin = child.stdin
    if stdin is None:
        return
    try:
        stdin.write(data or b"")
        await stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the child stopped reading; its exit status tells the rest
    finally:
        stdin.close()


async def _settle(child: Child, readers: list[asyncio.Task[bytes]]) -> int:
    """Wait for the command's exit, failing as soon as a reader does (output-limit);
    then end what it left and collect what the pipes held."""
    exited = asyncio.ensure_future(child.exited())
    try:
        while not exited.done():
            await asyncio.wait([exited, *(r for r in readers if not r.done())],
                               return_when=asyncio.FIRST_COMPLETED)
            for reader in readers:
                if reader.done():
                    reader.result()  # raises the reader's failure
    finally:
        exited.cancel()
    await release(child, readers)
    return exited.result()


class LocalTransport:
    """The local environment: both execution forms, as child processes.

    ``base_env`` is the environment children start from (default: this
    process's); clanker credentials in it are never passed on.
    """

    name = "local"

    def __init__(self, base_env: Mapping[str, str] | None = None) -> None:
        self._base_env = dict(os.environ if base_env is None else base_env)

    async def run(self, request: CommandRequest) -> CommandResult:
        """Run ``request`` to completion and return what it printed.

        The result is the command's own: once it exits, what it left running
        is ended and its output is what the pipes held. Raises ``timeout``,
        ``output-limit``, ``binary-unavailable``; a cancelled caller stops and
        reaps the child's tree before the cancellation propagates.
        """
        cap = request.max_output_bytes
        # One deadline for all of it: starting, running and collecting.
        deadline = asyncio.get_running_loop().time() + request.timeout
        try:
            async with asyncio.timeout_at(deadline):
                child = await spawn(request, self._base_env, stdin_pipe=request.stdin is not None)
        except TimeoutError as exc:
            raise HarnessCapabilityError(
                ErrorKind.TIMEOUT, f"{request.command} after {request.timeout:g}s", cause=exc
            ) from exc
        readers = [
            asyncio.ensure_future(read_capped(child.stdout, cap, "stdout")),
            asyncio.ensure_future(read_capped(child.stderr, cap, "stderr")),
        ]
        feeder = asyncio.ensure_future(_feed(child, request.stdin))
        try:
            async with asyncio.timeout_at(deadline):
                exit_code = await _settle(child, readers)
            out, err = (reader.result() for reader in readers)
        except TimeoutError as exc:
            await terminate(child)
            raise HarnessCapabilityError(
                ErrorKind.TIMEOUT, f"{request.command} after {request.timeout:g}s", cause=exc
            ) from exc
        except BaseException:
            await terminate(child)
            raise
        finally:
            for task in (*readers, feeder):
                task.cancel()
            await asyncio.gather(*readers, feeder, return_exceptions=True)
        return CommandResult(_decode(out), _decode(err), exit_code)

    async def open(self, request: CommandRequest) -> CommandSession:
        """Start ``request`` as a line-oriented stdio session (see :class:`CommandSession`)."""
        if request.stdin is not None:
            raise ValueError("stdin: a session writes its input with write_line()")
        try:
            async with asyncio.timeout(request.timeout):
                child = await spawn(request, self._base_env, stdin_pipe=True)
        except TimeoutError as exc:
            raise HarnessCapabilityError(
                ErrorKind.TIMEOUT, f"{request.command}: session over {request.timeout:g}s",
                cause=exc,
            ) from exc
        return CommandSession(child, request)
