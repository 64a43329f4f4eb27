"""Codex commit messages: ``codex exec --json ...``, the prompt on stdin.

Verified against Codex CLI 0.171.0 (docs/harnesses/codex.md, "Commit
messages"; fixtures in tests/fixtures/codex/commit/). ``exec --json`` prints
one event per line on stdout: ``thread.started``, one ``turn.started``, the
turn's ``item.*`` events, then ``turn.completed`` or ``turn.failed``. The
answer is the last ``agent_message`` of the completed turn: a turn may hold
several (commentary before a tool call, then the answer). Exit status 1 goes
with ``turn.failed``; a killed run just stops, with no terminal event.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from clanker.commit.capability import (
    CommitFailures,
    HarnessCommit,
    text_answer,
    typed_events,
)
from clanker.errors import ErrorKind

__all__ = ["COMMIT_ARGS", "CodexCommit", "parse_commit_stream"]

COMMIT_ARGS: Final = (
    # One prompt, no TUI. The prompt is read from stdin to EOF (no positional
    # PROMPT); an empty or whitespace-only stdin is exit 1, never a wait.
    # No --skip-git-repo-check: the service runs it at the repository root,
    # where Codex's git check passes (a plain directory would fail, exit 1).
    # No --ignore-user-config: it would drop the user's own model and provider.
    "exec",
    # One JSON event per line on stdout; diagnostics go to stderr.
    "--json",
    # No rollout, no thread index row: nothing of the prompt is kept.
    "--ephemeral",
    # Commands the model runs get a read-only filesystem. exec's approval
    # policy is `never`, so nothing asks. This is the guarantee: the mode is
    # read-only, not tool-free (Codex offers the model its exec tool anyway).
    "--sandbox", "read-only",
    # Without it Codex 0.171.0 retries a refused or unreachable provider
    # forever ("Reconnecting... waiting for network"). With it the turn fails
    # after the provider's own retries (0.7 s with none, 24.7 s with five).
    # The -c form only warns on a name a later version drops; --disable
    # would be a hard error.
    "-c", "features.unbounded_connection_retries=false",
    # Even with --ephemeral, Codex writes shell_snapshots/<thread>.<n>.sh, a dump
    # of the whole exported environment (API keys included), and keeps it
    # after exit until its next run prunes it. This stops that file.
    "-c", "features.shell_snapshot=false",
    # Without it the repository's AGENTS.md goes into the request, so a
    # repository could steer its own commit message. (Seen live: gone with it.)
    "-c", "project_doc_max_bytes=0",
    # The hosted web search runs at the provider, outside the read-only
    # sandbox, and a user's config may make it live; a diff that asks for a
    # search could carry its content elsewhere. Removed from the request with it.
    "-c", 'web_search="disabled"',
)
# An unknown -c key only warns (an `error` item), but a value of the wrong
# type is exit 1: if a later Codex changes one of these, commit messages fail
# closed rather than silently.

# Item types that are neither a tool call nor an answer: reasoning summaries,
# plan-mode text, the to-do list (it completes when the turn ends) and
# non-fatal warnings (config notices, transport fallbacks). Any other item
# after the last agent_message, a known tool or one a later version adds,
# means that message was commentary before more work, not the answer.
_NOT_TOOLS: Final = frozenset({"agent_message", "reasoning", "plan", "todo_list", "error"})
_ITEM_EVENTS: Final = frozenset({"item.started", "item.updated", "item.completed"})
_TERMINAL: Final = frozenset({"turn.completed", "turn.failed"})

# The start of a failed turn's `error.message` when the provider refused the request's
# credentials (none, signed out; or a rejected key or token): Codex 0.171.0 formats
# `unexpected status <code> <reason>: <body>, url: <url>`; only the prefix is read.
_REFUSED_CREDENTIALS: Final = "unexpected status 401 "
# ... and when an API-key provider's `env_key` variable is not set (no request is sent).
_MISSING_KEY: Final = "Missing environment variable: "
_SIGN_IN: Final = "sign in with `codex login`, or check the API key its provider uses"
_SET_KEY: Final = "the API key variable its provider names (env_key) is not set"


_FAILURES: Final = CommitFailures("codex")
_fail = _FAILURES.fail
_parse_failure = _FAILURES.parse


def _events(stdout: str) -> Iterator[dict[str, Any]]:
    """Yield every typed event; anything else on stdout is malformed output."""
    return typed_events(stdout, harness="codex")


def _item_type(event: Mapping[str, Any]) -> str:
    item = event.get("item")
    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
        raise _parse_failure(f"{event['type']} without a typed item")
    return str(item["type"])


def _failure_text(event: Mapping[str, Any]) -> str:
    """The failed turn's ``error.message`` (``""`` when it has none), only to read its prefix."""
    error = event.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else ""


