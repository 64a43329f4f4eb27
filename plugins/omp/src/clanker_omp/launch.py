"""Oh My Pi command lines: ``omp launch [--model SELECTOR] [--resume S | --fork S] FLAGS``."""

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

__all__ = ["OmpLaunch", "session_argument"]

# omp 18.2.3 mints UUIDv7 ids. Any canonical lowercase UUID is accepted, so
# sessions of older versions (whose id scheme was not checked) are not refused.
_SESSION_ID: Final = LOWERCASE_UUID
_VERSION: Final = re.compile(r"^omp/(\d+\.\d+\.\d+[0-9A-Za-z.+-]*)", re.MULTILINE)
# `omp --version` takes 1-2 s (bun start-up); a busy host doubles it.
_VERSION_TIMEOUT: Final = 15.0


def session_argument(session: SessionTarget) -> str:
    """Return what ``--resume`` / ``--fork`` should name: the trusted file when known.

    A bare id is a case-insensitive prefix that omp also matches against file
    names and then searches in every project; a path names one file.
    """
    return session.store_path or session.native_id


class OmpLaunch(HarnessLaunch):
    """omp's launch: ``omp launch`` is the interactive TUI in the current directory."""

    executable = "omp"
    session_id = _SESSION_ID
    session_id_problem = (
        "an Oh My Pi session id is a lowercase UUID such as "
        "01a22b8c-ca4c-72fc-ac3b-8d1148698ba1"
    )
    version = _VERSION
    version_timeout = _VERSION_TIMEOUT
    # `launch` is what bare `omp` runs. Naming it keeps the command a launch:
    # otherwise omp hoists the first positional that is a subcommand word
    # (`models`, `update`, ...) out of the user's flags and drops --resume.
    base_args = ("launch",)

    def session_args(self, request: LaunchRequest, session: SessionTarget) -> list[str]:
        flag = "--fork" if request.operation is LaunchOperation.FORK else "--resume"
        return [flag, session_argument(session)]


implementation = OmpLaunch
