"""Deck fixtures: CLANKER_HOME on a short path (the grid tests'), an in-process grid
where the library finds it, and a deck running headless on its own thread."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput

from clanker.api import Clanker
from clanker.deck.app import Deck
from clanker.deck.seen import SeenMarks
from clanker.grid.daemon import grid_location
from clanker.paths import clanker_paths
from clanker.tmux.control import Tmux
from tests.core.grid.conftest import LiveGrid, eventually, home, launcher

__all__ = ["Running", "home", "launcher", "live"]


@pytest.fixture
def live(home: Path) -> Iterator[LiveGrid]:
    location = grid_location(clanker_paths())
    location.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    with LiveGrid(location.socket) as grid:
        yield grid


class Running:
    """One deck on its own thread and loop, fed keys through a pipe."""

    def __init__(self, seen: Path, notified: list[str], *, tmux: Tmux | None = None,
                 attach: Callable[[list[str]], None] | None = None,
                 clock: Callable[[], datetime] | None = None) -> None:
        self._stack = contextlib.ExitStack()
        self._pipe: PipeInput = self._stack.enter_context(create_pipe_input())
        self.deck = Deck(Clanker(), seen=SeenMarks(seen), tmux=tmux or Tmux({"PATH": ""}),
                         workspace="/tmp", notify=notified.append, input=self._pipe,
                         output=DummyOutput(), **({"attach": attach} if attach else {}),
                         **({"clock": clock} if clock else {}))
        # A daemon: a deck this fixture failed to stop must not keep pytest from exiting.
        self._thread = threading.Thread(target=lambda: asyncio.run(self.deck.run()), daemon=True)

    def __enter__(self) -> Running:
        self._thread.start()
        try:
            eventually(lambda: self.deck.feed.synced and self.deck.app.is_running)
        except BaseException:
            # ``with`` skips __exit__ when __enter__ raises: stop the deck here, or it
            # outlives the test and writes to a closed capture.
            self._stop()
            raise
        return self

    def keys(self, text: str) -> None:
        self._pipe.send_text(text)

    def states(self) -> list[tuple[str, str]]:
        return [(r.terminal, r.attention) for r in self.deck.rows]

    def __exit__(self, *_: object) -> None:
        self.keys("q")
        self._thread.join(60)
        quit_by_key = not self._thread.is_alive()
        self._stop()
        assert quit_by_key, "q did not end the deck"

    def _exit(self) -> None:
        future = self.deck.app.future
        if future is not None and not future.done():
            self.deck.app.exit()

    def _stop(self) -> None:
        loop = self.deck.app.loop
        if self._thread.is_alive() and loop is not None:
            loop.call_soon_threadsafe(self._exit)
        self._thread.join(60)
        self._stack.close()
