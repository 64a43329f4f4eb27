"""The values the checkout service answers with, and its one error type."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any, Final

from attrs import field, frozen

__all__ = [
    "MAX_EXAMPLES",
    "TRANSACTION_TIMEOUT",
    "ChangeCategory",
    "Changes",
    "CheckoutError",
    "CompletionResult",
    "CompletionStatus",
    "CopyReport",
    "CreationResult",
    "Dirtiness",
    "PruneCandidate",
    "PrunePlan",
    "Refusal",
    "RemovedCheckout",
    "Worktree",
    "WorktreeAgent",
    "WorktreeListing",
]

MAX_EXAMPLES: Final = 20
"""At most this many relative paths are named per category of change."""

TRANSACTION_TIMEOUT: Final = 30.0
"""The bound, in seconds, an isolated-checkout transaction (create or complete) declares:
the bridge cuts the caller's call off there, and a grid that shuts down waits that long
at most for one that is under way."""


class Refusal(enum.StrEnum):
    """Why the service did not do what it was asked. Stable: appears in ``--json``."""

    NOT_A_REPOSITORY = "not-a-repository"
    INVALID_BRANCH = "invalid-branch"
    INVALID_BASE = "invalid-base"
    BRANCH_EXISTS = "branch-exists"
    PATH_OCCUPIED = "path-occupied"
    BUSY = "busy"
    NOT_FOUND = "not-found"
    MAIN_CHECKOUT = "main-checkout"
    NOT_OWNED = "not-owned"
    IN_USE = "in-use"
    LOCKED = "locked"
    TOO_MANY_SUBMODULES = "too-many-submodules"
    REMOVAL_FAILED = "removal-failed"
    UNSUPPORTED = "unsupported"
    GIT_FAILED = "git-failed"
    STATE_UNUSABLE = "state-unusable"


class CheckoutError(Exception):
    """The checkout service refused, or could not finish, a request.

    ``reason`` says which case; the message is one line a person can act on
    and names nothing secret. Whatever the service did before it stopped is
    in the message too ("the worktree is kept ...").
    """

    def __init__(self, reason: Refusal, message: str) -> None:
        super().__init__(message)
        self.reason = Refusal(reason)
        self.message = message

    def __repr__(self) -> str:
        return f"CheckoutError({self.reason.value!r}, {self.message!r})"


@frozen
class ChangeCategory:
    """How many entries of one kind, and at most :data:`MAX_EXAMPLES` of their paths
    (relative to the checkout; inside a submodule, prefixed with its path)."""

    count: int = 0
    examples: tuple[str, ...] = ()


@frozen(kw_only=True)
class Changes:
    """What ``git status`` reports in a checkout and its submodules.

    ``staged``: index differs from ``HEAD``; ``tracked``: a tracked file
    differs from the index (or is in conflict); ``untracked``: files that are
    neither tracked nor ignored; ``ignored``: what the ignore rules cover
    (a wholly ignored directory counts once). ``repositories`` is how many
    repositories were inspected (the checkout and each initialized submodule).
    """

    staged: ChangeCategory = ChangeCategory()
    tracked: ChangeCategory = ChangeCategory()
    untracked: ChangeCategory = ChangeCategory()
    ignored: ChangeCategory = ChangeCategory()
    repositories: int = 1
    submodules: bool = False

    def to_json(self) -> dict[str, Any]:
        """Counts and examples per category, as ``--json`` and the bridge answer them."""
        return {name: {"count": getattr(self, name).count,
                       "examples": list(getattr(self, name).examples)}
                for name in ("staged", "tracked", "untracked", "ignored")} | {
            "repositories": self.repositories, "submodules": self.submodules}

    @property
    def dirtiness(self) -> Dirtiness:
        if self.staged.count or self.tracked.count or self.untracked.count:
            return Dirtiness.DIRTY
        if self.ignored.count:
            return Dirtiness.IGNORED_ONLY
        return Dirtiness.CLEAN


class Dirtiness(enum.StrEnum):
    """A checkout's state as far as completing it goes."""

    CLEAN = "clean"
    IGNORED_ONLY = "ignored-only"
    """Only ignored files: completion needs ``discard_ignored``."""
    DIRTY = "dirty"
    """Tracked, staged or untracked changes: completion refuses."""
    MISSING = "missing"
    """The directory is gone (removed outside clanker)."""
    UNKNOWN = "unknown"
    """It could not be inspected (see the listing's ``problem``)."""


