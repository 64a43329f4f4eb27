"""Grid fixtures: short socket paths, real launcher processes, a real daemon."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from clanker.grid import daemon
from clanker.paths import clanker_paths


@pytest.fixture
def home(short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """CLANKER_HOME on a short path; any daemon started under it is stopped afterwards."""
    monkeypatch.setenv("CLANKER_HOME", str(short_dir))
    try:
        yield short_dir
    finally:
        # The test may have left the directory unusable on purpose.
        with contextlib.suppress(Exception):
            daemon.stop(clanker_paths())


@pytest.fixture
def launcher() -> Iterator[subprocess.Popen[bytes]]:
    """A real process standing in for ``clanker launch``: it exits when its stdin closes."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.buffer.read()"], stdin=subprocess.PIPE
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


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
