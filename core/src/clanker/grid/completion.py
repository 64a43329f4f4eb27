"""The grid's side of ``clanker_complete_isolated_checkout``: move the caller's
conversation back to the main checkout, then complete the worktree it ran in.

The worktree is the caller's launch directory (its binding), never anything
the model names. The order is the one that never strands a conversation:

1. preflight, before anything changes: the caller works in a worktree clanker
   created (else ``already-complete`` or ``not-owned``), git lists it unlocked
   or it is already gone, no other agent works there, and nothing in it would
   block its removal (``dirty``, or ``ignored-only`` without ``discard_ignored``:
   both are answered without moving anything);
2. the move back, through the caller's launcher, proven there before it is
   adopted (:mod:`clanker.grid.moves`); a refused or unanswered move is never
   followed by cleanup, and the answer says where the worktree is kept;
3. past that commit point, the strict completion
   (:meth:`~clanker.checkouts.service.CheckoutService.complete`: inspected
   again, removal verified, ``git branch -d`` only). Whatever it refuses now
   leaves the worktree in place and is answered as ``partial``.

Steps 2 and 3 run as one task this object owns: a caller that is cut off (its
process ended, its call timed out) does not cut the transaction off halfway,
since the launcher may already have committed the move. The outcome is kept
per conversation, so asking again from the main checkout answers
``already-complete`` with what happened.
"""

from __future__ import annotations

import asyncio
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from clanker._logging import get_logger
from clanker.bridge.credentials import Binding
from clanker.bridge.declaration import CapabilityRefused
from clanker.grid.isolation import (
    Isolation,
    Move,
    Transactions,
    _movable,
    _same_place,
    unrecovered_notice,
)
from clanker.grid.moves import MoveUnavailable
from clanker.grid.pending import PendingMove

if TYPE_CHECKING:
    from clanker.checkouts.service import CheckoutService
    from clanker.checkouts.types import CompletionResult, Worktree

__all__ = ["Completion"]

log = get_logger(__name__)

Locations = Callable[[], Iterable[tuple[str, str, str]]]
"""Every live terminal as ``(terminal, launch directory, reported location)``."""

_REMEMBERED: Final = 64
"""How many conversations' last completion are kept for ``already-complete``."""


def _inside(path: str, directory: str) -> bool:
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


