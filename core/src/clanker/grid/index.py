"""The grid's session index: listings answered from memory, proven by inotify.

The grid keeps, per asking environment (where the stores are: ``HOME``,
``CODEX_HOME`` and the like), the session service ``Clanker`` would build there,
whose memos are :class:`~clanker.sessions.index.WatchedMemo` over one shared
:class:`~clanker.grid.watch.DirectoryWatch`. Each question first passes the
watch's barrier (every event queued before it is counted); an unchanged store
then answers without a ``stat``, a changed one is scanned as without a grid.
When the barrier does not pass in time, or inotify cannot be had at all, every
answer is checked by ``stat``: slower, never stale.
"""

from __future__ import annotations

import asyncio
import json
import operator
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from attrs import frozen

from clanker._logging import get_logger
from clanker.grid.protocol import PROTOCOL_VERSION

if TYPE_CHECKING:
    from clanker.grid.protocol import SessionsRequest
    from clanker.grid.watch import DirectoryWatch
    from clanker.registry import HarnessProvider, Registry
    from clanker.sessions.service import SessionListing, SessionService
    from clanker.sessions.types import HarnessSession

__all__ = ["ENVIRONMENTS", "SessionIndex"]

log = get_logger(__name__)

ENVIRONMENTS: Final = 4
"""Asking environments kept at once, least recently asked first out."""


