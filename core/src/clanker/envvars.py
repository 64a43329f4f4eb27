"""clanker's own environment variables, and which of them carry authority.

Every ``CLANKER_*`` variable is treated as a credential unless it is one of the
configuration switches listed here. Failing closed this way means a credential
family added later is stripped from inherited environments without anyone
having to remember to list it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Final

__all__ = [
    "CONFIGURATION_VARIABLES",
    "ENV_NAME_PATTERN",
    "host_environ",
    "is_credential_variable",
    "strip_credentials",
]

PREFIX: Final = "CLANKER_"

CONFIGURATION_VARIABLES: Final = frozenset(
    {
        "CLANKER_HOME",  # relocates every clanker directory (tests, scripts)
        "CLANKER_LOAD_PLUGINS",  # comma-separated allow-list of plugins
        "CLANKER_DISABLE_PLUGINS",  # comma-separated deny-list of plugins
        "CLANKER_TRACE_HOOKS",  # log every hook call to stderr
        "CLANKER_DEBUG",  # show tracebacks for internal errors
        "CLANKER_DEBUG_ATTENTION",  # log each attention decision (safe metadata only)
    }
)

ENV_NAME_PATTERN: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_credential_variable(name: str) -> bool:
    """Say whether ``name`` is a clanker credential (case-insensitive, as on Windows)."""
    upper = name.upper()
    return upper.startswith(PREFIX) and upper not in CONFIGURATION_VARIABLES


def strip_credentials(environ: Mapping[str, str]) -> dict[str, str]:
    """Return a copy of ``environ`` without any inherited clanker credential."""
    return {k: v for k, v in environ.items() if not is_credential_variable(k)}


def host_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without clanker credentials, with ``HOME`` filled in as a program would.

    A harness takes a non-empty ``$HOME`` and otherwise the password
    database (Rust's ``home_dir``, Node's ``os.homedir``): resolving it once
    here is what lets every provider read ``HOME`` and nothing else. (Here,
    with the standard library alone, so the coder's early start builds the
    very environment the local environment does.)
    """
    env = strip_credentials(environ)
    if not env.get("HOME"):
        import pwd

        try:
            home = pwd.getpwuid(os.getuid()).pw_dir
        except (KeyError, OSError):
            home = ""
        if home:
            env["HOME"] = home
        else:
            env.pop("HOME", None)
    return env