class Completion:
    """Completes isolated checkouts for callers (one transaction per terminal, shared
    with :class:`~clanker.grid.isolation.Isolation` through ``transactions``)."""

    def __init__(self, *, state_dir: Path | None, move: Move,
                 session_of: Callable[[str], str | None],
                 listening: Callable[[str], bool], transactions: Transactions,
                 locations: Locations,
                 notify: Callable[[Binding, str], object] | None = None,
                 isolation: Isolation | None = None) -> None:
        """``isolation`` holds the pending moves: a caller whose harness moves only after
        its turn gets its completion scheduled there, and made at the trigger."""
        self._state_dir = state_dir
        self._isolation = isolation
        if isolation is not None:
            isolation.triggers["complete"] = self.triggered
        self._move = move
        self._session_of = session_of
        self._listening = listening
        self._transactions = transactions
        self._locations = locations
        self._notify = notify
        self._outcomes: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._moving: dict[str, asyncio.Future[dict[str, Any]]] = {}

    async def complete(self, binding: Binding, *, delete_branch: bool,
                       discard_ignored: bool) -> dict[str, Any]:
        terminal = binding.terminal
        self._transactions.begin(terminal)
        try:
            scheduled = None if self._isolation is None else \
                self._isolation.pending.of(terminal)
            if scheduled is not None and scheduled.kind != "complete":
                raise CapabilityRefused("busy: a move into an isolated checkout is scheduled "
                                        "for the end of this turn; nothing was changed")
            if scheduled is not None:
                return {"status": "already-scheduled", "path": scheduled.path,
                        "branch": scheduled.branch or None,
                        "message": "a move back to the main checkout is already scheduled "
                                   "for the end of this turn"}
            return await self._complete(binding, delete_branch, discard_ignored)
        finally:
            if terminal not in self._moving:  # else it settles when the move does
                self._transactions.busy.discard(terminal)

    async def _complete(self, binding: Binding, delete_branch: bool,
                        discard_ignored: bool) -> dict[str, Any]:
        from clanker.checkouts.types import CheckoutError, Dirtiness

        if self._state_dir is None:
            raise CapabilityRefused("unsupported: this grid completes no checkouts")
        service = self._service(binding.terminal)
        here = binding.launch_dir
        try:
            located = await self._locate(service, binding.terminal, here)
        except CheckoutError as error:
            raise CapabilityRefused(f"{error.reason.value}: {error.message}") from None
        session = self._session_of(binding.terminal)
        if located is None:
            answer: dict[str, Any] = {"status": "already-complete"}
            last = self._outcomes.get(session) if session is not None else None
            return answer | {"last": last} if last is not None else answer
        main, worktree = located
        if worktree.dirtiness in (Dirtiness.DIRTY, Dirtiness.IGNORED_ONLY) and not (
                worktree.dirtiness is Dirtiness.IGNORED_ONLY and discard_ignored):
            return _blocked(worktree)
        if worktree.problem is not None:
            raise CapabilityRefused(f"git-failed: {worktree.problem}; nothing was changed")
        session = _movable(session, self._listening, binding.terminal, "nothing was changed")
        target = _same_place(main, worktree.path, here) if os.path.isdir(here) else main
        if self._isolation is not None and self._isolation.after_turn(binding):
            self._isolation.schedule(binding, PendingMove(
                terminal=binding.terminal, session=session, target=target,
                path=worktree.path, branch=worktree.branch or "",
                after_revision=self._isolation.revision_of(binding.terminal),
                requested_at=datetime.now(UTC), kind="complete", main=main,
                delete_branch=delete_branch, discard_ignored=discard_ignored))
            self._isolation.tell(binding, f"isolated checkout completion scheduled: the agent "
                                          f"moves back to {target} once its turn ends, then "
                                          f"{worktree.path} is completed")
            return {"status": "scheduled", "path": worktree.path, "branch": worktree.branch,
                    "message": "your conversation moves back to the main checkout once this "
                               "turn has ended, and then the worktree is completed (an "
                               "interrupt or a failed turn cancels it and keeps the worktree)"}
        # Owned here, not by the caller: past the move's commit point it must finish.
        task = self._transactions.own(self._move_and_complete(
            service, binding, session, main, target, worktree,
            delete_branch, discard_ignored))
        self._moving[binding.terminal] = task

        def settled(done: asyncio.Future[dict[str, Any]]) -> None:
            # A caller cut off mid-move leaves its terminal busy until the move settles.
            del self._moving[binding.terminal]
            self._transactions.busy.discard(binding.terminal)
            if not done.cancelled() and done.exception() is not None:
                log.info("terminal %s: completion ended: %s", binding.terminal,
                         done.exception())

        task.add_done_callback(settled)
        return await asyncio.shield(task)

    def _service(self, caller: str) -> CheckoutService:
        from clanker.checkouts.service import CheckoutService
        from clanker.environment.local import LocalEnvironment

        assert self._state_dir is not None

        async def occupants(path: str) -> list[str]:
            return self._others(caller, path)

        return CheckoutService(environment=LocalEnvironment(), state_dir=self._state_dir,
                               occupants=occupants)

    def _others(self, caller: str, path: str) -> list[str]:
        """The other live terminals launched in ``path`` or reported working there
        (the caller itself does not count: it is the one being moved out)."""
        return [terminal for terminal, cwd, location in self._locations()
                if terminal != caller and (_inside(cwd, path) or _inside(location, path))]

    async def _locate(self, service: CheckoutService, caller: str, here: str
                      ) -> tuple[str, Worktree] | None:
        """The main checkout and the worktree ``here`` is in (checked as preflight), or
        ``None`` when ``here`` is the main checkout. Raises ``CheckoutError``."""
        from clanker.checkouts.git import Git
        from clanker.checkouts.types import CheckoutError, Refusal
        from clanker.environment.local import LocalEnvironment

        git = Git(LocalEnvironment().executor)
        if os.path.isdir(here):
            main = await git.main_checkout(here)
            top = await git.toplevel(here) or here
            if os.path.realpath(top) == os.path.realpath(main):
                return None
        else:  # removed behind clanker's back: only proof attributes it
            removed = await service.removed_origin(here)
            if removed is None:
                raise CheckoutError(Refusal.NOT_FOUND, f"{here} is gone and clanker cannot "
                                    "tell which worktree it was; nothing was changed")
            main, top = removed.main_checkout, removed.path
        listing = await service.list(main)
        worktree = next((w for w in listing.worktrees
                         if os.path.realpath(w.path) == os.path.realpath(top)), None)
        if worktree is None or not worktree.created_by_clanker:
            raise CheckoutError(Refusal.NOT_OWNED, f"{top} was not created by clanker; "
                                "nothing was changed (its removal is yours to do)")
        if worktree.locked:
            raise CheckoutError(Refusal.LOCKED, f"{top} is locked (git worktree unlock it "
                                "first); nothing was changed")
        others = self._others(caller, top)
        if others:
            raise CheckoutError(Refusal.IN_USE, f"another agent (terminal {others[0]}) "
                                f"works in {top}; nothing was changed")
        return main, worktree

    async def _move_and_complete(self, service: CheckoutService, binding: Binding,
                                 session: str, main: str, target: str, worktree: Worktree,
                                 delete_branch: bool, discard_ignored: bool
                                 ) -> dict[str, Any]:
        terminal = binding.terminal
        kept = f"the worktree is kept at {worktree.path}"
        try:
            outcome = await self._move(terminal, target, session)
        except MoveUnavailable as unavailable:
            raise CapabilityRefused(f"not-moved ({unavailable.word}): you continue where "
                                    f"you were; {kept}") from None
        if not outcome.moved:
            raise CapabilityRefused(f"not-moved ({outcome.why}): you continue where you "
                                    f"were; {kept}")
        return await self._after_move(service, binding, session, target, main, worktree,
                                      delete_branch, discard_ignored)

    async def triggered(self, binding: Binding, move: PendingMove) -> None:
        """Make ``move``, a completion scheduled for the end of the turn: re-validated
        first (the same conversation, the worktree still clanker's, unlocked, nobody
        else's and nothing in it that blocks), then moved and completed; the person
        hears of every outcome."""
        from clanker.checkouts.types import CheckoutError

        assert self._isolation is not None
        isolation, terminal = self._isolation, binding.terminal
        kept = f"the worktree is kept at {move.path}"
        try:
            self._transactions.begin(terminal)
        except CapabilityRefused as refused:
            isolation.tell(binding, f"isolated checkout completion not made ({refused}); "
                                    f"{kept}")
            return
        try:
            service = self._service(terminal)
            problem: str | None = None
            located = None
            if self._session_of(terminal) != move.session or not self._listening(terminal):
                problem = "the terminal is no longer attached to the same conversation"
            else:
                try:
                    located = await self._locate(service, terminal, binding.launch_dir)
                except CheckoutError as error:
                    problem = f"{error.reason.value}: {error.message}"
            if problem is None:
                problem = _still_to_complete(located, move, discard=move.discard_ignored)
            if problem is not None or located is None:
                isolation.tell(binding, f"isolated checkout completion cancelled ({problem}):"
                                        f" the agent continues where it was; nothing was "
                                        f"moved or removed; {kept}")
                return
            main, worktree = located
            isolation.under_way(terminal, move)
            try:
                outcome = await self._move(terminal, move.target, move.session)
            except MoveUnavailable as unavailable:
                isolation.tell(binding, f"isolated checkout completion not made "
                                        f"({unavailable.word}): the agent continues where it "
                                        f"was; {kept}")
                return
            finally:
                isolation.under_way(terminal, None)
            if not outcome.moved:
                isolation.tell(binding, unrecovered_notice(move, kept)
                               if outcome.why == "unrecovered" else
                               f"isolated checkout completion not made ({outcome.why}): the "
                               f"agent continues where it was; {kept}")
                return
            await self._after_move(service, binding, move.session, move.target, main,
                                   worktree, move.delete_branch, move.discard_ignored)
        finally:
            self._transactions.busy.discard(terminal)

    async def _after_move(self, service: CheckoutService, binding: Binding, session: str,
                          target: str, main: str, worktree: Worktree, delete_branch: bool,
                          discard_ignored: bool) -> dict[str, Any]:
        """Past the commit point: complete the worktree the conversation has left."""
        from clanker.checkouts.types import CheckoutError

        terminal = binding.terminal
        moved = {"moved_to": target, "path": worktree.path, "branch": worktree.branch}
        try:
            result = await service.complete(main, path=worktree.path,
                                            delete_branch=delete_branch,
                                            discard_ignored=discard_ignored)
        except asyncio.CancelledError:  # the grid stopped at the transaction's bound
            self._remember(session, moved | {
                "status": "partial", "reason": "stopped",
                "message": f"the grid stopped before the worktree was completed; it is "
                           f"kept at {worktree.path}; you continue in {target}"})
            raise
        except CheckoutError as error:
            answer = moved | {"status": "partial", "reason": error.reason.value,
                              "message": f"{error.message}; you continue in {target}"}
        except Exception as error:  # never "left where it was": the move is done
            log.warning("terminal %s: completion failed after the move: %s", terminal,
                        type(error).__name__)
            answer = moved | {"status": "partial", "reason": "failed",
                              "message": f"the worktree could not be completed "
                                         f"({type(error).__name__}); it is kept at "
                                         f"{worktree.path}; you continue in {target}"}
        else:
            answer = moved | _completed(result, target)
        self._remember(session, answer)
        if self._notify is not None:  # the person sees it, whoever else the agent tells
            self._notify(binding, _notice(answer))
        return answer

    def _remember(self, session: str, answer: dict[str, Any]) -> None:
        self._outcomes[session] = answer
        self._outcomes.move_to_end(session)
        while len(self._outcomes) > _REMEMBERED:
            self._outcomes.popitem(last=False)


