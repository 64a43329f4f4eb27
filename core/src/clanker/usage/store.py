"""Usage readings that survive between CLI invocations: one small file per key.

Written atomically, read strictly but tolerantly: a corrupt, foreign or
unreadable file is no file. Only safe data is kept: the measurements, the
probe clocks, and a failure's kind and safe detail (never vendor text).
"""

from __future__ import annotations

import contextlib
import hashlib
from datetime import datetime
from pathlib import Path
from typing import Final

from attrs import field, frozen

from clanker.converters import BoundaryError, make_boundary_converter, structure
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.storage import read_json, write_json_atomic
from clanker.usage.policy import ProbeState
from clanker.usage.types import UsageSnapshot

__all__ = ["Remembered", "UsageStore"]

_VERSION: Final = 1
_MAX_FILE: Final = 1024 * 1024
_converter = make_boundary_converter()


@frozen(kw_only=True)
class _Failure:
    kind: ErrorKind
    detail: str | None


@frozen(kw_only=True)
class _File:
    version: int
    key: str
    state: ProbeState
    snapshot: UsageSnapshot | None
    failure: _Failure | None
    checked_at: datetime | None


@frozen(kw_only=True)
class Remembered:
    """The last good snapshot (if any), the clocks, the latest failure."""

    state: ProbeState = field(factory=ProbeState)
    snapshot: UsageSnapshot | None = None
    failure: HarnessCapabilityError | None = None
    checked_at: datetime | None = None


class UsageStore:
    """Keyed by environment, harness and account: in memory, and on disk under
    ``directory`` when one is given (so readings survive between CLI runs)."""

    def __init__(self, directory: Path | None) -> None:
        self._directory = directory
        self._memory: dict[str, Remembered] = {}

    def _path(self, key: str) -> Path | None:
        if self._directory is None:
            return None
        digest = hashlib.sha256(key.encode()).hexdigest()[:24]
        return self._directory / "usage" / f"{digest}.json"

    def load(self, key: str, harness: str) -> Remembered:
        if key in self._memory:
            return self._memory[key]
        path = self._path(key)
        data = None if path is None else read_json(path, max_bytes=_MAX_FILE)
        if data is None:
            return Remembered()
        try:
            record = structure(_converter, data, _File)
        except BoundaryError:
            return Remembered()
        if record.version != _VERSION or record.key != key:
            return Remembered()
        failure = None
        if record.failure is not None:
            failure = HarnessCapabilityError(record.failure.kind, record.failure.detail,
                                             harness=harness)
        return Remembered(state=record.state, snapshot=record.snapshot, failure=failure,
                          checked_at=record.checked_at)

    def save(self, key: str, remembered: Remembered) -> None:
        self._memory[key] = remembered
        path = self._path(key)
        if path is None:
            return
        failure = remembered.failure
        record = _File(
            version=_VERSION, key=key, state=remembered.state, snapshot=remembered.snapshot,
            failure=None if failure is None else _Failure(kind=failure.kind,
                                                          detail=failure.detail),
            checked_at=remembered.checked_at,
        )
        # An unwritable cache makes the next run probe again, within the policy.
        with contextlib.suppress(OSError):
            write_json_atomic(path, _converter.unstructure(record))
