"""Git, run through an Environment's executor: bounded, shell-free, never a prompt.

Every git command of the checkout service goes through here, so another
environment (SSH) only has to hand over its executor. Git's own messages are
never shown: a failure becomes a :class:`~clanker.checkouts.types.CheckoutError`
with a fixed sentence.
"""

from __future__ import annotations

import os
from typing import Final

from attrs import frozen

from clanker.checkouts.types import CheckoutError, Refusal
from clanker.execution import MAX_OUTPUT, CommandExecutor, CommandRequest, CommandResult

__all__ = ["GIT_ENV", "Git", "ListedWorktree", "parse_worktree_list"]

GIT_ENV: Final = {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C",
                  "GIT_PAGER": "cat"}
"""What git runs with, here and where a commit's change or a bridge caller's checkout
is read: no index refresh from read-only commands, no credential prompt, no pager,
messages in one language."""
_TIMEOUT: Final = 30.0


@frozen(kw_only=True)
class ListedWorktree:
    """One record of ``git worktree list --porcelain -z``."""

    path: str
    head: str | None
    branch: str | None
    """Without ``refs/heads/``; ``None`` when detached or bare."""
    bare: bool = False
    locked: bool = False
    prunable: bool = False


def parse_worktree_list(text: str) -> list[ListedWorktree]:
    """Parse ``worktree list --porcelain -z``: records end with an empty field."""
    records: list[ListedWorktree] = []
    fields: dict[str, str] = {}
    for item in text.split("\0"):
        if item:
            key, _, value = item.partition(" ")
            fields.setdefault(key, value)
            continue
        if "worktree" in fields:
            branch = fields.get("branch")
            records.append(ListedWorktree(
                path=fields["worktree"],
                head=fields.get("HEAD"),
                branch=branch.removeprefix("refs/heads/") if branch else None,
                bare="bare" in fields,
                locked="locked" in fields,
                prunable="prunable" in fields,
            ))
        fields = {}
    return records


class Git:
    """``git -C <dir> ...`` through ``executor``."""

    def __init__(self, executor: CommandExecutor) -> None:
        self._executor = executor

    async def run(self, where: str, *args: str, timeout: float = _TIMEOUT) -> CommandResult:
        return await self._executor.run(CommandRequest(
            command="git", args=("-C", where, *args), env=GIT_ENV, timeout=timeout,
            max_output_bytes=MAX_OUTPUT))

    async def ok(self, where: str, *args: str) -> bool:
        return (await self.run(where, *args)).exit_code == 0

    async def output(self, where: str, *args: str, what: str) -> str:
        """Return stdout of a command that must succeed; ``what`` names it in the error."""
        result = await self.run(where, *args)
        if result.exit_code != 0:
            raise CheckoutError(Refusal.GIT_FAILED, f"git could not {what}")
        return result.stdout

    async def main_checkout(self, directory: str) -> str:
        """Return the main checkout of the repository ``directory`` belongs to.

        Any directory inside the main checkout or one of its linked worktrees
        will do. Refuses a directory outside a work tree and a bare repository.
        """
        if not os.path.isabs(directory):
            raise CheckoutError(Refusal.NOT_A_REPOSITORY, f"{directory} is not an absolute path")
        inside = await self.run(directory, "rev-parse", "--is-inside-work-tree")
        if inside.exit_code != 0 or inside.stdout.strip() != "true":
            raise CheckoutError(Refusal.NOT_A_REPOSITORY,
                                f"{directory} is not inside a git work tree")
        listed = await self.worktrees(directory)
        # Git lists the main worktree first, always.
        if not listed or listed[0].bare:
            raise CheckoutError(Refusal.NOT_A_REPOSITORY,
                                f"the repository of {directory} has no main checkout (bare)")
        return listed[0].path

    async def worktrees(self, directory: str) -> list[ListedWorktree]:
        text = await self.output(directory, "worktree", "list", "--porcelain", "-z",
                                 what="list the worktrees")
        return parse_worktree_list(text)

    async def toplevel(self, directory: str) -> str | None:
        result = await self.run(directory, "rev-parse", "--show-toplevel")
        return result.stdout.strip() or None if result.exit_code == 0 else None

    async def branch_exists(self, main: str, branch: str) -> bool:
        return await self.ok(main, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}")

    async def commit_of(self, main: str, revision: str) -> str | None:
        result = await self.run(main, "rev-parse", "--verify", "--quiet", "--end-of-options",
                                f"{revision}^{{commit}}")
        text = result.stdout.strip()
        return text if result.exit_code == 0 and text else None

    async def is_ancestor(self, main: str, ancestor: str, descendant: str) -> bool:
        return await self.ok(main, "merge-base", "--is-ancestor", "--end-of-options",
                             ancestor, descendant)

    async def changes_already_in(self, main: str, branch: str, target: str) -> bool:
        """Whether merging ``branch`` into ``target`` would change nothing: every change
        of the branch is already there (a squash or rebase merge).

        Proved by git's own merge (``merge-tree --write-tree``, git 2.38 or newer):
        its tree must be ``target``'s. A conflict, an older git or any failure
        answers ``False``.
        """
        merged = await self.run(main, "merge-tree", "--write-tree", "--no-messages",
                                "--end-of-options", target, branch)
        tree = await self.commit_of(main, target)
        if merged.exit_code != 0 or tree is None:
            return False
        own = await self.run(main, "rev-parse", "--verify", "--quiet", "--end-of-options",
                             f"{tree}^{{tree}}")
        first = merged.stdout.split("\n", 1)[0].strip()
        return own.exit_code == 0 and bool(first) and first == own.stdout.strip()
