"""Hermes's history: ``$HERMES_HOME/state.db``, read-only.

Verified against hermes-agent 0.19.0 (docs/harnesses/hermes.md, "Sessions").
This module says where the database is (the ``HERMES_HOME`` a plain ``hermes``
uses, profiles included); how its rows become sessions is
:mod:`clanker_hermes.summaries`'s, imported with the first database to read:
knowing where the store is (all a listing over empty stores asks) reads nothing.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.ids import HarnessId
from clanker.sessions.capability import SessionScan, home_directory

if TYPE_CHECKING:
    from clanker.sessions.capability import SessionsContext
    from clanker.stores import HostFiles

__all__ = [
    "HermesSessions",
    "hermes_home",
    "state_db",
]

_HERMES: Final = HarnessId("hermes")

# `active_profile` holds one profile name.
_PROFILE_FILE_BYTES: Final = 4096
# Hermes's profile ids and the names it reserves (hermes_cli/profiles.py). The pattern
# is compiled (and cached by `re`) only when a sticky profile is found.
_PROFILE_ID: Final = r"[a-z0-9][a-z0-9_-]{0,63}"
_RESERVED_PROFILES: Final = frozenset({"hermes", "default", "test", "tmp", "root", "sudo"})


def _not_configured(detail: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(ErrorKind.NOT_CONFIGURED, detail, harness=_HERMES)


# -- where the store is ---------------------------------------------------------------------


def _absolute(value: str, name: str) -> Path:
    # Relative to the directory Hermes was started in, which clanker cannot know.
    if not value.startswith("/") or "\x00" in value:
        raise _not_configured(f"{name} is not an absolute path")
    return Path(value)


def _read_active_profile(root: Path, files: HostFiles) -> str | None:
    """The sticky profile name in ``<root>/active_profile``, as Hermes reads it.

    A missing, unreadable or undecodable file is no profile (Hermes skips it).
    Only a regular file is read (a FIFO there would block the listing).
    """
    data = files.read_small(root / "active_profile", _PROFILE_FILE_BYTES)
    if data is None:
        return None
    try:
        return data.decode("utf-8").strip() or None
    except UnicodeDecodeError:
        return None


def hermes_home(environ: Mapping[str, str], files: HostFiles) -> Path | None:
    """The ``HERMES_HOME`` a plain ``hermes`` started with ``environ`` uses.

    Hermes's order (hermes_cli/main.py, hermes_constants.py, 0.19.0):

    1. ``-p NAME`` on its command line: invisible to clanker (a flag given to
       some earlier run);
    2. ``$HERMES_HOME`` when it is a profile directory (its parent is named
       ``profiles``);
    3. the sticky ``<root>/active_profile`` (set by ``hermes profile use``),
       when it names a profile other than ``default``: ``<root>/profiles/<name>``;
    4. ``$HERMES_HOME``;
    5. ``~/.hermes``.

    ``<root>`` is ``~/.hermes``, or ``$HERMES_HOME`` when that lies outside
    it. ``None`` when there is no home directory to start from. Raises
    ``not-configured`` when Hermes itself would refuse to start (a relative
    ``HERMES_HOME``, an invalid or missing sticky profile).
    """
    home = home_directory(environ)
    native = None if home is None else Path(home) / ".hermes"
    env_value = environ.get("HERMES_HOME", "")
    if env_value and Path(env_value).parent.name == "profiles":
        return _absolute(env_value, "HERMES_HOME")
    env_home = _absolute(env_value.strip(), "HERMES_HOME") if env_value.strip() else None
    inside_native = (env_home is not None and native is not None
                     and Path(files.realpath(env_home)).is_relative_to(files.realpath(native)))
    root = native if env_home is None or inside_native else env_home
    if root is not None:
        name = _read_active_profile(root, files)
        if name is not None and name.casefold() != "default":
            profile = name.lower()
            if re.fullmatch(_PROFILE_ID, profile) is None or profile in _RESERVED_PROFILES:
                raise _not_configured("the active Hermes profile has an invalid name")
            directory = root / "profiles" / profile
            found = files.stat(directory)
            if found is None or not stat.S_ISDIR(found.st_mode):
                raise _not_configured("the active Hermes profile does not exist")
            return directory
    if env_home is not None:
        return env_home
    return native


def state_db(environ: Mapping[str, str], files: HostFiles) -> Path | None:
    """``<HERMES_HOME>/state.db``, or ``None`` when there is no home to start from."""
    home = hermes_home(environ, files)
    return None if home is None else home / "state.db"


# -- the capability -------------------------------------------------------------------------


class HermesSessions:
    """Hermes's sessions from the profile a plain ``hermes`` uses."""

    # Verified 2026-11-30 with hermes-agent 0.19.0: with the recorded cwd
    # removed, `hermes --resume <id>` from another directory resumes ("session's
    # recorded dir is gone ...; staying in <cwd>"), and `hermes --tui --resume
    # <id>` (what clanker launches) resumes and re-homes the row to the nearest
    # existing ancestor's git root.
    resumes_without_original_directory = True

    def store_roots(self, environ: Mapping[str, str], files: HostFiles) -> tuple[Path, ...]:
        # Database rows carry no store_path: there is no file to confine. The
        # directory is still the store's, for whoever asks.
        try:
            db = state_db(environ, files)
        except HarnessCapabilityError:
            return ()
        return () if db is None else (db.parent,)

    async def discover(self, context: SessionsContext) -> SessionScan:
        return await context.offload(lambda: self._discover(context))

    def _discover(self, context: SessionsContext) -> SessionScan:
        db = state_db(context.environ, context.files)
        found = None if db is None else context.files.stat(db)
        if db is None or found is None or not stat.S_ISREG(found.st_mode):
            return SessionScan()
        # The reader, imported with the first database to read: finding the store
        # never loads it.
        from clanker_hermes.summaries import scan

        return scan(db, context)

implementation = HermesSessions
