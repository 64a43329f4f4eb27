"""The shared line scanner: complete lines only, found by markers, in either order."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from clanker.environment.files import FileSample, head_and_tail
from clanker.environment.lines import LineRegion, count, decode_object, find, rfind

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def sample_of(data: bytes, head_bytes: int, tail_bytes: int) -> FileSample:
    """What read_sample reads of ``data``, without a file."""
    head = data[:head_bytes]
    tail = b""
    if len(data) > head_bytes:
        tail = data[max(len(data) - tail_bytes, head_bytes):]
    return FileSample(path=Path("/s.jsonl"), size=len(data), mtime=_EPOCH, head=head, tail=tail)


def reference_lines(data: bytes, head_bytes: int, tail_bytes: int) -> tuple[list[bytes],
                                                                            list[bytes]]:
    """The complete lines of the head and of the tail, worked out from the whole file.

    A line is complete in the head when its newline was read (or the head is the
    whole file); in the tail when it starts after the tail's first newline, so the
    line the tail starts in is dropped even when the read began on its first byte.
    Written from line offsets in the whole file, not from the sample's buffers.
    """
    lines: list[tuple[int, int]] = []
    start = 0
    while start <= len(data):
        newline = data.find(b"\n", start)
        end = len(data) if newline < 0 else newline
        if start < len(data):
            lines.append((start, end))
        start = end + 1
    whole = len(data) <= head_bytes
    tail_from = max(len(data) - tail_bytes, head_bytes)
    head = [data[a:b] for a, b in lines if b < head_bytes or (whole and b <= len(data))]
    if tail_from >= len(data):
        return head, head  # nothing read past the head: its lines are the newest there are
    return head, [data[a:b] for a, b in lines if a > tail_from]


_bytes = st.lists(st.sampled_from([b"a", b"b", b"ab", b"\n", b" ", b"{", b"\t"]),
                  max_size=60).map(b"".join)
_marker = st.lists(st.sampled_from([b"a", b"b", b" ", b"{"]), min_size=1, max_size=3).map(
    b"".join)


_thorough = settings(max_examples=400)


@_thorough
@example(data=b"a\nb\nab\n", head_bytes=2, tail_bytes=0, markers=[b"a"])
@example(data=b"ab\nb\na", head_bytes=3, tail_bytes=2, markers=[b"a", b"b"])
@given(data=_bytes, head_bytes=st.integers(0, 70), tail_bytes=st.integers(0, 70),
       markers=st.lists(_marker, min_size=1, max_size=3))
def test_marked_lines_are_exactly_the_complete_lines_holding_a_marker(
    data: bytes, head_bytes: int, tail_bytes: int, markers: list[bytes]
) -> None:
    sample = sample_of(data, head_bytes, tail_bytes)
    expected_head, expected_tail = reference_lines(data, head_bytes, tail_bytes)
    head, tail = head_and_tail(sample)
    assert (tail is head) == (not sample.tail)
    for region, expected in ((head, expected_head), (tail, expected_tail)):
        wanted = [line for line in expected if any(m in line for m in markers)]
        for given_markers in (tuple(markers), markers[0]) if len(markers) == 1 else (
                tuple(markers),):
            oldest = [region.buf[a:b] for a, b in region.spans_with(given_markers)]
            newest = [region.buf[a:b]
                      for a, b in region.spans_with(given_markers, newest_first=True)]
            assert oldest == wanted
            assert newest == wanted[::-1]
        assert [region.buf[a:b] for a, b in region.spans()] == [
            line for line in expected if line.strip()]
        assert region.first() == next(iter(region.spans()), None)


@_thorough
@given(data=_bytes, head_bytes=st.integers(0, 70), tail_bytes=st.integers(0, 70))
def test_the_sample_lines_follow_the_same_rule(data: bytes, head_bytes: int,
                                               tail_bytes: int) -> None:
    sample = sample_of(data, head_bytes, tail_bytes)
    expected_head, expected_tail = reference_lines(data, head_bytes, tail_bytes)
    assert sample.head_lines() == [line for line in expected_head if line.strip()]
    assert sample.tail_lines() == [line for line in expected_tail if line.strip()]


@given(data=_bytes, start=st.integers(0, 80), marker=_marker)
def test_a_head_region_can_start_past_its_first_lines(data: bytes, start: int,
                                                      marker: bytes) -> None:
    sample = sample_of(data, 1000, 1000)  # whole
    newline = data.find(b"\n", min(start, len(data)))
    lo = len(data) if newline < 0 else newline + 1  # a line start
    head, tail = head_and_tail(sample, start=lo)
    assert tail is head
    expected = [line for line in data[lo:].split(b"\n") if marker in line]
    assert [head.buf[a:b] for a, b in head.spans_with(marker)] == expected
    assert head.first() == next(iter(head.spans()), None)


def test_a_line_cut_by_either_bound_is_never_found() -> None:
    data = b'{"k":"first"}\n{"k":"cut-in-tail"}\n{"k":"last"}\n{"k":"cut-in-head"}\n'
    sample = sample_of(data, head_bytes=20, tail_bytes=len(data) - 20)
    head, tail = head_and_tail(sample)
    assert [head.buf[a:b] for a, b in head.spans_with(b'"k"')] == [b'{"k":"first"}']
    # The tail began inside the second line: it is dropped, the rest are whole.
    assert [tail.buf[a:b] for a, b in tail.spans_with(b'"k"', newest_first=True)] == [
        b'{"k":"cut-in-head"}', b'{"k":"last"}']


def test_a_line_holding_several_markers_is_found_once() -> None:
    region = LineRegion(b"ab ab\nb\nzz\nba", 0, 13)
    assert list(region.spans_with((b"a", b"b"))) == [(0, 5), (6, 7), (11, 13)]
    assert list(region.spans_with((b"b", b"a"), newest_first=True)) == [(11, 13), (6, 7), (0, 5)]


@pytest.mark.parametrize("markers", [b"", (), (b"a", b""), b"a\nb"])
def test_a_marker_that_cannot_lie_within_a_line_is_refused(markers: bytes | tuple[bytes, ...],
                                                            ) -> None:
    with pytest.raises(ValueError, match="markers"):
        LineRegion(b"a\n", 0, 2).spans_with(markers)


def test_a_line_is_decoded_once() -> None:
    region = LineRegion(b'{"a":1}\n[1]\n', 0, 12)
    first = region.object_at((0, 7))
    assert first == {"a": 1}
    assert region.object_at((0, 7)) is first
    assert region.object_at((8, 11)) is None


def _loads(line: bytes) -> object:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


_json_line = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(-2**100, 2**100) | st.floats()
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=3),
    max_leaves=8,
).map(lambda v: json.dumps(v).encode())
# Numbers as a file may spell them (long mantissas, huge exponents, leading zeros), and
# objects that name a key twice: where a decoder could round, refuse or order otherwise.
_number = st.from_regex(rb"\A-?(0|[1-9][0-9]{0,30}|00)(\.[0-9]{1,30})?([eE][-+]?[0-9]{1,4})?\Z")
_spelled_line = st.one_of(
    _number.map(lambda n: b'{"n":' + n + b"}"),
    st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c"]), _number | _json_line),
             max_size=5).map(lambda pairs: b"{" + b",".join(
                 b'"' + key + b'":' + value for key, value in pairs) + b"}"),
    st.sampled_from([b'{"a":"\\ud800"}', b'{"a":"\xed\xa0\x80"}', b'{"a":NaN}',
                     b'{"a":-Infinity}', b'{"a":"\x7f"}', b'{"a":"\x01"}']),
)


@settings(max_examples=400)
@given(st.one_of(st.binary(max_size=40), _json_line, _spelled_line,
                 st.tuples(_json_line, st.sampled_from([b"", b" ", b"\r", b"x", b"\x00", b"{}"]))
                 .map(lambda pair: pair[0] + pair[1])))
def test_decode_object_answers_as_json_loads(line: bytes) -> None:
    # repr: the same keys in the same order, -0.0 apart from 0.0, NaN equal to NaN.
    assert repr(decode_object(line)) == repr(_loads(line))


_haystack = st.lists(st.sampled_from([b"a", b"b", b"ab", b"\n", b'"', b"\x00", b"\xff"]),
                     max_size=300).map(b"".join)


@settings(max_examples=400)
@given(_haystack, st.lists(st.sampled_from([b"a", b"b", b"\n", b'"', b"\x00"]),
                           max_size=4).map(b"".join), st.integers(-8, 310), st.integers(-8, 310))
def test_the_byte_searches_answer_as_the_bytes_methods(buf: bytes, needle: bytes, start: int,
                                                        end: int) -> None:
    assert find(buf, needle, start, end) == buf.find(needle, start, end)
    assert rfind(buf, needle, start, end) == buf.rfind(needle, start, end)
    assert count(buf, needle, start, end) == buf.count(needle, start, end)


_NAMES = (b'"user"', b'"model_change"')


def _escaped(text: str, escape: list[bool]) -> str:
    """``text`` as a JSON string, each ASCII letter written as ``\\u00XX`` where asked."""
    body = json.dumps(text)[1:-1]
    out = [f"\\u{ord(c):04x}" if c.isascii() and (c.isalpha() or c == "_") and escape[i % 7]
           else c for i, c in enumerate(body)]
    return '"' + "".join(out) + '"'


@given(st.dictionaries(st.sampled_from(["type", "role", "user", "x"]),
                       st.sampled_from(["user", "model_change", "assistant", "users", ""]),
                       max_size=4),
       st.lists(st.booleans(), min_size=7, max_size=7))
def test_a_line_judged_not_to_hold_a_name_holds_none(entry: dict[str, str],
                                                     escape: list[bool]) -> None:
    line = ("{" + ",".join(f"{_escaped(k, escape)}:{_escaped(v, escape)}"
                           for k, v in entry.items()) + "}").encode()
    assert json.loads(line) == entry
    region = LineRegion(line, 0, len(line))
    held = {f'"{s}"'.encode() for pair in entry.items() for s in pair} & set(_NAMES)
    if held:  # however its letters are written
        assert region.may_hold((0, len(line)), _NAMES)


def test_a_line_that_is_not_plain_utf8_json_may_hold_anything() -> None:
    for line in (b' {"a":1}', b"\xef\xbb\xbf{}", b'{\x00"\x00', b"[]"):
        assert LineRegion(line, 0, len(line)).may_hold((0, len(line)), _NAMES)