def _still_to_complete(located: tuple[str, Worktree] | None, move: PendingMove, *,
                       discard: bool) -> str | None:
    """Why the scheduled completion must not be made now (``None``: it may)."""
    from clanker.checkouts.types import Dirtiness

    if located is None:
        return "the agent already runs in the main checkout"
    _, worktree = located
    if os.path.realpath(worktree.path) != os.path.realpath(move.path):
        return f"the agent no longer runs in {move.path}"
    if worktree.problem is not None:
        return f"git-failed: {worktree.problem}"
    if worktree.dirtiness is Dirtiness.DIRTY or (
            worktree.dirtiness is Dirtiness.IGNORED_ONLY and not discard):
        return f"{worktree.dirtiness}: changes in the worktree block its completion"
    return None


def _notice(answer: dict[str, Any]) -> str:
    """One line for the person: what completing the agent's checkout did."""
    if answer["status"] == "completed":
        branch = ("its branch deleted" if answer["branch_deleted"]
                  else f"branch {answer['branch']} kept")
        return (f"isolated checkout completed: {answer['path']} removed, {branch}; "
                f"the agent continues in {answer['moved_to']}")
    why = answer.get("reason") or answer.get("removal")
    return (f"isolated checkout only partly completed ({why}): {answer['path']} is kept; "
            f"the agent continues in {answer['moved_to']}")


def _blocked(worktree: Worktree) -> dict[str, Any]:
    from clanker.checkouts.types import Dirtiness

    assert worktree.changes is not None
    ignored_only = worktree.dirtiness is Dirtiness.IGNORED_ONLY
    return {"status": str(worktree.dirtiness), "path": worktree.path,
            "branch": worktree.branch, "changes": worktree.changes.to_json(),
            "can_complete_with_discard_ignored": ignored_only,
            "message": ("only ignored files are left; discardIgnored moves the worktree "
                        "to the Trash with them" if ignored_only else
                        "commit, stash or remove the changes first") +
                       "; nothing was moved or removed"}


def _completed(result: CompletionResult, target: str) -> dict[str, Any]:
    answer: dict[str, Any] = {"status": "completed" if result.done else "partial",
                              "removal": str(result.status), "trashed": result.trashed,
                              "branch_deleted": result.branch_deleted}
    if result.branch_note is not None:
        answer["branch_note"] = result.branch_note
    if not result.done:  # changed between the preflight and the removal
        assert result.changes is not None
        answer["changes"] = result.changes.to_json()
        answer["message"] = (f"the worktree is kept ({result.status}); you continue in "
                             f"{target}")
    return answer
