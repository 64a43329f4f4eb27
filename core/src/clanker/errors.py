"""The one error type of every harness capability, and the CLI's exit codes.

An operational failure is never turned into an absent capability: absence means
"this harness cannot do that", a :class:`HarnessCapabilityError` means "it can,
but this attempt failed, and here is the category".
"""

from __future__ import annotations

import enum
from typing import Final

__all__ = [
    "EXIT_ACCOUNT",
    "EXIT_ACCOUNT_STORE",
    "EXIT_BUSY",
    "EXIT_CHECKOUT_DIRTY",
    "EXIT_CHECKOUT_REFUSED",
    "EXIT_CODER_NO_KEYRING",
    "EXIT_CODER_NO_TRANSCRIPT",
    "EXIT_CODER_REFUSED",
    "EXIT_CODER_RESUME_FAILED",
    "EXIT_CODER_SILENT",
    "EXIT_CODER_STOPPED",
    "EXIT_CODER_TURN_FAILED",
    "EXIT_CODER_USAGE_LIMIT",
    "EXIT_CODES",
    "EXIT_DECK_UNUSABLE",
    "EXIT_GRID_UNAVAILABLE",
    "EXIT_HOST",
    "EXIT_HOST_UNREACHABLE",
    "EXIT_IGNORED_ONLY",
    "EXIT_INTERNAL",
    "EXIT_NOTHING_TO_COMMIT",
    "EXIT_NOT_A_REPOSITORY",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_REMOVAL_FAILED",
    "EXIT_TMUX_FAILED",
    "EXIT_TMUX_UNAVAILABLE",
    "EXIT_USAGE",
    "ErrorKind",
    "HarnessCapabilityError",
]


class ErrorKind(enum.StrEnum):
    """Why a capability call failed. The values are stable: they appear in ``--json``."""

    UNSUPPORTED = "unsupported"
    BINARY_UNAVAILABLE = "binary-unavailable"
    NOT_CONFIGURED = "not-configured"
    UNAUTHENTICATED = "unauthenticated"
    COMMAND_FAILED = "command-failed"
    TIMEOUT = "timeout"
    OUTPUT_LIMIT = "output-limit"
    INPUT_LIMIT = "input-limit"
    ABORTED = "aborted"
    PARSE_FAILURE = "parse-failure"
    STORAGE_CHANGED = "storage-changed"
    TRANSPORT_FAILURE = "transport-failure"


# One fixed, safe sentence per kind. Detail is appended by the caller and must
# itself be safe: never raw vendor stderr, never a credential.
_MESSAGES: Final[dict[ErrorKind, str]] = {
    ErrorKind.UNSUPPORTED: "this harness does not support that operation",
    ErrorKind.BINARY_UNAVAILABLE: "the harness executable was not found",
    ErrorKind.NOT_CONFIGURED: "the harness is not configured for this",
    ErrorKind.UNAUTHENTICATED: "the harness is not signed in",
    ErrorKind.COMMAND_FAILED: "the harness command failed",
    ErrorKind.TIMEOUT: "the harness command did not finish in time",
    ErrorKind.OUTPUT_LIMIT: "the harness command produced more output than allowed",
    ErrorKind.INPUT_LIMIT: "more input than allowed was sent to the harness command",
    ErrorKind.ABORTED: "the operation was cancelled",
    ErrorKind.PARSE_FAILURE: "the harness output was not in the expected format",
    ErrorKind.STORAGE_CHANGED: "the harness storage is not in a format this version understands",
    ErrorKind.TRANSPORT_FAILURE: "the connection to the harness host failed",
}

