"""What a harness's exit status means for its commit answer.

A zero status is no proof (several harnesses exit 0 after a failed turn), so
the answer always comes from the structured output. A non-zero status is a
failure: the output says which one when it reports a failed turn; otherwise
the status itself is the detail. Standard error is never read: it is the
harness's own text, and clanker shows none of it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from clanker.commit.failures import CommitFailures
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandResult

__all__ = ["answer_by_exit"]


def answer_by_exit(
    result: CommandResult,
    parse: Callable[[str], str],
    *,
    harness: str,
    reported: Collection[ErrorKind] = (ErrorKind.COMMAND_FAILED, ErrorKind.UNAUTHENTICATED),
) -> str:
    """Return ``parse(stdout)`` of a zero exit; for another status raise the output's
    own failure when it is one of ``reported`` (by default a failed turn, and a
    harness that says it is signed out), else ``command-failed`` naming the status.
    """
    if result.exit_code == 0:
        return parse(result.stdout)
    try:
        parse(result.stdout)
    except HarnessCapabilityError as exc:
        if exc.kind in reported:
            raise
    raise CommitFailures(harness).fail(ErrorKind.COMMAND_FAILED, f"exit status {result.exit_code}")
