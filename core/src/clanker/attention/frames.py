"""Attention frames out of a terminal stream: the local half of the tty observer transport.

On an SSH host the hook bridge (:mod:`clanker.attention.hook`, with
``CLANKER_ATTENTION_TRANSPORT=tty``) writes each ``deliver`` request to its
controlling terminal as one OSC frame (:data:`~clanker.attention.wire.FRAME_START`,
the base64 of the request's JSON line, :data:`~clanker.attention.wire.FRAME_END`
or ``ESC \\``). The launcher reads that terminal's stream from the PTY it owns
and passes it through a :class:`FrameExtractor` before anything reaches the
person's terminal: frames are taken out whole, wherever the reads split them;
every other byte goes through unchanged and in order.

Bounded: a frame longer than :data:`~clanker.attention.wire.MAX_FRAME_BYTES` is
dropped (its bytes up to its end are discarded, never shown), and at most the
start of a frame (fewer bytes than :data:`~clanker.attention.wire.FRAME_START`)
is held back between reads. A malformed frame (a byte that is not base64 before
its end, or base64 that does not decode) is dropped and counted; the byte that
broke it is shown as ordinary output. What a frame says is judged by the sink
it is handed to, which says whether it took it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Final

from clanker.attention import wire

__all__ = ["FrameExtractor"]

_START: Final = wire.FRAME_START.encode("ascii")
_BEL: Final = wire.FRAME_END.encode("ascii")
_ESC: Final = b"\x1b"
_ST: Final = b"\x1b\\"
_BASE64: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
_MAX_BODY: Final = wire.MAX_FRAME_BYTES - len(_START) - len(_BEL)


class FrameExtractor:
    """Takes attention frames out of a terminal stream (see the module notes).

    ``sink(payload)`` is handed each well-formed frame's decoded bytes and
    answers whether it took it. :attr:`frames` counts frames taken,
    :attr:`dropped` frames dropped (oversized, malformed, or refused by the sink).
    """

    def __init__(self, sink: Callable[[bytes], bool]) -> None:
        self._sink = sink
        self._held = b""  # outside a frame: a possible start of one
        self._body = bytearray()  # inside a frame: its base64 so far
        self._inside = False
        self._discarding = False  # inside an oversized frame: up to its end
        self._escape = False  # inside a frame: the last byte read was ESC
        self.frames = 0
        self.dropped = 0

    def feed(self, data: bytes) -> bytes:
        """Take the frames out of ``data`` (the next bytes of the stream); return what
        goes on to the person's terminal."""
        out = bytearray()
        buffer = self._held + data
        self._held = b""
        index = 0
        while index < len(buffer):
            if self._inside:
                index = self._in_frame(buffer, index, out)
                continue
            start = buffer.find(_START, index)
            if start >= 0:
                out += buffer[index:start]
                index = start + len(_START)
                self._inside, self._discarding, self._escape = True, False, False
                self._body.clear()
                continue
            tail = buffer[index:]
            keep = _partial_start(tail)
            out += tail[:len(tail) - keep]
            self._held = bytes(tail[len(tail) - keep:])
            break
        return bytes(out)

    def flush(self) -> bytes:
        """The stream ended: what was held back as a possible frame start (an
        unfinished frame is dropped)."""
        if self._inside:
            self._drop()
        held, self._held = self._held, b""
        return held

    def _in_frame(self, buffer: bytes, index: int, out: bytearray) -> int:
        """Read frame bytes from ``index``; return where reading goes on."""
        while index < len(buffer):
            byte = buffer[index]
            if self._escape:
                self._escape = False
                if byte == _ST[1]:
                    self._finish()
                    return index + 1
                self._drop()  # an ESC that does not end the frame: not a frame
                out += _ESC
                return index  # that byte is ordinary output again
            if byte == _BEL[0]:
                self._finish()
                return index + 1
            if byte == _ESC[0]:
                self._escape = True
                index += 1
                continue
            if byte not in _BASE64:
                self._drop()
                return index
            if not self._discarding:
                if len(self._body) >= _MAX_BODY:
                    self._discarding = True
                    self._body.clear()
                else:
                    self._body.append(byte)
            index += 1
        return index

    def _finish(self) -> None:
        if self._discarding:
            self._drop()
            return
        try:
            payload = base64.b64decode(bytes(self._body), validate=True)
        except (binascii.Error, ValueError):
            self._drop()
            return
        self._reset()
        if self._sink(payload):
            self.frames += 1
        else:
            self.dropped += 1

    def _drop(self) -> None:
        self.dropped += 1
        self._reset()

    def _reset(self) -> None:
        self._inside = self._discarding = self._escape = False
        self._body.clear()


def _partial_start(tail: bytes) -> int:
    """How many bytes at the end of ``tail`` could begin a frame (fewer than all of it)."""
    for size in range(min(len(tail), len(_START) - 1), 0, -1):
        if tail.endswith(_START[:size]):
            return size
    return 0
