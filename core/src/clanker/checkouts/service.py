"""Isolated checkouts as transactions: create a worktree on a new branch, complete it safely.

Shared by every way in (the library, ``clanker worktree``, later the agent's
bridge); it never names a harness. Git runs through the Environment's
executor. What git cannot do for us runs on this machine only and says so
elsewhere: copying ``.worktreeinclude`` files and moving a checkout to the
Trash.

Each transaction holds its checkout's lock (one wins, a concurrent one is
told ``busy``) and writes clanker's record before and after the step that
changes the repository, so a cancelled or crashed request leaves a state the
next request recognizes: a record in phase ``creating`` or ``completing`` is
reconciled against git's listing, never reported as done.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from attrs import evolve

from clanker.checkouts.git import Git, ListedWorktree
from clanker.checkouts.include import copy_included
from clanker.checkouts.inspection import inspect_checkout
from clanker.checkouts.naming import CONTAINER_SUFFIX, MAX_BRANCH_LENGTH, worktree_path
from clanker.checkouts.provenance import Phase, ProvenanceStore, Record
from clanker.checkouts.types import (
    Changes,
    CheckoutError,
    CompletionResult,
    CompletionStatus,
    CopyReport,
    CreationResult,
    Dirtiness,
    PruneCandidate,
    PrunePlan,
    Refusal,
    RemovedCheckout,
    Worktree,
    WorktreeListing,
)
from clanker.descriptor import Transport
from clanker.environment import Environment
from clanker.errors import HarnessCapabilityError

__all__ = ["CheckoutService", "Trash", "send_to_trash"]

Trash = Callable[[str], None]
"""Moves a path into the user's Trash, or raises :class:`OSError`."""

Occupants = Callable[[str], Awaitable[Sequence[str]]]
"""Who works in a checkout: the ids of the agents running in it (none: idle)."""

_NO_TRASH: Final = "the Trash is available only for checkouts on this machine"


def send_to_trash(path: str) -> None:
    """The user's Trash (freedesktop on Linux, the system Trash on macOS), by send2trash."""
    # Deferred: only a completion that trashes needs it. It ships no type information.
    from send2trash import send2trash  # type: ignore[import-untyped]

    send2trash(path)


def _now() -> datetime:
    return datetime.now(UTC)


