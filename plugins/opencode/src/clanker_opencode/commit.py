"""OpenCode commit messages: ``opencode run --format json ...``, the prompt on stdin.

Verified against opencode-ai 1.18.33 (docs/harnesses/opencode.md, "Commit
messages"; fixtures in tests/fixtures/opencode/commit/). ``run --format json``
prints one event per line on stdout, each ``{"type", "timestamp",
"sessionID", ...}``: ``step_start``, finished ``text`` parts, ``tool_use``,
``step_finish`` (with the step's finish ``reason``) and ``error``. A step that
ends in tool calls is followed by another step, so only the last step can hold
the answer. opencode exits 1 once it printed an ``error``; nothing else on
stdout says that the run is over, so the last step's ``stop`` is the end.

Missing or refused credentials are opencode's own error classes: a
``ProviderAuthError`` (a configured provider without its key) or an
``APIError`` whose ``statusCode`` is 401 (the provider refused the key or
token). opencode's default provider (its free ``opencode`` models) needs no
sign-in at all, so there is no signed-out state to report for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, Final

from attrs import define, field

from clanker.commit.capability import (
    CommitFailures,
    HarnessCommit,
    http_status,
    text_answer,
    typed_events,
)
from clanker.errors import ErrorKind

__all__ = ["AGENT", "COMMIT_ARGS", "COMMIT_CONFIG", "COMMIT_ENV", "OpenCodeCommit",
           "parse_commit_stream"]

AGENT: Final = "clanker-commit"
"""The primary agent clanker defines for this one run (in ``COMMIT_CONFIG``)."""

COMMIT_CONFIG: Final = json.dumps({
    # Our own primary agent that may use nothing. A user's agent-level
    # permission beats the global one (a `build` agent allowing bash kept
    # bash in the request), so the global deny alone is not enough; an agent
    # that only exists here is one no user config has loosened. A denied tool
    # is removed from the request, not refused when called.
    "agent": {AGENT: {"mode": "primary", "permission": "deny"}},
    # Every tool of every other agent, too: the request carried `tools: []`.
    "permission": "deny",
    # No git snapshot of the worktree under ~/.local/share/opencode/snapshot.
    "snapshot": False,
    # A user's `"share": "auto"` (or OPENCODE_AUTO_SHARE) would upload the
    # conversation; with `disabled` the share call is refused.
    "share": "disabled",
}, separators=(",", ":"))
"""The configuration clanker passes in ``OPENCODE_CONFIG_CONTENT``, compact JSON."""

COMMIT_ENV: Final = MappingProxyType({
    # Merged after the global config and OPENCODE_CONFIG, so it wins over
    # them. It replaces a user's own OPENCODE_CONFIG_CONTENT for this run
    # (their global config files still apply).
    "OPENCODE_CONFIG_CONTENT": COMMIT_CONFIG,
    # `run` always creates a session; in memory, no row (and no copy of the
    # prompt) lands in opencode.db. The price: an OpenCode console sign-in
    # kept in that database is not seen for this run.
    "OPENCODE_DB": ":memory:",
    # `run` puts its session in $PWD, not in its working directory: with
    # clanker's own PWD inherited, it ran in clanker's directory, not in the
    # repository. Empty, opencode falls back to the working directory, which
    # the service sets to the repository root. (Seen live both ways.)
    "PWD": "",
    # Nothing from the repository: without it its AGENTS.md (or CLAUDE.md,
    # CONTEXT.md) goes into the system prompt, so a repository could steer its
    # own commit message, its opencode.json and .opencode/ directories load
    # (providers, MCP servers, instructions), and opencode writes a "$schema"
    # line into an opencode.json that lacks one, a change in the user's
    # worktree. (Seen live both ways.) The user's global config still applies.
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
})

COMMIT_ARGS: Final = (
    # One prompt, no TUI. The prompt is read from stdin to EOF (no positional
    # message words, so the message is exactly stdin); an empty stdin is
    # exit 1, never a wait.
    "run",
    # Only disables external plugins; kept because the spec asks for it and
    # no plugin should see the prompt. It denies no tool and skips no config.
    "--pure",
    # One JSON event per line on stdout; everything else goes to stderr.
    "--format", "json",
    # The agent COMMIT_CONFIG defines. An agent that does not exist only
    # warns and falls back to `build`, which has tools: the two travel together.
    "--agent", AGENT,
    # Without a title `run` makes a second model call, with the whole prompt,
    # to name the session.
    "--title", "clanker commit message",
)
# Start-up took up to ~40 s to the first request on two loaded cores, and
# opencode's own retries (5, backing off to 30 s) end a refused provider after
# about 78 s: it may still be retrying when clanker's inference ceiling ends it.

_SIGN_IN: Final = ("sign in to the model's provider with `opencode auth login`, or check "
                   "the key it uses")

# A step's finish reasons that mean the turn failed, rather than a non-answer.
_FAILED: Final = frozenset({"error"})


_FAILURES: Final = CommitFailures("opencode")
_fail = _FAILURES.fail
_parse_failure = _FAILURES.parse


@define
class _Step:
    start_id: str
    texts: dict[str, str] = field(factory=dict)  # part id -> its last text, first-seen order
    kinds: set[str] = field(factory=set)
    reason: object = None
    closed: bool = False


def _events(stdout: str) -> Iterator[dict[str, Any]]:
    """Yield every typed event; anything else on stdout is malformed output."""
    return typed_events(stdout, harness="opencode")


def _part(event: Mapping[str, Any]) -> dict[str, Any]:
    part = event.get("part")
    if not isinstance(part, dict) or not isinstance(part.get("id"), str):
        raise _parse_failure(f"{event['type']} without a part that has an id")
    return part


def _error_detail(event: Mapping[str, Any]) -> str:
    """Name the error safely: its class name and HTTP status, never its message."""
    error = event.get("error")
    name = error.get("name") if isinstance(error, dict) else None
    data = error.get("data") if isinstance(error, dict) else None
    status = http_status(data.get("statusCode")) if isinstance(data, dict) else None
    # The message and response body are provider text (they can quote the
    # request or a URL): they stay out. The error class names are opencode's.
    text = "opencode reported an error"
    if isinstance(name, str) and name.isascii() and name.isalnum() and len(name) <= 40:
        text += f" ({name}"
        if status is not None:
            text += f", HTTP {status}"
        text += ")"
    return text


def _credentials_refused(event: Mapping[str, Any]) -> bool:
    """Say whether an ``error`` event is opencode's missing- or refused-credentials error."""
    error = event.get("error")
    if not isinstance(error, dict):
        return False
    data = error.get("data")
    status = http_status(data.get("statusCode")) if isinstance(data, dict) else None
    name = error.get("name")
    return name == "ProviderAuthError" or (name == "APIError" and status == 401)


