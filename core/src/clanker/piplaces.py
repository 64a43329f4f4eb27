"""Where a store of Pi's JSON Lines session files is, apart from how its files are read.

Pi and its fork Oh My Pi keep their sessions in directories of session files
(:class:`SessionRoot`); :class:`SessionFiles` is the sessions capability over such
a store, less what each plugin declares (its roots, its scan). Knowing where the
store is costs nothing of the format's reader (:mod:`clanker.pistore`), which the
listing over empty stores (:mod:`clanker.sessions.empty`) never needs: it asks
every provider for its roots only.

Pi's directory rules are the format's own (:func:`agent_dir`,
:func:`settings_session_dir`, :func:`wrapped_dir_name`), with the names a plugin
declares (verified against Pi 0.73.1, as its harness page says): Oh My Pi reads them
too, to leave Pi's files to Pi where the two stores meet.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from attrs import frozen

from clanker.sessions.capability import home_directory

if TYPE_CHECKING:
    from clanker.environment import HostFiles
    from clanker.sessions.capability import SessionScan, SessionsContext

__all__ = [
    "SessionFiles",
    "SessionRoot",
    "absolute",
    "agent_dir",
    "settings_session_dir",
    "tilde_path",
    "wrapped_dir_name",
]

# settings.json is a small hand-edited object; anything larger is not read.
_SETTINGS_BYTES: Final = 1024 * 1024


@frozen
class SessionRoot:
    """A directory of session files: ``nested`` ones hold one directory per project."""

    path: Path
    nested: bool


def absolute(value: str | None) -> str | None:
    """``value`` normalized when it is an absolute path, else ``None``.

    A relative value is relative to the directory the harness was started in,
    which clanker cannot know: it is not guessed.
    """
    if not value or "\x00" in value or not value.startswith("/"):
        return None
    return posixpath.normpath(value)


def tilde_path(value: str | None, environ: Mapping[str, str]) -> str | None:
    """A directory setting as Pi reads one (``expandTildePath``): ``~`` and ``~/...``
    expanded (``~user`` stays literal), absolute only."""
    if value and (value == "~" or value.startswith("~/")):
        home = home_directory(environ)
        if home is None:
            return None
        value = home + value[1:]
    return absolute(value)


def agent_dir(environ: Mapping[str, str], variable: str, default: str) -> str | None:
    """``$variable`` (``~`` expanded) if set and non-empty, else ``~/<default>``."""
    configured = environ.get(variable)
    if configured:
        return tilde_path(configured, environ)
    home = home_directory(environ)
    return None if home is None else absolute(posixpath.join(home, default))


def settings_session_dir(agent: str, environ: Mapping[str, str], files: HostFiles) -> str | None:
    """``sessionDir`` from the global ``<agent>/settings.json``, if absolute after ``~``.

    One bounded read of one small file. A missing, oversized or malformed file
    is no setting, exactly as for Pi (which then uses its default).
    """
    data = files.read_small(posixpath.join(agent, "settings.json"), _SETTINGS_BYTES)
    if data is None:
        return None
    try:
        settings = json.loads(data)
    except (ValueError, RecursionError):
        return None
    value = settings.get("sessionDir") if isinstance(settings, dict) else None
    if not isinstance(value, str) or not value:
        return None
    return tilde_path(value, environ)


def wrapped_dir_name(name: str) -> bool:
    """Whether ``name`` is a project directory name as Pi gives one: ``--<encoded cwd>--``.

    Pi names every one so; a directory named otherwise in its default root is
    not Pi's (Oh My Pi, sharing the directory through ``PI_CODING_AGENT_DIR``,
    names those under the home ``-<path>``), and neither are the files in it.
    """
    return len(name) >= 4 and name.startswith("--") and name.endswith("--")


class SessionFiles:
    """The sessions capability over a store of these files, less what each harness
    declares: where its roots are (:meth:`roots`) and how it scans them (:meth:`scan`)."""

    resumes_without_original_directory: bool

    def roots(self, environ: Mapping[str, str], files: HostFiles) -> tuple[SessionRoot, ...]:
        raise NotImplementedError

    def scan(self, context: SessionsContext, roots: tuple[SessionRoot, ...]) -> SessionScan:
        raise NotImplementedError

    def store_roots(self, environ: Mapping[str, str], files: HostFiles) -> tuple[Path, ...]:
        return tuple(root.path for root in self.roots(environ, files))

    async def discover(self, context: SessionsContext) -> SessionScan:
        # Walking and reading block: off the event loop.
        return await context.offload(
            lambda: self.scan(context, self.roots(context.environ, context.files)))
