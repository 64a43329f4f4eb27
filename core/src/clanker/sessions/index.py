"""The session index a running grid keeps: earlier answers proven by inotify, and
the rows a listing crosses the grid's socket as.

:class:`WatchedMemo` is a :class:`~clanker.sessions.witness.ScanMemo` whose
answers are proven current by a watch (the grid's
:class:`~clanker.grid.watch.DirectoryWatch`) instead of one ``stat`` per file:
an answer is kept with the watch's proof only once its witness held again
*after* the watches were in place, so a change made while it was scanned shows
(then it is checked by ``stat`` as without a grid). An answer whose proof
cannot be made or fails is checked by ``stat`` too; nothing is ever answered
on the watch's word alone when the watch cannot vouch for it.

The rows (:func:`session_row`, :func:`session_from_row`) are fixed-position
lists, checked strictly (exact types, exact length) on the way in.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterable
from datetime import datetime
from typing import Any, Final, Protocol

from clanker.environment.witness import Witness
from clanker.ids import HarnessId, is_harness_id
from clanker.sessions.scope import canonical
from clanker.sessions.types import HarnessSession, SessionScan
from clanker.sessions.witness import ScanMemo

__all__ = ["ProvenPaths", "StoreWatch", "WatchedMemo", "session_from_row", "session_row"]


class StoreWatch(Protocol):
    """What a :class:`WatchedMemo` asks of a watch (the grid's is the one there is)."""

    def prove(self, listed: Iterable[str], read: Iterable[str]) -> object | None: ...

    def still(self, proof: Any) -> bool: ...


class WatchedMemo(ScanMemo):
    """A :class:`ScanMemo` whose answers a watch proves current (see the module notes)."""

    def __init__(self, watch: StoreWatch, *, capacity: int = 8,
                 settle_ns: int | None = None) -> None:
        super().__init__(capacity=capacity, settle_ns=settle_ns)
        self._watch = watch
        self._proofs: dict[Hashable, tuple[Witness, object]] = {}

    def recall(self, key: Hashable) -> SessionScan | None:
        with self._lock:
            entry = self._entries.get(key)
            proof = self._proofs.get(key)
        if entry is not None and proof is not None and proof[0] is entry[0] \
                and self._watch.still(proof[1]):
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
            return entry[1]
        return super().recall(key)

    def keep(self, key: Hashable, witness: Witness, scan: SessionScan) -> None:
        super().keep(key, witness, scan)
        with self._lock:
            kept = self._entries.get(key)
            self._proofs = {k: p for k, p in self._proofs.items()
                            if k in self._entries and k != key}
        if kept is None or kept[0] is not witness:
            return
        proof = self._watch.prove(*witness.recorded())
        # Checked after the watches exist: what changed before raised no event.
        if proof is not None and witness.holds():
            with self._lock:
                self._proofs[key] = (witness, proof)


class ProvenPaths:
    """:func:`~clanker.sessions.scope.canonical`, remembering the directories that
    resolve to themselves (no link on the way, the common case, missing ones
    included) for as long as a watch proves no component of theirs changed. A
    directory with a link on the way is resolved every time: its target's own
    components are not watched. Bounded: past ``capacity`` it starts afresh."""

    def __init__(self, watch: StoreWatch, *, capacity: int = 65_536) -> None:
        self._watch = watch
        self._capacity = capacity
        self._known: dict[str, object] = {}

    def __call__(self, path: str) -> str:
        proof = self._known.get(path)
        if proof is not None and self._watch.still(proof):
            return path
        resolved = canonical(path)
        if resolved == path:
            proof = self._watch.prove((), (path,))
            # Resolved once more after the watches exist: a change before raised no event.
            if proof is not None and canonical(path) == path:
                if len(self._known) >= self._capacity:
                    self._known = {}
                self._known[path] = proof
        return resolved




def session_row(session: HarnessSession) -> list[Any]:
    """``session`` as one row (see :func:`session_from_row`)."""
    created = session.created_at
    return [session.harness, session.native_id, session.updated_at.isoformat(),
            session.title, session.cwd, None if created is None else created.isoformat(),
            session.model, session.message_count, session.parent_id, session.store_path,
            session.order, session.hidden, session.account]


def session_from_row(row: object) -> HarnessSession:
    """The session of one row; ``ValueError`` (or ``TypeError``) for anything else."""
    # One shape test per row, as the summary cache does: a listing decodes thousands.
    if type(row) is not list or tuple(map(type, row)) not in _SHAPES:
        raise ValueError("session row: wrong shape or types")
    (harness, native_id, updated, title, cwd, created, model, count, parent, store, order,
     hidden, account) = row
    if harness not in _HARNESSES:
        if not is_harness_id(harness):
            raise ValueError("session row: not a harness id")
        _HARNESSES.add(harness)
    return HarnessSession(
        harness=HarnessId(harness), native_id=native_id, updated_at=_aware(updated),
        title=title, cwd=cwd, created_at=None if created is None else _aware(created),
        model=model, message_count=count, parent_id=parent, store_path=store, order=order,
        hidden=hidden, account=account)


def _aware(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    if value.tzinfo is None:
        raise ValueError("session row: a time without its zone")
    return value


_TEXT: Final = (str, type(None))
_SHAPES: Final = frozenset(
    (str, str, str, title, cwd, created, model, count, parent, store, int, bool, account)
    for title, cwd, created, model, parent, store, account in itertools.product(
        _TEXT, repeat=7)
    for count in (int, type(None)))
_HARNESSES: set[str] = set()
"""Harness ids already checked (a row's is checked once per process, not per row)."""
