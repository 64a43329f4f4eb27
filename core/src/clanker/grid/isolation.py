"""The grid's side of ``clanker_create_isolated_checkout``: create a worktree for the
caller and move its conversation into it.

Everything comes from the authenticated caller: its launch directory names the
repository (the branch starts from the main checkout's ``HEAD``), its terminal
the conversation (the root session attention bound) and the launcher that moves
it (:mod:`clanker.grid.moves`). What can be checked before anything is created
is checked first; once the worktree exists it is never removed here: a move
that is refused leaves it in place and the answer says where.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from clanker.bridge.credentials import Binding
from clanker.bridge.declaration import CapabilityRefused
from clanker.grid.moves import MoveUnavailable
from clanker.grid.protocol import MoveOutcome

__all__ = ["Isolation"]

Move = Callable[[str, str, str], Awaitable[MoveOutcome]]


class Isolation:
    """Creates isolated checkouts for callers, one at a time per terminal."""

    def __init__(self, *, state_dir: Path | None, move: Move,
                 session_of: Callable[[str], str | None],
                 listening: Callable[[str], bool]) -> None:
        """``state_dir`` is clanker's state directory (``None``: this grid creates no
        checkouts); ``move(terminal, target, session)`` asks the terminal's launcher,
        ``session_of`` is the root session attention bound, ``listening`` whether a
        launcher can be asked."""
        self._state_dir = state_dir
        self._move = move
        self._session_of = session_of
        self._listening = listening
        self._busy: set[str] = set()

    @property
    def busy(self) -> set[str]:
        """The terminals a checkout transaction runs for now: completion shares it, so
        one terminal never has a create and a complete under way at once."""
        return self._busy

    async def create(self, binding: Binding, branch: str) -> dict[str, Any]:
        terminal = binding.terminal
        if terminal in self._busy:
            raise CapabilityRefused("busy: another isolated checkout is being made for you")
        self._busy.add(terminal)
        try:
            return await self._create(binding, branch)
        finally:
            self._busy.discard(terminal)

    async def _create(self, binding: Binding, branch: str) -> dict[str, Any]:
        from clanker.checkouts.git import Git
        from clanker.checkouts.service import CheckoutService
        from clanker.checkouts.types import CheckoutError
        from clanker.environment.local import LocalEnvironment

        if self._state_dir is None:
            raise CapabilityRefused("unsupported: this grid creates no checkouts")
        environment = LocalEnvironment()
        service = CheckoutService(environment=environment, state_dir=self._state_dir)
        git = Git(environment.executor)
        here = binding.launch_dir
        try:
            main = await git.main_checkout(here)
            top = await git.toplevel(here)
        except CheckoutError as error:
            raise CapabilityRefused(f"{error.reason.value}: {error.message}") from None
        if top is not None and os.path.realpath(top) != os.path.realpath(main):
            listed = await git.worktrees(main)
            current = next((w.branch for w in listed
                            if os.path.realpath(w.path) == os.path.realpath(top)), None)
            return {"status": "already-isolated", "branch": current, "path": top}
        session = self._session_of(binding.terminal)
        if session is None:
            raise CapabilityRefused("no-session: clanker does not know your conversation "
                                    "yet, so it cannot be moved; nothing was created")
        if not self._listening(binding.terminal):
            raise CapabilityRefused("not-relayed: your launch cannot be moved to another "
                                    "checkout; nothing was created")
        try:
            created = await service.create(here, branch)
        except CheckoutError as error:
            raise CapabilityRefused(f"{error.reason.value}: {error.message}") from None
        target = _same_place(created.path, main, here)
        kept = f"the worktree is kept at {created.path} (branch {created.branch})"
        try:
            outcome = await self._move(binding.terminal, target, session)
        except MoveUnavailable as unavailable:
            raise CapabilityRefused(f"not-moved ({unavailable.word}): you continue where "
                                    f"you were; {kept}") from None
        if not outcome.moved:
            raise CapabilityRefused(f"not-moved ({outcome.why}): you continue where you "
                                    f"were; {kept}")
        return {"status": "created", "branch": created.branch, "path": created.path}


def _same_place(worktree: str, main: str, here: str) -> str:
    """Where in ``worktree`` the caller continues: the directory it works in, relative
    to the main checkout, when the worktree has it; else the worktree's root."""
    relative = os.path.relpath(os.path.realpath(here), os.path.realpath(main))
    if relative == "." or relative.startswith(".."):
        return worktree
    inside = os.path.join(worktree, relative)
    return inside if os.path.isdir(inside) else worktree