def _the_turn(stdout: str) -> tuple[list[dict[str, Any]], str | None, str]:
    """Return the events of the one turn, how it ended (None: it did not), and the
    failure's text when it failed."""
    turn: list[dict[str, Any]] | None = None
    ended: str | None = None
    failure = ""
    seen = False
    for event in _events(stdout):
        kind = event["type"]
        if kind in _ITEM_EVENTS:
            _item_type(event)  # every item is checked, in or out of the turn
        if kind == "turn.started":
            if turn is not None:
                raise _parse_failure("more than one turn")
            turn = []
        elif kind in _TERMINAL:
            if turn is None or ended is not None:
                raise _parse_failure(f"{kind} without its own turn.started")
            ended = kind
            if kind == "turn.failed":
                failure = _failure_text(event)
        elif turn is not None and ended is None:
            turn.append(event)
        seen = True
    if not seen:
        raise _parse_failure("no output (nothing was sent, or codex stopped before it began)")
    if turn is None:
        raise _parse_failure("no turn started")
    return turn, ended, failure


def parse_commit_stream(stdout: str) -> str:
    """Return the answer in ``codex exec --json`` output, or raise a typed failure.

    There must be exactly one ``turn.started`` and, after it, exactly one
    terminal event: ``turn.completed``. ``turn.failed`` is ``unauthenticated``
    when Codex says the provider refused the credentials (HTTP 401) or the
    provider's key variable is missing, and otherwise ``command-failed``;
    no terminal event (a killed or interrupted run) is incomplete. The answer
    is the text of the turn's last ``item.completed`` ``agent_message``, as
    given, and only when no other item but reasoning, plan, to-do list or
    warning follows it. Reasoning, plans, warnings, the top-level ``error``
    events (retry notices) and stderr are never the answer. Unknown event
    types and fields are ignored; every other failure is ``parse-failure``.
    """
    turn, ended, failure = _the_turn(stdout)
    if ended == "turn.failed":
        # error.message is provider text (an HTTP body, a URL): it stays out,
        # and only Codex's own fixed prefix is looked at.
        if failure.startswith(_REFUSED_CREDENTIALS):
            raise _fail(ErrorKind.UNAUTHENTICATED, _SIGN_IN)
        if failure.startswith(_MISSING_KEY):
            raise _fail(ErrorKind.UNAUTHENTICATED, _SET_KEY)
        raise _fail(ErrorKind.COMMAND_FAILED, "the turn failed")
    if ended is None:
        raise _parse_failure("incomplete: the turn did not end")
    answer = _last_message(turn)
    if not answer.strip():
        raise _parse_failure("the answer is empty")
    return text_answer(answer, harness="codex")


def _last_message(turn: list[dict[str, Any]]) -> str:
    """Return the text of the turn's last completed agent_message, if nothing but
    reasoning, plan, to-do list or warning items follow it."""
    answer: str | None = None
    work_after = False  # an item other than _NOT_TOOLS after the current answer
    kinds: set[str] = set()
    for event in turn:
        if event["type"] not in _ITEM_EVENTS:
            continue  # retry notices (`error`), and event types Codex may add
        kind = _item_type(event)
        kinds.add(kind)
        if kind == "agent_message" and event["type"] == "item.completed":
            text = event["item"].get("text")
            if not isinstance(text, str):
                raise _parse_failure("an agent_message without text")
            answer, work_after = text, False
        elif kind not in _NOT_TOOLS:
            work_after = answer is not None
    if work_after:
        raise _parse_failure("a tool call follows the last message: it was not the answer")
    if answer is None:
        if "reasoning" in kinds:
            raise _parse_failure("the turn holds only reasoning, no message")
        if kinds - _NOT_TOOLS:
            raise _parse_failure("the turn is only tool calls, no message")
        raise _parse_failure("the turn completed without a message")
    return answer


class CodexCommit(HarnessCommit):
    """``codex exec --json --ephemeral --sandbox read-only ...`` with the prompt on stdin."""

    # stdin is read to EOF before anything starts; the executor writes it all
    # and closes stdin. At most 1,048,576 characters (clanker's prompt
    # is at most 96 KiB).
    command = "codex"
    args = COMMIT_ARGS
    # One token, after `exec`: the value stays the model whatever it
    # looks like (`-m -x` would be a usage error). A bare slug: Codex
    # chooses providers through config, never through the model name.
    model_bound = True
    # 1: a failed turn (signed out included), or a start-up error (no
    # prompt, not a git repository, too large an input); 2: a bad flag;
    # 130/143: a signal. The stream says whether a turn failed, and why
    # when the credentials were refused; stderr is never read.
    parse_stream = staticmethod(parse_commit_stream)

implementation = CodexCommit
