"""Finding lines in a bounded sample of a JSON Lines file without decoding it.

A listing summarizes thousands of session files, and most of a large one is
tool output no summary uses, so a provider does not decode a file line by
line: it searches the bytes of a :class:`~clanker.environment.files.FileSample`
for markers (``b'"type":"turn_context"'``) and decodes only the lines that
hold one. :class:`LineRegion` is where those searches run: the part of the
head or the tail that holds complete lines, and nothing else.

The searches are :func:`find` and :func:`rfind`, StringZilla's SIMD substring
search: the answer of ``bytes.find``/``bytes.rfind`` for the same arguments
(tests/core/test_lines.py compares them), 10-25x faster over a sample's
128 KiB, where CPython's two-way search was most of a parser's time
(benchmarks/RESULTS.md).

A line cut by a read bound is never a line: the head ends at its last
newline (unless it is the whole file) and the tail starts after its first
one (the tail was read from an arbitrary offset). A file's last line needs no
newline: it ends where the file does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from json.scanner import make_scanner
from typing import Any, Final, cast, final

from msgspec.json import Decoder
from stringzilla import count, find, rfind

__all__ = ["LineRegion", "count", "decode_object", "find", "rfind"]

Span = tuple[int, int]
"""Where a line starts and ends in its region's buffer (the newline not included)."""

# The scanner json.loads runs (JSONDecoder.scan_once), with json.loads' defaults.
_SCAN: Final = make_scanner(cast(Any, json.JSONDecoder()))
_decode: Final = Decoder().decode
# Marker tuples already found valid (a reader's constants, searched thousands of times).
_CHECKED: Final[set[tuple[bytes, ...]]] = set()
# The only way JSON spells an ASCII letter or `_` other than as itself.
_LETTER_ESCAPE: Final = re.compile(rb"\\u00[4-7]")


def decode_object(line: bytes) -> dict[str, Any] | None:
    """``json.loads(line)`` when that is an object, else ``None`` (never an exception).

    For a line starting with ``{`` and a non-NUL byte, json.loads would pick
    UTF-8 and decode it as one JSON document. msgspec's decoder does that in
    about half the time, and gives json.loads' value for every line it takes
    (exact integers of any size, the same floats, the last of two equal keys);
    what it refuses and json.loads takes (``NaN``, ``1e400``, a lone surrogate)
    goes to json.loads' own scanner, run directly (without the encoding
    detection and whitespace regexes around it). Any other line goes through
    json.loads, so the answer is always the one it would give
    (tests/core/test_lines.py compares them).
    """
    if line[:1] != b"{" or line[1:2] == b"\x00":
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            return None
    else:
        try:
            value = _decode(line)
        except Exception:  # anything msgspec refuses, json.loads may still take
            value = _scanned(line)
    return value if isinstance(value, dict) else None


