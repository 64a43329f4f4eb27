"""Antigravity command lines: ``agy [--model=ID] [--conversation=UUID] FLAGS``."""

from __future__ import annotations

import re
from typing import Final

from clanker.launch.capability import (
    LOWERCASE_UUID,
    LaunchRequest,
    SessionTarget,
    checked_session_id,
)
from clanker.launch.harness import HarnessLaunch

__all__ = ["AgyLaunch"]

# The whole stdout must be one `X.Y.Z` or `vX.Y.Z` line: the spec's usage probe
# sends `/usage` only to versions it can read exactly, so anything noisier,
# a prerelease included, is not a version here either.
_VERSION: Final = re.compile(r"\Av?(\d+\.\d+\.\d+)\n?\Z")


class AgyLaunch(HarnessLaunch):
    """agy's TUI in the working directory; conversations are scoped to it."""

    # `-v` is not a version flag in every build ("flag needs an argument").
    executable = "agy"
    version = _VERSION
    # agy parses flags like Go's `flag` package: a value-taking flag given as
    # two tokens takes the next token whatever it is, so values are bound with "=".
    # The user's flags come last, in order: the first non-flag word ends agy's
    # flag parsing.
    model_bound = True

    def session_args(self, request: LaunchRequest, session: SessionTarget) -> list[str]:
        # Resume, and the emulated local fork, which continues the same
        # conversation: agy has no fork flag.
        return [f"--conversation={session.native_id}"]

    def validate_session_id(self, raw: str) -> str:
        # A conversation id is a UUID, also the name of its store file
        # (`conversations/<uuid>.db`); clanker passes the canonical lowercase form.
        normalized = raw.lower() if raw.isascii() else raw
        return checked_session_id(
            normalized, LOWERCASE_UUID,
            "an Antigravity conversation id is a UUID such as "
            "d6b9f466-8d4d-4b93-adbe-9bdb0b6df587",
        )


implementation = AgyLaunch