def _same(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _entry(listed: list[ListedWorktree], path: str) -> ListedWorktree | None:
    return next((e for e in listed if _same(e.path, path)), None)


def _record_at(store: ProvenanceStore, path: str) -> Record | None:
    return next((r for r in reversed(store.records()) if _same(r.path, path)), None)


def _ancestors(path: str) -> list[str]:
    """``path`` and the directories above it, nearest first (the root excluded)."""
    found: list[str] = []
    while os.path.dirname(path) != path:
        found.append(path)
        path = os.path.dirname(path)
    return found


def _gone(entry: ListedWorktree | None, path: str) -> bool:
    return entry is None or entry.prunable or not os.path.isdir(path)


class CheckoutService:
    """Create, list, complete and prune the worktrees of a repository.

    ``state_dir`` is clanker's state directory (records and locks live under
    it). ``trash`` moves a checkout to the user's Trash (default:
    :func:`send_to_trash`). ``occupants`` says which agents work in a
    checkout (default: none known); one that is occupied is never completed
    and never handed out again by a retried create.
    """

    def __init__(self, *, environment: Environment, state_dir: Path,
                 trash: Trash | None = None, occupants: Occupants | None = None) -> None:
        self._git = Git(environment.executor)
        self._environment = environment.name
        self._local = environment.transport is Transport.LOCAL
        self._state = state_dir
        self._trash = trash or send_to_trash
        self._occupants = occupants

    async def _refuse_occupied(self, path: str, what: str) -> None:
        found = await self._occupants(path) if self._occupants is not None else ()
        if found:
            raise CheckoutError(Refusal.IN_USE, f"{what} is in use by a running agent "
                                f"(terminal {found[0]}); it is left as it is")

    def _store(self, main: str) -> ProvenanceStore:
        return ProvenanceStore(self._state, environment=self._environment, main_checkout=main)

    # -- create ----------------------------------------------------------------

    async def validate_branch(self, main: str, branch: str) -> str:
        """Return ``branch`` when git accepts it as a new branch name; refuse it otherwise."""
        if not isinstance(branch, str) or not 1 <= len(branch) <= MAX_BRANCH_LENGTH:
            raise CheckoutError(Refusal.INVALID_BRANCH,
                                f"a branch name has 1 to {MAX_BRANCH_LENGTH} characters")
        # An option-like name would be read as an option; ``@{-1}`` and the like are
        # expanded by --branch: only a name that comes back unchanged is a name.
        if branch.startswith("-") or "\0" in branch:
            raise CheckoutError(Refusal.INVALID_BRANCH, f"{branch!r} is not a valid branch name")
        result = await self._git.run(main, "check-ref-format", "--branch", branch)
        if result.exit_code != 0 or result.stdout.rstrip("\n") != branch:
            raise CheckoutError(Refusal.INVALID_BRANCH, f"{branch!r} is not a valid branch "
                                "name (git check-ref-format refuses it)")
        return branch

    async def create(self, repository: str, branch: str, *, base: str | None = None
                     ) -> CreationResult:
        """Create the worktree of a new ``branch`` from ``base`` (default: the main
        checkout's ``HEAD``) at its deterministic path.

        A retry for a branch this service created, whose worktree is still
        attached there, answers with that checkout (``created=False``). Raises
        :class:`CheckoutError`: ``invalid-branch``, ``invalid-base``,
        ``branch-exists``, ``path-occupied``, ``busy``, ``in-use``,
        ``not-a-repository``, ``git-failed``, ``state-unusable``.
        """
        git = self._git
        main = await git.main_checkout(repository)
        branch = await self.validate_branch(main, branch)
        path = worktree_path(main, branch)
        store = self._store(main)
        with store.checkout_lock(os.path.basename(path), f"the worktree of {branch!r}"):
            listed = await git.worktrees(main)
            here = _entry(listed, path)
            record = store.find(path=path)
            ours = record is not None and record.branch == branch and record.phase in (
                Phase.CREATING, Phase.ACTIVE)
            if await git.branch_exists(main, branch):
                if ours and record is not None and here is not None and here.branch == branch \
                        and not here.locked and not _gone(here, path):
                    if base is not None and await git.commit_of(main, base) != record.base:
                        raise CheckoutError(Refusal.BRANCH_EXISTS, f"the branch {branch!r} "
                                            f"exists, created from {record.base[:12]}, not "
                                            f"from {base!r}")
                    await self._refuse_occupied(path, f"the worktree of {branch!r}")
                    return await self._finish(store, record, main, path, created=False)
                elsewhere = next((e for e in listed if e.branch == branch), None)
                if ours and record is not None and record.phase is Phase.CREATING \
                        and elsewhere is None and not os.path.lexists(path):
                    # Our own create stopped after git made the branch: attach it now.
                    await self._add(main, path, branch, record, new_branch=False)
                    return await self._finish(store, record, main, path, created=True)
                where = f" (checked out in {elsewhere.path})" if elsewhere else ""
                raise CheckoutError(Refusal.BRANCH_EXISTS, f"the branch {branch!r} already "
                                    f"exists{where}; clanker never takes over a branch")
            if here is not None or os.path.lexists(path):
                raise CheckoutError(Refusal.PATH_OCCUPIED, f"{path} is already taken; clanker "
                                    "leaves it as it is")
            commit = await git.commit_of(main, base or "HEAD")
            if commit is None:
                raise CheckoutError(Refusal.INVALID_BASE, f"{base!r} is not a commit of this "
                                    "repository" if base else "the main checkout has no commit "
                                    "to start from")
            record = Record(branch=branch, path=path, base=commit, phase=Phase.CREATING,
                            created_at=_now())
            store.put(record)
            await self._add(main, path, branch, record, new_branch=True)
            return await self._finish(store, record, main, path, created=True)

    async def _add(self, main: str, path: str, branch: str, record: Record, *,
                   new_branch: bool) -> None:
        args = ("-b", branch, path, record.base) if new_branch else (path, branch)
        result = await self._git.run(main, "worktree", "add", "--quiet", *args)
        if result.exit_code == 0:
            return
        listed = await self._git.worktrees(main)
        if _entry(listed, path) is None and not await self._git.branch_exists(main, branch):
            # Nothing was made: forget the intent rather than leave a phantom record.
            store = self._store(main)
            store.update(lambda records: records.remove(record) if record in records else None)
        raise CheckoutError(Refusal.GIT_FAILED, f"git could not create the worktree {path} "
                            f"for {branch!r}")

    async def _finish(self, store: ProvenanceStore, record: Record, main: str, path: str, *,
                      created: bool) -> CreationResult:
        copies = CopyReport()
        if record.phase is Phase.CREATING:
            if not created:
                await self._check_interrupted(path)
            copies = await self._copies(main, path)
            record = evolve(record, phase=Phase.ACTIVE)
            store.put(record)
        return CreationResult(main_checkout=main, path=path, branch=record.branch,
                              base=record.base, created=created, copies=copies)

    async def _check_interrupted(self, path: str) -> None:
        """Refuse to hand out a worktree an interrupted ``git worktree add`` left half
        checked out (its tracked files missing or its index unwritten)."""
        changes = await inspect_checkout(self._git, path)
        if changes.staged.count or changes.tracked.count:
            raise CheckoutError(Refusal.PATH_OCCUPIED, f"an interrupted create left {path} "
                                "incomplete; it is left as it is (inspect it, then remove it "
                                "with git worktree remove --force)")

    async def _copies(self, main: str, path: str) -> CopyReport:
        # Copying skips what is already there, so a retry after a cancelled copy is safe.
        # A failed copy leaves the worktree usable: it is reported, never fatal.
        if not self._local:
            return CopyReport(skipped=(".worktreeinclude: copies are made only on this machine",))
        try:
            return await copy_included(self._git, main, path)
        except (CheckoutError, HarnessCapabilityError) as exc:
            reason = exc.message if isinstance(exc, CheckoutError) else exc.kind.value
            return CopyReport(skipped=(f".worktreeinclude: nothing copied ({reason})",))

    # -- removed worktrees (history) -----------------------------------------------

    async def _candidate_mains(self, path: str, near: str | None) -> list[str]:
        """The main checkouts ``path`` may have been in a worktree of: the one beside
        the ``<repo>-worktrees`` container it lies in, and the repository of ``near``."""
        guesses = [near] if near is not None else []
        container = next((a for a in _ancestors(path)
                          if os.path.basename(a).endswith(CONTAINER_SUFFIX)), None)
        if container is not None:
            guesses.insert(0, container[: -len(CONTAINER_SUFFIX)])
        mains: list[str] = []
        for guess in guesses:
            if not os.path.isdir(guess):
                continue
            with contextlib.suppress(CheckoutError):
                main = await self._git.main_checkout(guess)
                if main not in mains:
                    mains.append(main)
        return mains

    async def removed_origin(self, path: str, *, near: str | None = None
                             ) -> RemovedCheckout | None:
        """Attribute the missing directory ``path`` (a worktree, or a directory
        inside one) to the worktree and repository it was in, or ``None`` when
        nothing proves one.

        Proof is git's own listing (a prunable entry) or clanker's record; a
        look-alike directory name alone proves nothing. ``near`` is a
        directory of another repository to consider (where the caller is).
        """
        path = os.path.abspath(path)
        for main in await self._candidate_mains(path, near):
            listed = await self._git.worktrees(main)
            records = self._store(main).records()
            for root in _ancestors(path):
                entry = _entry(listed[1:], root)
                record = next((r for r in reversed(records) if _same(r.path, root)), None)
                if entry is None and record is None:
                    continue
                if os.path.isdir(root):
                    return None  # the worktree is there: only a directory inside it went
                branch = record.branch if record is not None else \
                    entry.branch if entry else None
                refused = await self._not_recreatable(main, root, record, listed)
                return RemovedCheckout(path=root, main_checkout=main, branch=branch,
                                       recreatable=refused is None,
                                       reason=None if refused is None else refused[1])
        return None

    async def _not_recreatable(self, main: str, path: str, record: Record | None,
                               listed: list[ListedWorktree]) -> tuple[Refusal, str] | None:
        """Why the worktree at ``path`` may not be checked out again, or ``None``."""
        if record is None or os.path.normpath(path) != os.path.normpath(
                worktree_path(main, record.branch)):
            # Only clanker's own deterministic path is proof the directory was its own.
            return Refusal.NOT_OWNED, f"{path} is not a worktree path clanker created"
        if os.path.lexists(path):
            return Refusal.PATH_OCCUPIED, f"{path} exists again; clanker leaves it as it is"
        if not await self._git.branch_exists(main, record.branch):
            return Refusal.NOT_FOUND, f"its branch {record.branch!r} no longer exists"
        elsewhere = next((e for e in listed if e.branch == record.branch
                          and not _same(e.path, path)), None)
        if elsewhere is not None:
            return Refusal.BRANCH_EXISTS, (f"its branch {record.branch!r} is checked out in "
                                           f"{elsewhere.path}")
        stale = _entry(listed, path)
        if stale is not None and stale.locked:
            return Refusal.LOCKED, f"git keeps {path} registered and locked"
        return None

    async def recreate(self, removed: RemovedCheckout) -> CreationResult:
        """Check the branch of a removed worktree clanker created out again at the
        same path (its deterministic one), re-checking every condition first.

        Raises :class:`CheckoutError`: ``not-owned`` (no record, or not clanker's
        path), ``not-found`` (the branch is gone), ``path-occupied``,
        ``branch-exists`` (checked out elsewhere), ``locked``, ``busy``,
        ``git-failed``.
        """
        main, path = removed.main_checkout, removed.path
        store = self._store(main)
        with store.checkout_lock(os.path.basename(path), f"the worktree {path}"):
            listed = await self._git.worktrees(main)
            record = _record_at(store, path)
            refused = await self._not_recreatable(main, path, record, listed)
            if refused is not None or record is None:
                reason, why = refused or (Refusal.NOT_OWNED, "clanker did not create it")
                raise CheckoutError(reason, f"the worktree {path} is not recreated: {why}")
            if _entry(listed, path) is not None:
                # Git still registers the missing directory: clear that one entry only.
                await self._git.output(main, "worktree", "remove", "--end-of-options", path,
                                       what=f"forget the missing worktree {path}")
            record = evolve(record, phase=Phase.CREATING, removed_at=None, branch_deleted=False)
            store.put(record)
            await self._add(main, path, record.branch, record, new_branch=False)
            return await self._finish(store, record, main, path, created=True)

    # -- complete --------------------------------------------------------------

    async def complete(
        self,
        repository: str,
        *,
        path: str | None = None,
        branch: str | None = None,
        delete_branch: bool = False,
        discard_ignored: bool = False,
    ) -> CompletionResult:
        """Remove a worktree this service created, strictly.

        The checkout is ``path``, or the worktree of ``branch``, or (neither)
        the worktree ``repository`` is in. Tracked, staged and untracked
        changes block (``dirty``); ignored files alone block too
        (``ignored-only``) unless ``discard_ignored``, which moves the whole
        checkout to the Trash. Inspection runs again right before removal,
        and success is reported only once git no longer lists the checkout and
        its directory is gone. ``delete_branch`` uses ``git branch -d``: an
        unmerged branch is kept and ``branch_note`` says why.

        Raises :class:`CheckoutError`: ``not-found``, ``main-checkout``,
        ``not-owned``, ``locked``, ``busy``, ``too-many-submodules``,
        ``in-use``, ``removal-failed``, ``unsupported``, ``git-failed``.
        """
        git = self._git
        main = await git.main_checkout(repository)
        store = self._store(main)
        listed = await git.worktrees(main)
        target = await self._resolve(main, listed, store, path=path, branch=branch,
                                     cwd=repository)
        record = _record_at(store, target)
        entry = _entry(listed, target)
        if record is None or (record.phase is Phase.REMOVED and not _gone(entry, target)):
            # Never clanker's, or re-created at clanker's old path by someone else.
            raise CheckoutError(Refusal.NOT_OWNED, f"{target} was not created by clanker; it is "
                                "left as it is (git worktree remove is yours to run)")
        with store.checkout_lock(os.path.basename(target), f"the worktree {target}"):
            listed = await git.worktrees(main)
            entry = _entry(listed, target)
            record = _record_at(store, target) or record
            if _gone(entry, target):
                return await self._already_gone(store, record, main, entry, delete_branch)
            assert entry is not None
            await self._refuse_occupied(target, f"the worktree {target}")
            if entry.locked:
                raise CheckoutError(Refusal.LOCKED, f"{target} is locked (git worktree "
                                    "unlock it first); nothing was removed")
            blocked = self._blocked(main, record, await inspect_checkout(git, target),
                                    discard_ignored)
            if blocked is not None:
                return blocked
            store.put(evolve(record, phase=Phase.COMPLETING))
            try:
                # Again, right before removal: the first look may be stale by now.
                changes = await inspect_checkout(git, target)
                blocked = self._blocked(main, record, changes, discard_ignored)
                if blocked is not None:
                    store.put(record)
                    return blocked
                trashed = await self._remove(main, target, changes)
            except CheckoutError:
                if os.path.isdir(target):
                    store.put(record)  # still there: still active
                raise
            store.put(evolve(record, phase=Phase.REMOVED, removed_at=_now()))
            deleted, note = await self._delete_branch(main, record.branch, delete_branch)
            if deleted:
                store.put(evolve(record, phase=Phase.REMOVED, removed_at=_now(),
                                 branch_deleted=True))
            return CompletionResult(
                main_checkout=main, path=target, branch=record.branch,
                status=CompletionStatus.REMOVED,
                changes=changes if changes.dirtiness is Dirtiness.IGNORED_ONLY else None,
                trashed=trashed, branch_deleted=deleted, branch_note=note)

    async def _resolve(self, main: str, listed: list[ListedWorktree], store: ProvenanceStore,
                       *, path: str | None, branch: str | None, cwd: str) -> str:
        if path is not None and branch is not None:
            raise CheckoutError(Refusal.NOT_FOUND, "name the worktree by its path or by its "
                                "branch, not both")
        if branch is not None:
            found = next((e.path for e in listed[1:] if e.branch == branch), None)
            if found is None:
                record = store.find(branch=branch)
                found = record.path if record and record.phase is not Phase.REMOVED else None
            if found is None:
                raise CheckoutError(Refusal.NOT_FOUND, f"no worktree of this repository is on "
                                    f"the branch {branch!r}")
            return found
        # A directory inside a worktree names that worktree; a missing one only itself.
        given = os.path.abspath(path) if path is not None else cwd
        wanted = (await self._git.toplevel(given) or given) if os.path.isdir(given) else given
        if _same(wanted, main):
            raise CheckoutError(Refusal.MAIN_CHECKOUT, f"{main} is the main checkout, which "
                                "is never completed")
        entry = _entry(listed, wanted)
        if entry is not None:
            return entry.path
        record = next((r for r in store.records() if _same(r.path, wanted)), None)
        if record is None:
            raise CheckoutError(Refusal.NOT_FOUND, f"{wanted} is not a worktree of {main}")
        return record.path

    def _blocked(self, main: str, record: Record, changes: Changes,
                 discard_ignored: bool) -> CompletionResult | None:
        dirtiness = changes.dirtiness
        if dirtiness is Dirtiness.DIRTY:
            status = CompletionStatus.DIRTY
        elif dirtiness is Dirtiness.IGNORED_ONLY and not discard_ignored:
            status = CompletionStatus.IGNORED_ONLY
        else:
            return None
        return CompletionResult(main_checkout=main, path=record.path, branch=record.branch,
                                status=status, changes=changes)

    async def _remove(self, main: str, target: str, changes: Changes) -> bool:
        """Remove ``target``; return whether it went to the Trash. Verified before returning."""
        git = self._git
        trashed = changes.dirtiness is Dirtiness.IGNORED_ONLY or changes.submodules
        if trashed:
            # Git removes a worktree with ignored files or submodules only with --force,
            # which would also take whatever appeared since the inspection: the Trash
            # keeps everything recoverable instead.
            if not self._local:
                raise CheckoutError(Refusal.UNSUPPORTED, f"{_NO_TRASH}; {target} is kept")
            await self._to_trash(target)
        result = await git.run(main, "worktree", "remove", target)
        listed = await git.worktrees(main)
        if _entry(listed, target) is not None or os.path.lexists(target):
            detail = "git refused to remove it" if result.exit_code else "it is still there"
            raise CheckoutError(Refusal.REMOVAL_FAILED, f"{target} could not be removed "
                                f"({detail}); it is kept as it is")
        return trashed

    async def _to_trash(self, target: str) -> None:
        # A cancelled caller must not leave a move half-done behind a "cancelled":
        # the move finishes, then the cancellation goes on.
        moving = asyncio.ensure_future(asyncio.to_thread(self._trash, target))
        try:
            await asyncio.shield(moving)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await moving
            raise
        except OSError as exc:
            raise CheckoutError(Refusal.REMOVAL_FAILED, f"{target} could not be moved to the "
                                f"Trash ({exc.strerror or type(exc).__name__}); it is kept"
                                ) from exc

    async def _already_gone(self, store: ProvenanceStore, record: Record, main: str,
                            entry: ListedWorktree | None, delete_branch: bool
                            ) -> CompletionResult:
        target = record.path
        if entry is not None:
            if entry.locked:
                raise CheckoutError(Refusal.LOCKED, f"{target} is gone but git's entry for it "
                                    "is locked (git worktree unlock it first)")
            # Its directory is gone: this drops git's administrative entry, nothing else.
            await self._git.run(main, "worktree", "remove", target)
            if _entry(await self._git.worktrees(main), target) is not None:
                raise CheckoutError(Refusal.REMOVAL_FAILED, f"git still lists {target}; "
                                    "nothing else was changed")
        removed = record.removed_at or _now()
        store.put(evolve(record, phase=Phase.REMOVED, removed_at=removed))
        deleted, note = await self._delete_branch(main, record.branch, delete_branch)
        if deleted:
            store.put(evolve(record, phase=Phase.REMOVED, removed_at=removed,
                             branch_deleted=True))
        return CompletionResult(main_checkout=main, path=target, branch=record.branch,
                                status=CompletionStatus.ALREADY_GONE, branch_deleted=deleted,
                                branch_note=note)

    async def _delete_branch(self, main: str, branch: str, wanted: bool
                             ) -> tuple[bool, str | None]:
        if not wanted:
            return False, None
        git = self._git
        if not await git.branch_exists(main, branch):
            return False, f"the branch {branch!r} no longer exists"
        if (await git.run(main, "branch", "-d", "--", branch)).exit_code == 0:
            return True, None
        holder = next((e for e in await git.worktrees(main) if e.branch == branch), None)
        if holder is not None:
            return False, f"the branch {branch!r} is kept: it is checked out in {holder.path}"
        return False, (f"the branch {branch!r} is kept: git branch -d refuses a branch that "
                       "is not fully merged (git branch -D deletes it anyway)")

    # -- list and prune --------------------------------------------------------

    async def list(self, repository: str, *, inspect: bool = True) -> WorktreeListing:
        """Every worktree git lists for the repository, and those clanker remembers
        creating that git no longer lists, each with its dirtiness (``inspect``)."""
        git = self._git
        main = await git.main_checkout(repository)
        listed = await git.worktrees(main)
        records = self._store(main).records()
        found: list[Worktree] = []
        for index, entry in enumerate(listed):
            record = next((r for r in reversed(records) if _same(r.path, entry.path)), None)
            ours = record is not None and record.phase is not Phase.REMOVED
            item = Worktree(
                path=entry.path, branch=entry.branch, head=entry.head, main=index == 0,
                created_by_clanker=ours, locked=entry.locked,
                base=record.base if ours and record else None,
                created_at=record.created_at if ours and record else None)
            found.append(await self._inspected(item, inspect))
        for record in records:
            if any(_same(record.path, e.path) for e in listed):
                continue
            found.append(Worktree(path=record.path, branch=record.branch, head=None,
                                  listed=False, created_by_clanker=True,
                                  dirtiness=Dirtiness.MISSING, base=record.base,
                                  created_at=record.created_at, removed_at=record.removed_at))
        return WorktreeListing(main_checkout=main, worktrees=tuple(found))

    async def _inspected(self, item: Worktree, inspect: bool) -> Worktree:
        if not os.path.isdir(item.path):
            return evolve(item, dirtiness=Dirtiness.MISSING)
        if not inspect:
            return item
        try:
            changes = await inspect_checkout(self._git, item.path)
        except CheckoutError as exc:
            return evolve(item, problem=exc.message)
        return evolve(item, dirtiness=changes.dirtiness, changes=changes)

    async def prune(self, repository: str, *, apply: bool = False) -> PrunePlan:
        """The worktrees clanker created whose branch is merged into the main
        checkout's ``HEAD`` and that are clean (or already gone); with ``apply``,
        complete each (branch deleted with ``git branch -d``)."""
        listing = await self.list(repository)
        main = listing.main_checkout
        candidates: list[PruneCandidate] = []
        for item in listing.worktrees:
            if item.main or (not item.listed and item.removed_at is not None):
                continue
            candidates.append(PruneCandidate(worktree=item, eligible=False,
                                             reason=await self._prune_reason(main, item)))
        candidates = [evolve(c, eligible=True) if c.reason.startswith("merged") else c
                      for c in candidates]
        if not apply:
            return PrunePlan(main_checkout=main, candidates=tuple(candidates), applied=False)
        results: list[CompletionResult] = []
        failures: list[str] = []
        for candidate in candidates:
            if not candidate.eligible:
                continue
            try:
                results.append(await self.complete(main, path=candidate.worktree.path,
                                                   delete_branch=True))
            except CheckoutError as exc:
                failures.append(exc.message)
        return PrunePlan(main_checkout=main, candidates=tuple(candidates), applied=True,
                         results=tuple(results), failures=tuple(failures))

    async def _prune_reason(self, main: str, item: Worktree) -> str:
        refusal = next((reason for failed, reason in (
            (not item.created_by_clanker, "not created by clanker"),
            (item.locked, "locked"),
            (item.branch is None, "not on a branch"),
            (item.dirtiness not in (Dirtiness.MISSING, Dirtiness.CLEAN),
             item.problem or str(item.dirtiness)),
        ) if failed), None)
        if refusal is not None or item.branch is None:
            return refusal or "not on a branch"
        if self._occupants is not None and item.listed and await self._occupants(item.path):
            return "an agent works there"
        if not await self._git.branch_exists(main, item.branch):
            return "its branch no longer exists"
        ref = f"refs/heads/{item.branch}"
        how = ""
        if not await self._git.is_ancestor(main, ref, "HEAD"):
            if not await self._git.changes_already_in(main, ref, "HEAD"):
                return "not merged into the main checkout's HEAD"
            # Squashed or rebased: git branch -d will keep the branch, and say so.
            how = " (its changes are in HEAD: squashed or rebased)"
        return f"merged{how}, already gone" if item.dirtiness is Dirtiness.MISSING else \
            f"merged{how} and clean"