def _steps(stdout: str) -> tuple[list[_Step], str | None, bool]:
    """Return the steps in order, the first error event's safe description, and whether
    that error says the credentials are missing or refused."""
    steps: list[_Step] = []
    error: str | None = None
    signed_out = False
    for event in _events(stdout):
        kind = event["type"]
        if kind == "error":
            if error is None:
                error = _error_detail(event)
                signed_out = _credentials_refused(event)
            continue
        if kind not in ("step_start", "text", "step_finish", "reasoning", "tool_use"):
            continue  # event types opencode may add
        part = _part(event)
        current = steps[-1] if steps else None
        if kind == "step_start":
            if current is None or current.closed or current.start_id != part["id"]:
                steps.append(_Step(start_id=part["id"]))
            continue  # the same step_start again changes nothing
        if current is None or current.closed:
            if kind in ("reasoning", "tool_use"):
                continue  # never content, wherever opencode prints them
            raise _parse_failure(f"{kind} outside a step")
        current.kinds.add(kind)
        if kind == "step_finish":
            current.reason, current.closed = part.get("reason"), True
        elif kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise _parse_failure("a text part without text")
            if part.get("synthetic") is True or part.get("ignored") is True:
                continue  # opencode's own notes, not the model's
            current.texts[part["id"]] = text  # a part printed again: its last version
    return steps, error, signed_out


def parse_commit_stream(stdout: str) -> str:
    """Return the answer in ``opencode run --format json`` output, or raise a typed failure.

    The first ``error`` event decides: ``unauthenticated`` when it is a
    ``ProviderAuthError`` or an ``APIError`` with ``statusCode`` 401, else
    ``command-failed``. Otherwise the last step must
    be closed by a ``step_finish`` whose ``reason`` is ``stop`` (``error``
    is ``command-failed``; an open step, ``length``, ``tool-calls``,
    ``content-filter`` or anything else is ``parse-failure``). The answer is
    that step's text parts (each in its last printed version; synthetic or
    ignored parts and blank ones skipped) joined with newlines, as given.
    Earlier steps, reasoning, tool output and stderr are never the answer.
    """
    steps, error, signed_out = _steps(stdout)
    if signed_out:
        raise _fail(ErrorKind.UNAUTHENTICATED, _SIGN_IN)
    if error is not None:
        raise _fail(ErrorKind.COMMAND_FAILED, error)
    if not steps:
        raise _parse_failure("no answer: opencode printed no step")
    last = steps[-1]
    if not last.closed:
        raise _parse_failure("incomplete: the last step did not finish")
    reason = last.reason
    if reason in _FAILED:
        raise _fail(ErrorKind.COMMAND_FAILED, "the last step finished with an error")
    if reason == "length":
        raise _parse_failure("the answer was cut off at the output limit")
    if reason == "tool-calls":
        raise _parse_failure("the last step is only a tool call")
    if reason != "stop":
        known = reason if reason in ("content-filter", "unknown") else "no known reason"
        raise _parse_failure(f"the last step did not stop normally ({known})")
    answer = "\n".join(text for text in last.texts.values() if text.strip())
    if not answer:
        if "reasoning" in last.kinds:
            raise _parse_failure("the answer holds only reasoning, no text")
        if "tool_use" in last.kinds:
            raise _parse_failure("the answer is only a tool call")
        raise _parse_failure("the answer is empty")
    return text_answer(answer, harness="opencode")


class OpenCodeCommit(HarnessCommit):
    """``opencode run --pure --format json --agent clanker-commit ...`` with the prompt on stdin."""

    # stdin is read to EOF before start-up; the executor writes it all and
    # closes stdin (a pipe left open makes opencode wait silently).
    command = "opencode"
    args = COMMIT_ARGS
    # One token: the value stays the model whatever it looks like.
    # opencode splits it at the first `/` into provider and model.
    model_bound = True
    env = COMMIT_ENV
    # 1: an error event (missing or refused credentials included), or a
    # start-up error (no message, a bad flag: the help on stderr); 143: a
    # signal (SIGINT is ignored). The stream says whether a turn failed;
    # stderr is never read.
    parse_stream = staticmethod(parse_commit_stream)

implementation = OpenCodeCommit
