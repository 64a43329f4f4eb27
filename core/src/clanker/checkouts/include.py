"""``.worktreeinclude``: the ignored files a new worktree needs, copied from the main checkout.

The file at the top of the main checkout holds gitignore patterns. An entry
is copied when it is both ignored by the repository's own rules and matched
by those patterns; a tracked file is never copied (it is in the worktree
already, and a copy of a different version would dirty it). Both lists come
from git (``ls-files --others --ignored --directory``, so a wholly ignored
directory is one entry), the intersection is taken entry by entry, and each
chosen file or directory is copied without following a link out of it and
without replacing anything already in the worktree.
"""

from __future__ import annotations

import os
import shutil
import stat
from typing import Final

from clanker.checkouts.git import Git
from clanker.checkouts.types import CopyReport

__all__ = ["INCLUDE_FILE", "MAX_INCLUDED", "copy_included", "included_entries"]

INCLUDE_FILE: Final = ".worktreeinclude"
MAX_INCLUDED: Final = 256
"""At most this many entries are copied; the rest are reported as skipped."""


def _inside(entry: str, directories: set[str]) -> bool:
    """Whether a directory entry (``dir/``) of ``directories`` contains ``entry``."""
    parts = entry.rstrip("/").split("/")
    return any("/".join(parts[:depth]) + "/" in directories for depth in range(1, len(parts)))


async def _ignored(git: Git, main: str, *exclude: str) -> list[str]:
    text = await git.output(main, "ls-files", "-z", "--others", "--ignored", "--directory",
                            *exclude, what="list ignored files")
    return [entry for entry in text.split("\0") if entry]


async def included_entries(git: Git, main: str) -> list[str]:
    """Return the entries (``dir/`` for a directory) ``.worktreeinclude`` selects."""
    include = os.path.join(main, INCLUDE_FILE)
    info = os.lstat(include) if os.path.lexists(include) else None
    if info is None or not stat.S_ISREG(info.st_mode):
        return []
    ignored = await _ignored(git, main, "--exclude-standard")
    matched = await _ignored(git, main, f"--exclude-from={include}")
    ignored_set, matched_set = set(ignored), set(matched)
    chosen = {e for e in matched if e in ignored_set or _inside(e, ignored_set)}
    chosen |= {e for e in ignored if _inside(e, matched_set)}
    # A chosen directory already carries whatever is chosen inside it.
    dirs = {e for e in chosen if e.endswith("/")}
    return sorted(e for e in chosen if not _inside(e, dirs))


def _copy(worktree: str, relative: str, source: str) -> str | None:
    """Copy one entry into ``worktree``; return why it was not copied, or ``None``."""
    target = os.path.join(worktree, relative)
    if os.path.lexists(target):
        return "already in the worktree"
    # A link on the way would put the copy outside the worktree.
    parts = relative.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        if os.path.islink(os.path.join(worktree, *parts[:depth])):
            return "a directory on its way in the worktree is a link"
    info = os.lstat(source)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if stat.S_ISDIR(info.st_mode):
        shutil.copytree(source, target, symlinks=True)
    elif stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
        shutil.copy2(source, target, follow_symlinks=False)
    else:
        return "not a regular file, directory or link"
    return None


async def copy_included(git: Git, main: str, worktree: str) -> CopyReport:
    """Copy what ``.worktreeinclude`` selects from ``main`` into the new ``worktree``."""
    entries = await included_entries(git, main)
    copied: list[str] = []
    skipped: list[str] = []
    for index, entry in enumerate(entries):
        relative = entry.rstrip("/")
        if index >= MAX_INCLUDED:
            skipped.append(f"{relative}: over the limit of {MAX_INCLUDED} entries")
            continue
        try:
            reason = _copy(worktree, relative, os.path.join(main, relative))
        except OSError as exc:
            reason = f"could not be copied ({exc.strerror or type(exc).__name__})"
        except shutil.Error:
            reason = "could not be copied whole"
        if reason is None:
            copied.append(relative)
        else:
            skipped.append(f"{relative}: {reason}")
    return CopyReport(copied=tuple(copied), skipped=tuple(skipped))
