"""Pending moves: a create or a complete from a harness whose conversation moves only
once its turn has ended (the ``after-turn`` rehome strategy) is recorded here, one per
terminal, until the attention broker settles that terminal's root turn.

What counts is the broker's own published state, never the agent's word: the first
root-turn outcome recorded after the request (a revision newer than the one the
terminal had when it asked) decides. ``completed`` triggers the move; ``interrupted``,
``failed`` and ``session-ended`` cancel it, and so does the terminal's tombstone (the
agent exited) or its retirement. A cancelled move keeps the checkout it created.

A pending move outlives the grid that recorded it (:class:`PendingStore`): each
is one 0600 JSON file in a 0700 directory of the grid's state, written
atomically when it is scheduled and removed when it is triggered, cancelled or
dropped. A grid that starts loads them as *orphans*: their terminals were this
grid's predecessor's, and nothing of them is trusted but what the record says.
An orphan is re-armed (:meth:`PendingMoves.rearm`) only on a terminal that
registers with the same conversation, the same harness, workspace, environment
and launch directory, and only until :data:`REARM_WITHIN` has passed; then it
waits for that terminal's next completed root turn, and the trigger re-validates
everything as for any move. A file that cannot be used is refused
(:class:`PendingStateError`, logged, set aside as ``*.refused``) and costs no
other move.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import os
import stat
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from attrs import evolve, field, frozen

from clanker._logging import get_logger
from clanker.attention.broker import OutcomeKind, Revision
from clanker.bridge.credentials import Binding

if TYPE_CHECKING:
    from cattrs.preconf.json import JsonConverter

__all__ = ["MAX_STORED", "PENDING_DIRECTORY", "REARM_WITHIN", "STALE_AFTER", "Decision", "Orphan",
           "PendingMove", "PendingMoves", "PendingStateError", "PendingStore", "StoredMove"]

log = get_logger(__name__)

REARM_WITHIN: Final = timedelta(minutes=10)
"""How long after a grid starts a move it reloaded can still be re-armed on a terminal
that resumes the same conversation; after that it is cancelled (the checkout kept)."""
STALE_AFTER: Final = timedelta(hours=24)
"""A move asked for longer ago than this is cancelled by the grid that reloads it, not
re-armed (each grid start would otherwise give it another :data:`REARM_WITHIN`)."""
MAX_STORED: Final = 1024
"""How many stored moves a grid loads (one per terminal: the grid's own bound on live
terminals): more files than this are left alone, and said so."""
PENDING_DIRECTORY: Final = "pending-moves"
"""The store's directory, inside clanker's state directory (beside ``grid.log``)."""
_MAX_FILE: Final = 64 * 1024
_VERSION: Final = 1
_KINDS: Final = frozenset({"create", "complete"})


def _one_of_kinds(_: object, attribute: Any, value: str) -> None:
    if value not in _KINDS:
        raise ValueError(f"{attribute.name} must be create or complete, not {value!r}")


def _absolute(_: object, attribute: Any, value: str) -> None:
    if value and not os.path.isabs(value):
        raise ValueError(f"{attribute.name} must be an absolute path")


@frozen(kw_only=True)
class PendingMove:
    """One scheduled move: where the conversation goes once its turn has ended."""

    terminal: str
    session: str
    """The root session the broker had bound when the move was asked for."""
    target: str = field(validator=_absolute)
    """Where the resume runs (the worktree, or the caller's directory inside it)."""
    path: str = field(validator=_absolute)
    """The worktree's root, as the create recorded it."""
    branch: str
    after_revision: int
    """The terminal's published revision when the move was asked for."""
    requested_at: datetime
    kind: str = field(default="create", validator=_one_of_kinds)
    """``create`` (into the worktree) or ``complete`` (back to the main checkout, then
    the worktree completed)."""
    main: str = field(default="", validator=_absolute)
    """The main checkout (a ``complete``'s destination repository)."""
    delete_branch: bool = False
    discard_ignored: bool = False


class Decision(enum.StrEnum):
    """What a published revision means for a terminal's pending move."""

    WAIT = "wait"
    TRIGGER = "trigger"
    CANCEL = "cancel"


_CANCELLING = {
    OutcomeKind.INTERRUPTED: "the turn was interrupted",
    OutcomeKind.FAILED: "the turn failed",
    OutcomeKind.SESSION_ENDED: "the session ended",
}


def decide(move: PendingMove, revision: Revision) -> tuple[Decision, str]:
    """What ``revision`` of ``move``'s terminal means for it, and why (for a notice)."""
    snapshot = revision.snapshot
    if snapshot is None:
        return Decision.CANCEL, "the agent exited"
    outcome = snapshot.last_outcome
    if outcome is None or outcome.revision <= move.after_revision:
        return Decision.WAIT, ""
    if outcome.kind is OutcomeKind.COMPLETED:
        return Decision.TRIGGER, "the turn completed"
    return Decision.CANCEL, _CANCELLING[outcome.kind]


@frozen(kw_only=True)
class StoredMove:
    """One pending move as a file holds it: the move and the caller it was asked for
    (a terminal id lives as long as one grid: the caller's facts are what a terminal of
    the next grid is compared with)."""

    version: int
    move: PendingMove
    caller: Binding


@frozen(kw_only=True)
class Orphan:
    """A move a grid reloaded from its predecessor's state, not yet re-armed."""

    stored: StoredMove
    reloaded_at: datetime

    @property
    def move(self) -> PendingMove:
        return self.stored.move

    @property
    def caller(self) -> Binding:
        return self.stored.caller


class PendingStateError(Exception):
    """A stored pending move cannot be used (``path`` and ``reason`` say which and why)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


_converter: JsonConverter | None = None


def _boundary() -> JsonConverter:
    global _converter  # noqa: PLW0603 - one strict converter, made on first use
    if _converter is None:
        from clanker.converters import make_boundary_converter

        _converter = make_boundary_converter()
    return _converter


def _file_name(terminal: str) -> str:
    """The file of ``terminal``'s move: a digest, so no terminal id names a path."""
    return hashlib.sha256(terminal.encode("utf-8", "surrogatepass")).hexdigest()[:32] + ".json"


class PendingStore:
    """The pending moves on disk, one file per terminal in ``directory`` (0700, ours).

    The only code that reads or writes them. Writes are atomic (a fresh 0600 file,
    flushed to the disk, renamed over the old one): a reader finds the old record
    or the new one. Every failure is an ``OSError`` or :class:`PendingStateError`.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _ensure(self) -> None:
        self.directory.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(FileExistsError):
            os.mkdir(self.directory, 0o700)
        self._check()

    def _check(self) -> bool:
        try:
            info = os.lstat(self.directory)
        except FileNotFoundError:
            return False
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() \
                or stat.S_IMODE(info.st_mode) & 0o077:
            raise PendingStateError(self.directory, "is not a private directory of ours")
        return True

    def save(self, move: PendingMove, caller: Binding) -> None:
        """Write ``move`` (asked for by ``caller``) as its terminal's file."""
        from clanker.storage import write_json_atomic

        self._ensure()
        data = _boundary().unstructure(StoredMove(version=_VERSION, move=move, caller=caller))
        write_json_atomic(self.directory / _file_name(move.terminal), data)

    def remove(self, terminal: str) -> None:
        """Remove ``terminal``'s file (nothing if it has none)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.directory / _file_name(terminal))

    def load(self) -> tuple[list[StoredMove], list[PendingStateError]]:
        """Every stored move that can be used, and a refusal for each file that cannot
        (set aside as ``<name>.refused``, so it is refused once and kept to be read)."""
        if not self._check():
            return [], []
        with os.scandir(self.directory) as entries:
            names = sorted(e.name for e in entries if e.name.endswith(".json"))
        loaded: list[StoredMove] = []
        refused: list[PendingStateError] = []
        if len(names) > MAX_STORED:
            refused.append(PendingStateError(
                self.directory, f"holds {len(names)} moves; the first {MAX_STORED} are read"))
            names = names[:MAX_STORED]
        for name in names:
            path = self.directory / name
            try:
                loaded.append(self._read(path))
            except PendingStateError as error:
                refused.append(error)
                with contextlib.suppress(OSError):
                    os.replace(path, path.with_name(name + ".refused"))
        return loaded, refused

    @staticmethod
    def _read(path: Path) -> StoredMove:
        from clanker.converters import BoundaryError, structure
        from clanker.storage import UnusableFileError, parse_json, read_own_file

        try:
            raw = read_own_file(path, max_bytes=_MAX_FILE)
        except UnusableFileError as error:
            raise PendingStateError(path, error.reason) from None
        if raw is None:
            raise PendingStateError(path, "went away while it was read")
        try:
            data = parse_json(raw)
        except ValueError:
            raise PendingStateError(path, "is not JSON (torn or corrupt)") from None
        try:
            stored = structure(_boundary(), data, StoredMove)
        except BoundaryError as error:
            raise PendingStateError(path, f"is not a pending move ({error})") from None
        if stored.version != _VERSION:
            raise PendingStateError(path, f"has version {stored.version}, not {_VERSION}")
        if stored.move.terminal != stored.caller.terminal \
                or path.name != _file_name(stored.move.terminal):
            raise PendingStateError(path, "does not belong to the terminal it names")
        return stored


class PendingMoves:
    """The scheduled moves of one grid, at most one per terminal (event-loop thread),
    kept in ``store`` too when one is given (see the module's docstring)."""

    def __init__(self, store: PendingStore | None = None) -> None:
        self._moves: dict[str, PendingMove] = {}
        self._callers: dict[str, Binding] = {}
        self._store = store
        self._orphans: list[Orphan] = []
        self._unsaved: set[str] = set()

    def schedule(self, move: PendingMove, caller: Binding) -> bool:
        """Record ``move`` for ``caller``; ``False`` (nothing recorded) when its terminal
        has one. A store that cannot write it is logged: the move stays scheduled in
        this grid's memory (it would not survive this grid)."""
        if move.terminal in self._moves:
            return False
        self._moves[move.terminal] = move
        self._callers[move.terminal] = caller
        if self._store is not None:
            try:
                self._store.save(move, caller)
            except (OSError, PendingStateError) as error:
                self._unsaved.add(move.terminal)
                log.warning("terminal %s: the pending move cannot be kept across a grid "
                            "restart: %s", move.terminal, error)
        return True

    def of(self, terminal: str) -> PendingMove | None:
        return self._moves.get(terminal)

    def caller_of(self, terminal: str) -> Binding | None:
        return self._callers.get(terminal)

    def pop(self, terminal: str) -> PendingMove | None:
        """Take ``terminal``'s move out (triggered, cancelled or dropped), on disk too."""
        move = self._moves.pop(terminal, None)
        self._callers.pop(terminal, None)
        self._unsaved.discard(terminal)
        if move is not None:
            self._forget(terminal)
        return move

    def suspend(self) -> dict[str, tuple[PendingMove, Binding, bool]]:
        """Take every move out of memory and leave it on disk (the grid stops: the
        next one reloads it); return them, each with whether it is on disk (a store
        that could not write one loses it now)."""
        moves = {terminal: (move, self._callers[terminal], terminal not in self._unsaved)
                 for terminal, move in self._moves.items()}
        self._moves.clear()
        self._callers.clear()
        self._unsaved.clear()
        return moves

    def all(self) -> dict[str, PendingMove]:
        return dict(self._moves)

    @property
    def kept(self) -> bool:
        """Whether moves are kept across a grid restart (a store was given)."""
        return self._store is not None

    # ------------------------------------------------------------- orphans

    def reload(self, now: datetime
               ) -> tuple[int, list[PendingStateError], list[StoredMove]]:
        """Load the moves a previous grid left as orphans: how many, what was refused,
        and the stale ones (asked for :data:`STALE_AFTER` ago or more: taken out)."""
        if self._store is None:
            return 0, [], []
        try:
            loaded, refused = self._store.load()
        except (OSError, PendingStateError) as error:
            failure = error if isinstance(error, PendingStateError) else PendingStateError(
                self._store.directory, f"cannot be read ({error})")
            return 0, [failure], []
        stale = [stored for stored in loaded if now - stored.move.requested_at >= STALE_AFTER]
        for stored in stale:
            self._forget(stored.move.terminal)
        self._orphans = [Orphan(stored=stored, reloaded_at=now) for stored in loaded
                         if stored not in stale and stored.move.terminal not in self._moves]
        return len(self._orphans), refused, stale

    @property
    def orphans(self) -> tuple[Orphan, ...]:
        return tuple(self._orphans)

    def orphans_of(self, session: str) -> list[Orphan]:
        return [orphan for orphan in self._orphans if orphan.move.session == session]

    def drop_orphan(self, orphan: Orphan) -> None:
        """Forget ``orphan`` (cancelled), on disk too."""
        if orphan in self._orphans:
            self._orphans.remove(orphan)
            self._forget(orphan.move.terminal)

    def rearm(self, orphan: Orphan, caller: Binding, after_revision: int) -> PendingMove | None:
        """Make ``orphan`` ``caller``'s pending move, waiting for a root turn completed
        after ``after_revision``; ``None`` (nothing changed) when ``caller``'s terminal
        has a move already."""
        if caller.terminal in self._moves or orphan not in self._orphans:
            return None
        move = evolve(orphan.move, terminal=caller.terminal, after_revision=after_revision)
        self._orphans.remove(orphan)
        self.schedule(move, caller)  # written first: a crash now leaves a record, not none
        if orphan.move.terminal != caller.terminal:
            self._forget(orphan.move.terminal)
        return move

    def expired(self, now: datetime) -> list[Orphan]:
        """The orphans no longer re-armable at ``now``, taken out (on disk too)."""
        late = [o for o in self._orphans if now - o.reloaded_at >= REARM_WITHIN]
        for orphan in late:
            self.drop_orphan(orphan)
        return late

    def _forget(self, terminal: str) -> None:
        if self._store is None:
            return
        try:
            self._store.remove(terminal)
        except OSError as error:
            log.warning("terminal %s: the stored pending move cannot be removed: %s",
                        terminal, error)
