"""Antigravity's history: ``~/.gemini/antigravity-cli/conversation_summaries.db``, read-only.

**Written from the spec and public material, never run against agy** (it
cannot be installed here): see docs/harnesses/agy.md, "Sessions". This module
says where the store is; how its picker index becomes sessions is
:mod:`clanker_agy.summaries`'s, imported with the first scan: knowing where the
store is (all a listing over empty stores asks) reads nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from clanker.sessions.capability import StoreDirectory, home_directory

if TYPE_CHECKING:
    from clanker.sessions.capability import SessionScan, SessionsContext

__all__ = [
    "AgySessions",
    "agy_dir",
]


# -- where the store is ---------------------------------------------------------------------


def agy_dir(environ: Mapping[str, str]) -> Path | None:
    """``~/.gemini/antigravity-cli``; ``None`` without a home directory.

    No override is documented. ``GEMINI_HOME`` is reported to move the ACP
    server's files, never verified for the CLI, so it is not read.
    """
    home = home_directory(environ)
    return None if home is None else Path(home) / ".gemini" / "antigravity-cli"


# -- the capability -------------------------------------------------------------------------


class AgySessions(StoreDirectory):
    """agy's conversations from its picker index, offered while their store file exists."""

    # Not verified: agy cannot run here, and the spec's removed-worktree probe
    # could not characterize it either ("recreate the worktree"). Unproven is
    # False: clanker refuses rather than launching somewhere unknown.
    resumes_without_original_directory = False

    def directory(self, environ: Mapping[str, str]) -> Path | None:
        return agy_dir(environ)

    def scan(self, context: SessionsContext, directory: Path) -> SessionScan:
        # The reader, imported with the first scan: finding the store never loads it.
        from clanker_agy.summaries import scan

        return scan(context, directory)


implementation = AgySessions
