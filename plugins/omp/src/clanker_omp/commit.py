"""Oh My Pi commit messages: ``omp --print --mode json ...``, the prompt on stdin.

Verified against omp 18.2.3 (docs/harnesses/omp.md, "Commit messages";
fixtures in tests/fixtures/omp/commit/). omp's JSON mode prints one event per
line on stdout: a ``session`` header, then agent events; unlike pi, its
``message_update`` lines carry only the delta. The answer is the last
assistant ``message_end``: omp re-prompts after a tool call, after a
thinking-only answer and after a failed request, and each attempt ends its
own message. omp exits 1 when that message failed, but 0 when it is only
reasoning, cut off or a tool call, so the stream is read either way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

from clanker.commit.capability import answer_by_exit, inference_request, text_answer, typed_events
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, CommandResult

__all__ = ["COMMIT_ARGS", "MAX_TIME", "OmpCommit", "parse_commit_stream"]

MAX_TIME: Final = 65
"""omp's own deadline, in seconds. omp starts the clock only once its session exists
(11 s on a loaded machine), so 65 leaves room before clanker's 90 s kill."""

COMMIT_ARGS: Final = (
    # Print mode: one prompt, then exit; never the TUI, never a question.
    # `--print` takes no value in omp.
    "--print",
    # One JSON event per line on stdout.
    "--mode", "json",
    # An ephemeral session: no session file, no resume or "move cwd" question.
    "--no-session",
    # No built-in tools: the request carried no `tools`, and a tool call the
    # model makes anyway is answered "Tool ... not found". (omp's help says
    # "built-in": extension tools are what --no-extensions removes.)
    "--no-tools",
    # No discovered extensions, skills or rules: nothing from the user's or
    # the repository's omp directories can run or add to the prompt.
    # (AGENTS.md still reaches the model: omp 18.2.3 has no flag against
    # context files; see the contract page.)
    "--no-extensions",
    "--no-skills",
    "--no-rules",
    # No title generation: a second model call with the prompt. Print mode
    # does not start one in 18.2.3; this keeps it so in later versions.
    "--no-title",
    # omp's default retries (10 agent-level attempts, each with 6 transport
    # attempts) run for minutes against an unreachable provider. With a
    # deadline omp aborts itself and ends the turn cleanly ("Deadline
    # exceeded", exit 1) instead of being killed by clanker's timeout.
    "--max-time", str(MAX_TIME),
)
# omp's own text for an aborted turn whose --max-time deadline passed.
_DEADLINE: Final = "Deadline exceeded"


