"""What a sessions listing is: every provider's sessions and what each reported.

Apart from the service that makes one (:mod:`clanker.sessions.service`): a listing
answered without scanning (:mod:`clanker.sessions.empty`) needs neither asyncio
nor the service's caches.
"""

from __future__ import annotations

import enum

from attrs import frozen

from clanker.sessions.types import HarnessSession, SessionScan

__all__ = ["ProviderScan", "SessionListing", "Shortfall", "ShortfallReason"]


@frozen(kw_only=True)
class ProviderScan:
    harness: str
    scan: SessionScan
    account: str | None = None
    """The managed account whose home was read (``None``: the harness's own)."""


class ShortfallReason(enum.Enum):
    """Why a provider's part of a listing may lack sessions its harness has."""

    ERROR = "error"
    """Its store could not be read (``kind`` says how): sessions may be missing."""
    LIMIT = "limit"
    """The per-store bound cut it: only the newest sessions were read."""
    PARTIAL = "partial"
    """The harness itself can only list part of its history from here (OpenCode lists
    the project of one directory, say); nothing failed."""


@frozen(kw_only=True)
class Shortfall:
    """One reason one provider's part of a listing is not its whole history."""

    harness: str
    reason: ShortfallReason
    detail: str
    """A safe sentence for a person."""
    kind: str | None = None
    """The error's kind, for :attr:`ShortfallReason.ERROR`."""


_LIMIT_DETAIL = "only the newest sessions were read: a higher limit reads more"


@frozen(kw_only=True, repr=False)
class SessionListing:
    """Sessions newest first, plus what each provider reported."""

    sessions: tuple[HarnessSession, ...]
    scans: tuple[ProviderScan, ...]

    @property
    def incomplete(self) -> tuple[Shortfall, ...]:
        """Every reason the listing may lack sessions, per provider; empty when complete.

        Skipped files are not among them: they are files that could not be read
        as a session (counted in each scan), not sessions the listing left out.
        """
        found: list[Shortfall] = []
        for result in self.scans:
            scan, harness = result.scan, result.harness
            if scan.error is not None:
                found.append(Shortfall(harness=harness, reason=ShortfallReason.ERROR,
                                       detail=scan.error.message, kind=scan.error.kind.value))
            if scan.truncated:
                found.append(Shortfall(harness=harness, reason=ShortfallReason.LIMIT,
                                       detail=_LIMIT_DETAIL))
            if scan.partial is not None:
                found.append(Shortfall(harness=harness, reason=ShortfallReason.PARTIAL,
                                       detail=scan.partial))
        return tuple(found)

    def __repr__(self) -> str:
        # Short on purpose: asyncio formats a finished task's result on some
        # paths (Python 3.11's Runner does, via signal.getsignal), and a full
        # repr of ten thousand sessions costs half a second.
        return f"SessionListing(<{len(self.sessions)} sessions>, <{len(self.scans)} scans>)"

    @property
    def complete(self) -> bool:
        return all(p.scan.complete for p in self.scans)
