"""The shared reader of Pi's session format (clanker.pistore) against a naive full parse.

``Lines.entries`` skips lines undecoded; whatever it skips, a plain ``json.loads`` of
every line must agree that the line could not matter (generated files, torn and long
lines, escapes, spaced and compact JSON, blank lines, entries after blanks or a byte
order mark, UTF-16 lines: each way it finds lines, by byte search where no byte is
NUL and line by line otherwise).
"""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from clanker.pistore import _OPENING, Lines, Want, count_messages, header_place, parent_from
from clanker.stores import head_and_tail
from clanker.testing.sessions import sample_of_bytes

KINDS = ("message", "model_change", "session_info", "title", "compaction")
ROLES = ("user", "assistant", "toolResult", "bashExecution")
WANTS = (
    Want((b'"user"',), frozenset({b"message"}), frozenset({b"user"})),
    Want((b'"model_change"', b'"assistant"'), frozenset({b"model_change", b"message"}),
         frozenset({b"assistant"})),
    Want((b'"message"', b'"model_change"'), frozenset({b"message", b"model_change"})),
    Want((b'"session_info"',), frozenset({b"session_info"})),
)


def _entry(kind: str, role: str, text: str, entry_id: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": kind, "id": entry_id, "parentId": None,
                             "timestamp": "2026-11-30T08:50:51.402Z"}
    if kind == "message":
        entry["message"] = {"role": role, "content": [{"type": "text", "text": text}]}
    else:
        entry["name"] = text
    return entry


def _line(entry: dict[str, Any], style: str) -> bytes:
    if style == "escaped":  # a letter spelled as \u00XX: the token search cannot see it
        return json.dumps(entry).replace("e", "\\u0065").encode()
    if style == "spaced":
        return json.dumps(entry).encode()
    return json.dumps(entry, separators=(",", ":")).encode()


_LINE = st.builds(
    lambda entry, style, torn: _line(entry, style)[:torn] if torn else _line(entry, style),
    st.builds(_entry, st.sampled_from(KINDS), st.sampled_from(ROLES),
              # short and long texts: a line of 1 KiB or more is judged by its opening
              st.one_of(st.text(max_size=20), st.text(min_size=1100, max_size=1400)),
              st.sampled_from(["a", "b", "c"])),
    st.sampled_from(["compact", "spaced", "escaped"]),
    st.one_of(st.none(), st.integers(1, 60)),
)
_ODD = st.sampled_from([b"not json", b"", b"   ", b"[1]", b"\xef\xbb\xbf{}", b"\xff\xfe{}"])
# An entry as json.loads still reads it: after blanks or a UTF-8 mark; in UTF-16 (NULs).
_DRESSED = st.tuples(_LINE, st.sampled_from([b" ", b"\t", b"\xef\xbb\xbf"])).map(
    lambda pair: pair[1] + pair[0])
_WIDE = st.builds(_entry, st.sampled_from(KINDS), st.sampled_from(ROLES), st.text(max_size=5),
                  st.just("w")).map(lambda entry: json.dumps(entry).encode("utf-16"))
FILES = st.one_of(
    # No NUL byte anywhere: lines are found by byte search.
    st.lists(st.one_of(_LINE, _DRESSED, _ODD), max_size=12).map(
        lambda lines: b"\n".join(lines) + b"\n"),
    # A NUL somewhere (a UTF-16 line): every line is judged by itself.
    st.lists(st.one_of(_LINE, _DRESSED, _ODD, _WIDE), max_size=12).map(
        lambda lines: b"\n".join(lines) + b"\n"),
)


def _matters(entry: dict[str, Any], want: Want) -> bool:
    kind = str(entry.get("type")).encode()
    if kind not in want.kinds:
        return False
    role = entry.get("message", {}).get("role") if kind == b"message" else None
    return want.roles is None or kind != b"message" or str(role).encode() in want.roles


def _naive(data: bytes) -> list[dict[str, Any] | None]:
    found: list[dict[str, Any] | None] = []
    for raw in data.split(b"\n"):
        if not raw.strip(b" \t\r"):
            continue
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            value = None
        found.append(value if isinstance(value, dict) else None)
    return found


