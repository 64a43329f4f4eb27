"""Codex command lines: ``codex [-m MODEL] [-C DIR resume ID | -C DIR fork ID] FLAGS``."""

from __future__ import annotations

import re
from typing import Final

from clanker.launch.capability import (
    LaunchOperation,
    LaunchRequest,
    SessionTarget,
)
from clanker.launch.harness import HarnessLaunch

__all__ = ["CodexLaunch"]

# Codex looks sessions up by UUID ignoring case (an uppercase id resumed an
# existing session in 0.171.0), so both cases pass and nothing is rewritten.
# Codex also resumes by session name; clanker never does, so a lookalike name
# can never pick a conversation.
_SESSION_ID: Final = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
# stdout only: every command may print PATH-alias warnings on stderr.
_VERSION: Final = re.compile(r"^codex-cli (\d+\.\d+\.\d+\S*)$", re.MULTILINE)


class CodexLaunch(HarnessLaunch):
    """Codex's TUI, fresh or through its ``resume`` / ``fork`` subcommands."""

    executable = "codex"
    session_id = _SESSION_ID
    session_id_problem = "a Codex session id is a UUID such as 01a22b86-c7d0-79e0-b3c0-03c56f3ce14a"
    version = _VERSION
    # Top level, before the subcommand: a `-m` the user puts after
    # `resume ID` is a subcommand-level option and wins over ours.
    model_flag = "-m"

    def session_args(self, request: LaunchRequest, session: SessionTarget) -> list[str]:
        args = []
        if request.cwd is not None:
            # Without -C, a TUI resumed outside the session's latest cwd
            # asks which directory to use and defaults to the recorded
            # one, even when that is gone; with it, Codex continues in the
            # launch directory. Top level, so a user's -C after the id wins.
            args += ["-C", request.cwd]
        # Codex resumes by id only; it refuses a rollout path.
        subcommand = "fork" if request.operation is LaunchOperation.FORK else "resume"
        return [*args, subcommand, session.native_id]


implementation = CodexLaunch
