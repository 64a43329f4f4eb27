"""Claude Code command lines: ``claude [--model MODEL] [--resume ID [--fork-session]] FLAGS``."""

from __future__ import annotations

import posixpath
import re
from typing import Final

from clanker.launch.capability import (
    LOWERCASE_UUID,
    LaunchOperation,
    LaunchRequest,
    SessionTarget,
)
from clanker.launch.harness import HarnessLaunch

__all__ = ["ClaudeLaunch"]

# Lowercase only: Claude Code 2.1.197 answers an uppercase copy of an existing
# id with "No conversation found". `--resume` also takes a title or search
# term; clanker never passes one, so a lookalike title cannot pick a session.
_SESSION_ID: Final = LOWERCASE_UUID
_VERSION: Final = re.compile(r"^(\d+\.\d+\.\d+\S*) \(Claude Code\)$", re.MULTILINE)


class ClaudeLaunch(HarnessLaunch):
    """Claude Code's interactive session; resume and fork are top-level options."""

    executable = "claude"
    session_id = _SESSION_ID
    session_id_problem = (
        "a Claude Code session id is a lowercase UUID such as "
        "2bd84788-1866-4763-ad83-f2741628502f"
    )
    version = _VERSION
    # The inherited build puts clanker's options first: user options such as
    # `--add-dir <dirs...>` are variadic and would swallow any word that followed them.

    def session_args(self, request: LaunchRequest, session: SessionTarget) -> list[str]:
        args = ["--resume", self._resume_target(session)]
        if request.operation is LaunchOperation.FORK:
            args.append("--fork-session")
        return args

    @staticmethod
    def _resume_target(session: SessionTarget) -> str:
        path = session.store_path
        # By id, Claude only finds sessions of the cwd's project (and its git
        # worktrees); the transcript path works from any directory. Only an
        # absolute path: `--resume` takes an optional value, so a word that
        # starts with "-" would be read as another option.
        if path is not None and posixpath.isabs(path):
            return path
        return session.native_id


implementation = ClaudeLaunch
