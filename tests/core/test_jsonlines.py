"""JSON-lines framing over a session, and the one-document reader."""

from __future__ import annotations

import asyncio

import pytest

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution.jsonlines import (
    document_list,
    end_cleanly,
    read_matching,
    send,
    transcript_objects,
)
from clanker.testing import ScriptedSession


def read(lines: list[str], **kwargs: object) -> dict[str, object]:
    session = ScriptedSession(lines)
    return asyncio.run(read_matching(session, lambda m: m.get("id") == 1, harness="h", **kwargs))  # type: ignore[arg-type]


def test_skips_unrelated_messages_and_returns_the_match() -> None:
    assert read(['{"method":"note"}', '{"id":2}', '{"id":1,"result":3}']) == {"id": 1, "result": 3}


@pytest.mark.parametrize(
    ("lines", "kind"),
    [
        ([], ErrorKind.COMMAND_FAILED),
        (["not json"], ErrorKind.PARSE_FAILURE),
        (["[1, 2]"], ErrorKind.PARSE_FAILURE),
        (["[" * 100_000], ErrorKind.PARSE_FAILURE),
        (['{"id":2}'] * 5, ErrorKind.PARSE_FAILURE),
    ],
)
def test_failures_are_typed(lines: list[str], kind: ErrorKind) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        read(lines, max_skipped=3)
    assert caught.value.kind is kind


def test_banners_can_be_allowed() -> None:
    assert read(["Welcome!", '{"id":1}'], allow_non_json=True) == {"id": 1}


def test_send_writes_one_compact_line() -> None:
    session = ScriptedSession()
    asyncio.run(send(session, {"id": 1, "params": {"text": "ü\nx"}}))
    assert session.written == ['{"id":1,"params":{"text":"ü\\nx"}}']


def test_a_session_that_exits_0_ends_cleanly() -> None:
    session = ScriptedSession(exit_code=0)
    asyncio.run(end_cleanly(session, harness="h", process="server"))
    assert session.input_closed


@pytest.mark.parametrize("exit_code", [1, 143, -9])
def test_any_other_exit_is_command_failed(exit_code: int) -> None:
    session = ScriptedSession(exit_code=exit_code, stderr="vendor text")
    with pytest.raises(HarnessCapabilityError) as raised:
        asyncio.run(end_cleanly(session, harness="h", process="server"))
    assert raised.value.kind is ErrorKind.COMMAND_FAILED
    assert raised.value.harness == "h"
    assert raised.value.detail == f"server exited {exit_code}"
    assert session.input_closed


def test_a_document_gives_its_root_and_the_named_list() -> None:
    document, entries = document_list(
        '{"plan": "pro", "windows": [{"a": 1}, 2]}', "windows", command="x --json", harness="h"
    )
    assert document["plan"] == "pro"
    assert entries == [{"a": 1}, 2]


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("", "x --json did not print one JSON document"),
        ('{"windows": []} {"windows": []}', "x --json did not print one JSON document"),
        ("[" * 100_000, "x --json did not print one JSON document"),
        ('[{"windows": []}]', "the document has no windows list"),
        ('{"windows": {}}', "the document has no windows list"),
        ('{"other": []}', "the document has no windows list"),
    ],
)
def test_anything_else_is_a_parse_failure_naming_the_command(stdout: str, message: str) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        document_list(stdout, "windows", command="x --json", harness="h")
    assert caught.value.kind is ErrorKind.PARSE_FAILURE
    assert caught.value.harness == "h"
    assert message in str(caught.value)


def test_a_transcript_is_its_lines_as_objects_in_order() -> None:
    assert transcript_objects('{"id":2}\n{"method":"note"}\r\n{"id":1}', harness="h") == [
        {"id": 2},
        {"method": "note"},
        {"id": 1},
    ]
    assert transcript_objects("", harness="h") == []


@pytest.mark.parametrize(
    "stdout", ['{"id":1}\nnot json', '{"id":1}\n\n{"id":2}', "[1]", "[" * 100_000]
)
def test_a_transcript_line_that_is_not_an_object_is_a_parse_failure(stdout: str) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        transcript_objects(stdout, harness="h")
    assert caught.value.kind is ErrorKind.PARSE_FAILURE
    assert "a line that is not a JSON object" in str(caught.value)
