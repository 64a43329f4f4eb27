"""From ``HARNESS:ID`` to a session clanker may launch: re-found, confined, placed.

A selection names a harness and a native id, nothing else. Everything a launch
uses (the store path, the directory) comes from clanker re-finding the session
in the harness's own store, never from the caller.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from typing import TYPE_CHECKING, Final

from attrs import frozen

from clanker.descriptor import SessionOperation
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.registry import HarnessProvider, Registry
from clanker.sessions.service import SessionService
from clanker.sessions.types import HarnessSession

if TYPE_CHECKING:
    from clanker.checkouts.service import CheckoutService
    from clanker.checkouts.types import RemovedCheckout

__all__ = [
    "MIN_PREFIX",
    "AmbiguousSelectionError",
    "DirectoryGoneError",
    "InvalidSelectionError",
    "Selection",
    "SessionNotFoundError",
    "parse_selection",
    "resolve_selection",
]


class InvalidSelectionError(ValueError):
    """The selection is not ``HARNESS:ID`` for a known harness and a well-formed id."""


class SessionNotFoundError(LookupError):
    """The harness's history has no session with that id (any more)."""


class AmbiguousSelectionError(InvalidSelectionError):
    """An id prefix that more than one session of the harness starts with."""

    def __init__(self, message: str, candidates: tuple[str, ...]) -> None:
        super().__init__(message)
        self.candidates = candidates
        """The matching sessions' keys (``HARNESS:ID``), newest first."""


class DirectoryGoneError(HarnessCapabilityError):
    """The session's directory is gone and its harness continues a session only there.

    ``removed`` is the worktree that directory was, when clanker can prove it
    (``removed.recreatable`` then says whether ``recreate_worktree`` would
    bring it back, ``removed.reason`` why not).
    """

    def __init__(self, detail: str, *, harness: str, removed: RemovedCheckout | None) -> None:
        super().__init__(ErrorKind.UNSUPPORTED, detail, harness=harness)
        self.removed = removed


MIN_PREFIX: Final = 8
"""The shortest id prefix a selection may use (git's default abbreviation, rounded up)."""
MAX_CANDIDATES: Final = 10
_PREFIX: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@frozen(kw_only=True)
class Selection:
    """A re-found session and the directory to launch it in.

    ``notice`` is set when the launch directory is not the session's own
    (its recorded directory is gone and the harness can continue elsewhere).
    """

    provider: HarnessProvider
    session: HarnessSession
    launch_cwd: str
    notice: str | None = None


def parse_selection(
    registry: Registry, raw: str, *, prefixes: bool = False
) -> tuple[HarnessProvider, str, bool]:
    """Split ``HARNESS:ID`` and check both parts (syntax only).

    Returns the provider, the id and whether it is a prefix to look up
    (only with ``prefixes``: at least :data:`MIN_PREFIX` characters that are
    not a whole id of the harness).
    """
    harness, sep, native_id = raw.partition(":")
    if not sep or not native_id:
        raise InvalidSelectionError("a session is selected as HARNESS:ID (see `clanker sessions`)")
    provider = registry.find_provider(harness)
    if provider is None:
        known = ", ".join(registry.ids()) or "none installed"
        raise InvalidSelectionError(f"unknown harness {harness!r} (known: {known})")
    if provider.sessions is None:
        raise HarnessCapabilityError(ErrorKind.UNSUPPORTED, "session history", harness=provider.id)
    if provider.launch is None:
        raise HarnessCapabilityError(ErrorKind.UNSUPPORTED, "launch", harness=provider.id)
    try:
        return provider, provider.launch.validate_session_id(native_id), False
    except ValueError as exc:
        if prefixes and len(native_id) >= MIN_PREFIX and _PREFIX.fullmatch(native_id):
            return provider, native_id, True
        hint = f" (or a unique prefix of one, at least {MIN_PREFIX} characters)" if prefixes else ""
        raise InvalidSelectionError(f"{provider.id}: {exc}{hint}") from exc


async def _by_prefix(service: SessionService, provider: HarnessProvider, prefix: str) -> str:
    """The one native id of ``provider``'s history that starts with ``prefix``."""
    listing = await service.discover([provider], workspace=None)
    [result] = listing.scans
    wanted = prefix.lower()
    keys = list(dict.fromkeys(
        s.native_id for s in listing.sessions if s.native_id.lower().startswith(wanted)))
    if not keys and result.scan.error is not None:
        raise result.scan.error
    if not keys:
        raise SessionNotFoundError(
            f"{provider.id} has no session whose id starts with {prefix} in its history")
    if len(keys) > 1:
        shown = tuple(f"{provider.id}:{k}" for k in keys[:MAX_CANDIDATES])
        more = f" and {len(keys) - len(shown)} more" if len(keys) > len(shown) else ""
        raise AmbiguousSelectionError(
            f"{provider.id}:{prefix} matches several sessions: {', '.join(shown)}{more}", shown)
    return keys[0]


