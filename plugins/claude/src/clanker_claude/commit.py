"""Claude Code commit messages: ``claude -p --output-format stream-json --verbose ...``,
the prompt on stdin.

Verified against Claude Code 2.1.197 (docs/harnesses/claude.md, "Commit
messages"; fixtures in tests/fixtures/claude/commit/). Print mode with
stream-json output prints one event per line: ``system`` ``init``, the
``assistant`` message(s), then exactly one ``result`` object when the run
ends; the answer is its ``result`` text. Claude reports most failures (no
login, API errors, refusals, an answer cut off at the output limit) as
``subtype: "success"`` with ``is_error: true``, and a thinking-only answer as
a clean success with an empty ``result``, so every field of the rule is
checked. Why a failure happened is only in the stream: a failed request's
``assistant`` message carries Claude's own ``error`` category
(``authentication_failed`` when signed out or when the credentials are
refused), which the single ``result`` of ``--output-format json`` lacks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from clanker.commit.capability import (
    CommitFailures,
    HarnessCommit,
    http_status,
    text_answer,
    typed_events,
)
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker_claude.models import ISOLATION_ARGS, ISOLATION_ENV

__all__ = ["COMMIT_ARGS", "COMMIT_ENV", "ClaudeCommit", "parse_commit_result"]

COMMIT_ARGS: Final = (
    # Print mode: one prompt, then exit. It never asks anything (no trust
    # dialog, no permission prompt: a tool it has not been granted is denied).
    "-p",
    # One event per line; the last is the one `result` object, the same object
    # `--output-format json` prints alone. The stream adds the assistant
    # message's `error` category (`authentication_failed`), which that single
    # object lacks. Print mode requires `--verbose` with stream-json; it adds
    # no partial messages (that is `--include-partial-messages`).
    "--output-format", "stream-json", "--verbose",
    # No built-in tool at all: the request carries `"tools": []`, and a tool
    # call the model makes anyway is answered "No such tool available". Nothing
    # after it may name tools again (a later `--tools` wins); `--model` is safe.
    # The permission modes and allow lists do not do this: in `default` and
    # `plan` mode a Read (and in `plan` a Bash) ran in the repository.
    "--tools", "",
    # Bounds the loop, not the tools: a model that keeps calling the missing
    # tool stops after one turn (`error_max_turns`) instead of looping.
    "--max-turns", "1",
    # No skills. A prompt that starts with `/` is still a local slash command
    # (no model call, `num_turns` 0, refused below); clanker's prompt never does.
    "--disable-slash-commands",
    # Only the user's settings, no session file, no hooks, no MCP server
    # (project, user, plugin): the same isolation as the models probe. Only the
    # user's settings also drops the project's CLAUDE.md and CLAUDE.local.md.
    *ISOLATION_ARGS,
)
COMMIT_ENV: Final = {
    **ISOLATION_ENV,
    # No CLAUDE.md of any scope (user, project, local, `.claude/rules`) and no
    # auto-memory: a repository could otherwise steer its own commit message.
    "CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1",
    # No attachments: without it every `@path` in the prompt (that is, in the
    # diff) is read and sent along, files outside the repository included.
    "CLAUDE_CODE_DISABLE_ATTACHMENTS": "1",
}
# Claude retries a failing request 10 times (about 3 minutes against a dead
# endpoint); clanker's inference ceiling is the bound. Killed, it prints nothing.

# The result subtypes of Claude Code 2.1.197's schema.
# The assistant message's error category when Claude has no credentials, or the
# provider refused them (Claude Code 2.1.197: no login, HTTP 401/403, a bad key).
_SIGNED_OUT: Final = "authentication_failed"
_SIGN_IN: Final = "sign in with `claude` and /login, or check the API key it uses"

_SUBTYPES: Final = frozenset({
    "success", "error_during_execution", "error_max_turns", "error_max_budget_usd",
    "error_max_structured_output_retries",
})


_FAILURES: Final = CommitFailures("claude")
_fail = _FAILURES.fail
_parse_failure = _FAILURES.parse


def _events(stdout: str) -> Iterator[dict[str, Any]]:
    """Yield every typed event; anything else on stdout is malformed output."""
    return typed_events(stdout, harness="claude")


def _read_stream(stdout: str) -> tuple[Mapping[str, Any], frozenset[str]]:
    """Return the one ``result`` (the last event) and the assistant messages' error categories."""
    result: Mapping[str, Any] | None = None
    errors: set[str] = set()
    seen = False
    for event in _events(stdout):
        seen = True
        if result is not None:
            raise _parse_failure("an event after the result")
        if event["type"] == "result":
            result = event
        elif event["type"] == "assistant":
            error = event.get("error")
            if isinstance(error, str):
                errors.add(error)
    if not seen:
        raise _parse_failure("no output (claude printed no result: interrupted, or it "
                             "stopped before its turn)")
    if result is None:
        raise _parse_failure("incomplete: no result object (interrupted or killed)")
    return result, frozenset(errors)


