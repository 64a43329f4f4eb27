"""A listing answered without a scan, when nothing could be in it.

A provider with store roots reads its files only under them (its
:meth:`~clanker.sessions.capability.SessionsCapability.store_roots`, the roots
its confinement is checked against): when every root is missing or an empty
directory, its scan is empty. A provider without roots (one that lists through
its harness's command, or one whose store cannot be found from here) has its own
``discover`` driven without an event loop, its offloaded work run at once and its
commands only looked up: when it finishes that way with an empty scan or with a
typed failure of its own (the ``binary-unavailable`` of a command that is not
installed, a setting it refuses), that is its scan. When that is so of every
provider, :func:`empty_listing` says what the service's scan would, with neither
the event loop, the service, nor a thread.
Anything it cannot prove (a root with an entry, a link, a root it cannot look
at, a command that is installed, a provider that waits on anything) leaves the
listing to the service.

This machine only: the roots are looked at with :mod:`os`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from clanker.errors import HarnessCapabilityError
from clanker.sessions.answers import AnswerCache, answers_path
from clanker.sessions.cache import SummaryCache
from clanker.sessions.capability import DEFAULT_STORE_LIMIT, NeedsEventLoop, SessionsContext
from clanker.sessions.inline import LookupOnly, finish
from clanker.sessions.listing import ProviderScan, SessionListing
from clanker.sessions.scope import canonical
from clanker.sessions.types import SessionScan

if TYPE_CHECKING:
    from clanker.environment import Environment
    from clanker.execution import CommandExecutor
    from clanker.registry import HarnessProvider

__all__ = ["empty_listing"]


def empty_listing(
    providers: Sequence[HarnessProvider],
    *,
    environment: Environment,
    workspace: str | None,
    cache_dir: Path | None,
    locate: Callable[[str], str | None],
) -> SessionListing | None:
    """The listing of ``providers`` when none of them has anything to read, else ``None``.

    ``environment`` is this machine's; ``locate`` finds a command as its executor
    would (``None``: not installed); ``cache_dir`` is where the service keeps its
    caches. The scans are the service's own for the same stores, in the same
    order: each provider's own home, none for a managed account (the caller
    answers here only when there is none).
    """
    environ, files = environment.environ, environment.files
    scans: list[ProviderScan] = []
    for provider in providers:
        capability = provider.sessions
        if capability is None:
            continue
        try:
            roots = capability.store_roots(environ, files)
        except Exception:  # the scan would meet the same failure: let it say so
            return None
        if roots:
            if not all(_nothing_under(os.fspath(root)) for root in roots):
                return None
            scans.append(ProviderScan(harness=provider.id, scan=SessionScan()))
            continue
        scan = _driven(provider, environment, workspace, cache_dir, locate)
        if scan is None:
            return None
        scans.append(ProviderScan(harness=provider.id, scan=scan))
    return SessionListing(sessions=(), scans=tuple(scans))


def _driven(provider: HarnessProvider, environment: Environment, workspace: str | None,
            cache_dir: Path | None, locate: Callable[[str], str | None]) -> SessionScan | None:
    """``provider``'s scan by its own ``discover``, when it finishes without an event
    loop as an empty scan or as a typed failure; else ``None``."""
    capability = provider.sessions
    assert capability is not None
    if locate(provider.descriptor.executable) is not None:
        return None  # its own command may well be what it lists through: only it can say
    executor = cast("CommandExecutor", LookupOnly(locate))
    # The workspace's own spellings: its worktrees would need git, and neither answer
    # this accepts depends on them.
    scopes = () if workspace is None else tuple(dict.fromkeys(
        [canonical(workspace), os.path.normpath(workspace)]))
    context = SessionsContext(
        harness=provider.id, executor=executor, files=environment.files,
        environ=environment.environ, cache=SummaryCache(provider.id, None), scopes=scopes,
        limit=DEFAULT_STORE_LIMIT, inline=True,
        answers=AnswerCache(provider.id, answers_path(cache_dir, provider.id)),
    )
    try:
        scan = finish(capability.discover(context))
    except NeedsEventLoop:
        return None
    except HarnessCapabilityError as exc:
        # Its own typed failure (a missing command, a setting it refuses): the scan's too.
        return SessionScan(error=exc.with_harness(provider.id))
    except Exception:  # whatever it is, the service reports it: let it
        return None
    if scan.sessions or scan.skipped or scan.truncated or scan.partial is not None \
            or scan.error is not None:
        return None
    return scan


def _nothing_under(root: str) -> bool:
    """Whether ``root`` is absent or a real, empty directory (not a link to one: a
    walk does not follow links, and what it makes of one is the scan's to say)."""
    if not os.path.isabs(root):
        return False  # relative to a directory only the harness knows
    try:
        found = os.lstat(root)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(found.st_mode):
        return False
    try:
        with os.scandir(root) as entries:
            return next(entries, None) is None
    except OSError:
        return False
