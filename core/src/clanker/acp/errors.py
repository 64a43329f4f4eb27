"""How a coder turn can end badly, each with its own exit code (docs/exit-codes.md)."""

from __future__ import annotations

import enum
from typing import Final

from clanker import errors

__all__ = ["CoderError", "CoderFailure"]


class CoderFailure(enum.StrEnum):
    """Why a turn did not end with ``end_turn``; the values appear in ``--json``."""

    STOPPED = "stopped"
    """The agent stopped short: ``refusal``, ``max_tokens`` or ``max_turn_requests``."""
    TURN_FAILED = "turn-failed"
    """The agent died mid-turn, or answered the prompt with an error."""
    USAGE_LIMIT = "usage-limit"
    """The agent's provider refused for a usage limit (the reset time, when it said one)."""
    UNAUTHENTICATED = "unauthenticated"
    """The agent answered the prompt that it needs signing in (ACP ``auth_required``)."""
    RESUME_FAILED = "resume-failed"
    """Neither ``session/resume`` nor ``session/load`` continued the session asked for."""
    REFUSED = "refused"
    """A permission request was refused because nobody could be asked."""
    NO_TRANSCRIPT = "no-transcript"
    """``--show``: there is no transcript with that id."""
    SILENT = "silent"
    """The agent sent nothing for the turn's idle bound; clanker cancelled the turn."""
    NO_KEYRING = "no-keyring"
    """An agent secret is needed but keyring has no usable OS credential store here."""


EXIT_CODES: Final[dict[CoderFailure, int]] = {
    CoderFailure.STOPPED: errors.EXIT_CODER_STOPPED,
    CoderFailure.TURN_FAILED: errors.EXIT_CODER_TURN_FAILED,
    CoderFailure.USAGE_LIMIT: errors.EXIT_CODER_USAGE_LIMIT,
    CoderFailure.UNAUTHENTICATED: errors.EXIT_CODES[errors.ErrorKind.UNAUTHENTICATED],
    CoderFailure.RESUME_FAILED: errors.EXIT_CODER_RESUME_FAILED,
    CoderFailure.REFUSED: errors.EXIT_CODER_REFUSED,
    CoderFailure.NO_TRANSCRIPT: errors.EXIT_CODER_NO_TRANSCRIPT,
    CoderFailure.SILENT: errors.EXIT_CODER_SILENT,
    CoderFailure.NO_KEYRING: errors.EXIT_CODER_NO_KEYRING,
}


class CoderError(Exception):
    """A coder session or turn failed; ``message`` is safe to show (no agent stderr)."""

    def __init__(self, failure: CoderFailure, message: str) -> None:
        self.failure = CoderFailure(failure)
        self.message = message
        super().__init__(message)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.failure]
