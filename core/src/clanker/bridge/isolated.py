"""``clanker_create_isolated_checkout``: the agent asks for its own worktree, and its
conversation continues there in the same terminal.

It takes operation data only, the new branch's name: the repository, the
terminal, the conversation and every path come from the authenticated caller
(the input schema is closed, so a ``path`` or ``workspace`` field is refused).
A launch is granted it only when its harness can be moved while it runs
(:func:`grants_for`); the grid does the work
(:class:`~clanker.bridge.declaration.BridgeHost.create_isolated_checkout`).
"""

from __future__ import annotations

from typing import Any, Final

from clanker.bridge.declaration import Annotations, Caller, Signal, define_capability
from clanker.bridge.input import Arguments, Input, Text
from clanker.checkouts.types import TRANSACTION_TIMEOUT

__all__ = ["CHECKOUT_NAMES", "CLANKER_CREATE_ISOLATED_CHECKOUT"]

MAX_BRANCH: Final = 200


async def _create(arguments: Arguments, caller: Caller, signal: Signal) -> dict[str, Any]:
    return await caller.host.create_isolated_checkout(str(arguments["branch"]))


CLANKER_CREATE_ISOLATED_CHECKOUT: Final = define_capability(
    name="clanker_create_isolated_checkout",
    description=(
        "Move your work into a new git worktree of this repository, on a new branch from "
        "the main checkout's HEAD; your conversation continues there, in the same terminal. "
        "Answers created (with the branch and path), already-isolated (you already work in "
        "one), or a one-line refusal; when the move itself is refused the worktree is kept "
        "and you continue where you were. Takes the new branch's name only."
    ),
    input=Input(branch=Text("The new branch, as git names branches (feature/x).",
                            max_length=MAX_BRANCH)),
    annotations=Annotations(read_only=False, destructive=False, idempotent=False),
    timeout=TRANSACTION_TIMEOUT,
    guidance=("To work apart from other agents in this repository, ask "
              "clanker_create_isolated_checkout for a worktree instead of running "
              "`git worktree` or EnterWorktree yourself: clanker records it, moves this "
              "conversation there and can complete it safely later."),
    run=_create,
)

CHECKOUT_NAMES: Final = (CLANKER_CREATE_ISOLATED_CHECKOUT.name,
                          "clanker_complete_isolated_checkout")
"""What a launch whose conversation can be moved is granted beside the shipped names
(the way in, and the way back: :mod:`clanker.bridge.complete`)."""