class SessionIndex:
    """Session listings for the grid's clients (see the module notes)."""

    def __init__(self, *, capacity: int = ENVIRONMENTS, settle_ns: int | None = None,
                 max_watches: int | None = None) -> None:
        """``settle_ns`` and ``max_watches``: see
        :class:`~clanker.environment.witness.Witness` and
        :class:`~clanker.grid.watch.DirectoryWatch` (default: theirs)."""
        self._capacity = capacity
        self._settle_ns = settle_ns
        self._max_watches = max_watches
        self._readers: OrderedDict[tuple[tuple[str, str], ...], _Reader] = OrderedDict()
        self._watch: DirectoryWatch | None = None
        self._watch_failed = False
        self._lock = asyncio.Lock()
        self._rows: dict[int, tuple[HarnessSession, list[Any]]] = {}
        self._encoded: tuple[bytes, tuple[HarnessSession, ...], list[bytes]] | None = None

    @property
    def watch(self) -> DirectoryWatch | None:
        """The watch (``None`` until the first question, or when inotify cannot be had)."""
        return self._watch

    async def listing(self, request: SessionsRequest) -> SessionListing:
        """Answer ``request`` as ``Clanker.sessions`` would in the asking process."""
        async with self._lock:  # one scan at a time: they share one worker anyway
            started = time.perf_counter()
            watch = self._watcher()
            if watch is not None and not await asyncio.to_thread(watch.barrier):
                watch.overflowed()  # its events could not be proven read: check by stat
            reader = self._service(request.environ)
            held = 0 if watch is None else watch.held
            listing = await reader.service.discover(reader.providers(request.harnesses),
                                                    workspace=request.workspace,
                                                    limit=request.limit)
            log.info("sessions: %d sessions from %d stores in %.1f ms, %d proven by the watch",
                     len(listing.sessions), len(listing.scans),
                     (time.perf_counter() - started) * 1000,
                     0 if watch is None else watch.held - held)
            return listing

    async def answer(self, request: SessionsRequest, rows_per_line: int) -> list[bytes]:
        """:meth:`listing`, as the ``sessions`` op's reply lines (see
        :mod:`clanker.grid.protocol`)."""
        listing = await self.listing(request)
        # Off the loop: tens of thousands of rows would hold up the grid's deliveries.
        return await asyncio.to_thread(self._lines, listing, rows_per_line)

    def _lines(self, listing: SessionListing, rows_per_line: int) -> list[bytes]:
        header = _header(listing)
        sessions = listing.sessions
        kept = self._encoded
        # The same session objects as last time (an unchanged store's memo hands
        # back the very same ones): the same bytes, without encoding them again.
        if kept is not None and kept[0] == header and len(kept[1]) == len(sessions) \
                and all(map(operator.is_, kept[1], sessions)):
            return kept[2]
        from clanker.sessions.index import session_row

        rows = self._rows
        fresh: dict[int, tuple[HarnessSession, list[Any]]] = {}
        for session in sessions:
            known = rows.get(id(session))
            fresh[id(session)] = known if known is not None and known[0] is session \
                else (session, session_row(session))
        self._rows = fresh
        lines = [header]
        for start in range(0, len(sessions), rows_per_line):
            chunk = [fresh[id(s)][1] for s in sessions[start:start + rows_per_line]]
            lines.append(json.dumps({"v": PROTOCOL_VERSION, "ok": True, "rows": chunk},
                                    ensure_ascii=False, separators=(",", ":"),
                                    allow_nan=False).encode("utf-8", "surrogatepass") + b"\n")
        self._encoded = (header, sessions, lines)
        return lines

    async def aclose(self) -> None:
        self._readers.clear()
        if self._watch is not None:
            self._watch.close()
            self._watch = None

    def _watcher(self) -> DirectoryWatch | None:
        if self._watch is None and not self._watch_failed:
            try:
                from clanker.grid.watch import DirectoryWatch

                self._watch = (DirectoryWatch() if self._max_watches is None
                               else DirectoryWatch(max_watches=self._max_watches))
            except Exception as exc:  # no inotify here (another OS, no instances left)
                log.warning("session index: no watch (%s); answers are checked by stat",
                            type(exc).__name__)
                self._watch_failed = True
        return self._watch

    def _service(self, environ: dict[str, str]) -> _Reader:
        key = tuple(sorted(environ.items()))
        reader = self._readers.get(key)
        if reader is not None:
            self._readers.move_to_end(key)
            return reader
        from clanker.accounts.service import AccountService
        from clanker.environment.local import LocalEnvironment
        from clanker.paths import clanker_paths
        from clanker.registry import Registry
        from clanker.sessions.service import SessionService
        from clanker.sessions.witness import ScanMemo

        watch, settle = self._watch, self._settle_ns

        def plain() -> ScanMemo:
            return ScanMemo(settle_ns=settle)

        memos: Callable[[], ScanMemo] = plain
        paths_of: dict[str, Any] = {}
        if watch is not None:
            from clanker.sessions.index import ProvenPaths, WatchedMemo

            paths_of["canonical_path"] = ProvenPaths(watch)

            def watched() -> ScanMemo:
                return WatchedMemo(watch, settle_ns=settle)

            memos = watched
        # What `Clanker` builds for a process with this environment, and no more.
        environment = LocalEnvironment(environ)
        registry = Registry.from_entry_points(environ)
        paths = clanker_paths(environ)
        accounts = AccountService(registry=registry, environment=environment, paths=paths)
        reader = self._readers[key] = _Reader(registry, SessionService(
            environment=environment, cache_dir=paths.cache, homes=accounts.homes,
            memos=memos, **paths_of))
        while len(self._readers) > self._capacity:
            self._readers.popitem(last=False)
        return reader


@frozen
class _Reader:
    registry: Registry
    service: SessionService

    def providers(self, harnesses: list[str] | None) -> list[HarnessProvider]:
        if harnesses is None:
            return list(self.registry.providers.values())
        found = [self.registry.find_provider(h) for h in harnesses]
        if any(p is None for p in found):
            raise ValueError("sessions: a harness this environment does not have")
        return [p for p in found if p is not None]


def _header(listing: SessionListing) -> bytes:
    from clanker.grid.protocol import ScanReport, SessionsReply, encode_reply

    scans = []
    for result in listing.scans:
        scan, error = result.scan, result.scan.error
        scans.append(ScanReport(
            harness=result.harness, account=result.account, skipped=scan.skipped,
            truncated=scan.truncated, partial=scan.partial,
            error_kind=None if error is None else error.kind.value,
            error_detail=None if error is None else error.detail))
    return encode_reply(SessionsReply(scans=scans, count=len(listing.sessions)))
