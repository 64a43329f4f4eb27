"""Pi commit messages: ``pi --print --mode json ...``, the prompt on stdin.

Verified against pi 0.73.1 (docs/harnesses/pi.md, "Commit messages";
fixtures in tests/fixtures/pi/commit/). Pi's JSON mode prints one event per
line on stdout: a ``session`` header, then agent events. The answer is the
last assistant ``message_end``: pi re-prompts after a tool call and retries
after a failed request, and each attempt ends its own message. JSON mode
exits 0 even when the turn failed, so the event stream, not the exit code,
says whether there is an answer.
"""

from __future__ import annotations

from typing import Final

from clanker.commit.capability import (
    CommitFailures,
    HarnessCommit,
    events_after_header,
    last_turn,
    stopped_answer,
)
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandResult

__all__ = ["COMMIT_ARGS", "PiCommit", "parse_commit_stream"]

COMMIT_ARGS: Final = (
    # Print mode: one prompt, then exit; never the TUI, never a question on
    # the terminal. No value follows it: pi takes the next token as a prompt
    # unless it starts with `-`.
    "--print",
    # One JSON event per line on stdout (two tokens: `--mode=json` is an
    # unknown option). Everything else pi prints goes to stderr.
    "--mode", "json",
    # An in-memory session: no session file, and no "session found in another
    # project" question. With it, pi wrote nothing but an empty auth.json.
    "--no-session",
    # No tools at all, built-in or extension: the request carries no `tools`,
    # and a tool call the model makes anyway is answered "Tool ... not found".
    "--no-tools",
    # No extensions, skills or prompt templates: nothing loaded from the user's
    # or the repository's pi directories can run or rewrite the prompt.
    "--no-extensions",
    "--no-skills",
    "--no-prompt-templates",
    # Without it pi inlines the repository's AGENTS.md / CLAUDE.md into the
    # system prompt, and a repository could steer its own commit message.
    "--no-context-files",
    # No start-up network work (version check, tool downloads, package
    # installs); the model request itself still goes out.
    "--offline",
    # In JSON mode every `message_update` repeats the whole partial message
    # twice, so stdout grows with the square of the answer: 4,000 characters
    # of reasoning made 5.1 MB, past clanker's 1 MiB stream cap. A commit
    # message without reasoning stays far below it (140 characters: 17 KB).
    # This also overrides a `:<level>` suffix on the model. If a run still
    # overflows, the executor's output-limit failure stands.
    "--thinking", "off",
)
# pi itself is bounded by its retry policy (3 retries, 2/4/8 s) and the
# provider's request timeout; clanker's inference ceiling is the backstop.

_SKIP: Final = ('{"type":"message_update"',)
"""message_update partials: large, racy, never the answer (passed over unread)."""
_SIGN_IN: Final = "sign in with /login in pi, or set an API key for the model's provider"


_FAILURES: Final = CommitFailures("pi")
_fail = _FAILURES.fail
_parse_failure = _FAILURES.parse


def _header_only(stdout: str) -> bool:
    """Say whether stdout is exactly one ``session`` header: pi stopped before its turn."""
    lines = [line for line in stdout.split("\n") if line.strip()]
    if len(lines) != 1:
        return False
    try:
        events = events_after_header(lines[0], harness="pi", skip=_SKIP)
    except HarnessCapabilityError:
        return False
    return not events  # the header was read, and nothing followed it


def parse_commit_stream(stdout: str) -> str:
    """Return the answer in pi's ``--mode json`` output, or raise a typed failure.

    The answer is the last assistant ``message_end``; it counts only when the
    run ended after it (an ``agent_end`` follows it, no assistant message is
    left open) and its ``stopReason`` is ``stop``. Its text blocks are the
    answer; reasoning, tool calls and the streamed ``message_update``
    partials are never read. A failed or aborted turn is ``command-failed``;
    anything else that is not an answer is ``parse-failure``.
    """
    last = last_turn(stdout, harness="pi", skip=_SKIP).message
    stop = last.get("stopReason")
    if stop in ("error", "aborted"):
        # errorMessage is provider text (it can quote the request): it stays out.
        raise _fail(ErrorKind.COMMAND_FAILED, f"the turn ended with stopReason {stop}")
    return stopped_answer(last, harness="pi")


class PiCommit(HarnessCommit):
    """``pi --print --mode json ...`` with the prompt on stdin."""

    # stdin is read to EOF before the turn starts; the executor writes it all
    # and closes stdin (a pipe left open makes pi wait silently forever).
    command = "pi"
    args = COMMIT_ARGS
    # Two tokens, last: pi rejects `--model=`, and `--model` takes the
    # next token whatever it looks like.
    model_bound = False

    def parse_output(self, result: CommandResult) -> str:
        if result.exit_code != 0:
            # 1: no credentials (the header alone), unknown model or bad option
            # (nothing on stdout); 143/129: killed.
            if result.exit_code == 1 and _header_only(result.stdout):
                raise _fail(ErrorKind.UNAUTHENTICATED, _SIGN_IN)
            raise _fail(ErrorKind.COMMAND_FAILED, f"exit status {result.exit_code}")
        return parse_commit_stream(result.stdout)

implementation = PiCommit
