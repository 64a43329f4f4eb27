"""Codex's history: rollout files under ``$CODEX_HOME/sessions``, read at their head and tail.

Verified against Codex CLI 0.171.0 (docs/harnesses/codex.md, "Sessions"). Layout::

    $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<local time>-<uuid>.jsonl

Line 1 is ``session_meta`` (id, cwd, source, fork parent); every later line is
``{"timestamp","ordinal","type","payload"}``. Archived rollouts
(``$CODEX_HOME/archived_sessions/``) cannot be resumed and are never read;
sub-agent rollouts sit beside their parents and are not listed.

This module says where the store and its optional index (``state_5.sqlite``) are;
how they are read is :mod:`clanker_codex.summaries`'s, imported with the first scan:
knowing where the store is (all a listing over empty stores asks) reads nothing.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from clanker.sessions.capability import StoreDirectory, home_directory

if TYPE_CHECKING:
    from clanker.sessions.capability import SessionScan, SessionsContext
    from clanker.stores import HostFiles

__all__ = [
    "INDEX_NAME",
    "CodexSessions",
    "codex_home",
    "index_path",
    "sessions_dir",
]

INDEX_NAME: Final = "state_5.sqlite"
_CONFIG_BYTES: Final = 1024 * 1024


# -- where the store is ---------------------------------------------------------------------


def _absolute(value: str | None) -> Path | None:
    # Codex takes a relative CODEX_HOME relative to its own cwd, which clanker
    # cannot know: it is not guessed.
    if not value or "\x00" in value or not value.startswith("/"):
        return None
    return Path(posixpath.normpath(value))


def codex_home(environ: Mapping[str, str]) -> Path | None:
    """``$CODEX_HOME`` when set and non-empty (an empty value is unset), else ``~/.codex``."""
    configured = environ.get("CODEX_HOME")
    if configured:
        return _absolute(configured)
    home = home_directory(environ)
    return None if home is None else _absolute(posixpath.join(home, ".codex"))


def sessions_dir(environ: Mapping[str, str]) -> Path | None:
    """``<codex home>/sessions``: no flag, config key or XDG variable moves it."""
    home = codex_home(environ)
    return None if home is None else home / "sessions"


def index_path(environ: Mapping[str, str], files: HostFiles) -> Path | None:
    """Where ``state_5.sqlite`` lives, or ``None`` when clanker cannot know.

    Codex's order: ``sqlite_home`` in ``config.toml`` (it beat the variable
    live), then ``$CODEX_SQLITE_HOME``, then the Codex home. A relative value
    (resolved against Codex's cwd) means "unknown": no index is read rather
    than possibly the wrong one. A profile's or ``-c`` value is invisible here.
    """
    home = codex_home(environ)
    if home is None:
        return None
    data = files.read_small(home / "config.toml", _CONFIG_BYTES)
    configured: object = None
    if data is not None:
        import tomllib  # only when there is a config to read: start-up stays lean

        try:
            configured = tomllib.loads(data.decode("utf-8")).get("sqlite_home")
        except (ValueError, UnicodeDecodeError):
            configured = None  # Codex refuses to start with it; nothing to follow
    if configured is None:
        configured = environ.get("CODEX_SQLITE_HOME") or None
    if configured is None:
        return home / INDEX_NAME
    directory = _absolute(configured) if isinstance(configured, str) else None
    return None if directory is None else directory / INDEX_NAME


# -- the capability -------------------------------------------------------------------------


class CodexSessions(StoreDirectory):
    """Codex's rollout files, enriched by its index when that can be trusted."""

    # Verified 2026-11-30 with Codex 0.171.0: with the recorded cwd removed,
    # `codex -C <dir> resume <id>` (the argv clanker builds, -C before the
    # subcommand) loads the session in <dir> without asking; without -C the
    # TUI asks and defaults to the missing directory. `codex exec resume <id>`
    # from elsewhere continues it too.
    resumes_without_original_directory = True

    def directory(self, environ: Mapping[str, str]) -> Path | None:
        return sessions_dir(environ)

    def scan(self, context: SessionsContext, root: Path) -> SessionScan:
        # The reader, imported with the first scan: finding the store never loads it.
        from clanker_codex.summaries import scan

        return scan(context, root)


implementation = CodexSessions
