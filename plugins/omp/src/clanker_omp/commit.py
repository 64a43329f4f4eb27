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

from collections.abc import Mapping
from typing import Any, Final

from clanker.commit.capability import (
    CommitFailures,
    HarnessCommit,
    last_turn,
    stopped_answer,
)
from clanker.errors import ErrorKind, HarnessCapabilityError

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
# The content block types omp gives reasoning.
_REASONING: Final = frozenset({"thinking", "redactedThinking"})


_FAILURES: Final = CommitFailures("omp")
_fail = _FAILURES.fail
_parse_failure = _FAILURES.parse


def _failed_turn(message: Mapping[str, Any], stop: str) -> HarnessCapabilityError:
    if stop == "aborted" and message.get("errorMessage") == _DEADLINE:
        return _fail(ErrorKind.TIMEOUT, "omp stopped itself at its --max-time deadline")
    status = message.get("errorStatus")
    # errorMessage is provider text (and names the file omp saved the request
    # in): it stays out. An HTTP status is safe to show.
    http = f", HTTP {status}" if isinstance(status, int) and not isinstance(status, bool) else ""
    return _fail(ErrorKind.COMMAND_FAILED, f"the turn ended with stopReason {stop}{http}")


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
    turn = last_turn(stdout, harness="omp")
    last = turn.message
    stop = last.get("stopReason")
    if stop in ("error", "aborted"):
        raise _failed_turn(last, stop)
    answer = stopped_answer(last, harness="omp", reasoning=_REASONING)
    if not turn.terminal:
        raise _parse_failure("incomplete: omp says the run is not finished (isTerminal false)")
    return answer


class OmpCommit(HarnessCommit):
    """``omp --print --mode json ...`` with the prompt on stdin."""

    # stdin is read to EOF before start-up work; the executor writes it all
    # and closes stdin (a pipe left open makes omp wait forever).
    command = "omp"
    args = COMMIT_ARGS
    # Two tokens, last, as at launch: a built-in string flag takes the
    # next token whatever it looks like.
    model_bound = False
    # 1: a failed or aborted turn, or a start-up error; 2: a bad flag;
    # 130/143/129: a signal. The stream says which turn failed, if any.
    reported = (ErrorKind.COMMAND_FAILED, ErrorKind.TIMEOUT)
    parse_stream = staticmethod(parse_commit_stream)

implementation = OmpCommit
