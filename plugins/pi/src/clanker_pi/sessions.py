"""Pi's history: JSON Lines session files, in every directory Pi may have written them to.

Verified against pi 0.73.1 (docs/harnesses/pi.md, "Sessions"). Layout::

    <agentDir>/sessions/--<encoded cwd>--/<timestamp>_<uuid>.jsonl   (default)
    <session dir>/<timestamp>_<uuid>.jsonl                          (explicit, flat)

This module says where the store is (with Pi's directory rules, which are
:mod:`clanker.piplaces`'s); how its files become sessions is
:mod:`clanker_pi.summaries`'s, imported with the first scan: knowing where the
store is (all a listing over empty stores asks) reads nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from clanker import piplaces

if TYPE_CHECKING:
    from clanker.sessions.capability import SessionScan, SessionsContext
    from clanker.stores import HostFiles

SessionRoot = piplaces.SessionRoot

__all__ = [
    "PiSessions",
    "SessionRoot",
    "agent_dir",
    "session_roots",
    "settings_session_dir",
]

# Below the home, where pi keeps its agent dir unless $PI_CODING_AGENT_DIR moves it.
_PI_DEFAULT_AGENT_DIR: Final = ".pi/agent"


# -- where the store is ---------------------------------------------------------------------


def agent_dir(environ: Mapping[str, str]) -> Path | None:
    """``$PI_CODING_AGENT_DIR`` (``~`` expanded) if set and non-empty, else ``~/.pi/agent``."""
    agent = piplaces.agent_dir(environ, "PI_CODING_AGENT_DIR", _PI_DEFAULT_AGENT_DIR)
    return None if agent is None else Path(agent)


def settings_session_dir(agent: Path, environ: Mapping[str, str], files: HostFiles) -> Path | None:
    """``sessionDir`` from the global ``<agentDir>/settings.json``, if absolute after ``~``."""
    found = piplaces.settings_session_dir(str(agent), environ, files)
    return None if found is None else Path(found)


def session_roots(environ: Mapping[str, str], files: HostFiles) -> tuple[SessionRoot, ...]:
    """Every directory pi may have written sessions to, as clanker can know them.

    Pi writes a new session to the first of: ``--session-dir`` (per
    invocation: invisible here), ``$PI_CODING_AGENT_SESSION_DIR``, ``sessionDir``
    in the project's ``.pi/settings.json`` (not read: see the docs), then the
    global ``settings.json``, else ``<agentDir>/sessions/--<cwd>--/``. Earlier
    sessions stay where they were written, so history reads all of them.
    """
    roots: list[SessionRoot] = []
    agent = agent_dir(environ)
    if agent is not None:
        roots.append(SessionRoot(agent / "sessions", nested=True))
    explicit = piplaces.tilde_path(environ.get("PI_CODING_AGENT_SESSION_DIR"), environ)
    if explicit is not None:
        roots.append(SessionRoot(Path(explicit), nested=False))
    from_settings = settings_session_dir(agent, environ, files) if agent is not None else None
    if from_settings is not None:
        roots.append(SessionRoot(from_settings, nested=False))
    unique: dict[Path, SessionRoot] = {}
    for root in roots:
        unique.setdefault(root.path, root)
    return tuple(unique.values())


# -- the capability -------------------------------------------------------------------------


class PiSessions(piplaces.SessionFiles):
    """Pi's session files, from every root clanker can know of."""

    # Verified 2026-11-30 with pi 0.73.1: `pi --session <path> -p ...` from
    # another directory exits 1 with "Stored session working directory does
    # not exist" when the recorded cwd is gone (a bare id offers a fork on
    # stdin instead). Clanker refuses and asks for the directory back.
    resumes_without_original_directory = False

    def roots(self, environ: Mapping[str, str], files: HostFiles) -> tuple[SessionRoot, ...]:
        return session_roots(environ, files)

    def scan(self, context: SessionsContext, roots: tuple[SessionRoot, ...]) -> SessionScan:
        # The reader, imported with the first scan: finding the store never loads it.
        from clanker_pi.summaries import scan

        return scan(context, roots)


implementation = PiSessions
