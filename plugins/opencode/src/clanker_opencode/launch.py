"""OpenCode command lines: ``opencode [-m PROVIDER/MODEL] [-s ID [--fork]] FLAGS``."""

from __future__ import annotations

import re
from typing import Final

from clanker.launch.capability import (
    LaunchOperation,
    LaunchRequest,
    SessionTarget,
)
from clanker.launch.harness import HarnessLaunch

__all__ = ["OpenCodeLaunch"]

# What opencode generates: "ses_", 12 lowercase hex digits (an inverted time
# stamp), 14 characters of [0-9A-Za-z]. opencode itself only checks the "ses"
# prefix, and `opencode import` keeps foreign ids; clanker resumes the ids
# opencode mints, so nothing else ever reaches `-s`.
_SESSION_ID: Final = re.compile(r"ses_[0-9a-f]{12}[0-9A-Za-z]{14}")
# stdout is the bare version and nothing else.
_VERSION: Final = re.compile(r"\A\s*(\d+\.\d+\.\d+[0-9A-Za-z.+-]*)\s*\Z")
# `opencode --version` takes about 2 s (a 185 MB Bun binary); a busy host doubles it.
_VERSION_TIMEOUT: Final = 15.0


class OpenCodeLaunch(HarnessLaunch):
    """OpenCode's TUI: the default command, in the working directory clanker starts it in."""

    executable = "opencode"
    session_id = _SESSION_ID
    session_id_problem = "an OpenCode session id looks like ses_dd477e2caffeRx4w8c0S7Feig0"
    version = _VERSION
    version_timeout = _VERSION_TIMEOUT
    # No positional project (no base_args): opencode resolves a relative one
    # against $PWD, not against its working directory, and bare `opencode`
    # already uses that directory. A resumed or forked session runs in the
    # directory opencode recorded for it, whatever the working directory is.
    # The user's flags come last: one unknown flag makes opencode print its
    # help and exit 1.
    model_flag = "-m"

    def session_args(self, request: LaunchRequest, session: SessionTarget) -> list[str]:
        # opencode takes an id only, never a path, so store_path is not used.
        if request.operation is LaunchOperation.FORK:
            return ["-s", session.native_id, "--fork"]
        return ["-s", session.native_id]


implementation = OpenCodeLaunch
