"""Pi command lines: ``pi [--model PROVIDER/ID] [--session S | --fork S] FLAGS``."""

from __future__ import annotations

import re
from typing import Final

from clanker.launch.capability import (
    LOWERCASE_UUID,
    LaunchOperation,
    LaunchRequest,
    SessionTarget,
)
from clanker.launch.harness import HarnessLaunch

__all__ = ["PiLaunch", "session_argument"]

# Pi writes UUIDv7 ids since 0.67.1 and random (v4) UUIDs before; both stay
# resumable, so any canonical lowercase UUID is accepted. Pi matches ids
# case-sensitively, so an upper-case spelling would never find the session.
_SESSION_ID: Final = LOWERCASE_UUID
# `pi --version` prints the bare version; with stdin not a terminal it goes to stderr.
_VERSION: Final = re.compile(r"^(\d+\.\d+\.\d+[0-9A-Za-z.+-]*)[ \t]*$", re.MULTILINE)
# Every pi start takes 2-4 s, `--version` included.
_VERSION_TIMEOUT: Final = 15.0


def session_argument(session: SessionTarget) -> str:
    """Return what ``--session`` / ``--fork`` should name: the trusted file when known.

    A bare id is a prefix that pi also looks up in every other project, and a
    match there makes pi ask on stdin whether to fork it; a path names one file.
    """
    return session.store_path or session.native_id


class PiLaunch(HarnessLaunch):
    """Pi's launch: the bare command is the interactive TUI in the current directory."""

    executable = "pi"
    session_id = _SESSION_ID
    session_id_problem = ("a Pi session id is a lowercase UUID such as "
                          "01a22b88-3feb-75b8-aeec-e180f9f7f187")
    version = _VERSION
    version_timeout = _VERSION_TIMEOUT
    version_on_stderr = True
    # The inherited build gives the model as two tokens (pi rejects
    # `--model=...` as an unknown option, and has no `-m`) and the user's flags
    # last, so an unknown user flag can only swallow another user token as its value.

    def session_args(self, request: LaunchRequest, session: SessionTarget) -> list[str]:
        flag = "--fork" if request.operation is LaunchOperation.FORK else "--session"
        return [flag, session_argument(session)]


implementation = PiLaunch
