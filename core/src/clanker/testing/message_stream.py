"""The commit contract's part for harnesses whose JSON mode prints a session-header
stream of whole messages (``clanker.commit.turns``): a ``session`` header, then
``message_start`` / ``message_end`` events and an ``agent_end``.

The rule is core's, so its edges are checked here once, on built streams, for every
plugin that sets :attr:`MessageStreamContract.commit_stream_header`; what a failed
turn means (and anything else the harness adds) stays in the plugin's own tests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, cast

import pytest

from clanker.capabilities import Capability
from clanker.commit.capability import CommitCapability
from clanker.errors import ErrorKind
from clanker.testing.base import ContractBase
from clanker.testing.commit import commit_failure, json_lines

__all__ = ["MessageStreamContract", "assistant_message", "message_run"]

_TEXT: dict[str, object] = {"type": "text", "text": "Fix the upload race"}


def assistant_message(stop: object = "stop", *content: Mapping[str, object]
                      ) -> dict[str, object]:
    """An assistant message with ``content`` blocks, ending with ``stopReason`` ``stop``."""
    return {"role": "assistant", "content": list(content), "stopReason": stop}


def message_run(header: Mapping[str, Any], message: Mapping[str, object], *,
                agent_end: bool = True, terminal: bool | None = None) -> str:
    """A minimal run around one assistant ``message``, in the format's event order: the
    ``header``, the message's start and end, ``turn_end`` and (unless not ``agent_end``)
    an ``agent_end``, with ``isTerminal`` when ``terminal`` is given."""
    tail: list[dict[str, object]] = [{"type": "turn_end", "message": message}]
    if agent_end:
        end: dict[str, object] = {"type": "agent_end", "messages": [message]}
        if terminal is not None:
            end["isTerminal"] = terminal
        tail.append(end)
    return json_lines(header, {"type": "agent_start"}, {"type": "turn_start"},
                      {"type": "message_start", "message": assistant_message()},
                      {"type": "message_end", "message": message}, *tail)


def _signed(text: str, signature: str) -> dict[str, object]:
    return {"type": "text", "text": text, "textSignature": signature}


def _phase(text: str, phase: str) -> dict[str, object]:
    return _signed(text, json.dumps({"v": 1, "id": f"msg_{phase}", "phase": phase}))


class MessageStreamContract(ContractBase):
    """Commit answers in a session-header message stream: the last assistant
    ``message_end`` whose ``stopReason`` is ``stop`` answers, only when an
    ``agent_end`` follows it and nothing is left open; its text blocks (commentary
    left out) are the answer as given; anything else is a typed failure."""

    commit_stream_header: ClassVar[Mapping[str, Any] | None] = None
    """The harness's captured ``session`` header event; the part runs only when it is set."""
    commit_reasoning_blocks: ClassVar[Sequence[Mapping[str, Any]]] = (
        {"type": "thinking", "thinking": "Fix it"},)
    """Content blocks the harness uses for reasoning: never the answer."""

    def _commit(self) -> CommitCapability:
        return cast(CommitCapability, self._implementation(Capability.COMMIT))

    def _header(self) -> Mapping[str, Any]:
        self._require(Capability.COMMIT)
        return self._unless(self.commit_stream_header, "commit_stream_header")

    def _run_of(self, message: Mapping[str, object], *, agent_end: bool = True) -> str:
        return message_run(self._header(), message, agent_end=agent_end)

    def _parsed(self, stdout: str) -> str:
        from clanker.execution import CommandResult

        return self._commit().parse_output(CommandResult(stdout=stdout, stderr="", exit_code=0))

    def _refusal(self, stdout: str) -> tuple[ErrorKind, str]:
        error = commit_failure(self._commit(), self.harness_id, stdout)
        return error.kind, error.detail or ""

    def test_stream_text_blocks_are_joined_and_returned_as_given(self) -> None:
        message = assistant_message("stop", *self.commit_reasoning_blocks,
                             {"type": "text", "text": "Fix it"},
                             {"type": "text", "text": "\nBecause.\n"})
        assert self._parsed(self._run_of(message)) == "Fix it\n\nBecause.\n"
        untrimmed = assistant_message("stop", {"type": "text", "text": "\n  Fix it  \n"})
        assert self._parsed(self._run_of(untrimmed)) == "\n  Fix it  \n"

    def test_stream_commentary_phase_text_is_not_the_answer(self) -> None:
        commentary = _phase("Looking at the diff first.", "commentary")
        final = _phase("Fix it", "final_answer")
        assert self._parsed(self._run_of(assistant_message("stop", commentary, final))) == "Fix it"
        for other in (_signed("Fix it", "msg_3"), _signed("Fix it", "{not json")):
            assert self._parsed(self._run_of(assistant_message("stop", other))) == "Fix it"
        kind, detail = self._refusal(self._run_of(assistant_message("stop", commentary)))
        assert kind is ErrorKind.PARSE_FAILURE and "empty" in detail

    def test_stream_stop_without_answer_text_fails(self) -> None:
        cases: list[tuple[list[Mapping[str, object]], str]] = [
            ([], "empty"),
            ([{"type": "text", "text": "  \n\t "}], "empty"),
            ([{"type": "image", "data": "", "mimeType": "image/png"}], "empty"),
            ([{"type": "toolCall", "id": "c", "name": "bash", "arguments": {}}], "tool call"),
            *(([block], "only reasoning") for block in self.commit_reasoning_blocks),
        ]
        for content, said in cases:
            kind, detail = self._refusal(self._run_of(assistant_message("stop", *content)))
            assert kind is ErrorKind.PARSE_FAILURE and said in detail, content

    @pytest.mark.parametrize(("stop", "kind"), [
        ("toolUse", ErrorKind.PARSE_FAILURE), ("length", ErrorKind.PARSE_FAILURE),
        ("error", ErrorKind.COMMAND_FAILED), ("aborted", ErrorKind.COMMAND_FAILED),
        ("paused", ErrorKind.PARSE_FAILURE), (None, ErrorKind.PARSE_FAILURE),
        (1, ErrorKind.PARSE_FAILURE),
    ])
    def test_stream_only_stop_is_an_answer(self, stop: object, kind: ErrorKind) -> None:
        assert self._refusal(self._run_of(assistant_message(stop, _TEXT)))[0] is kind

    def test_stream_answer_must_be_followed_by_agent_end(self) -> None:
        cut = self._run_of(assistant_message("stop", _TEXT), agent_end=False)
        kind, detail = self._refusal(cut)
        assert kind is ErrorKind.PARSE_FAILURE and "did not end" in detail
        early = json_lines(self._header(), {"type": "agent_end", "messages": []},
                           {"type": "message_start", "message": assistant_message()},
                           {"type": "message_end", "message": assistant_message("stop", _TEXT)})
        assert "did not end" in self._refusal(early)[1]

    def test_stream_assistant_message_left_open_is_incomplete(self) -> None:
        after = self._run_of(assistant_message("stop", _TEXT)) + json_lines(
            {"type": "message_start", "message": assistant_message("stop", _TEXT)})
        assert "inside an answer" in self._refusal(after)[1]
        start = {"type": "message_start", "message": assistant_message("stop", _TEXT)}
        only_open = json_lines(self._header(), start)
        assert "inside an answer" in self._refusal(only_open)[1]

    def test_stream_other_roles_and_unknown_events_are_not_the_answer(self) -> None:
        text = self._run_of(assistant_message("stop", _TEXT)) + json_lines(
            {"type": "message_start", "message": {"role": "toolResult", "content": []}},
            {"type": "message_end", "message": {"role": "custom", "content": "x"}},
            {"type": "compaction_start", "reason": "threshold"}, {"type": "queue_update"},
        )
        assert self._parsed(text) == "Fix the upload race"

    def test_stream_a_line_separator_inside_json_text_does_not_split_the_line(self) -> None:
        message = assistant_message("stop", {"type": "text", "text": "Fix it\u2028 now"})
        assert self._parsed(self._run_of(message)) == "Fix it\u2028 now"

    @pytest.mark.parametrize("text", [
        "not json\n",
        '{"type":"agent_start"}\n',  # no session header first
        json_lines([1, 2]),
        json_lines({"no": "type"}),
        json_lines({"type": None}),
        json_lines({"type": 7}),
        "[" * 100_000 + "\n",
        '{"type":"session"' + " " * 2_000_000,
    ])
    def test_stream_malformed_output_is_a_parse_failure(self, text: str) -> None:
        self._header()
        assert self._refusal(text)[0] is ErrorKind.PARSE_FAILURE

    @pytest.mark.parametrize("message", [
        ["assistant"],
        "text",
        None,
        {"role": "assistant", "content": {"text": "Fix"}, "stopReason": "stop"},
        {"role": "assistant", "content": "Fix it", "stopReason": "stop"},
        {"role": "assistant", "content": [7], "stopReason": "stop"},
        {"role": "assistant", "content": [{"text": "x"}], "stopReason": "stop"},
        {"role": "assistant", "stopReason": "stop", "content": [{"type": "text", "text": None}]},
        {"role": "assistant", "stopReason": "stop", "content": [{"type": "text", "text": 7}]},
        {"role": "assistant", "stopReason": "stop",
         "content": [{"type": "text", "text": "\udfff"}]},
    ])
    def test_stream_wrong_types_are_a_parse_failure(self, message: object) -> None:
        end: dict[str, object] = {"type": "message_end"}
        if message is not None:
            end["message"] = message
        text = json_lines(self._header(), end, {"type": "agent_end", "messages": []})
        assert self._refusal(text)[0] is ErrorKind.PARSE_FAILURE
