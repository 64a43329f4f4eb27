"""The grid's side of ``await-move``: the launchers that can move their terminal's
conversation to another checkout, and asking one of them to.

A relayed launch (:mod:`clanker.launch.relayed`) holds one connection per
terminal, authenticated with that terminal's credential. :meth:`Movers.move`
sends one instruction down it and waits, bounded, for the launcher's one-line
answer; one move per terminal at a time. The connection ends when the terminal
is retired (:meth:`Movers.drop`) or the launcher leaves. A terminal retired while
its move is under way (an after-turn launcher releases the source's registration
before the resume registers, as the spec orders it) keeps its connection for
that one answer, and no longer.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

from clanker.grid.errors import GridError
from clanker.grid.protocol import (
    EmptyReply,
    MoveInstruction,
    MoveOutcome,
    encode_reply,
    parse_reply,
)

__all__ = ["ANSWER_WITHIN", "MoveUnavailable", "Movers"]

ANSWER_WITHIN: Final = 300.0
"""How long a launcher has to prove and adopt a move, or refuse it (seconds): its own
proof is bounded well inside this (:class:`clanker.launch.replacement.Proof`), and so is
an after-turn move (the source retired, a native relocation, up to three resume
attempts, then the recovery where it was, relocated back first: OpenCode's slow
start-up and servers make that several minutes at worst)."""


class MoveUnavailable(Exception):
    """The terminal's launcher cannot be asked: ``word`` is ``not-relayed`` (no launcher
    listens), ``busy`` (a move is under way) or ``no-answer`` (it left, or said
    nothing in time)."""

    def __init__(self, word: str, message: str) -> None:
        super().__init__(message)
        self.word = word


class _Channel:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.lock = asyncio.Lock()
        self.done = asyncio.Event()
        self.retired = False
        """The terminal was retired during a move: the channel ends after its answer."""


class Movers:
    """The listening launchers, one channel per terminal (event-loop thread only)."""

    def __init__(self, *, answer_within: float = ANSWER_WITHIN) -> None:
        self._channels: dict[str, _Channel] = {}
        self._answer_within = answer_within

    async def serve(self, terminal: str, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        """Hold an authenticated ``await-move`` connection until it is dropped."""
        channel = _Channel(reader, writer)
        previous = self._channels.get(terminal)
        if previous is not None:  # the launcher reconnected: the newest one listens
            previous.done.set()
        self._channels[terminal] = channel
        try:
            writer.write(encode_reply(EmptyReply()))
            await writer.drain()
            await channel.done.wait()
        finally:
            if self._channels.get(terminal) is channel:
                del self._channels[terminal]

    def listening(self, terminal: str) -> bool:
        channel = self._channels.get(terminal)
        return channel is not None and not channel.retired

    def drop(self, terminal: str) -> None:
        """``terminal`` was retired: its channel ends, once the answer of a move under
        way on it has been read (the launcher retires the source before it answers)."""
        channel = self._channels.get(terminal)
        if channel is None:
            return
        if channel.lock.locked():
            channel.retired = True
            return
        del self._channels[terminal]
        channel.done.set()

    async def move(self, terminal: str, target: str, session: str) -> MoveOutcome:
        """Ask ``terminal``'s launcher to continue ``session`` in ``target``; its answer."""
        channel = self._channels.get(terminal)
        if channel is None or channel.retired:
            raise MoveUnavailable("not-relayed", "no launcher can move this terminal")
        if channel.lock.locked():
            raise MoveUnavailable("busy", "a move of this terminal is already under way")
        async with channel.lock:
            try:
                channel.writer.write(encode_reply(MoveInstruction(target=target,
                                                                  session=session)))
                await channel.writer.drain()
                async with asyncio.timeout(self._answer_within):
                    line = await channel.reader.readline()
                outcome = parse_reply(line.removesuffix(b"\n"), MoveOutcome, op="await-move")
            except (TimeoutError, ConnectionError, GridError, ValueError,
                    asyncio.LimitOverrunError) as error:
                self._end(terminal, channel)
                raise MoveUnavailable("no-answer", "the launcher did not answer the move"
                                      ) from error
            except asyncio.CancelledError:
                # The call was cut off: a late answer must never be read as the next one's.
                self._end(terminal, channel)
                raise
            if channel.retired:  # answered: the retired terminal's channel ends now
                self._end(terminal, channel)
            return outcome

    def _end(self, terminal: str, channel: _Channel) -> None:
        if self._channels.get(terminal) is channel:
            del self._channels[terminal]
        channel.done.set()
        with contextlib.suppress(Exception):
            channel.writer.close()