@frozen(kw_only=True)
class CopyReport:
    """What ``.worktreeinclude`` asked for: ignored files copied from the main checkout."""

    copied: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    """Entries not copied, each ``path: reason`` (already there, a special file, ...)."""


@frozen(kw_only=True)
class CreationResult:
    """A worktree that exists, attached to its branch, where the service said it would be."""

    main_checkout: str
    path: str
    branch: str
    base: str
    """The commit the branch started from (its full id)."""
    created: bool
    """``False`` when this was a retry: the same checkout, already there, is the answer."""
    copies: CopyReport = CopyReport()


class CompletionStatus(enum.StrEnum):
    REMOVED = "removed"
    """Removed (or moved to the Trash) and verified gone from git's listing."""
    ALREADY_GONE = "already-gone"
    """Its directory had already been removed outside clanker; git's entry is dropped."""
    DIRTY = "dirty"
    """Nothing removed: tracked, staged or untracked changes."""
    IGNORED_ONLY = "ignored-only"
    """Nothing removed: only ignored files, and ``discard_ignored`` was not given."""


@frozen(kw_only=True)
class CompletionResult:
    main_checkout: str
    path: str
    branch: str | None
    status: CompletionStatus
    changes: Changes | None = None
    """What blocked it (for ``dirty`` and ``ignored-only``), or what was discarded."""
    trashed: bool = False
    """The whole checkout went to the Trash (ignored files discarded, or submodules in it)."""
    branch_deleted: bool = False
    branch_note: str | None = None
    """Why the branch was kept when deleting it was asked for (``git branch -d`` refused)."""

    @property
    def done(self) -> bool:
        return self.status in (CompletionStatus.REMOVED, CompletionStatus.ALREADY_GONE)

    @property
    def can_complete_with_discard_ignored(self) -> bool:
        return self.status is CompletionStatus.IGNORED_ONLY


@frozen(kw_only=True)
class WorktreeAgent:
    """An agent the grid says works in a worktree."""

    terminal: str
    harness: str
    attention: str


@frozen(kw_only=True)
class Worktree:
    """One worktree of a repository, as git lists it, or as clanker remembers it."""

    path: str
    branch: str | None
    head: str | None
    main: bool = False
    listed: bool = True
    """Git lists it (``False``: only clanker's record remembers it)."""
    created_by_clanker: bool = False
    locked: bool = False
    dirtiness: Dirtiness = Dirtiness.UNKNOWN
    changes: Changes | None = None
    problem: str | None = None
    base: str | None = None
    created_at: datetime | None = None
    removed_at: datetime | None = None
    agents: tuple[WorktreeAgent, ...] = ()
    """Filled in by the library from the grid (empty when no grid runs)."""


@frozen(kw_only=True)
class WorktreeListing:
    main_checkout: str
    worktrees: tuple[Worktree, ...] = field(default=())


@frozen(kw_only=True)
class PruneCandidate:
    worktree: Worktree
    eligible: bool
    reason: str
    """Why it is (``merged and clean``) or is not (``dirty``, ``not merged``, ...) pruned."""


@frozen(kw_only=True)
class PrunePlan:
    main_checkout: str
    candidates: tuple[PruneCandidate, ...]
    applied: bool
    results: tuple[CompletionResult, ...] = ()
    failures: tuple[str, ...] = ()
    """One line per eligible worktree that could not be completed."""


@frozen(kw_only=True)
class RemovedCheckout:
    """A directory that is gone, attributed to the repository it was a worktree of.

    Attributed only on proof: git still lists it (as prunable) or clanker's
    record names it. ``recreatable`` says whether clanker may check its
    branch out there again; when not, ``reason`` says why in one line.
    """

    path: str
    main_checkout: str
    branch: str | None
    recreatable: bool
    reason: str | None = None
