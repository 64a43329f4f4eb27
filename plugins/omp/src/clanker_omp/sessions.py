"""Oh My Pi's history: JSON Lines session files, in its managed and explicit session dirs.

Verified against omp 18.2.3 (docs/harnesses/omp.md, "Sessions"). Layout::

    <sessions dir>/<project dir>/<timestamp>_<uuid>.jsonl     (managed)
    <session dir>/<timestamp>_<uuid>.jsonl                    (explicit, flat)

This module says where the store is (profiles, ``XDG_DATA_HOME``, the explicit
dir); how the files become sessions, and which of them are Pi's where the two
stores meet, is :mod:`clanker_omp.summaries`'s, imported with the first scan:
knowing where the store is (all a listing over empty stores asks) reads nothing.
"""

from __future__ import annotations

import posixpath
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from clanker import piplaces
from clanker.sessions.capability import home_directory

if TYPE_CHECKING:
    from clanker.sessions.capability import SessionScan, SessionsContext
    from clanker.stores import HostFiles

SessionRoot = piplaces.SessionRoot

__all__ = [
    "OmpSessions",
    "SessionRoot",
    "agent_dir",
    "profile_name",
    "session_roots",
    "sessions_dir",
]

# omp's profile names and the names it refuses (Windows device names). The patterns are
# compiled (and cached by `re`) only when a profile is named.
_PROFILE: Final = r"[a-z0-9][a-z0-9._-]{0,63}"
_RESERVED: Final = r"(?:CON|PRN|AUX|NUL|COM[0-9]|LPT[0-9])(?:\..*)?"


# -- where the store is ---------------------------------------------------------------------


def _join(*parts: str) -> str:
    # node's path.join: concatenate with "/" (an absolute later part does not
    # restart the path, unlike os.path.join), then normalize.
    return posixpath.normpath("/".join(part for part in parts if part))


def _normalize_profile(raw: str | None) -> str | None:
    """omp's ``normalizeProfileName``; ``None`` for the default or an invalid name.

    omp refuses to start with an invalid name, so no session is ever written
    under one; its dir resolver falls back to the default profile.
    """
    name = (raw or "").strip()
    if not name or name == "default" or name in (".", "..") or name.endswith("."):
        return None
    if (re.fullmatch(_PROFILE, name) is None
            or re.fullmatch(_RESERVED, name, re.IGNORECASE) is not None):
        return None
    return name


def profile_name(environ: Mapping[str, str]) -> str | None:
    """``$OMP_PROFILE`` when defined (even empty: the default), else ``$PI_PROFILE``.

    ``--profile`` is per invocation and invisible here.
    """
    raw = environ["OMP_PROFILE"] if "OMP_PROFILE" in environ else environ.get("PI_PROFILE")
    return _normalize_profile(raw)


def agent_dir(environ: Mapping[str, str]) -> tuple[str, bool] | None:
    """The agent dir and whether it is the profile's default (which XDG may relocate).

    A named profile uses ``~/<cfg>/profiles/<name>/agent`` and ignores
    ``$PI_CODING_AGENT_DIR``; otherwise that variable wins (no ``~`` expansion;
    ignored when it equals the agent dir of a ``$PI_PROFILE`` that
    ``$OMP_PROFILE`` overrode), else ``~/<cfg>/agent``, ``<cfg>`` being
    ``$PI_CONFIG_DIR`` or ``.omp``.
    """
    home = home_directory(environ)
    if home is None:
        return None
    config = environ.get("PI_CONFIG_DIR") or ".omp"
    profile = profile_name(environ)
    root = _join(home, config, "profiles", profile) if profile else _join(home, config)
    default = _join(root, "agent")
    override = None if profile else environ.get("PI_CODING_AGENT_DIR") or None
    bypassed = _normalize_profile(environ.get("PI_PROFILE"))
    if override and bypassed and override == _join(home, config, "profiles", bypassed, "agent"):
        override = None  # inherited from a parent's profile switch, not the user's choice
    if override is None:
        return default, True
    resolved = piplaces.absolute(override)
    if resolved is None:
        return None
    return resolved, resolved == default


def sessions_dir(
    environ: Mapping[str, str], files: HostFiles, *, platform: str = sys.platform
) -> Path | None:
    """Where omp files managed sessions: ``<agent dir>/sessions``, or XDG's.

    On Linux and macOS, when the agent dir is the profile's default and
    ``$XDG_DATA_HOME/omp`` exists (for a named profile:
    ``$XDG_DATA_HOME/omp/profiles/<name>``), sessions live in its ``sessions/``
    (the ``agent/`` level is dropped). omp checks that existence; so does this.
    """
    agent = agent_dir(environ)
    if agent is None:
        return None
    path, is_default = agent
    data_home = piplaces.absolute(environ.get("XDG_DATA_HOME"))
    if is_default and data_home is not None and platform in ("linux", "darwin"):
        profile = profile_name(environ)
        app = _join(data_home, "omp", "profiles", profile) if profile else _join(data_home, "omp")
        if files.stat(app) is not None:
            return Path(app) / "sessions"
    return Path(path) / "sessions"


def session_roots(
    environ: Mapping[str, str], files: HostFiles, *, platform: str = sys.platform
) -> tuple[SessionRoot, ...]:
    """The managed sessions dir and ``$PI_CODING_AGENT_SESSION_DIR`` (flat, absolute only).

    The explicit dir is where omp writes new sessions (``--session-dir`` is
    per invocation and invisible here); sessions written before stay in the
    managed dir, so history reads both.
    """
    roots: list[SessionRoot] = []
    managed = sessions_dir(environ, files, platform=platform)
    if managed is not None:
        roots.append(SessionRoot(managed, nested=True))
    explicit = piplaces.absolute(environ.get("PI_CODING_AGENT_SESSION_DIR"))
    if explicit is not None and Path(explicit) != managed:
        roots.append(SessionRoot(Path(explicit), nested=False))
    return tuple(roots)


# -- the capability -------------------------------------------------------------------------


class OmpSessions(piplaces.SessionFiles):
    """omp's session files, from the managed sessions dir and an explicit session dir."""

    # Verified 2026-11-30 with omp 18.2.3: `omp --resume <path> -p ...` from
    # another directory loads a session whose recorded cwd is gone and appends
    # to the same file (by id it refuses). Clanker resumes and forks by the
    # store path it re-found (launch.session_argument), so True holds for
    # clanker's argv only.
    resumes_without_original_directory = True

    def roots(self, environ: Mapping[str, str], files: HostFiles) -> tuple[SessionRoot, ...]:
        return session_roots(environ, files)

    def scan(self, context: SessionsContext, roots: tuple[SessionRoot, ...]) -> SessionScan:
        # The reader, imported with the first scan: finding the store never loads it.
        from clanker_omp.summaries import scan

        return scan(context, roots)


implementation = OmpSessions
