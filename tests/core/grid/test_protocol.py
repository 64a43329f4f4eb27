"""The wire protocol: strict parsing, fixed error words, safe reasons."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clanker.grid.errors import GridProtocolError, GridRequestError
from clanker.grid.protocol import (
    MAX_ENVELOPES,
    MAX_LINE,
    DeliverRequest,
    ErrorWord,
    ExplainRequest,
    HelloReply,
    HelloRequest,
    ProtocolError,
    RegisterRequest,
    Registration,
    RetireRequest,
    StreamEvent,
    StreamKind,
    encode_error,
    encode_reply,
    encode_request,
    parse_reply,
    parse_request,
)

TOKEN = "ab" * 32


def line(data: dict[str, Any]) -> bytes:
    return json.dumps(data).encode()


def refused(raw: bytes) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        parse_request(raw)
    return caught.value


def test_a_register_request_parses_with_camel_case_keys() -> None:
    request = parse_request(line({
        "v": 1, "op": "register", "harness": "fake-agent", "workspace": "/w", "cwd": "/w/x",
        "launcherPid": 42, "trustedRootSessionId": "abc",
    }))
    assert request == RegisterRequest(harness="fake-agent", workspace="/w", cwd="/w/x",
                                      launcher_pid=42, trusted_root_session_id="abc")


@pytest.mark.parametrize("request_", [
    HelloRequest(),
    RegisterRequest(harness="fake-agent", cwd="/tmp", launcher_pid=7),
    RetireRequest(terminal="t-1", token=TOKEN),
    DeliverRequest(terminal="t-1", token=TOKEN, envelopes=[{"event": "turn_started"}]),
    ExplainRequest(terminal="t-1"),
])
def test_requests_round_trip(request_: Any) -> None:
    encoded = encode_request(request_)
    assert encoded.endswith(b"\n")
    assert parse_request(encoded[:-1]) == request_


@pytest.mark.parametrize(("data", "word"), [
    ({"op": "hello"}, ErrorWord.BAD_REQUEST),
    ({"v": "1", "op": "hello"}, ErrorWord.BAD_REQUEST),
    ({"v": True, "op": "hello"}, ErrorWord.BAD_REQUEST),
    ({"v": 2, "op": "hello"}, ErrorWord.UNSUPPORTED_VERSION),
    ({"v": 1}, ErrorWord.BAD_REQUEST),
    ({"v": 1, "op": "dance"}, ErrorWord.UNKNOWN_OP),
    ({"v": 1, "op": "hello", "extra": 1}, ErrorWord.BAD_REQUEST),
    ({"v": 1, "op": "register", "harness": "fake-agent", "cwd": "/w", "launcherPid": "7"},
     ErrorWord.BAD_REQUEST),
    ({"v": 1, "op": "register", "harness": "fake-agent", "cwd": "/w", "launcherPid": True},
     ErrorWord.BAD_REQUEST),
    ({"v": 1, "op": "register", "harness": "fake-agent", "cwd": "relative", "launcherPid": 7},
     ErrorWord.BAD_REQUEST),
    ({"v": 1, "op": "register", "harness": "Not An Id", "cwd": "/w", "launcherPid": 7},
     ErrorWord.BAD_REQUEST),
    ({"v": 1, "op": "register", "harness": "fake-agent", "cwd": "/w", "launcherPid": 0},
     ErrorWord.BAD_REQUEST),
    ({"v": 1, "op": "deliver", "terminal": "t-1", "token": TOKEN, "envelopes": []},
     ErrorWord.BAD_REQUEST),
    ({"v": 1, "op": "deliver", "terminal": "t-1", "token": TOKEN,
      "envelopes": [{}] * (MAX_ENVELOPES + 1)}, ErrorWord.TOO_LARGE),
    ({"v": 1, "op": "explain", "terminal": "../../etc"}, ErrorWord.BAD_REQUEST),
    ({"v": 1, "op": "retire", "terminal": "t-1", "token": "x" * 200}, ErrorWord.BAD_REQUEST),
])
def test_malformed_requests_get_a_fixed_word(data: dict[str, Any], word: ErrorWord) -> None:
    assert refused(line(data)).word is word


@pytest.mark.parametrize("raw", [
    b"", b"not json", b"[1, 2]", b'"hello"', b"\xff\xfe", b'{"v": NaN, "op": "hello"}',
    b'{"v": 1, "v": 1, "op": "hello"}', b"[" * 60_000,
])
def test_lines_that_are_not_one_json_object_are_bad_requests(raw: bytes) -> None:
    assert refused(raw).word is ErrorWord.BAD_REQUEST


def test_an_oversized_line_is_too_large() -> None:
    assert refused(b" " * (MAX_LINE + 1)).word is ErrorWord.TOO_LARGE


def test_reasons_name_fields_never_values() -> None:
    secret = "Sk_VerySecret value"
    for data in (
        {"v": 1, "op": "register", "harness": secret, "cwd": "/w", "launcherPid": 7},
        {"v": 1, "op": "register", "harness": "fake-agent", "cwd": secret, "launcherPid": 7},
        {"v": 1, "op": "hello", secret: 1},
        {"v": 1, "op": secret},
        {"v": 1, "op": "retire", "terminal": "t-1", "token": 5},
    ):
        error = refused(line(data))
        assert secret not in error.reason
        assert secret not in str(error)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
ops = st.sampled_from(["hello", "register", "retire", "deliver", "list", "subscribe",
                       "explain", "shutdown", "other"])
keys = st.sampled_from(["harness", "cwd", "workspace", "launcherPid", "terminal", "token",
                        "envelopes", "trustedRootSessionId", "x"])


@given(op=ops, fields=st.dictionaries(keys, json_values, max_size=6),
       version=st.sampled_from([1, 1, 1, 2, "1", None]))
def test_any_json_object_parses_or_is_refused_with_a_word(
    op: str, fields: dict[str, Any], version: object
) -> None:
    raw = line({"v": version, "op": op, **fields})
    try:
        request = parse_request(raw)
    except ProtocolError as exc:
        assert isinstance(exc.word, ErrorWord)
    else:
        assert request.op.value == op
        assert parse_request(encode_request(request)[:-1]) == request


def test_replies_parse_and_refusals_raise_their_word() -> None:
    reply = encode_reply(Registration(terminal="t-1", token=TOKEN))
    assert json.loads(reply) == {"v": 1, "ok": True, "terminal": "t-1", "token": TOKEN}
    assert parse_reply(reply[:-1], Registration) == Registration(terminal="t-1", token=TOKEN)
    assert TOKEN not in repr(Registration(terminal="t-1", token=TOKEN))
    with pytest.raises(GridRequestError) as caught:
        parse_reply(encode_error(ErrorWord.UNAUTHORIZED), Registration, op="retire")
    assert caught.value.word == "unauthorized"
    event = parse_reply(encode_reply(StreamEvent(kind=StreamKind.SYNCED)), StreamEvent)
    assert event.kind is StreamKind.SYNCED


@pytest.mark.parametrize("raw", [
    b"nope", b'{"ok": true}', b'{"v": 1}', b'{"v": 1, "ok": false}',
    b'{"v": 1, "ok": true, "terminal": "t", "token": "x", "more": 1}',
    b'{"v": 2, "ok": true, "terminal": "t", "token": "x"}',
])
def test_malformed_replies_are_protocol_errors(raw: bytes) -> None:
    with pytest.raises(GridProtocolError):
        parse_reply(raw, Registration)


def test_hello_reply_carries_a_zoned_time() -> None:
    raw = b'{"v":1,"ok":true,"server":"s","version":"1","pid":1,' \
          b'"startedAt":"2026-01-01T00:00:00","terminals":0}'
    with pytest.raises(GridProtocolError):
        parse_reply(raw, HelloReply)


def _entry(**extra: Any) -> Any:
    from datetime import UTC, datetime

    from clanker.grid.protocol import TerminalEntry

    at = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    return TerminalEntry(terminal="t-1", harness="codex", workspace=None, cwd="/repo",
                         launcher_pid=1, registered_at=at, location="/repo",
                         attention="running", since=at, revision={"revision": 1}, **extra)


def test_a_pending_move_rides_on_its_terminal_and_is_left_out_without_one() -> None:
    from datetime import UTC, datetime

    from clanker.grid.protocol import ListReply, PendingMoveEntry

    move = PendingMoveEntry(state="scheduled", kind="create", branch="feature/x",
                            path="/repo-worktrees/feature-x-0a1b2c3d",
                            target="/repo-worktrees/feature-x-0a1b2c3d/src",
                            requested_at=datetime(2026, 12, 3, 12, 1, tzinfo=UTC))
    encoded = encode_reply(ListReply(terminals=[_entry(pending_move=move)]))
    assert json.loads(encoded)["terminals"][0]["pendingMove"]["requestedAt"]
    [parsed] = parse_reply(encoded.rstrip(b"\n"), ListReply).terminals
    assert parsed.pending_move == move
    bare = encode_reply(ListReply(terminals=[_entry()]))
    assert "pendingMove" not in json.loads(bare)["terminals"][0]  # what older peers read
    with pytest.raises(ValueError, match="state"):
        PendingMoveEntry(state="done", kind="create", branch="b", path="/p", target="/p",
                         requested_at=datetime(2026, 12, 3, tzinfo=UTC))
