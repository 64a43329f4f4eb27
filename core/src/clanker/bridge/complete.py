"""``clanker_complete_isolated_checkout``: the agent is done in its worktree; its
conversation continues in the main checkout and the worktree is removed.

It takes operation data only, two booleans: the checkout being completed is the
one the authenticated caller was launched in, and every path comes from the
grid (the input schema is closed, so a ``path`` or ``workspace`` field is
refused). It is granted exactly where ``clanker_create_isolated_checkout`` is
(:data:`clanker.bridge.isolated.CHECKOUT_NAMES`); the grid does the work
(:class:`~clanker.bridge.declaration.BridgeHost.complete_isolated_checkout`).
"""

from __future__ import annotations

from typing import Any, Final

from clanker.bridge.declaration import Annotations, Caller, Signal, define_capability
from clanker.bridge.input import Arguments, Flag, Input
from clanker.checkouts.types import TRANSACTION_TIMEOUT

__all__ = ["CLANKER_COMPLETE_ISOLATED_CHECKOUT"]


async def _complete(arguments: Arguments, caller: Caller, signal: Signal) -> dict[str, Any]:
    return await caller.host.complete_isolated_checkout(
        delete_branch=bool(arguments["deleteBranch"]),
        discard_ignored=bool(arguments["discardIgnored"]))


CLANKER_COMPLETE_ISOLATED_CHECKOUT: Final = define_capability(
    name="clanker_complete_isolated_checkout",
    description=(
        "Finish the isolated worktree you work in: your conversation continues in the main "
        "checkout it was created from, then the worktree is removed (use this, not `git "
        "worktree remove`, ExitWorktree or a cd: clanker tracks the worktree and moves "
        "this conversation with it). Strict: uncommitted, staged or untracked changes "
        "block (dirty); ignored files alone block (ignored-only) unless discardIgnored, "
        "which moves the whole worktree to the Trash. deleteBranch deletes its branch "
        "with git branch -d only (an unmerged branch is kept). Answers completed, "
        "already-complete, dirty, ignored-only, partial or a one-line refusal."
    ),
    input=Input(
        deleteBranch=Flag("Delete the worktree's branch too (git branch -d: only when "
                           "merged).", required=False, default=False),
        discardIgnored=Flag("Remove it although ignored files are left (they go to the "
                             "Trash with it).", required=False, default=False),
    ),
    annotations=Annotations(read_only=False, destructive=True, idempotent=False),
    timeout=TRANSACTION_TIMEOUT,
    guidance=("When your work in a clanker worktree is done (committed, merged), finish it "
              "with clanker_complete_isolated_checkout instead of `git worktree remove`, "
              "ExitWorktree or cd: it moves this conversation back and removes the "
              "worktree safely."),
    run=_complete,
)
