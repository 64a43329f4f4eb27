"""What clanker remembers of the worktrees it created, per main checkout.

One JSON file per main checkout under ``<state>/checkouts/`` (its name a hash
of the environment and the checkout's canonical path), replaced atomically,
read strictly (an unknown key or a wrong type is a corrupt file, which is
refused, never rewritten: it may be a newer clanker's). Records outlive the
worktree: a removed worktree and its branch can still be attributed to
clanker from its path alone.

Two kinds of lock, both :mod:`clanker.locking` on clanker's own files (the
kernel drops them when a process dies, so nothing stale is left to clean): a
short one around each read-modify-write of the file (waited for at most 30 s,
then ``busy``), and one taken in a single try per checkout and held for a
whole create or complete, so that of two concurrent requests for one checkout
one proceeds and the other is told the checkout is busy.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Final

from attrs import evolve, field, frozen

from clanker.checkouts.types import CheckoutError, Refusal
from clanker.converters import BoundaryError, make_boundary_converter, structure
from clanker.locking import LockTimeoutError, UnsafeLockError, exclusive
from clanker.storage import (
    MAX_STATE_FILE,
    UnusableFileError,
    parse_json,
    read_own_file,
    write_json_atomic,
)

__all__ = ["MAX_RECORDS", "Phase", "ProvenanceStore", "Record"]

MAX_RECORDS: Final = 512
_VERSION: Final = 1
_FILE_LOCK_WAIT: Final = 30.0  # seconds: the lock around a read-modify-write of the file


class Phase(enum.StrEnum):
    CREATING = "creating"
    """Asked for; git may or may not have made it yet (a cancelled or crashed create)."""
    ACTIVE = "active"
    COMPLETING = "completing"
    """Removal started; git's listing says whether it finished."""
    REMOVED = "removed"


@frozen(kw_only=True)
class Record:
    branch: str
    path: str
    base: str
    phase: Phase
    created_at: datetime
    removed_at: datetime | None = None
    branch_deleted: bool = False


@frozen(kw_only=True)
class _Document:
    version: int
    environment: str
    main_checkout: str
    records: tuple[Record, ...] = field(default=())


_CONVERTER: Final = make_boundary_converter()


def _phase(value: object, _: type[Phase]) -> Phase:
    # Phase is a str: without its own hook the converter's exact-str hook would
    # hand back the bare string, which no ``is Phase.X`` matches.
    if type(value) is not str:
        raise TypeError(f"expected a phase name, got {type(value).__name__}")
    return Phase(value)


_CONVERTER.register_structure_hook(Phase, _phase)


def _key(environment: str, main_checkout: str) -> str:
    return hashlib.sha256(f"{environment}\0{main_checkout}".encode()).hexdigest()[:32]


@contextlib.contextmanager
def _flock(path: Path, *, timeout: float) -> Iterator[bool]:
    """Hold an exclusive lock on clanker's own file ``path``; yield whether it was taken
    within ``timeout`` seconds (0: one try)."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(exclusive(path, timeout=timeout))
        except UnsafeLockError as exc:
            raise CheckoutError(Refusal.STATE_UNUSABLE, f"the lock file {exc}") from exc
        except LockTimeoutError:
            yield False
            return
        yield True


class ProvenanceStore:
    """The records of one main checkout in one environment."""

    def __init__(self, state_dir: Path, *, environment: str, main_checkout: str) -> None:
        key = _key(environment, main_checkout)
        self._path = state_dir / "checkouts" / f"{key}.json"
        self._locks = state_dir / "locks"
        self._file_lock = self._locks / f"checkouts-{key}.lock"
        self._environment = environment
        self._main = main_checkout

    @property
    def path(self) -> Path:
        return self._path

    @contextlib.contextmanager
    def checkout_lock(self, name: str, what: str) -> Iterator[None]:
        """Hold the lock of the checkout named ``name`` or raise ``busy`` at once."""
        lock = self._locks / f"checkout-{_key(self._main, name)}.lock"
        with _flock(lock, timeout=0) as taken:
            if not taken:
                raise CheckoutError(Refusal.BUSY, f"{what} is busy: another create or "
                                    "complete for it is running; try again when it ends")
            yield

    def records(self) -> tuple[Record, ...]:
        return self._read().records

    def find(self, *, path: str | None = None, branch: str | None = None) -> Record | None:
        """The newest record matching every given field."""
        for record in reversed(self.records()):
            if (path is None or record.path == path) and (
                    branch is None or record.branch == branch):
                return record
        return None

    def update(self, change: Callable[[list[Record]], None]) -> None:
        """Apply ``change`` to the records under the file lock and write the result."""
        with _flock(self._file_lock, timeout=_FILE_LOCK_WAIT) as taken:
            if not taken:
                raise CheckoutError(Refusal.BUSY, "clanker's record of this checkout's "
                                    "worktrees is busy: another clanker held it for "
                                    f"{_FILE_LOCK_WAIT:g} s; try again")
            document = self._read()
            records = list(document.records)
            change(records)
            # Bounded: the oldest removed records go first; live ones are never forgotten.
            while len(records) > MAX_RECORDS:
                gone = next((r for r in records if r.phase is Phase.REMOVED), None)
                if gone is None:
                    break
                records.remove(gone)
            data = _CONVERTER.unstructure(evolve(document, records=tuple(records)))
            try:
                write_json_atomic(self._path, data)
            except OSError as exc:
                raise CheckoutError(Refusal.STATE_UNUSABLE, f"clanker's record {self._path} "
                                    f"cannot be written ({exc.strerror})") from exc

    def put(self, record: Record) -> None:
        """Replace the record of ``record.path`` (or add it)."""
        def change(records: list[Record]) -> None:
            records[:] = [r for r in records if r.path != record.path]
            records.append(record)

        self.update(change)

    def _read(self) -> _Document:
        empty = _Document(version=_VERSION, environment=self._environment,
                          main_checkout=self._main)
        try:
            raw = read_own_file(self._path, max_bytes=MAX_STATE_FILE)
        except UnusableFileError as exc:
            raise CheckoutError(Refusal.STATE_UNUSABLE, str(exc)) from exc
        if raw is None:
            return empty
        try:
            document = structure(_CONVERTER, parse_json(raw), _Document)
        except (ValueError, BoundaryError) as exc:
            raise CheckoutError(Refusal.STATE_UNUSABLE, f"clanker's record {self._path} is "
                                "not in a format this version understands; it is left as "
                                "it is") from exc
        if document.version != _VERSION or document.main_checkout != self._main:
            raise CheckoutError(Refusal.STATE_UNUSABLE, f"clanker's record {self._path} "
                                "belongs to another version or checkout; it is left as it is")
        return document
