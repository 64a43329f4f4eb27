"""Claude Code's history: one JSON Lines transcript per session, under its config dir.

Verified against Claude Code 2.1.197 (docs/harnesses/claude.md, "Sessions"). Layout::

    <config dir>/projects/<encoded project dir>/<session uuid>.jsonl

This module says where the transcripts are; how they are read is
:mod:`clanker_claude.summaries`'s, imported with the first scan: knowing where the
store is (all a listing over empty stores asks) reads nothing.
"""

from __future__ import annotations

import posixpath
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from clanker.sessions.capability import StoreDirectory, home_directory

if TYPE_CHECKING:
    from clanker.sessions.capability import SessionScan, SessionsContext

__all__ = [
    "ClaudeSessions",
    "config_dir",
    "projects_dir",
]


# -- where the store is ---------------------------------------------------------------------


def config_dir(environ: Mapping[str, str]) -> Path | None:
    """``$CLAUDE_CONFIG_DIR`` if set, else ``~/.claude``; NFC-normalized as Claude does.

    Claude takes the variable whenever it is defined (``??``): an empty or
    relative value is relative to Claude's cwd, which clanker cannot know, so
    there is then no store to read.
    """
    if "CLAUDE_CONFIG_DIR" in environ:
        value = environ["CLAUDE_CONFIG_DIR"]
    else:
        home = home_directory(environ)
        if home is None:
            return None
        value = posixpath.join(home, ".claude")
    value = unicodedata.normalize("NFC", value)
    if not value.startswith("/") or "\x00" in value:
        return None
    return Path(posixpath.normpath(value))


def projects_dir(environ: Mapping[str, str]) -> Path | None:
    """``<config dir>/projects``, where every transcript lives."""
    root = config_dir(environ)
    return None if root is None else root / "projects"


# -- the capability -------------------------------------------------------------------------


class ClaudeSessions(StoreDirectory):
    """Claude Code's transcripts under ``<config dir>/projects``."""

    # Verified 2026-11-30 with Claude Code 2.1.197: once the recorded cwd (a
    # removed git worktree) is gone, `--resume <id>` answers "No conversation
    # found", but `--resume <transcript path>` (with or without
    # `--fork-session`) loads it from any directory and continues in the same
    # file. Clanker resumes and forks by the store path it re-found
    # (ClaudeLaunch), so True holds for the argv clanker builds.
    resumes_without_original_directory = True

    def directory(self, environ: Mapping[str, str]) -> Path | None:
        return projects_dir(environ)

    def scan(self, context: SessionsContext, root: Path) -> SessionScan:
        # The reader, imported with the first scan: finding the store never loads it.
        from clanker_claude.summaries import scan

        return scan(context, root)


implementation = ClaudeSessions
