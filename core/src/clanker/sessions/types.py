"""Session history values: one past conversation, and one store's scan."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Final

from attrs import field, fields, frozen, validators

from clanker.errors import HarnessCapabilityError
from clanker.ids import HarnessId

__all__ = [
    "EMPTY",
    "FOREIGN",
    "HarnessSession",
    "NoSession",
    "SessionScan",
    "bounded_text",
    "clean_text",
    "parse_timestamp",
]

_TITLE_LIMIT = 200


def clean_text(value: object, *, limit: int = _TITLE_LIMIT) -> str | None:
    """Return ``value`` as one printable line of at most ``limit`` characters, or ``None``.

    Titles come from whatever a person typed first: newlines and control
    characters are folded to spaces so a table (and a terminal) stays sane.
    """
    if not isinstance(value, str):
        return None
    # Splitting first gives the same words as mapping each unprintable character
    # to a space and then splitting (every whitespace character but " " is
    # unprintable), and leaves the per-character pass to the rare text with a
    # control or format character inside a word: a listing folds thousands.
    folded = " ".join(value.split())
    if not folded.isprintable():
        folded = " ".join("".join(c if c.isprintable() else " " for c in folded).split())
    if not folded:
        return None
    return folded if len(folded) <= limit else folded[: limit - 1].rstrip() + "…"


def parse_timestamp(value: object) -> datetime | None:
    """Read an ISO 8601 string (``Z`` allowed) or epoch seconds/milliseconds as UTC.

    Returns ``None`` for anything else, including naive timestamps, which
    would otherwise be read in the wrong zone.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            # Milliseconds since 1973; an integer too large for a float overflows here.
            seconds = value / 1000 if value > 10**11 else value
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
            return parsed.astimezone(UTC) if parsed.tzinfo is not None else None
        except (ValueError, OverflowError):  # Overflow: year 1 in a zone east of UTC
            return None
    return None


def bounded_text(value: object, limit: int) -> str | None:
    """Return ``value`` unchanged when every later step can hold it, else ``None``.

    That is a string that is not blank, at most ``limit`` characters, without
    NUL and encodable as UTF-8 (a lone surrogate from a ``"\\ud800"`` escape
    is not). Unlike :func:`clean_text` nothing is folded: this guards values
    that are used as they are (a cwd, a model, an id).
    """
    if not isinstance(value, str) or not value.strip() or len(value) > limit or "\x00" in value:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


def _aware(_: object, attribute: Any, value: Any) -> None:
    if value is not None and value.tzinfo is None:
        raise ValueError(f"{attribute.name}: timestamps must carry a time zone")


def _path(_: object, attribute: Any, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value.startswith("/") or "\0" in value:
        raise ValueError(f"{attribute.name}: must be an absolute path")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{attribute.name}: must be valid text") from None


def _non_negative(_: object, attribute: Any, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or value < 0):
        raise ValueError(f"{attribute.name}: must be a count")


def _sessions(values: Iterable[HarnessSession]) -> tuple[HarnessSession, ...]:
    return tuple(values)


class NoSession(enum.Enum):
    """A file in the store that is no session of this harness, yet no skip either:
    neither listed, nor counted, nor found by id."""

    EMPTY = "empty"
    """The harness created the file but wrote no message into it (opened and quit):
    there is nothing to list or resume, and nothing unreadable either."""
    FOREIGN = "foreign"
    """Another harness's session, in a directory the two share: its own format (or
    the verified directory rules) says whose it is, and that harness lists it."""


EMPTY: Final = NoSession.EMPTY
FOREIGN: Final = NoSession.FOREIGN


@frozen(kw_only=True)
class HarnessSession:
    """One past conversation, normalized.

    ``cwd`` is canonical (symlinks resolved as far as the path exists) or
    ``None`` when the harness recorded no directory. ``store_path`` is where
    it was found: for confinement checks only, never an input to a launch
    unless clanker itself re-found it. ``order`` is the provider's discovery
    order, which breaks ties between equal ``updated_at`` values. ``hidden``
    marks a real session that listings leave out on purpose (a sub-agent's
    transcript, a scripted print-mode run): it is not a skip, and re-finding
    it by id still works.
    """

    harness: HarnessId
    native_id: str = field(validator=validators.min_len(1))
    updated_at: datetime = field(validator=_aware)
    title: str | None = None
    cwd: str | None = field(default=None, validator=_path)
    created_at: datetime | None = field(default=None, validator=_aware)
    model: str | None = None
    message_count: int | None = field(default=None, validator=_non_negative)
    parent_id: str | None = None
    store_path: str | None = None
    order: int = 0
    hidden: bool = False
    account: str | None = None
    """The managed account whose home holds it (its opaque id), or ``None`` for the
    harness's own home (the default account). Set by the service, never a provider."""

    @property
    def key(self) -> str:
        """``harness:id``, the form the CLI accepts back."""
        return f"{self.harness}:{self.native_id}"


_FIELDS: Final = tuple(f.name for f in fields(HarnessSession))
# A slot copy is the constructor's result only while no field converts and nothing runs
# after __init__: a change to HarnessSession that breaks either fails here, at import.
assert not any(f.converter for f in fields(HarnessSession))
assert not hasattr(HarnessSession, "__attrs_post_init__")


def placed(session: HarnessSession, harness: HarnessId, store_path: str, order: int,
           shared: dict[str | None, str | None]) -> HarnessSession:
    """``evolve(session, harness=..., store_path=..., order=...)``, a sixth of its cost.

    Every session of a listing passes here once; ``evolve`` runs the field
    validators again over values they already passed, and these three fields
    have none, so the copy is made slot by slot (equal to evolve's, field for
    field). Its ``cwd`` and ``model`` are the equal strings ``shared`` holds
    (each file's summary made its own: thousands of copies of a few values)."""
    copy = object.__new__(HarnessSession)
    put = object.__setattr__  # the class is frozen
    for name in _FIELDS:
        put(copy, name, getattr(session, name))
    put(copy, "harness", harness)
    put(copy, "store_path", store_path)
    put(copy, "order", order)
    cwd, model = session.cwd, session.model
    put(copy, "cwd", shared.setdefault(cwd, cwd))
    put(copy, "model", shared.setdefault(model, model))
    return copy


@frozen(kw_only=True, repr=False)
class SessionScan:
    """What one provider found.

    ``skipped`` counts files or rows that could not be read as a session
    (malformed, truncated, oversized): a typed skip, never a crash.
    ``truncated`` says the per-store bound cut the scan. ``partial`` is a safe,
    human sentence when the store could only be read in part for another
    reason (a harness that lists one project at a time, say). ``error`` is set
    when the store itself failed (unreadable, changed schema): then
    ``sessions`` is whatever was read before. None of these is ever treated as
    a complete scan.
    """

    sessions: tuple[HarnessSession, ...] = field(default=(), converter=_sessions)
    skipped: int = 0
    truncated: bool = False
    partial: str | None = None
    error: HarnessCapabilityError | None = field(default=None, eq=False)

    @property
    def complete(self) -> bool:
        return self.error is None and not self.truncated and self.partial is None

    def __repr__(self) -> str:  # short: see SessionListing.__repr__
        return (f"SessionScan(<{len(self.sessions)} sessions>, skipped={self.skipped}, "
                f"truncated={self.truncated}, partial={self.partial!r}, error={self.error!r})")