async def resolve_selection(
    service: SessionService,
    registry: Registry,
    raw: str,
    *,
    operation: SessionOperation | None,
    workspace: str,
    checkouts: CheckoutService | None = None,
    recreate_worktree: bool = False,
    scoped: bool = True,
) -> Selection:
    """Re-find ``raw`` in its harness's store and decide where it may be launched.

    The id may be a unique prefix of at least :data:`MIN_PREFIX` characters (as
    ``clanker sessions`` prints them); an ambiguous one raises
    :class:`AmbiguousSelectionError` naming the candidates.

    ``operation`` (resume or fork) is checked against the descriptor first, so
    an unsupported fork fails before any scan. ``None`` only looks it up.

    When the session's directory is gone: a harness that continues elsewhere
    runs in the main checkout of the worktree it was (proved by ``checkouts``),
    else in ``workspace``; any other raises :class:`DirectoryGoneError`. With
    ``recreate_worktree`` the worktree's branch is checked out there again
    first, for any harness (:class:`~clanker.checkouts.types.CheckoutError`
    says why when it cannot be). ``scoped=False``: ``workspace`` is only where to
    continue, not a directory of this machine to look in first (an SSH host's).
    """
    provider, native_id, prefix = parse_selection(registry, raw, prefixes=True)
    if operation is not None and provider.descriptor.operation(operation) is None:
        raise HarnessCapabilityError(ErrorKind.UNSUPPORTED, operation.value, harness=provider.id)
    if prefix:
        native_id = await _by_prefix(service, provider, native_id)
    session = await service.find(provider, native_id, workspace=workspace if scoped else None)
    if session is None and not prefix and len(native_id) >= MIN_PREFIX:
        # Well-formed as a whole id for this harness, and yet perhaps a prefix.
        with contextlib.suppress(SessionNotFoundError):
            full = await _by_prefix(service, provider, native_id)
            session = await service.find(provider, full,
                                         workspace=workspace if scoped else None)
    if session is None:
        raise SessionNotFoundError(f"{provider.id} has no session {native_id} in its history")
    capability = provider.sessions
    assert capability is not None
    environment = service.environment
    # The store of the home the session was found in (a managed account's has its own).
    roots = capability.store_roots(service.store_environ(provider, session.account),
                                   environment.files)
    if session.store_path is not None and not environment.files.confined(
        session.store_path, roots
    ):
        raise HarnessCapabilityError(
            ErrorKind.STORAGE_CHANGED, "the session file lies outside the harness's store",
            harness=provider.id,
        )
    place = None if session.cwd is None else environment.files.stat(session.cwd)
    if session.cwd is None or (place is not None and stat.S_ISDIR(place.st_mode)):
        return Selection(provider=provider, session=session, launch_cwd=session.cwd or workspace)
    return await _elsewhere(provider, session, session.cwd, workspace=workspace,
                            checkouts=checkouts, recreate_worktree=recreate_worktree)


async def _elsewhere(
    provider: HarnessProvider, session: HarnessSession, gone: str, *, workspace: str,
    checkouts: CheckoutService | None, recreate_worktree: bool,
) -> Selection:
    """Where a session whose directory ``gone`` no longer exists may continue."""
    capability = provider.sessions
    assert capability is not None
    removed = None if checkouts is None else await checkouts.removed_origin(gone, near=workspace)
    if recreate_worktree:
        if removed is None or checkouts is None:
            from clanker.checkouts.types import CheckoutError, Refusal

            raise CheckoutError(Refusal.NOT_OWNED, f"{gone} is not recreated: clanker cannot "
                                "prove it was a worktree of a repository")
        created = await checkouts.recreate(removed)
        # The session's own directory inside the worktree, when the branch has it.
        where = gone if os.path.isdir(gone) else created.path
        return Selection(provider=provider, session=session, launch_cwd=where,
                         notice=f"recreated the worktree {created.path} from its branch "
                         f"{created.branch!r}")
    if capability.resumes_without_original_directory:
        # A removed worktree continues in its own repository's main checkout, not
        # wherever the caller happens to be.
        target = workspace if removed is None else removed.main_checkout
        what = "no longer exists" if removed is None else \
            f"(a worktree of {removed.main_checkout}) was removed"
        return Selection(provider=provider, session=session, launch_cwd=target,
                         notice=f"{gone} {what}; continuing the session in {target}")
    if removed is None:
        why = "clanker cannot prove it was a worktree of a repository, so it cannot recreate it"
    elif removed.recreatable:
        why = (f"it was the worktree of {removed.branch!r}: resume with --recreate-worktree "
               "(recreate_worktree=True) to check that branch out there again")
    else:
        why = f"it cannot be recreated: {removed.reason}"
    raise DirectoryGoneError(
        f"{gone} no longer exists and this harness continues a session only in its own "
        f"directory; {why}", harness=provider.id, removed=removed)
