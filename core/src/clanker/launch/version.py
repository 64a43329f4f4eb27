"""Reading a version number out of ``<harness> --version`` output."""

from __future__ import annotations

import re

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandResult

__all__ = ["parse_version_output"]

_PRINTABLE_VERSION = re.compile(r"[0-9][0-9A-Za-z.+_-]{0,63}")


def parse_version_output(
    result: CommandResult,
    pattern: re.Pattern[str],
    *,
    harness: str,
    include_stderr: bool = False,
) -> str:
    """Return group 1 of the first match of ``pattern`` in stdout.

    ``include_stderr`` also searches stderr (after stdout), for CLIs that
    print their version there when stdout is not a terminal.

    A non-zero exit is ``command-failed``; output without a match (or a
    match that is not a plausible version token) is ``parse-failure``.
    """
    if result.exit_code != 0:
        raise HarnessCapabilityError(
            ErrorKind.COMMAND_FAILED, f"--version exited {result.exit_code}", harness=harness
        )
    text = result.stdout + ("\n" + result.stderr if include_stderr else "")
    match = pattern.search(text)
    version = match.group(1) if match else None
    if version is None or _PRINTABLE_VERSION.fullmatch(version) is None:
        raise HarnessCapabilityError(
            ErrorKind.PARSE_FAILURE, "unrecognized --version output", harness=harness
        )
    return version
