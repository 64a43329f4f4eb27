"""The grid's side of ``clanker_create_isolated_checkout``: create a worktree for the
caller and move its conversation into it.

Everything comes from the authenticated caller: its launch directory names the
repository (the branch starts from the main checkout's ``HEAD``), its terminal
the conversation (the root session attention bound) and the launcher that moves
it (:mod:`clanker.grid.moves`). What can be checked before anything is created
is checked first; once the worktree exists it is never removed here: a move
that is refused leaves it in place and the answer says where.

The move is the commit point, so it runs as a task :class:`Transactions` owns:
a caller cut off while the launcher is at work (its call reached its bound, its
process ended) does not cut the move off, and a grid that shuts down waits for
it, for at most the transaction's bound.

A caller whose harness moves only after its turn (``after-turn``) gets its
checkout at once and a pending move (:mod:`clanker.grid.pending`), one per
terminal: the grid's publisher hands every revision to :meth:`Isolation.observe`,
and the terminal's next completed root turn triggers the move, re-validated first
(the checkout is still there, clanker's and on its branch; the terminal is still
attached to the same conversation). An interrupted or failed turn, an ended
session or an exited agent cancels it; the checkout is kept. Every outcome of a
create (made, scheduled, cancelled, refused) is told to the person through the
grid's notices (what ``watch --notify`` reads).

Pending moves outlive the grid (:class:`~clanker.grid.pending.PendingStore`): a
grid that stops suspends them, and the next one reloads them
(:meth:`Isolation.reload`) and re-arms each on a terminal that comes back with the
same conversation from the same place, or cancels it, saying so, when the
conversation comes back elsewhere or nobody resumes it in time.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from clanker._logging import get_logger
from clanker.bridge.credentials import Binding
from clanker.bridge.declaration import CapabilityRefused
from clanker.grid.moves import MoveUnavailable
from clanker.grid.pending import (
    REARM_WITHIN,
    Decision,
    Orphan,
    PendingMove,
    PendingMoves,
    PendingStore,
    decide,
)
from clanker.grid.protocol import MoveOutcome

if TYPE_CHECKING:
    from clanker.attention.broker import Revision
    from clanker.grid.pending import PendingStateError

__all__ = ["Isolation", "Transactions"]

log = get_logger(__name__)

Move = Callable[[str, str, str], Awaitable[MoveOutcome]]

STOPPING: Final = ("stopping: the grid is shutting down and starts no checkout "
                   "transaction; nothing was changed")


class Transactions:
    """The checkout transactions of one grid: which terminals one runs for (one at a
    time per terminal, create or complete), the calls under way, and the moves they
    own past the caller; :meth:`close` refuses new ones and :meth:`settle` waits."""

    def __init__(self) -> None:
        self.busy: set[str] = set()
        self._tasks: set[asyncio.Future[Any]] = set()
        self._closed = False

    def begin(self, terminal: str) -> None:
        """Mark ``terminal`` busy; raises ``CapabilityRefused`` (``stopping``, ``busy``)."""
        if self._closed:
            raise CapabilityRefused(STOPPING)
        if terminal in self.busy:
            raise CapabilityRefused("busy: another isolated checkout transaction runs for "
                                    "you; nothing was changed")
        self.busy.add(terminal)
        call = asyncio.current_task()
        if call is not None:  # the call itself: settled once its answer is made
            self._track(call)

    def own(self, work: Awaitable[Any]) -> asyncio.Future[Any]:
        """Run ``work`` as a task no caller can cancel (await it through a shield)."""
        task = asyncio.ensure_future(work)
        self._track(task)
        return task

    def _track(self, task: asyncio.Future[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def close(self) -> None:
        """Refuse every transaction from now on (the grid is shutting down)."""
        self._closed = True

    async def settle(self, timeout: float) -> bool:
        """Wait until the transactions under way have finished, for at most ``timeout``
        seconds; those still running then are cancelled. Say whether any ran."""
        if not self._tasks:
            return False
        _, late = await asyncio.wait(set(self._tasks), timeout=timeout)
        for task in late:
            log.warning("a checkout transaction was still running at the bound; cut off")
            task.cancel()
        if late:
            await asyncio.gather(*late, return_exceptions=True)
        return True


class Isolation:
    """Creates isolated checkouts for callers, one at a time per terminal."""

    def __init__(self, *, state_dir: Path | None, move: Move,
                 session_of: Callable[[str], str | None],
                 listening: Callable[[str], bool],
                 transactions: Transactions | None = None,
                 after_turn: Callable[[Binding], bool] = lambda binding: False,
                 revision_of: Callable[[str], int] = lambda terminal: 0,
                 notify: Callable[[Binding, str], object] | None = None,
                 pending_dir: Path | None = None,
                 binding_of: Callable[[str], Binding | None] = lambda terminal: None) -> None:
        """``state_dir`` is clanker's state directory (``None``: this grid creates no
        checkouts); ``move(terminal, target, session)`` asks the terminal's launcher,
        ``session_of`` is the root session attention bound, ``listening`` whether a
        launcher can be asked, ``after_turn`` whether the caller's harness moves only
        after its turn, ``revision_of`` the terminal's published revision and
        ``notify`` tells the person (the grid's notices). ``pending_dir`` keeps the
        pending moves across a grid restart (``None``: in memory only) and
        ``binding_of`` is a live terminal's record, which a reloaded move's caller
        must match to be re-armed on it."""
        self._state_dir = state_dir
        self._move = move
        self._session_of = session_of
        self._listening = listening
        self._transactions = transactions if transactions is not None else Transactions()
        self._moving: dict[str, asyncio.Future[MoveOutcome]] = {}
        self._after_turn = after_turn
        self._revision_of = revision_of
        self._notify = notify
        self.pending = PendingMoves(None if pending_dir is None else PendingStore(pending_dir))
        self._binding_of = binding_of
        self._expiry: asyncio.TimerHandle | None = None
        self._under_way: dict[str, PendingMove] = {}
        self.triggers: dict[str, Callable[[Binding, PendingMove], Awaitable[None]]] = {
            "create": self._triggered}
        """What makes a triggered move of each kind (completion adds ``complete``)."""

    @property
    def transactions(self) -> Transactions:
        """What completion shares, so one terminal never has a create and a complete
        under way at once, and what shutdown settles."""
        return self._transactions

    async def create(self, binding: Binding, branch: str) -> dict[str, Any]:
        terminal = binding.terminal
        self._transactions.begin(terminal)
        try:
            scheduled = self.pending.of(terminal)
            if scheduled is not None and scheduled.kind != "create":
                raise CapabilityRefused("busy: a move back to the main checkout is scheduled "
                                        "for the end of this turn; nothing was created")
            if scheduled is not None:
                return {"status": "already-scheduled", "branch": scheduled.branch,
                        "path": scheduled.path,
                        "message": "a move is already scheduled for the end of this turn"}
            return await self._create(binding, branch)
        finally:
            if terminal not in self._moving:  # else it settles when the move does
                self._transactions.busy.discard(terminal)

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
        session = _movable(self._session_of(binding.terminal), self._listening,
                           binding.terminal, "nothing was created")
        try:
            created = await service.create(here, branch)
        except CheckoutError as error:
            raise CapabilityRefused(f"{error.reason.value}: {error.message}") from None
        target = _same_place(created.path, main, here)
        if self._after_turn(binding):
            self.schedule(binding, PendingMove(
                terminal=binding.terminal, session=session, target=target,
                path=created.path, branch=created.branch,
                after_revision=self._revision_of(binding.terminal),
                requested_at=datetime.now(UTC)))
            self._tell(binding, f"isolated checkout move scheduled: {created.path} (branch "
                                f"{created.branch}) is created; the agent moves there once "
                                f"its turn ends")
            return {"status": "scheduled", "branch": created.branch, "path": created.path,
                    "message": "the worktree is created; your conversation moves there "
                               "once this turn has ended (an interrupt or a failed turn "
                               "cancels the move and keeps the worktree)"}
        kept = f"the worktree is kept at {created.path} (branch {created.branch})"
        try:
            outcome = await self._owned_move(binding.terminal, target, session)
        except MoveUnavailable as unavailable:
            self._tell(binding, f"isolated checkout move not made ({unavailable.word}): the "
                                f"agent continues where it was; {kept}")
            raise CapabilityRefused(f"not-moved ({unavailable.word}): you continue where "
                                    f"you were; {kept}") from None
        if not outcome.moved:
            self._tell(binding, f"isolated checkout move not made ({outcome.why}): the "
                                f"agent continues where it was; {kept}")
            raise CapabilityRefused(f"not-moved ({outcome.why}): you continue where you "
                                    f"were; {kept}")
        self._tell(binding, f"isolated checkout ready: the agent continues in {target} "
                            f"(branch {created.branch})")
        return {"status": "created", "branch": created.branch, "path": created.path}

    def after_turn(self, binding: Binding) -> bool:
        """Whether ``binding``'s harness moves its conversation only after its turn."""
        return self._after_turn(binding)

    def revision_of(self, terminal: str) -> int:
        return self._revision_of(terminal)

    def schedule(self, binding: Binding, move: PendingMove) -> bool:
        """Record ``move`` for ``binding``'s terminal (``False``: it has one already)."""
        return self.pending.schedule(move, binding)

    def observe(self, revision: Revision) -> None:
        """Hear one published revision: trigger or cancel the terminal's pending move
        when it settles the root turn that was running when the move was asked for."""
        terminal = revision.terminal
        move = self.pending.of(terminal)
        if move is None:
            if self.pending.orphans:
                self._rearm(revision)
            return
        decision, why = decide(move, revision)
        if decision is Decision.WAIT:
            return
        binding = self.pending.caller_of(terminal)
        self.pending.pop(terminal)
        assert binding is not None  # recorded with the move
        if decision is Decision.CANCEL:
            self._tell(binding, f"isolated checkout move cancelled ({why}): the agent "
                                f"continues where it was; the worktree is kept at "
                                f"{move.path} (branch {move.branch})")
            return
        self._transactions.own(self.triggers[move.kind](binding, move))

    def under_way(self, terminal: str, move: PendingMove | None) -> None:
        """Say that ``terminal``'s triggered move is being made (``None``: no longer)."""
        if move is None:
            self._under_way.pop(terminal, None)
        else:
            self._under_way[terminal] = move

    def tell(self, binding: Binding, message: str) -> None:
        """Tell the person (the grid's notices)."""
        self._tell(binding, message)

    def move_of(self, terminal: str) -> tuple[str, PendingMove] | None:
        """``terminal``'s after-turn move and its state (``scheduled`` until its turn
        ends, ``moving`` while the launcher makes it); ``None`` when it has none. The
        source's terminal is retired early in a move, so a terminal of the same
        conversation (the resume being proven) shows the move until it is answered."""
        scheduled = self.pending.of(terminal)
        if scheduled is not None:
            return "scheduled", scheduled
        moving = self._under_way.get(terminal)
        if moving is None and self._under_way:
            session = self._session_of(terminal)
            moving = next((move for move in self._under_way.values()
                           if session is not None and move.session == session), None)
        return None if moving is None else ("moving", moving)

    def cancel_all(self, why: str) -> int:
        """Take every pending move out of this grid (it is stopping), telling the person
        of each; return how many there were. Moves kept across a restart are suspended
        (the next grid reloads them), the others cancelled."""
        if self._expiry is not None:
            self._expiry.cancel()
        if self.pending.kept:
            suspended = self.pending.suspend()
            for move, binding, kept in suspended.values():
                if not kept:
                    self._tell(binding, f"isolated checkout move cancelled ({why}; it could "
                                        f"not be kept for the next grid): {_kept(move)}")
                    continue
                self._tell(binding, f"isolated checkout move suspended ({why}): it is made "
                                    f"if this conversation is resumed from "
                                    f"{binding.launch_dir} within {_minutes()} of the grid's "
                                    f"next start, else cancelled; the worktree is kept at "
                                    f"{move.path} (branch {move.branch})")
            return len(suspended)
        moves = self.pending.all()
        for terminal, move in moves.items():
            caller = self.pending.caller_of(terminal)
            self.pending.pop(terminal)
            if caller is not None:
                self._tell(caller, f"isolated checkout move cancelled ({why}): the agent "
                                   f"continues where it was; the worktree is kept at "
                                   f"{move.path} (branch {move.branch})")
        return len(moves)

    def reload(self, now: datetime, *, clock: Callable[[], datetime] | None = None) -> int:
        """Load the pending moves the previous grid left (each re-armable for
        :data:`~clanker.grid.pending.REARM_WITHIN` from ``now``); return how many. A
        file that cannot be used is logged and costs no other move. With ``clock``
        (and a running loop), :meth:`expire` runs by itself once that time is up."""
        count, refused, stale = self.pending.reload(now)
        for error in refused:
            _log_refused(error)
        for old in stale:
            self._tell(old.caller, f"isolated checkout move cancelled (it was asked for "
                                   f"{old.move.requested_at.isoformat(timespec='seconds')}, "
                                   f"too long ago to be made after a grid restart): "
                                   f"{_kept(old.move)}")
        if count:
            log.info("%d pending move(s) reloaded; each waits for its conversation", count)
            if clock is not None:
                self._expiry = asyncio.get_running_loop().call_later(
                    REARM_WITHIN.total_seconds(), lambda: self.expire(clock()))
        return count

    def expire(self, now: datetime) -> int:
        """Cancel the reloaded moves nobody came back for in time, saying so."""
        late = self.pending.expired(now)
        for orphan in late:
            self._tell(orphan.caller, f"isolated checkout move cancelled (the grid "
                                      f"restarted and the conversation was not resumed "
                                      f"from {orphan.caller.launch_dir} within {_minutes()}):"
                                      f" {_kept(orphan.move)}")
        return len(late)

    def _rearm(self, revision: Revision) -> None:
        """Re-arm a reloaded move on ``revision``'s terminal when it runs the same
        conversation from the same place; cancel it when it runs it elsewhere."""
        snapshot = revision.snapshot
        if snapshot is None or not snapshot.root_session_id:
            return
        orphans = self.pending.orphans_of(snapshot.root_session_id)
        if not orphans:
            return
        caller = self._binding_of(revision.terminal)
        if caller is None:  # not live yet: a later revision asks again
            return
        for orphan in orphans:
            why = _mismatch(orphan, caller)
            move = None if why else self.pending.rearm(orphan, caller, revision.revision)
            if move is not None:
                self._tell(caller, f"isolated checkout move re-armed after the grid "
                                   f"restarted: the agent moves to {move.target} (branch "
                                   f"{move.branch}) once its turn ends")
                continue
            self.pending.drop_orphan(orphan)
            self._tell(caller, f"isolated checkout move cancelled (the grid restarted and "
                               f"{why or 'this terminal has a move of its own'}): "
                               f"{_kept(orphan.move)}")

    def forget(self, terminal: str) -> None:
        """``terminal`` was retired: its pending move, if any, is cancelled."""
        binding = self.pending.caller_of(terminal)
        move = self.pending.pop(terminal)
        if move is not None and binding is not None:
            self._tell(binding, f"isolated checkout move cancelled (the terminal was "
                                f"retired): the worktree is kept at {move.path} "
                                f"(branch {move.branch})")

    async def _triggered(self, binding: Binding, move: PendingMove) -> None:
        terminal = binding.terminal
        kept = f"the worktree is kept at {move.path} (branch {move.branch})"
        try:
            self._transactions.begin(terminal)
        except CapabilityRefused as refused:
            self._tell(binding, f"isolated checkout move not made ({refused}); {kept}")
            return
        try:
            problem = await self._still_valid(binding, move)
            if problem is not None:
                self._tell(binding, f"isolated checkout move not made ({problem}): the "
                                    f"agent continues where it was; {kept}")
                return
            self._under_way[terminal] = move
            try:
                outcome = await self._move(terminal, move.target, move.session)
            except MoveUnavailable as unavailable:
                self._tell(binding, f"isolated checkout move not made ({unavailable.word}):"
                                    f" the agent continues where it was; {kept}")
                return
            finally:
                self._under_way.pop(terminal, None)
            self._tell(binding, _moved_notice(outcome, move, kept))
        finally:
            self._transactions.busy.discard(terminal)

    async def _still_valid(self, binding: Binding, move: PendingMove) -> str | None:
        """Why the move must not be made now (``None``: it may)."""
        from clanker.checkouts.service import CheckoutService
        from clanker.checkouts.types import CheckoutError
        from clanker.environment.local import LocalEnvironment

        if self._session_of(binding.terminal) != move.session \
                or not self._listening(binding.terminal):
            return "the terminal is no longer attached to the same conversation"
        if self._state_dir is None or not os.path.isdir(move.path):
            return f"{move.path} is gone"
        service = CheckoutService(environment=LocalEnvironment(), state_dir=self._state_dir)
        try:
            listing = await service.list(move.path, inspect=False)
        except CheckoutError as error:
            return f"{error.reason.value}: {error.message}"
        here = os.path.realpath(move.path)
        found = next((w for w in listing.worktrees
                      if os.path.realpath(w.path) == here and w.listed), None)
        if found is None or not found.created_by_clanker:
            return f"{move.path} is no longer a worktree clanker created"
        if found.branch != move.branch:
            return f"{move.path} is no longer on branch {move.branch}"
        return None

    def _tell(self, binding: Binding, message: str) -> None:
        log.info("terminal %s: %s", binding.terminal, message)
        if self._notify is not None:
            self._notify(binding, message)

    async def _owned_move(self, terminal: str, target: str, session: str) -> MoveOutcome:
        task = self._transactions.own(self._move(terminal, target, session))
        self._moving[terminal] = task

        def settled(_: asyncio.Future[MoveOutcome]) -> None:
            del self._moving[terminal]
            self._transactions.busy.discard(terminal)

        task.add_done_callback(settled)
        return await asyncio.shield(task)


def _minutes() -> str:
    return f"{int(REARM_WITHIN.total_seconds() // 60)} minutes"


def _kept(move: PendingMove) -> str:
    return (f"the agent continues where it was; the worktree is kept at {move.path} "
            f"(branch {move.branch})")


def _mismatch(orphan: Orphan, caller: Binding) -> str | None:
    """Why ``caller`` is not where ``orphan`` was asked for (``None``: it is)."""
    asked = orphan.caller
    if (asked.harness, asked.workspace, asked.environment) != \
            (caller.harness, caller.workspace, caller.environment):
        return "the conversation came back in another harness or workspace"
    if os.path.realpath(asked.launch_dir) != os.path.realpath(caller.launch_dir):
        return f"the conversation came back in {caller.launch_dir}, not {asked.launch_dir}"
    return None


def _log_refused(error: PendingStateError) -> None:
    log.warning("a stored pending move is refused (the others are kept): %s", error)


def _moved_notice(outcome: MoveOutcome, move: PendingMove, kept: str) -> str:
    if outcome.moved:
        return (f"isolated checkout ready: the agent continues in {move.target} "
                f"(branch {move.branch})")
    if outcome.why == "unrecovered":
        return unrecovered_notice(move, kept)
    return f"isolated checkout move not made ({outcome.why}): the agent continues where " \
           f"it was; {kept}"


def unrecovered_notice(move: PendingMove, kept: str) -> str:
    """The strong notice of a move after which nothing runs the conversation."""
    return (f"isolated checkout move FAILED and the agent could not be resumed where it "
            f"was: resume the conversation from history (clanker resume {move.session}); "
            f"nothing was removed; {kept}")


def _movable(session: str | None, listening: Callable[[str], bool], terminal: str,
             unchanged: str) -> str:
    """``session``, the conversation to move, when ``terminal``'s launch can be moved to
    another checkout; else raise :class:`CapabilityRefused`, saying ``unchanged``."""
    if session is None:
        raise CapabilityRefused("no-session: clanker does not know your conversation "
                                f"yet, so it cannot be moved; {unchanged}")
    if not listening(terminal):
        raise CapabilityRefused("not-relayed: your launch cannot be moved to another "
                                f"checkout; {unchanged}")
    return session


def _same_place(worktree: str, main: str, here: str) -> str:
    """Where in ``worktree`` the caller continues: the directory it works in, relative
    to the main checkout, when the worktree has it; else the worktree's root."""
    relative = os.path.relpath(os.path.realpath(here), os.path.realpath(main))
    if relative == "." or relative.startswith(".."):
        return worktree
    inside = os.path.join(worktree, relative)
    return inside if os.path.isdir(inside) else worktree
