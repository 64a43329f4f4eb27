"""The grid's connection table: which connections wait, which hold, which make room.

A connection *waits* from the moment it is accepted until its one request line
has arrived; it *holds* while the grid streams to it (``subscribe``) or writes
an answer that may be large (``list``, ``explain``). Three rules keep a
same-user client from exhausting the grid:

* A newcomer never queues behind idle connections. When ``max_waiting``
  connections already wait, the one that has waited longest *without its
  request ready* is closed (its line neither buffered nor queued in the kernel)
  to make room. A connection whose request has arrived is never refused for
  room: answering it costs what refusing it would.
* Holders are capped at ``max_held``, fewer than the table. Every other
  request (``deliver``, ``register``, ``retire``, ...) is answered at once
  with a short line and holds nothing, so subscribers and slow readers never
  crowd those out.
* ``ceiling`` bounds every open connection together (descriptors are finite);
  past it a newcomer is refused ``capacity``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import struct
import termios
from collections.abc import Iterable, Iterator
from typing import Final, SupportsIndex

from attrs import frozen

__all__ = ["ConnectionCounts", "ConnectionTable", "RequestReader"]

_INT: Final = struct.Struct("i")


class RequestReader(asyncio.StreamReader):
    """A stream reader that notes when a whole request line has arrived."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit=limit)
        self.line_arrived = False

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        if isinstance(data, bytes | bytearray) and b"\n" in data:
            self.line_arrived = True
        super().feed_data(data)


@frozen
class ConnectionCounts:
    """How many connections are open, waiting for their request, and holding a slot."""

    open: int
    waiting: int
    held: int


def _queued(writer: asyncio.StreamWriter) -> int:
    """Bytes the peer sent that the kernel holds and the event loop has not read yet."""
    sock = writer.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        raw = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * _INT.size)
    except (OSError, ValueError):
        return 0  # closed already: nothing will be read from it
    return int(_INT.unpack(raw)[0])


class _Waiter:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: RequestReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def ready(self) -> bool:
        return self.reader.line_arrived or _queued(self.writer) > 0


class ConnectionTable:
    """The counts and the eviction rule of the module notes (event-loop thread only)."""

    def __init__(self, *, max_waiting: int, max_held: int, ceiling: int) -> None:
        if not 0 < max_held < ceiling or max_waiting <= 0:
            raise ValueError("the connection bounds must be positive, held below the ceiling")
        self._max_waiting = max_waiting
        self._max_held = max_held
        self._ceiling = ceiling
        self._open = 0
        self._held = 0
        self._waiting: dict[object, _Waiter] = {}  # in arrival order

    def counts(self) -> ConnectionCounts:
        return ConnectionCounts(open=self._open, waiting=len(self._waiting), held=self._held)

    def admit(
        self, key: object, reader: RequestReader, writer: asyncio.StreamWriter,
        *, evicted: list[asyncio.StreamWriter],
    ) -> bool:
        """Open ``key`` as waiting; say whether it may stay (``False``: refuse ``capacity``).

        Appends the writer of each connection closed to make room to ``evicted``
        (the caller tells it why and closes it).
        """
        if self._open >= self._ceiling:
            return False
        if len(self._waiting) >= self._max_waiting:
            victim = self._idlest()
            if victim is not None:
                evicted.append(self._waiting.pop(victim).writer)
        self._open += 1
        self._waiting[key] = _Waiter(reader, writer)
        return True

    def _idlest(self) -> object | None:
        """The connection that has waited longest without its request ready."""
        for key, waiter in self._waiting.items():
            if not waiter.ready():
                return key
        return None

    def arrived(self, key: object) -> None:
        """``key``'s request has been read (or it ended): it waits no more."""
        self._waiting.pop(key, None)

    def close(self, key: object) -> None:
        """``key`` is closed (every admitted connection calls this once)."""
        self._waiting.pop(key, None)
        self._open -= 1

    @contextlib.contextmanager
    def hold(self) -> Iterator[bool]:
        """Hold a slot while the block runs; yields whether one was free."""
        if self._held >= self._max_held:
            yield False
            return
        self._held += 1
        try:
            yield True
        finally:
            self._held -= 1
