"""Starting and stopping child processes: the part both execution forms share.

Children start in their own process group so that a timeout or cancellation
stops the whole tree (npm shims start node, which starts the real binary).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import Mapping
from typing import Final

from clanker.envvars import strip_credentials
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution.request import CommandRequest

__all__ = ["GRACE_SECONDS", "compose_env", "resolve_executable", "spawn", "terminate"]

GRACE_SECONDS: Final = 1.0
_READ_CHUNK: Final = 64 * 1024


def compose_env(base: Mapping[str, str], additions: Mapping[str, str]) -> dict[str, str]:
    """Return the child environment: ``base`` without credentials, then ``additions``."""
    env = strip_credentials(base)
    env.update(additions)
    return env


def resolve_executable(command: str, env: Mapping[str, str]) -> str:
    """Find ``command`` on the child's PATH or raise ``binary-unavailable``."""
    found = shutil.which(command, path=env.get("PATH", os.defpath))
    if found is None:
        raise HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE, command)
    return found


async def spawn(
    request: CommandRequest, base_env: Mapping[str, str], *, stdin_pipe: bool
) -> asyncio.subprocess.Process:
    """Start ``request`` with piped output, in a new process group."""
    env = compose_env(base_env, request.env)
    if request.cwd is not None and "PWD" not in request.env:
        # As a shell would: Node and Bun CLIs take $PWD, not getcwd(), as their directory.
        env["PWD"] = request.cwd
    executable = resolve_executable(request.command, env)
    try:
        return await asyncio.create_subprocess_exec(
            executable,
            *request.args,
            stdin=asyncio.subprocess.PIPE if stdin_pipe else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=request.cwd,
            env=env,
            start_new_session=True,
            limit=_READ_CHUNK,
        )
    except FileNotFoundError as exc:
        # The cwd is missing, or the file vanished between lookup and exec.
        kind = ErrorKind.COMMAND_FAILED if request.cwd and not os.path.isdir(request.cwd) else (
            ErrorKind.BINARY_UNAVAILABLE
        )
        raise HarnessCapabilityError(kind, request.command, cause=exc) from exc
    except PermissionError as exc:
        raise HarnessCapabilityError(
            ErrorKind.BINARY_UNAVAILABLE, f"{request.command} is not executable", cause=exc
        ) from exc


def _signal_group(process: asyncio.subprocess.Process, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


async def terminate(process: asyncio.subprocess.Process) -> None:
    """Stop the process group (SIGTERM, then SIGKILL after a grace period) and reap.

    Safe to call on a process that already exited, and safe to call while the
    calling task is being cancelled: the reaping itself is shielded.
    """
    if process.returncode is None:
        _signal_group(process, signal.SIGTERM)
        try:
            await asyncio.shield(asyncio.wait_for(process.wait(), GRACE_SECONDS))
        except TimeoutError:
            _signal_group(process, signal.SIGKILL)
    else:
        # The leader is gone but a grandchild may still hold the group.
        _signal_group(process, signal.SIGKILL)
    await asyncio.shield(process.wait())
    await asyncio.shield(_release_pipes(process))


async def _release_pipes(process: asyncio.subprocess.Process) -> None:
    """Drain the dead group's pipes to EOF so the transport closes with the loop alive."""
    if process.stdin is not None:
        process.stdin.close()
    streams = [s for s in (process.stdout, process.stderr) if s is not None]

    async def drain(stream: asyncio.StreamReader) -> None:
        while await stream.read(_READ_CHUNK):
            pass

    with contextlib.suppress(Exception):
        await asyncio.wait_for(asyncio.gather(*(drain(s) for s in streams)), GRACE_SECONDS)


async def read_capped(
    stream: asyncio.StreamReader, cap: int, which: str
) -> bytes:
    """Read ``stream`` to EOF, raising ``output-limit`` past ``cap`` bytes."""
    chunks: list[bytes] = []
    total = 0
    while chunk := await stream.read(_READ_CHUNK):
        total += len(chunk)
        if total > cap:
            raise HarnessCapabilityError(ErrorKind.OUTPUT_LIMIT, f"{which} over {cap} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
