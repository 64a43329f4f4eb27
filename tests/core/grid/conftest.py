"""Grid fixtures: short socket paths, real launcher processes, a real daemon."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from clanker.grid.protocol import Registration
from clanker.grid.server import Grid

T = TypeVar("T")


@pytest.fixture
def home(grid_home: Path) -> Path:
    return grid_home


# Registers itself when it is sent a socket path (the grid believes a launcher only
# from the launcher or its descendants), then waits for its stdin to close.
_LAUNCHER = """
import json, os, sys
from clanker.grid.client import GridClient
path = sys.stdin.readline().strip()
if path:
    reg = GridClient(path, timeout=30).register(
        harness="fake-agent", workspace=None, cwd="/tmp", launcher_pid=os.getpid())
    print(json.dumps({"terminal": reg.terminal, "token": reg.token}), flush=True)
sys.stdin.read()
"""


@pytest.fixture
def launcher() -> Iterator[subprocess.Popen[bytes]]:
    """A real process standing in for ``clanker launch``: it exits when its stdin closes."""
    process = subprocess.Popen(
        [sys.executable, "-c", _LAUNCHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()


def register_as(process: subprocess.Popen[bytes], socket_path: Path) -> Registration:
    """Have ``process`` (a :func:`launcher`) register itself on the grid at ``socket_path``."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(f"{socket_path}\n".encode())
    process.stdin.flush()
    line = process.stdout.readline()
    assert line, "the launcher could not register"
    data = json.loads(line)
    return Registration(terminal=data["terminal"], token=data["token"])


def end(process: subprocess.Popen[bytes]) -> None:
    """Let a launcher exit on its own and reap it."""
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=30)


def eventually(condition: Callable[[], bool], *, within: float = 30.0) -> None:
    """Wait until ``condition`` holds; a generous bound, not a timing assertion."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the condition never held")
        time.sleep(0.02)


def root(event: str, session: str = "s1", **fields: object) -> dict[str, object]:
    """A wire envelope from the root session."""
    return {"event": event, "scope": "root", "sessionId": session, **fields}


class LiveGrid:
    """A real :class:`~clanker.grid.server.Grid` on its own event-loop thread, as the
    daemon runs it, with the loop reachable from the test: :meth:`on_loop` runs a
    function there, :meth:`paused` holds the loop still (nothing is accepted or read)."""

    def __init__(self, socket_path: Path, **options: Any) -> None:
        self.path = socket_path
        self._options = options
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.grid: Grid | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def _run(self) -> None:
        async def main() -> None:
            async with Grid(self.path, **self._options) as grid:
                self.grid, self.loop = grid, asyncio.get_running_loop()
                self._started.set()
                await grid.wait_stopped()

        try:
            asyncio.run(main())
        finally:
            self._started.set()  # a grid that could not start says so at once

    def __enter__(self) -> LiveGrid:
        self._thread.start()
        assert self._started.wait(30)
        assert self.grid is not None, "the grid did not start"
        return self

    def __exit__(self, *_: object) -> None:
        assert self.loop is not None and self.grid is not None
        self.loop.call_soon_threadsafe(self.grid.request_stop)
        self._thread.join(60)
        assert not self._thread.is_alive()

    def on_loop(self, function: Callable[[Grid], T]) -> T:
        """Run ``function(grid)`` on the grid's loop and return what it returns."""
        assert self.loop is not None and self.grid is not None
        grid = self.grid

        async def call() -> T:
            return function(grid)

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(60)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hold the grid's loop still while the block runs (not a sleep: an event)."""
        assert self.loop is not None
        holding, release = threading.Event(), threading.Event()

        def hold() -> None:
            holding.set()
            release.wait(120)

        self.loop.call_soon_threadsafe(hold)
        assert holding.wait(30)
        try:
            yield
        finally:
            release.set()
