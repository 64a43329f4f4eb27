"""The deck's view of the grid: subscribe, then hydrate; newest revision wins.

A reader thread follows :meth:`clanker.api.Clanker.watch_agents` and keeps, per
terminal, the entry with the highest revision it has seen (a stale one is
ignored; a tombstone removes the agent). When the grid goes away it says so,
keeps the last picture marked stale, and subscribes again with a growing pause
(the grid's own snapshot then replaces everything it held).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from clanker.api import Clanker
    from clanker.grid.protocol import StreamEvent, TerminalEntry

__all__ = ["Feed"]

_RETRY_FIRST: Final = 0.25
_RETRY_MOST: Final = 5.0


def _revision(entry: TerminalEntry) -> int:
    value = entry.revision.get("revision")
    return value if isinstance(value, int) else 0


class Feed:
    """The live agents, as the grid's stream says; ``changed(event)`` hears of every
    accepted change (called on the reader thread)."""

    def __init__(self, clanker: Clanker, changed: Callable[[str], None]) -> None:
        self._clanker = clanker
        self._changed = changed
        self._lock = threading.Lock()
        self._entries: dict[str, TerminalEntry] = {}
        self._pending: dict[str, TerminalEntry] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="clanker-deck-feed", daemon=True)
        self.connected = False
        self.synced = False
        self.problem: str | None = None
        """Why the deck is not live (one line), or ``None``."""

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Stop following the grid. The reader may be blocked reading the stream: it
        is a daemon thread and ends at the next event, when the grid stops, or with
        the process (a generator cannot be closed from another thread)."""
        self._stop.set()

    def entries(self) -> list[TerminalEntry]:
        with self._lock:
            return list(self._entries.values())

    def entry(self, terminal: str) -> TerminalEntry | None:
        with self._lock:
            return self._entries.get(terminal)

    def apply(self, event: StreamEvent) -> bool:
        """Take one stream event; say whether the picture changed."""
        from clanker.grid.protocol import StreamKind

        with self._lock:
            if event.kind is StreamKind.SNAPSHOT and event.entry is not None:
                # Hydration builds a fresh table: what the grid no longer has is gone.
                if self._pending is None:
                    self._pending = {}
                self._pending[event.entry.terminal] = event.entry
                return False
            if event.kind is StreamKind.SYNCED:
                fresh = self._pending or {}
                for terminal, old in self._entries.items():
                    # A revision that arrived before the hydration's copy keeps the newest.
                    if terminal in fresh and _revision(old) > _revision(fresh[terminal]):
                        fresh[terminal] = old
                self._entries, self._pending = fresh, None
                self.synced = True
                return True
            if event.kind is StreamKind.REVISION and event.entry is not None:
                return self._revise(event.entry)
        return False

    def _revise(self, entry: TerminalEntry) -> bool:
        target = self._pending if self._pending is not None else self._entries
        held = target.get(entry.terminal)
        if held is not None and _revision(held) >= _revision(entry):
            return False  # newest revision wins: an older one changes nothing
        if entry.revision.get("snapshot") is None:  # a tombstone: the agent is gone
            return target.pop(entry.terminal, None) is not None
        target[entry.terminal] = entry
        return True

    def _run(self) -> None:
        from clanker.grid.errors import GridError

        pause = _RETRY_FIRST
        while not self._stop.is_set():
            try:
                stream = self._clanker.watch_agents(notifications=False)
            except GridError as exc:
                self.problem = f"{exc}; retrying"
            else:
                self._follow(stream)
                if self.synced:  # it was live: the next pause starts short again
                    pause = _RETRY_FIRST
            self.connected, self.synced = False, False
            self._changed("disconnected")
            if self._stop.wait(pause):
                return
            pause = min(pause * 2, _RETRY_MOST)

    def _follow(self, stream: Generator[StreamEvent, None, None]) -> None:
        from clanker.grid.errors import GridError

        with contextlib.closing(stream):
            self.connected, self.problem = True, None
            try:
                for event in stream:
                    if self.apply(event):
                        self._changed(event.kind.value)
                    if self._stop.is_set():
                        return
                self.problem = "the grid stopped; reconnecting"
            except GridError as exc:
                self.problem = f"the grid went away ({exc}); reconnecting"
            except Exception as exc:  # a silent reader death would freeze the deck
                self.problem = f"the grid stream failed ({type(exc).__name__}); reconnecting"