def _failed_turn(result: Mapping[str, Any], subtype: str) -> HarnessCapabilityError:
    if subtype == "error_max_turns":
        return _fail(ErrorKind.COMMAND_FAILED,
                     "the turn hit --max-turns 1: the model asked for a tool instead of answering")
    # `result` (or `errors`) is Claude's or the provider's text: it stays out.
    # An HTTP status is safe to show.
    status = http_status(result.get("api_error_status"))
    parts = [] if subtype == "success" else [subtype]
    if status is not None:
        parts.append(f"HTTP {status}")
    said = f" ({', '.join(parts)})" if parts else ""
    return _fail(ErrorKind.COMMAND_FAILED, f"the turn ended in an error result{said}")


def _check_outcome(result: Mapping[str, Any], errors: frozenset[str]) -> None:
    """Raise unless the result says the turn succeeded (``success``, ``is_error: false``)."""
    subtype, is_error = result.get("subtype"), result.get("is_error")
    if not isinstance(subtype, str) or subtype not in _SUBTYPES:
        raise _parse_failure("the result has no known subtype")
    if not isinstance(is_error, bool):
        raise _parse_failure("the result has no is_error flag")
    if is_error and _SIGNED_OUT in errors:
        # Claude's own category: no login, a refused key or token (401/403).
        raise _fail(ErrorKind.UNAUTHENTICATED, _SIGN_IN)
    if is_error or subtype == "error_max_turns":
        raise _failed_turn(result, subtype)
    if subtype != "success":
        raise _parse_failure("an error subtype without is_error")


def _check_completed(result: Mapping[str, Any]) -> None:
    """Raise unless a model turn ran and ended normally."""
    turns = result.get("num_turns")
    if not isinstance(turns, int) or isinstance(turns, bool):
        raise _parse_failure("the result has no turn count")
    if turns < 1:
        raise _parse_failure("no model turn: the prompt was taken as a slash command")
    stop = result.get("stop_reason")
    if stop == "max_tokens":
        raise _parse_failure("the answer was cut off at the output limit")
    if stop == "tool_use":
        raise _parse_failure("the answer is only a tool call")
    if stop != "end_turn":
        raise _parse_failure("the answer did not end normally (stop_reason is not end_turn)")
    if "terminal_reason" in result and result["terminal_reason"] != "completed":
        raise _parse_failure("incomplete: the run did not complete (terminal_reason)")
    if "deferred_tool_use" in result:
        raise _parse_failure("the answer is a deferred tool call")


def parse_commit_result(stdout: str) -> str:
    """Return the answer in ``claude -p --output-format stream-json``'s output, or raise
    a typed failure.

    Every non-blank line must be a JSON object with a string ``type``; the
    last one must be the only ``result`` (``type: "result"``). An error
    result whose run holds an ``assistant`` message with ``error:
    "authentication_failed"`` is ``unauthenticated``; any other error result
    (``is_error: true``, whatever the subtype) and ``error_max_turns`` are
    ``command-failed``. The answer counts only as ``subtype: "success"``,
    ``is_error: false``, at least one model turn, ``stop_reason: "end_turn"``,
    ``terminal_reason: "completed"`` when present, no ``deferred_tool_use``,
    and a non-blank ``result``; it is returned as given. Anything else is
    ``parse-failure``. Assistant messages are read only for their error category:
    thinking, tool calls and streamed text are never read.
    """
    result, errors = _read_stream(stdout)
    _check_outcome(result, errors)
    _check_completed(result)
    answer = result.get("result")
    if not isinstance(answer, str):
        raise _parse_failure("the result has no answer text")
    if not answer.strip():
        # Claude's `result` is the last text block: empty when the model gave
        # only reasoning (even after its own re-ask) or only a tool call.
        raise _parse_failure("the answer is empty (only reasoning or a tool call)")
    return text_answer(answer, harness="claude")


class ClaudeCommit(HarnessCommit):
    """``claude -p --output-format json ...`` with the prompt on stdin."""

    # Claude waits 3 s for the first byte of stdin, then reads to EOF; the
    # executor writes it all at once and closes stdin. No positional
    # prompt: nothing from the change is ever an argument.
    command = "claude"
    args = COMMIT_ARGS
    # Two tokens, last: `--model` takes the next token whatever it looks
    # like (verified: `--model --tools` ran with tools [] and model
    # "--tools"). Without it, Claude's own default for the account.
    model_bound = False
    env = COMMIT_ENV
    # 0 without a result is an interrupted run (SIGINT): a failure too.
    # 1: an error result, or a bad flag or stdin (no output); 143/129: a
    # signal. An error result says what failed (signed out included);
    # otherwise the status does.
    parse_stream = staticmethod(parse_commit_result)

implementation = ClaudeCommit
