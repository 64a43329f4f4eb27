"""What changed in a repository, bounded, read without touching the index.

The scope is everything a "stage all and commit" would take: staged,
unstaged and untracked changes. Git runs with ``GIT_OPTIONAL_LOCKS=0`` so
``status`` does not refresh (write) the index. Tracked patches come from one
``git diff`` against HEAD (or the empty tree in a repository without
commits); untracked files are read directly, only when they are regular files
inside the repository (no symlinks, no ``..``), not binary and not huge.
Whatever is left out or cut is listed, so the model (and the person) knows.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

from attrs import frozen

from clanker.checkouts.git import GIT_ENV
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import MAX_OUTPUT, CommandExecutor, CommandRequest

__all__ = [
    "FILE_BUDGET",
    "PATCH_BUDGET",
    "UNTRACKED_BUDGET",
    "ChangeContext",
    "NotARepositoryError",
    "NothingToCommitError",
    "collect_changes",
]

PATCH_BUDGET: Final = 48 * 1024
UNTRACKED_BUDGET: Final = 16 * 1024
FILE_BUDGET: Final = 8 * 1024
_BINARY_SNIFF: Final = 8 * 1024
_MAX_UNTRACKED_READ: Final = 256 * 1024
_RECENT_SUBJECTS: Final = 8


class NotARepositoryError(Exception):
    """The directory is not inside a git work tree."""


class NothingToCommitError(Exception):
    """The work tree has no staged, unstaged or untracked change."""


@frozen(kw_only=True)
class ChangeContext:
    """The change, as text a prompt can carry, plus what had to be left out."""

    root: str
    status: tuple[str, ...]
    patch: str
    untracked: str
    recent_subjects: tuple[str, ...]
    omitted: tuple[str, ...]


async def _git(executor: CommandExecutor, root: str, *args: str) -> tuple[str, int]:
    result = await executor.run(CommandRequest(
        command="git", args=("-C", root, *args), env=GIT_ENV, timeout=20.0,
        max_output_bytes=MAX_OUTPUT,
    ))
    return result.stdout, result.exit_code


async def collect_changes(executor: CommandExecutor, cwd: str) -> ChangeContext:
    """Describe the uncommitted change of the repository containing ``cwd``."""
    top, code = await _git(executor, cwd, "rev-parse", "--show-toplevel")
    if code != 0 or not top.strip():
        raise NotARepositoryError(f"{cwd} is not inside a git work tree")
    root = top.strip()
    raw_status, code = await _git(
        executor, root, "status", "--porcelain=v1", "-z", "--untracked-files=all",
        "--no-renames",
    )
    if code != 0:
        raise HarnessCapabilityError(ErrorKind.COMMAND_FAILED, "git status failed")
    entries = [e for e in raw_status.split("\0") if e]
    if not entries:
        raise NothingToCommitError(f"nothing to commit in {root}")
    omitted: list[str] = []
    untracked = [e[3:] for e in entries if e.startswith("?? ")]
    status = tuple(e for e in entries if not e.startswith("?? "))
    patch = await _tracked_patch(executor, root, omitted) if status else ""
    return ChangeContext(
        root=root,
        status=tuple(entries),
        patch=patch,
        untracked=_untracked_text(Path(root), untracked, omitted),
        recent_subjects=await _recent_subjects(executor, root),
        omitted=tuple(omitted),
    )


async def _tracked_patch(executor: CommandExecutor, root: str, omitted: list[str]) -> str:
    head, code = await _git(executor, root, "rev-parse", "--verify", "--quiet", "HEAD")
    if code == 0:
        base = head.strip()
    else:  # no commit yet: compare with the empty tree of this repository's hash
        empty, _ = await _git(executor, root, "hash-object", "-t", "tree", "/dev/null")
        base = empty.strip()
    try:
        diff, code = await _git(
            executor, root, "diff", base, "--no-color", "--no-ext-diff", "--no-textconv",
            "--no-renames", "-U3",
        )
    except HarnessCapabilityError as exc:
        if exc.kind is not ErrorKind.OUTPUT_LIMIT:
            raise
        stat_text, _ = await _git(executor, root, "diff", base, "--stat=100", "--no-color")
        omitted.append("all patches (the diff is larger than 1 MiB; summary only)")
        return stat_text
    if code != 0:
        raise HarnessCapabilityError(ErrorKind.COMMAND_FAILED, "git diff failed")
    return _bounded_patch(diff, omitted)


def _bounded_patch(diff: str, omitted: list[str]) -> str:
    """Cut each file's patch to FILE_BUDGET and the whole to PATCH_BUDGET, saying so."""
    files = ["diff --git" + part for part in diff.split("\ndiff --git")]
    if files:
        files[0] = files[0].removeprefix("diff --git")
    kept: list[str] = []
    used = 0
    for index, whole in enumerate(files):
        if used >= PATCH_BUDGET:
            omitted.extend(f"patch of {n}" for n in _names(files[index:]))
            break
        text = whole
        if len(whole) > FILE_BUDGET:
            text = whole[:FILE_BUDGET] + "\n[... patch cut ...]"
            omitted.append(f"the rest of the patch of {_names([whole])[0]}")
        kept.append(text)
        used += len(text)
    return "\n".join(kept)


def _names(parts: list[str]) -> list[str]:
    names = []
    for part in parts:
        header = part.split("\n", 1)[0]
        names.append(header.rsplit(" b/", 1)[-1] if " b/" in header else header)
    return names


def _untracked_text(root: Path, names: list[str], omitted: list[str]) -> str:
    chunks: list[str] = []
    used = 0
    real_root = root.resolve()
    for name in names:
        reason = None
        path = root / name
        try:
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                reason = "a symbolic link"
            elif not stat.S_ISREG(info.st_mode):
                reason = "not a regular file"
            elif not path.resolve().is_relative_to(real_root):
                reason = "outside the repository"
            elif used >= UNTRACKED_BUDGET:
                reason = "over the size budget"
        except OSError:
            reason = "unreadable"
        if reason is None:
            with open(path, "rb") as handle:
                data = handle.read(min(_MAX_UNTRACKED_READ, FILE_BUDGET + 1))
            if b"\0" in data[:_BINARY_SNIFF]:
                reason = "binary"
            else:
                text = data[:FILE_BUDGET].decode("utf-8", errors="replace")
                if len(data) > FILE_BUDGET:
                    text += "\n[... file cut ...]"
                    omitted.append(f"the rest of new file {name}")
                chunks.append(f"--- new file: {name}\n{text}")
                used += len(text)
                continue
        omitted.append(f"new file {name} ({reason})")
    return "\n".join(chunks)


async def _recent_subjects(executor: CommandExecutor, root: str) -> tuple[str, ...]:
    out, code = await _git(executor, root, "log", f"-{_RECENT_SUBJECTS}", "--format=%s")
    if code != 0:
        return ()
    return tuple(line[:120] for line in out.splitlines() if line.strip())
