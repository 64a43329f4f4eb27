"""``clanker coder clean``: remove coder transcripts and agent stderr logs by a rule.

Only clanker's own coder files are ever candidates: regular files (never a
symbolic link, never followed) directly in the coder directory, whose name is
a transcript's (``<session>.jsonl``) or an agent log's
(``agent-<time>-<pid>.log``). The directory itself must be a real directory of
this user's that nobody else can write to; everything is looked up and removed
relative to it, so a directory swapped in meanwhile is not followed.
"""

from __future__ import annotations

import os
import re
import stat
import time
from datetime import timedelta
from pathlib import Path
from typing import Final

from attrs import frozen

from clanker.acp.transcript import SESSION_ID

__all__ = ["CoderCleanup", "clean_coder_files", "own_coder_file"]

_LOG: Final = re.compile(r"agent-[0-9]{8}T[0-9]{6}-[0-9]{1,10}\.log")


def own_coder_file(name: str) -> str | None:
    """``"transcript"`` or ``"log"`` for a name clanker gives its coder files, else ``None``."""
    if name.endswith(".jsonl") and SESSION_ID.fullmatch(name[:-len(".jsonl")]):
        return "transcript"
    if _LOG.fullmatch(name):
        return "log"
    return None


@frozen(kw_only=True)
class CoderCleanup:
    """What :func:`clean_coder_files` removed (or, with ``dry_run``, would remove)."""

    directory: Path
    removed: tuple[Path, ...]
    """Oldest first."""
    kept: int
    """Own files left in place."""
    dry_run: bool


def clean_coder_files(directory: Path, *, older_than: timedelta | None = None,
                      keep: int | None = None, dry_run: bool = False,
                      now: float | None = None) -> CoderCleanup:
    """Remove the transcripts and logs in ``directory`` that the rule selects.

    ``older_than``: last written longer ago than that. ``keep``: all but the
    ``keep`` newest transcripts and the ``keep`` newest logs. Both: a file must
    be selected by each (the newest ``keep`` always stay). Raises
    :class:`ValueError` for no rule, a negative one, or a directory that is not
    safe to clean.
    """
    if older_than is None and keep is None:
        raise ValueError("clean: give a rule (--older-than DURATION and/or --keep N)")
    if (older_than is not None and older_than < timedelta(0)) or (keep is not None and keep < 0):
        raise ValueError("clean: the rule cannot be negative")
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return CoderCleanup(directory=directory, removed=(), kept=0, dry_run=dry_run)
    except OSError as exc:
        raise ValueError(f"clean: {directory} is not a directory clanker can clean "
                         f"({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise ValueError(f"clean: {directory} is not a private directory of this user "
                             "(expected mode 0700); nothing removed")
        files = _own_files(fd)
        cutoff = None if older_than is None else (
            (time.time() if now is None else now) - older_than.total_seconds())
        chosen = _select(files, cutoff, keep)
        removed: list[Path] = []
        for name in chosen:
            if not dry_run:
                try:
                    os.unlink(name, dir_fd=fd)
                except FileNotFoundError:
                    continue  # removed meanwhile (the retention bound, another clean)
            removed.append(directory / name)
        return CoderCleanup(directory=directory, removed=tuple(removed),
                            kept=len(files) - len(removed), dry_run=dry_run)
    finally:
        os.close(fd)


def _select(files: list[tuple[float, str, str]], cutoff: float | None,
            keep: int | None) -> list[str]:
    """The names the rule removes, oldest first."""
    chosen: list[tuple[float, str]] = []
    for kind in ("transcript", "log"):
        of_kind = sorted((f for f in files if f[2] == kind), reverse=True)  # newest first
        beyond = of_kind if keep is None else of_kind[keep:]
        chosen.extend((written, name) for written, name, _ in beyond
                      if cutoff is None or written < cutoff)
    return [name for _, name in sorted(chosen)]


def _own_files(fd: int) -> list[tuple[float, str, str]]:
    """(last written, name, kind) of every own coder file in the directory ``fd``."""
    found: list[tuple[float, str, str]] = []
    for name in os.listdir(fd):
        kind = own_coder_file(name)
        if kind is None:
            continue
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(info.st_mode):
            found.append((info.st_mtime, name, kind))
    return found
