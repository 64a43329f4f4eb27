"""Antigravity commit messages: ``agy ... --input-format=stream-json --output-format=stream-json``.

**Never run here**: agy cannot be installed on this machine. Built from the
spec (agy 1.2.12/1.2.14, "AI commit assistance") and public reports of its
stream-json mode (docs/harnesses/agy.md, "Commit messages"; synthetic fixtures
in tests/fixtures/agy/commit/). The prompt goes in as one NDJSON user line on
stdin; agy runs one turn per line and, after EOF, exits once that turn's
``result`` is written. stdout is one event per line: ``init``,
``step_update`` (the answer's text deltas among them), then one terminal
``result {status, response, error?, denied_actions?, ...}``. Only that
``result`` is read.

Signed out, agy is reported to print a login URL on stderr and wait up to
60 s for a browser login before anything reaches stdout; the ``result`` it
may print after that is read like the usage probe's error envelope (spec,
"Usage adapters"): ``unauthenticated`` only when its own ``error`` text
holds one of a narrow list of phrases. Never seen live.

agy's headless mode is neither tool-free nor non-persisting: every run keeps
its tools (limited by plan mode, the sandbox and headless refusal of tools
that need approval) and records a conversation in the user's agy history.
The docs page says so; nothing here can change it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

from clanker.commit.capability import (
    CommitFailures,
    HarnessCommit,
    text_answer,
    typed_events,
)
from clanker.errors import ErrorKind
from clanker_agy.usage import _SIGNED_OUT, _error_texts

__all__ = ["COMMIT_ARGS", "AgyCommit", "commit_stdin", "parse_commit_stream"]

# agy parses flags like Go's `flag` package: a value flag written as two
# tokens took the next token whatever it was (`--output-format json` became
# prompt text in a 1.1.12 report), so every value is bound with `=`.
COMMIT_ARGS: Final = (
    # Planning mode: the agent plans instead of editing. The only mode flag
    # agy has that restricts it; not a documented read-only guarantee.
    "--mode=plan",
    # Terminal commands run confined (nsjail, sandbox-exec, AppContainer). A
    # switch without a value. It confines commands, not file or MCP tools.
    "--sandbox",
    # No slash command or skill expansion: a prompt line starting with `/`
    # stays text. (Help text says "in print mode"; the spec passes it here.)
    "--disable-slash-commands",
    # One NDJSON user turn per stdin line; requires stream-json output. No
    # `--print`: installed `--print` requires a prompt argument, and bare
    # `-p` takes the next token as the prompt. Never interactive, no TTY.
    "--input-format=stream-json",
    # One typed event per line on stdout: init, step_update..., result.
    "--output-format=stream-json",
)
# The spec gives agy's AI commit 60 s in its Agy notes and 90 s in its "AI
# commit assistance" section; clanker's inference ceiling is 90 s, and the
# commit service caps every harness there. agy's own retries (a 429 or a
# dropped connection, about 150 s in a 1.2.11 report) can outlast it; then the
# run is killed and ends as a timeout. `--print-timeout` is documented for
# print mode only, so it is not passed.

# Result statuses that say the turn failed (ERROR in every report; FAILURE,
# CANCELLED and TIMEOUT in one third-party parser). SUCCESS is the only
# success: the older `OK` a third-party parser accepts is not seen in any
# capture (1.1.12 already printed SUCCESS), so it is unrecognized here.
_SUCCESS: Final = "SUCCESS"
_FAILED: Final = frozenset({"ERROR", "FAILURE", "CANCELLED", "TIMEOUT"})


_FAILURES: Final = CommitFailures("agy")
_fail = _FAILURES.fail
_parse_failure = _FAILURES.parse


def commit_stdin(prompt: str) -> bytes:
    """Return the one stdin line that carries ``prompt`` as agy's user turn.

    ``{"event":"user","message":{"content":<prompt>}}`` and a newline: the
    string-content form public reports ran on 1.2.x. JSON escapes every
    control character, so a newline in the diff cannot start a second turn.
    Non-ASCII stays UTF-8 (at most 6 bytes per character, escapes included,
    so clanker's 96 Ki-character prompt stays far below the 1 MiB stdin cap).
    """
    line = json.dumps({"event": "user", "message": {"content": prompt}},
                      ensure_ascii=False, separators=(",", ":"))
    return (line + "\n").encode("utf-8")


def _events(stdout: str) -> Iterator[dict[str, Any]]:
    """Yield every event (agy names it under ``event``); anything else is malformed output."""
    return typed_events(stdout, harness="agy", key="event")


def _final_result(stdout: str) -> Mapping[str, Any]:
    """Return the single ``result`` object, which must be the last event."""
    events = list(_events(stdout))
    results = [i for i, event in enumerate(events) if event["event"] == "result"]
    if not results:
        # Killed or crashed mid-turn, or an unknown model (reported to exit 0
        # silently): text deltas may be there, but they are never the answer.
        raise _parse_failure("incomplete: agy printed no result")
    if len(results) > 1:
        raise _parse_failure("more than one result: agy ran more than the one turn")
    if results[0] != len(events) - 1:
        raise _parse_failure("the result is not the last event")
    result = events[-1].get("result")
    if not isinstance(result, dict):
        raise _parse_failure("a result event without a result object")
    return result


def _check_status(result: Mapping[str, Any]) -> None:
    status = result.get("status")
    if not isinstance(status, str):
        raise _parse_failure("the result has no known status")
    if status in _FAILED:
        # `error` is agy's or the provider's text (quota messages, URLs): it
        # stays out, and is only matched against the usage probe's phrases
        # ("authentication failed or timed out" is not one of them). The
        # status is agy's own closed vocabulary.
        texts = [text.lower() for text in _error_texts(result)]
        if any(phrase in text for text in texts for phrase in _SIGNED_OUT):
            raise _fail(ErrorKind.UNAUTHENTICATED, "agy reported an authentication error; "
                        "sign in with `agy`")
        raise _fail(ErrorKind.COMMAND_FAILED, f"the turn ended with status {status}")
    if status != _SUCCESS:
        raise _parse_failure("the result has no known status")
    error = result.get("error")
    if error is not None and error != "":
        if not isinstance(error, str):
            raise _parse_failure("the result's error is not text")
        raise _fail(ErrorKind.COMMAND_FAILED, "the turn reported an error despite SUCCESS")


def parse_commit_stream(stdout: str) -> str:
    """Return the answer in agy's stream-json output, or raise a typed failure.

    Every non-blank line must be a JSON object with a string ``event``;
    unknown events are ignored, ``init`` and ``step_update`` are never read.
    There must be exactly one ``result`` and it must be the last event. Its
    ``status`` ``ERROR``, ``FAILURE``, ``CANCELLED`` or ``TIMEOUT`` is
    ``unauthenticated`` when its error text names a signed-out state (the
    usage probe's phrases), else ``command-failed``, like an ``error`` text
    beside ``SUCCESS``. The answer
    counts only with ``status: "SUCCESS"``, no ``denied_actions`` (a tool
    call agy refused headless) and a non-blank string ``response``, which is
    returned as given. Anything else is ``parse-failure``. Text deltas,
    tool steps and stderr are never the answer.
    """
    result = _final_result(stdout)
    _check_status(result)
    denied = result.get("denied_actions")
    if denied is not None and not isinstance(denied, list):
        raise _parse_failure("the result's denied_actions is not a list")
    if denied:
        raise _parse_failure("the model asked for a tool and agy refused it (denied_actions)")
    answer = result.get("response")
    if not isinstance(answer, str):
        raise _parse_failure("the result has no response text")
    if not answer.strip():
        # agy streams no reasoning text, only counts it: an empty response is
        # a turn that produced only reasoning, or nothing.
        raise _parse_failure("the answer is empty (only reasoning, or nothing)")
    return text_answer(answer, harness="agy")


class AgyCommit(HarnessCommit):
    """``agy --mode=plan --sandbox ... --output-format=stream-json`` with one user line on stdin."""

    command = "agy"
    args = COMMIT_ARGS
    # One token, `=`-bound, last: the value stays the model whatever
    # it looks like. Without it, agy's own default (the model last
    # chosen with /model, which persists across sessions).
    model_bound = True
    # 0 is no proof: an unknown event line, an unknown model, and a
    # turn after an error agy recovered from were all reported as 0.
    # 1: bad input or interrupted (SIGTERM writes an ERROR result first);
    # 2: a flag error; 3: quota. The stream says what failed when it can;
    # stderr (`AGY_ERROR: ...`) is diagnostics only, never read.
    parse_stream = staticmethod(parse_commit_stream)

    def stdin(self, prompt: str) -> bytes:
        # One line, then EOF: the executor writes it all and closes stdin,
        # and agy exits after that turn's result. Nothing from the change
        # is ever an argument.
        return commit_stdin(prompt)

implementation = AgyCommit
