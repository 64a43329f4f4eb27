"""One wire schema: the lean client and the grid's strict parser accept the same requests."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clanker.bridge import wire
from clanker.grid.protocol import (
    BRIDGE_OPS,
    ErrorWord,
    Op,
    ProtocolError,
    encode_request,
    parse_request,
)

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "ckb_" + "ab" * 32

values = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False),
    st.sampled_from([TOKEN, "ab" * 32, "t-0123456789abcdef", "clanker_context", "", "Bad",
                     "x" * 129, "a" * 64, "a" * 65, "-t"]),
    st.lists(st.sampled_from(["clanker_context", "clanker_notify", "Bad", 1]), max_size=34),
    st.dictionaries(st.sampled_from(["message", "n", "__proto__"]),
                    st.one_of(st.text(max_size=4), st.integers(), st.booleans()), max_size=3),
)
keys = st.sampled_from(["terminal", "token", "capabilities", "all", "name", "arguments",
                        "textArguments", "extra"])


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    op = draw(st.sampled_from(wire.OPS))
    data: dict[str, Any] = {}
    for key, (_, required) in wire.FIELDS[op].items():
        if required or draw(st.booleans()):
            data[key] = draw(values)
    for key in draw(st.lists(keys, max_size=2)):
        data[key] = draw(values)
    return op, data


@settings(max_examples=1500)
@given(requests())
def test_the_grid_parses_exactly_what_the_wire_schema_admits(drawn: tuple[str, dict[str, Any]]
                                                             ) -> None:
    op, data = drawn
    line = json.dumps({"v": 1, "op": op, **data}).encode()
    problem = wire.request_problem(op, data)
    try:
        request = parse_request(line)
    except ProtocolError as exc:
        assert problem is not None, exc.reason
        assert exc.word is ErrorWord.BAD_REQUEST
        return
    assert problem is None
    # And what the client builds is what the grid encodes back.
    assert json.loads(encode_request(request)) == wire.request(op, **data)


def test_the_ops_and_words_are_the_grids() -> None:
    assert {op.value for op in BRIDGE_OPS} == set(wire.OPS)
    assert all(Op(op) in BRIDGE_OPS for op in wire.OPS)
    grid_words = {word.value for word in ErrorWord}
    assert set(wire.WORDS) <= grid_words
    assert set(wire.EXIT_FOR_WORD) <= grid_words
    assert set(wire.SENTENCES) == set(wire.EXIT_FOR_WORD)


def test_the_client_refuses_to_build_what_the_grid_would_refuse() -> None:
    with pytest.raises(ValueError, match="cmd-list: all takes no token"):
        wire.request("cmd-list", token=TOKEN, all=True)
    with pytest.raises(ValueError, match="arguments and textArguments cannot be combined"):
        wire.request("cmd-run", token=TOKEN, name="x", arguments={}, textArguments={})
    with pytest.raises(ValueError, match="name must be a capability name"):
        wire.request("cmd-describe", token=TOKEN, name="Not A Name")


def test_every_cmd_exit_code_is_documented() -> None:
    table = (ROOT / "docs" / "exit-codes.md").read_text()
    for name in dir(wire):
        if name.startswith("EXIT_") and isinstance(getattr(wire, name), int):
            code = getattr(wire, name)
            assert re.search(rf"^\| {code} \|", table, re.MULTILINE), name
    assert "`clanker cmd`" in table
