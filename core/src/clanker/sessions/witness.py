"""The answers of earlier scans, each kept with the witness that proves it still holds.

A second listing of an unchanged store should cost one ``stat`` per file, not
a walk, a sort and thousands of cache lookups: :class:`ScanMemo` hands back
an earlier answer while its :class:`~clanker.environment.witness.Witness`
holds.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from clanker.environment.witness import Witness
from clanker.sessions.types import SessionScan

__all__ = ["ScanMemo"]


class ScanMemo:
    """The last few answers of one provider that did not fail, each kept with its witness.

    Keyed by everything that shaped the answer besides the files themselves
    (the request's scopes, id and bound, and the provider's resolved inputs).
    Bounded, least recently used first out: a re-find by id adds an entry.
    """

    def __init__(self, *, capacity: int = 8, settle_ns: int | None = None) -> None:
        self._capacity = capacity
        self._settle_ns = settle_ns
        self._entries: OrderedDict[Hashable, tuple[Witness, SessionScan]] = OrderedDict()
        self._lock = threading.Lock()

    def witness(self) -> Witness:
        return Witness(settle_ns=self._settle_ns)

    def recall(self, key: Hashable) -> SessionScan | None:
        """The answer kept under ``key`` if its witness still holds, else ``None``."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is None:
            return None
        witness, scan = entry
        if witness.holds():
            return scan
        with self._lock:
            if self._entries.get(key) is entry:
                del self._entries[key]
        return None

    def keep(self, key: Hashable, witness: Witness, scan: SessionScan) -> None:
        """Keep ``scan`` under ``key``, unless its witness cannot vouch for it or it failed."""
        if not witness.usable or scan.error is not None:
            return
        witness.seal()
        with self._lock:
            self._entries[key] = (witness, scan)
            self._entries.move_to_end(key)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