EXIT_OK: Final = 0
EXIT_INTERNAL: Final = 1
EXIT_USAGE: Final = 2
EXIT_NOT_FOUND: Final = 14  # a selected session is not (or no longer) in its harness's history
EXIT_NOT_A_REPOSITORY: Final = 15  # commit-message outside a git work tree
EXIT_NOTHING_TO_COMMIT: Final = 16  # commit-message with a clean work tree
EXIT_BUSY: Final = 17  # another commit-message request for the same repository is running
EXIT_GRID_UNAVAILABLE: Final = 18  # the grid is not running, cannot start, or is unsafe to use
EXIT_CHECKOUT_REFUSED: Final = 23  # `worktree`: the checkout cannot be created or completed so
EXIT_CHECKOUT_DIRTY: Final = 24  # `worktree complete`: changes block it; nothing was removed
EXIT_IGNORED_ONLY: Final = 25  # `worktree complete`: only ignored files; --discard-ignored
EXIT_REMOVAL_FAILED: Final = 26  # `worktree`: removal failed or was not verified; it is kept
EXIT_ACCOUNT: Final = 27  # the account cannot be used or changed as asked
EXIT_ACCOUNT_STORE: Final = 28  # the account settings could not be read or saved
EXIT_CODER_STOPPED: Final = 32  # `coder`: the turn stopped short (refusal, max tokens or turns)
EXIT_CODER_TURN_FAILED: Final = 33  # `coder`: the agent died mid-turn or answered with an error
EXIT_CODER_USAGE_LIMIT: Final = 34  # `coder`: the agent's provider refused for a usage limit
EXIT_CODER_RESUME_FAILED: Final = 35  # `coder --resume`: no session/resume or session/load
EXIT_CODER_REFUSED: Final = 36  # `coder`: a permission request was refused: nobody could be asked
EXIT_CODER_NO_TRANSCRIPT: Final = 37  # `coder --show`: no transcript with that id
EXIT_CODER_SILENT: Final = 38  # `coder`: the agent sent nothing for the idle bound
EXIT_CODER_NO_KEYRING: Final = 39  # `coder`: no OS credential store for an agent secret
EXIT_HOST: Final = 40  # `hosts`: unknown, malformed or taken host name, or unusable hosts file
EXIT_HOST_UNREACHABLE: Final = 41  # `hosts check`: the host could not be reached or used
EXIT_TMUX_UNAVAILABLE: Final = 45  # `--tmux`, `deck`: no tmux executable on PATH
EXIT_TMUX_FAILED: Final = 46  # `--tmux`: tmux refused or failed to open the window
EXIT_DECK_UNUSABLE: Final = 47  # `deck`: no interactive terminal to draw on

# The documented, stable table (docs/exit-codes.md). Never renumber an entry.
EXIT_CODES: Final[dict[ErrorKind, int]] = {
    ErrorKind.UNSUPPORTED: 3,
    ErrorKind.BINARY_UNAVAILABLE: 4,
    ErrorKind.NOT_CONFIGURED: 5,
    ErrorKind.UNAUTHENTICATED: 6,
    ErrorKind.COMMAND_FAILED: 7,
    ErrorKind.TIMEOUT: 8,
    ErrorKind.OUTPUT_LIMIT: 9,
    ErrorKind.INPUT_LIMIT: 10,
    ErrorKind.PARSE_FAILURE: 11,
    ErrorKind.STORAGE_CHANGED: 12,
    ErrorKind.TRANSPORT_FAILURE: 13,
    ErrorKind.ABORTED: 130,
}


class HarnessCapabilityError(Exception):
    """A capability call failed, with a category a caller can act on.

    ``detail`` must be safe to show a person (no vendor stderr, no secrets);
    the original exception is kept as ``__cause__`` for debugging only.
    ``retry_after`` (seconds) is set when the harness said when to try again.
    """

    def __init__(
        self,
        kind: ErrorKind,
        detail: str | None = None,
        *,
        harness: str | None = None,
        retry_after: float | None = None,
        cause: BaseException | None = None,
    ) -> None:
        self.kind = ErrorKind(kind)
        self.detail = detail
        self.harness = harness
        self.retry_after = retry_after
        super().__init__(self.message)
        if cause is not None:
            self.__cause__ = cause

    @property
    def message(self) -> str:
        """The fixed sentence for the kind, plus the harness and safe detail."""
        text = _MESSAGES[self.kind]
        if self.harness:
            text = f"{self.harness}: {text}"
        if self.detail:
            text = f"{text} ({self.detail})"
        return text

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.kind]

    def with_harness(self, harness: str) -> HarnessCapabilityError:
        """Return this error attributed to ``harness`` (cause and retry kept)."""
        if self.harness == harness:
            return self
        clone = HarnessCapabilityError(
            self.kind, self.detail, harness=harness, retry_after=self.retry_after
        )
        clone.__cause__ = self.__cause__ if self.__cause__ is not None else self
        return clone

    def __repr__(self) -> str:
        kind, detail, harness = self.kind.value, self.detail, self.harness
        return f"HarnessCapabilityError({kind!r}, {detail!r}, harness={harness!r})"