@settings(max_examples=300)
@given(FILES)
def test_the_lines_passed_over_are_those_a_full_parse_finds_of_no_use(data: bytes) -> None:
    head, _ = head_and_tail(sample_of_bytes(data, head_bytes=1 << 20))
    lines = Lines(head)
    naive = _naive(data)
    assert len(lines.spans) == len(naive)
    assert lines.every_entry(0) == [entry for entry in naive if entry is not None]
    for want in WANTS:
        for skip in (0, 1, 3):
            wanted = [e for e in naive[skip:] if e is not None and _matters(e, want)]
            kept = list(lines.entries(want, skip=skip))
            assert [e for e in kept if _matters(e, want)] == wanted
            assert all(entry in naive[skip:] for entry in kept)
            newest = list(lines.entries(want, skip=skip, newest_first=True))
            assert [e for e in newest if _matters(e, want)] == wanted[::-1]


def test_a_count_takes_each_message_id_once() -> None:
    entries = [_entry("message", "user", "x", "a"), _entry("message", "user", "x", "a"),
               _entry("message", "assistant", "y", "b"), _entry("model_change", "", "", "c"),
               {"type": "message", "message": {"role": "user"}}]
    assert count_messages(entries) == 3


def test_a_header_names_its_session_by_a_plain_id_and_an_absolute_cwd() -> None:
    assert header_place({"type": "session", "id": "abc", "cwd": "/w"}) == ("abc", "/w")
    for header in ({"id": "abc"}, {"cwd": "/w"}, {"id": "abc", "cwd": "w"},
                   {"id": " abc", "cwd": "/w"}, {"id": "a\nb", "cwd": "/w"},
                   {"id": "", "cwd": "/w"}, {"id": 7, "cwd": "/w"}):
        assert header_place(header) is None, header


def test_a_parent_is_named_by_the_id_its_file_name_ends_with() -> None:
    uuid = "01A22BA6-5788-7564-BEFE-73F0BE84EB1A"
    assert parent_from(f"/s/2026-11-30T08-50-51-402Z_{uuid}.jsonl") == uuid.lower()
    assert parent_from("/s/custom.jsonl") is None
    assert parent_from("abc") is None
    assert parent_from("abc", bare_id=True) == "abc"
    assert parent_from(" abc", bare_id=True) is None


# The opening pattern as it was written first, with backtracking quantifiers: the
# possessive one must find the same match, with the same groups, on any bytes.
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_BACKTRACKING_OPENING = re.compile(
    rb'\{\s*"type"\s*:\s*"([A-Za-z_]+)"'
    rb"(?:\s*,\s*" + _STRING + rb"\s*:\s*(?:" + _STRING + rb"|[-+.0-9A-Za-z]+))*"
    rb'(?:\s*,\s*"message"\s*:\s*\{\s*"role"\s*:\s*"([A-Za-z_]+)")?'
)
# Pieces of openings (and what breaks them): keys, strings with escapes, scalars, blanks.
_PIECES = st.sampled_from([
    b'{', b'}', b'"', b'\\', b'\\"', b'\\\\', b',', b':', b' ', b'\t', b'\n', b'"type"',
    b'"message"', b'"role"', b'"user"', b'"id"', b'"a\\"b"', b'null', b'123', b'-1.5e3',
    b'true', b'x', b'_', b'[', b'{"type":"message"', b'"message":{"role":"assistant"',
])
_OPENINGS = st.one_of(
    st.lists(_PIECES, max_size=40).map(b"".join),
    st.builds(lambda entry, style, cut: _line(entry, style)[:cut],
              st.builds(_entry, st.sampled_from(KINDS), st.sampled_from(ROLES),
                        st.text(max_size=30), st.sampled_from(["a", "b"])),
              st.sampled_from(["compact", "spaced", "escaped"]), st.integers(0, 200)),
)


@settings(max_examples=400)
@given(_OPENINGS)
@example(b'{"type":"message","id":"a\\"b","message":{"role":"user","content":[]}')
@example(b'{ "type" : "message" , "n" : -1.5e3 , "t" : "x\\\\" , "message" : { "role" : "user"')
@example(b'{"type":"session_info","name":"\\u0041","when":12}')
def test_the_opening_pattern_matches_as_its_backtracking_form_does(data: bytes) -> None:
    fast, slow = _OPENING.match(data), _BACKTRACKING_OPENING.match(data)
    assert (fast is None) == (slow is None)
    if fast is not None and slow is not None:
        assert (fast.span(), fast.group(1, 2)) == (slow.span(), slow.group(1, 2))