def _scanned(line: bytes) -> Any:
    """What json.loads makes of a UTF-8 line, through its scanner; ``None`` when it
    makes nothing."""
    try:
        text = line.decode("utf-8", "surrogatepass")
        value, end = _SCAN(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return None
    if end != len(text) and text[end:].strip(" \t\n\r"):
        return None  # json.loads: "Extra data"
    return value


@final
class LineRegion:
    """The complete lines of one read of a file: they all lie in ``buf[lo:hi]``.

    ``lo`` is always a line start; ``hi`` is a line's end (just past its
    newline) or the end of the file. Lines are named by their :data:`Span`
    so that nothing is copied until a line is actually wanted. A region
    belongs to one summary: it remembers each line it decoded, so asking twice
    costs one decode.
    """

    __slots__ = ("_objects", "buf", "hi", "lo")

    def __init__(self, buf: bytes, lo: int, hi: int) -> None:
        self.buf = buf
        self.lo = lo
        self.hi = hi
        self._objects: dict[int, dict[str, Any] | None] = {}

    def spans(self) -> list[Span]:
        """Every complete line that is not blank (ASCII whitespace only), oldest first."""
        buf, lo, hi = self.buf, self.lo, self.hi
        spans: list[Span] = []
        while lo < hi:
            end = buf.find(b"\n", lo, hi)
            end = hi if end < 0 else end
            # An object line starts with "{": the copy for the blank test is rarely made.
            if buf[lo] == 0x7B or buf[lo:end].strip():
                spans.append((lo, end))
            lo = end + 1
        return spans

    def first(self) -> Span | None:
        """The first span of :meth:`spans` (``None`` when there is none), found without
        looking past it: a reader that decides from line 1 alone pays for line 1."""
        buf, lo, hi = self.buf, self.lo, self.hi
        while lo < hi:
            end = buf.find(b"\n", lo, hi)
            end = hi if end < 0 else end
            if buf[lo] == 0x7B or buf[lo:end].strip():
                return lo, end
            lo = end + 1
        return None

    def spans_with(self, markers: bytes | tuple[bytes, ...], *,
                   newest_first: bool = False) -> Iterator[Span]:
        """Each complete line holding one of ``markers``, once, oldest or newest first.

        A marker is non-empty and holds no newline (so it lies within one
        line). Each step searches (once per marker) from where the last line ended,
        so a caller that stops early pays only for the lines it looked at.
        """
        if isinstance(markers, bytes):
            if not markers or b"\n" in markers:
                raise ValueError("markers: each must be non-empty and hold no newline")
            return (self._newest_single(markers) if newest_first
                    else self._oldest_single(markers))
        if markers not in _CHECKED:
            if not markers or any(not marker or b"\n" in marker for marker in markers):
                # An empty marker would match between lines and never move on.
                raise ValueError("markers: each must be non-empty and hold no newline")
            if len(_CHECKED) < 256:  # readers pass a few constant tuples: checked once
                _CHECKED.add(markers)
        return self._newest_first(markers) if newest_first else self._oldest_first(markers)

    # One marker, the usual case, is searched for without the bookkeeping of several.

    def _oldest_single(self, marker: bytes) -> Iterator[Span]:
        buf, lo, hi = self.buf, self.lo, self.hi
        while (pos := find(buf, marker, lo, hi)) >= 0:
            end = buf.find(b"\n", pos, hi)
            end = hi if end < 0 else end
            # lo is a line start, so the line holding pos starts at lo or later.
            yield max(rfind(buf, b"\n", lo, pos) + 1, lo), end
            lo = end + 1

    def _newest_single(self, marker: bytes) -> Iterator[Span]:
        buf, lo, hi, bound = self.buf, self.lo, self.hi, self.hi
        while (pos := rfind(buf, marker, lo, hi)) >= 0:
            start = max(rfind(buf, b"\n", lo, pos) + 1, lo)
            end = buf.find(b"\n", pos, bound)
            yield start, bound if end < 0 else end
            hi = start  # the next search ends before this line

    # Each marker's next place is kept (-1: none left) and searched again only once the
    # line it lies in has been passed: with several markers, every byte is searched once
    # a marker, however many lines are found. A marker holds no newline, so a place
    # outside the line just passed is still that marker's next one.

    def _oldest_first(self, markers: tuple[bytes, ...]) -> Iterator[Span]:
        buf, lo, hi = self.buf, self.lo, self.hi
        ahead = [find(buf, marker, lo, hi) for marker in markers]
        while True:
            pos = min((p for p in ahead if p >= 0), default=-1)
            if pos < 0:
                return
            end = buf.find(b"\n", pos, hi)
            end = hi if end < 0 else end
            # lo is a line start, so the line holding pos starts at lo or later.
            yield max(rfind(buf, b"\n", lo, pos) + 1, lo), end
            lo = end + 1
            ahead = [find(buf, marker, lo, hi) if 0 <= p < lo else p
                     for marker, p in zip(markers, ahead, strict=True)]

    def _newest_first(self, markers: tuple[bytes, ...]) -> Iterator[Span]:
        buf, lo, hi, bound = self.buf, self.lo, self.hi, self.hi
        behind = [rfind(buf, marker, lo, hi) for marker in markers]
        while True:
            pos = max(behind)
            if pos < 0:
                return
            start = max(rfind(buf, b"\n", lo, pos) + 1, lo)
            end = buf.find(b"\n", pos, bound)
            yield start, bound if end < 0 else end
            hi = start  # the next search ends before this line
            behind = [rfind(buf, marker, lo, hi) if p >= hi else p
                      for marker, p in zip(markers, behind, strict=True)]

    def may_hold(self, span: Span, names: tuple[bytes, ...]) -> bool:
        """Whether the JSON line at ``span`` can hold one of ``names``, judged undecoded.

        ``names`` are quoted strings of ASCII letters and ``_`` (``b'"user"'``).
        JSON writes such a letter as itself or as a ``\\u00XX`` escape, so a
        plain UTF-8 object line (it starts with ``{``) that has no such escape
        and spells none of them holds none; any other line (a BOM, UTF-16, a
        leading space) might, and is for its decoder to judge.
        """
        buf, (start, end) = self.buf, span
        # Searched in place: no copy of the line is made.
        if (buf[start:start + 1] != b"{" or buf[start + 1:start + 2] == b"\x00"
                or (find(buf, b"\\u00", start, end) >= 0
                    and _LETTER_ESCAPE.search(buf, start, end))):
            return True
        return any(find(buf, name, start, end) >= 0 for name in names)

    def object_at(self, span: Span) -> dict[str, Any] | None:
        """The JSON object on the line at ``span`` (:func:`decode_object`), decoded once."""
        objects, start = self._objects, span[0]
        if start in objects:
            return objects[start]
        found = objects[start] = decode_object(self.buf[start:span[1]])
        return found
