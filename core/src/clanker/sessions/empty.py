"""A listing answered without a scan, when nothing could be in it.

A provider with store roots reads its files only under them (its
:meth:`~clanker.sessions.capability.SessionsCapability.store_roots`, the roots
its confinement is checked against): when every root is missing or an empty
directory, its scan is empty. A provider without roots lists only through its
harness's own executable: when that executable is not on the host's ``PATH``,
its scan is the executor's ``binary-unavailable`` failure. When that is so of
every provider, :func:`empty_listing` says what the service's scan would, with
neither the event loop, the service's caches, nor a thread. Anything it cannot
prove (a root with an entry, a link, a root it cannot look at, roots that cannot
be found) leaves the listing to the service.

This machine only: the roots are looked at with :mod:`os`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.sessions.listing import ProviderScan, SessionListing
from clanker.sessions.types import SessionScan

if TYPE_CHECKING:
    from clanker.environment import HostFiles
    from clanker.registry import HarnessProvider

__all__ = ["empty_listing"]


def empty_listing(
    providers: Sequence[HarnessProvider],
    *,
    environ: Mapping[str, str],
    files: HostFiles,
    locate: Callable[[str], str | None],
) -> SessionListing | None:
    """The listing of ``providers`` when none of them has anything to read, else ``None``.

    ``environ`` and ``files`` are the host's, as a scan is handed them;
    ``locate`` finds a command as the executor would (``None``: not installed).
    The scans are the service's own for the same stores, in the same order:
    the harness's own home of each provider, none for a managed account (the
    caller answers here only when there is none).
    """
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
        executable = provider.descriptor.executable
        if locate(executable) is not None:
            return None  # its listing command runs: only the service can say what it answers
        error = HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE, executable)
        scans.append(ProviderScan(harness=provider.id,
                                  scan=SessionScan(error=error.with_harness(provider.id))))
    return SessionListing(sessions=(), scans=tuple(scans))


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
