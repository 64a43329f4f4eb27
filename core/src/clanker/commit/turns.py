"""Reading an agent's turn from a JSON-mode event stream of messages.

Several harnesses print the same shape in their JSON mode: a ``session``
header, then ``message_start`` / ``message_end`` events carrying whole
messages (a ``role``, a ``stopReason``, ``content`` as typed blocks: ``text``,
reasoning, tool calls) and ``agent_end`` when the run is over. The answer is
the last assistant ``message_end``, and it counts only when the run ended
after it. What differs between harnesses (which partial events to skip unread,
whether ``agent_end`` says the run may go on, which block types are
reasoning) is a parameter; what a failed turn means stays with each provider.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from attrs import frozen

from clanker.commit.events import typed_events
from clanker.commit.failures import CommitFailures
from clanker.commit.message import text_answer

__all__ = ["LastTurn", "answer_text", "events_after_header", "last_turn", "stopped_answer"]


@frozen
class LastTurn:
    """The last assistant message, and whether the last ``agent_end`` said the run is
    over (``isTerminal``; ``True`` when the harness does not say)."""

    message: Mapping[str, Any]
    terminal: bool


def _after_header(stdout: str, harness: str, skip: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    refuse = CommitFailures(harness).parse
    header = False
    for event in typed_events(stdout, harness=harness, skip=skip):
        if header:
            yield event
        elif event["type"] == "session":
            header = True
        else:
            raise refuse("the output does not start with a session header")
    if not header:
        raise refuse(
            f"no output (nothing was sent, or {harness} stopped before its header)")


def events_after_header(stdout: str, *, harness: str, skip: tuple[str, ...] = ()
                        ) -> list[dict[str, Any]]:
    """The typed events after the ``session`` header (``skip``: lines passed over)."""
    return list(_after_header(stdout, harness, skip))


def last_turn(stdout: str, *, harness: str, skip: tuple[str, ...] = ()) -> LastTurn:
    """The last assistant ``message_end``'s message, when the run ended after it: an
    ``agent_end`` follows it and no assistant message is left open."""
    refuse = CommitFailures(harness).parse
    last: Mapping[str, Any] | None = None
    open_message = False  # an assistant message_start without its message_end yet
    ended = False  # an agent_end after the last assistant message_end
    terminal = True
    for event in _after_header(stdout, harness, skip):
        kind = event["type"]
        if kind == "agent_end":
            terminal = event.get("isTerminal", True)
            if not isinstance(terminal, bool):
                raise refuse("agent_end isTerminal is not a boolean")
            ended = last is not None
        elif kind in ("message_start", "message_end"):
            message = event.get("message")
            if not isinstance(message, dict):
                raise refuse(f"{kind} without a message object")
            if message.get("role") != "assistant":
                continue  # the prompt, tool results and the harness's own messages
            open_message = kind == "message_start"
            if kind == "message_end":
                last, ended = message, False
    if open_message:
        raise refuse("incomplete: the output stops inside an answer")
    if last is None:
        raise refuse(f"no answer: {harness} ended without an assistant message")
    if not ended:
        raise refuse("incomplete: the run did not end after the last answer")
    return LastTurn(message=last, terminal=terminal)


def _is_commentary(block: Mapping[str, Any]) -> bool:
    """Whether a text block is an OpenAI Responses "commentary" preamble: progress talk
    before the final answer, kept in ``textSignature`` as
    ``{"v":1,"id":...,"phase":"commentary"|"final_answer"}``."""
    signature = block.get("textSignature")
    if not isinstance(signature, str) or not signature.startswith("{"):
        return False
    try:
        parsed = json.loads(signature)
    except (ValueError, RecursionError):
        return False
    return isinstance(parsed, dict) and parsed.get("v") == 1 and parsed.get("phase") == "commentary"


def answer_text(message: Mapping[str, Any], *, harness: str,
                reasoning: frozenset[str] = frozenset({"thinking"})) -> str:
    """The text blocks of a completed message (commentary left out), joined with
    newlines, checked as a commit message. Only reasoning (block types in
    ``reasoning``), only a tool call, or nothing at all is a ``parse-failure``."""
    refuse = CommitFailures(harness).parse
    content = message.get("content")
    if not isinstance(content, list):
        raise refuse("the answer has no content list")
    texts: list[str] = []
    kinds: set[str] = set()
    for block in content:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise refuse("an answer block is not a typed object")
        kinds.add(block["type"])
        if block["type"] != "text":
            continue  # reasoning, tool calls, images: never the answer
        text = block.get("text")
        if not isinstance(text, str):
            raise refuse("a text block has no text")
        if not _is_commentary(block):
            texts.append(text)
    answer = "\n".join(texts)
    if not answer.strip():
        if kinds & reasoning:
            raise refuse("the answer holds only reasoning, no text")
        if "toolCall" in kinds:
            raise refuse("the answer is only a tool call")
        raise refuse("the answer is empty")
    return text_answer(answer, harness=harness)


def stopped_answer(message: Mapping[str, Any], *, harness: str,
                   reasoning: frozenset[str] = frozenset({"thinking"})) -> str:
    """The answer of a message whose ``stopReason`` is ``stop`` (see ``answer_text``).

    The provider has already raised for the ``stopReason`` values that mean a
    failed turn; a message cut off at the output limit, one that is only a
    tool call, and any other reason are a ``parse-failure``.
    """
    refuse = CommitFailures(harness).parse
    stop = message.get("stopReason")
    if stop == "length":
        raise refuse("the answer was cut off at the output limit")
    if stop == "toolUse":
        raise refuse("the answer is only a tool call")
    if stop != "stop":
        raise refuse("the answer has no known stopReason")
    return answer_text(message, harness=harness, reasoning=reasoning)
