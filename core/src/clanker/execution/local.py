"""Run bounded commands on this machine."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution.process import read_capped, spawn, terminate
from clanker.execution.request import CommandRequest, CommandResult
from clanker.execution.session import CommandSession

__all__ = ["LocalTransport"]


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


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

        Raises ``timeout``, ``output-limit``, ``binary-unavailable``; a
        cancelled caller stops and reaps the child before the cancellation
        propagates.
        """
        process = await spawn(request, self._base_env, stdin_pipe=request.stdin is not None)
        assert process.stdout is not None
        assert process.stderr is not None
        cap = request.max_output_bytes

        async def feed() -> None:
            if process.stdin is None:
                return
            try:
                process.stdin.write(request.stdin or b"")
                await process.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the child stopped reading; its exit status tells the rest
            finally:
                process.stdin.close()

        try:
            async with asyncio.timeout(request.timeout):
                async with asyncio.TaskGroup() as group:
                    group.create_task(feed())
                    out = group.create_task(read_capped(process.stdout, cap, "stdout"))
                    err = group.create_task(read_capped(process.stderr, cap, "stderr"))
                exit_code = await process.wait()
        except TimeoutError as exc:
            await terminate(process)
            raise HarnessCapabilityError(
                ErrorKind.TIMEOUT, f"{request.command} after {request.timeout:g}s", cause=exc
            ) from exc
        except BaseExceptionGroup as group_exc:
            await terminate(process)
            limit = group_exc.subgroup(HarnessCapabilityError)
            if limit is not None:
                raise limit.exceptions[0] from None
            raise
        except BaseException:
            await terminate(process)
            raise
        return CommandResult(_decode(out.result()), _decode(err.result()), exit_code)

    async def open(self, request: CommandRequest) -> CommandSession:
        """Start ``request`` as a line-oriented stdio session (see :class:`CommandSession`)."""
        if request.stdin is not None:
            raise ValueError("stdin: a session writes its input with write_line()")
        process = await spawn(request, self._base_env, stdin_pipe=True)
        return CommandSession(process, request)
