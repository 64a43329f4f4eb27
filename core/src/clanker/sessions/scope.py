"""Which directories count as "this workspace": canonical, symlink-aware, worktrees included."""

from __future__ import annotations

import os
from collections.abc import Iterable

from clanker.errors import HarnessCapabilityError
from clanker.execution import CommandExecutor, CommandRequest

__all__ = ["canonical", "in_scope", "workspace_scopes"]


def canonical(path: str) -> str:
    """Resolve ``path`` (absolute) through symlinks as far as it exists; POSIX, no trailing /."""
    return os.path.realpath(path)  # what Path.resolve(strict=False) does, in a third of the time


def in_scope(cwd: str, scopes: Iterable[str]) -> bool:
    """Say whether canonical ``cwd`` is one of ``scopes`` or below one."""
    return any(cwd == scope or cwd.startswith(scope.rstrip("/") + "/") for scope in scopes)


async def workspace_scopes(workspace: str, executor: CommandExecutor) -> tuple[str, ...]:
    """Return the workspace's canonical path, its spelling, and the repository's worktrees.

    Worktrees count only when the workspace is the top of one (the main
    checkout or a linked worktree): they are the same project. Without git, or
    outside a repository, the workspace alone is the scope.
    """
    # Here, not with the module: only a listing for a workspace runs git.
    from clanker.checkouts.git import GIT_ENV

    given = os.path.normpath(workspace)
    root = canonical(workspace)
    scopes = dict.fromkeys([root, given])
    try:
        result = await executor.run(CommandRequest(
            command="git", args=("-C", root, "worktree", "list", "--porcelain"), env=GIT_ENV,
            timeout=5.0,
        ))
    except HarnessCapabilityError:
        return tuple(scopes)
    if result.exit_code != 0:
        return tuple(scopes)
    worktrees = [
        canonical(line.removeprefix("worktree "))
        for line in result.stdout.splitlines()
        if line.startswith("worktree /")
    ]
    if root in worktrees:
        scopes.update(dict.fromkeys(worktrees))
    return tuple(scopes)