def _fail(kind: ErrorKind, detail: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(kind, detail, harness="omp")


def _parse_failure(detail: str) -> HarnessCapabilityError:
    return _fail(ErrorKind.PARSE_FAILURE, detail)


def _is_commentary(block: Mapping[str, Any]) -> bool:
    """Say whether a text block is an OpenAI Responses "commentary" preamble.

    omp's pi-ai stores the Responses phase in ``textSignature`` as
    ``{"v":1,"id":...,"phase":"commentary"|"final_answer"}``; commentary is
    progress talk before the final answer, not the answer.
    """
    signature = block.get("textSignature")
    if not isinstance(signature, str) or not signature.startswith("{"):
        return False
    try:
        parsed = json.loads(signature)
    except (ValueError, RecursionError):
        return False
    return isinstance(parsed, dict) and parsed.get("v") == 1 and parsed.get("phase") == "commentary"


def _answer_text(message: Mapping[str, Any]) -> str:
    """Return the text blocks of a completed message, joined with newlines."""
    content = message.get("content")
    if not isinstance(content, list):
        raise _parse_failure("the answer has no content list")
    texts: list[str] = []
    kinds: set[str] = set()
    for block in content:
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise _parse_failure("an answer block is not a typed object")
        kinds.add(block["type"])
        if block["type"] != "text":
            continue  # thinking, redactedThinking, tool calls, images: never the answer
        text = block.get("text")
        if not isinstance(text, str):
            raise _parse_failure("a text block has no text")
        if not _is_commentary(block):
            texts.append(text)
    answer = "\n".join(texts)
    if not answer.strip():
        if kinds & {"thinking", "redactedThinking"}:
            raise _parse_failure("the answer holds only reasoning, no text")
        if "toolCall" in kinds:
            raise _parse_failure("the answer is only a tool call")
        raise _parse_failure("the answer is empty")
    return text_answer(answer, harness="omp")


def _failed_turn(message: Mapping[str, Any], stop: str) -> HarnessCapabilityError:
    if stop == "aborted" and message.get("errorMessage") == _DEADLINE:
        return _fail(ErrorKind.TIMEOUT, "omp stopped itself at its --max-time deadline")
    status = message.get("errorStatus")
    # errorMessage is provider text (and names the file omp saved the request
    # in): it stays out. An HTTP status is safe to show.
    http = f", HTTP {status}" if isinstance(status, int) and not isinstance(status, bool) else ""
    return _fail(ErrorKind.COMMAND_FAILED, f"the turn ended with stopReason {stop}{http}")


def _events(stdout: str) -> Iterator[dict[str, Any]]:
    """Yield the typed events after the ``session`` header."""
    header = False
    for event in typed_events(stdout, harness="omp"):
        if header:
            yield event
        elif event["type"] == "session":
            header = True
        else:
            raise _parse_failure("the output does not start with a session header")
    if not header:
        raise _parse_failure("no output (nothing was sent, or omp stopped before its header)")


def _last_answer(stdout: str) -> tuple[Mapping[str, Any], bool]:
    """Return the last assistant ``message_end``'s message, if the run ended after it,
    and the last ``agent_end``'s ``isTerminal``."""
    last: Mapping[str, Any] | None = None
    open_message = False  # an assistant message_start without its message_end yet
    ended = False  # an agent_end after the last assistant message_end
    terminal = True
    for event in _events(stdout):
        kind = event["type"]
        if kind == "agent_end":
            terminal = event.get("isTerminal", True)
            if not isinstance(terminal, bool):
                raise _parse_failure("agent_end isTerminal is not a boolean")
            ended = last is not None
        elif kind in ("message_start", "message_end"):
            message = event.get("message")
            if not isinstance(message, dict):
                raise _parse_failure(f"{kind} without a message object")
            if message.get("role") != "assistant":
                continue  # the prompt, tool results, irc and other custom messages
            open_message = kind == "message_start"
            if kind == "message_end":
                last, ended = message, False
    if open_message:
        raise _parse_failure("incomplete: the output stops inside an answer")
    if last is None:
        raise _parse_failure("no answer: omp ended without an assistant message")
    if not ended:
        raise _parse_failure("incomplete: the run did not end after the last answer")
    return last, terminal


def parse_commit_stream(stdout: str) -> str:
    """Return the answer in omp's ``--mode json`` output, or raise a typed failure.

    The answer is the last assistant ``message_end``; it counts only when the
    run ended after it (an ``agent_end`` follows it, no assistant message is
    left open, and the last ``agent_end`` is not ``isTerminal: false``) and
    its ``stopReason`` is ``stop``. Its text blocks are the answer; reasoning,
    tool calls and streamed deltas are never read. A failed turn is
    ``command-failed`` (``timeout`` at omp's own deadline); anything else that
    is not an answer is ``parse-failure``.
    """
    last, terminal = _last_answer(stdout)
    stop = last.get("stopReason")
    if stop in ("error", "aborted"):
        raise _failed_turn(last, stop)
    if stop == "length":
        raise _parse_failure("the answer was cut off at the output limit")
    if stop == "toolUse":
        raise _parse_failure("the answer is only a tool call")
    if stop != "stop":
        raise _parse_failure("the answer has no known stopReason")
    answer = _answer_text(last)
    if not terminal:
        raise _parse_failure("incomplete: omp says the run is not finished (isTerminal false)")
    return answer


class OmpCommit:
    """``omp --print --mode json ...`` with the prompt on stdin."""

    def build_invocation(self, model: str | None, prompt: str) -> CommandRequest:
        args = list(COMMIT_ARGS)
        if model is not None:
            # Two tokens, last, as at launch: a built-in string flag takes the
            # next token whatever it looks like.
            args += ["--model", model]
        # Read to EOF before start-up work; the executor writes it all and
        # closes stdin (a pipe left open makes omp wait forever).
        return inference_request("omp", args, prompt.encode("utf-8"))

    def parse_output(self, result: CommandResult) -> str:
        # 1: a failed or aborted turn, or a start-up error; 2: a bad flag;
        # 130/143/129: a signal. The stream says which turn failed, if any.
        return answer_by_exit(result, parse_commit_stream, harness="omp",
                              reported=(ErrorKind.COMMAND_FAILED, ErrorKind.TIMEOUT))
