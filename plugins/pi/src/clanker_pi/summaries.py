"""How Pi's JSON Lines session files become sessions (where they are is
:mod:`clanker_pi.sessions`'s), read at their head and tail.

Verified against pi 0.73.1 (docs/harnesses/pi.md, "Sessions"). Line 1 is the header
``{"type":"session","id","timestamp","cwd"[,"parentSession"]}``; every later line is
one entry. The directory name only pre-filters: it is not reversible (``/a/b-c``,
``/a/b/c`` and ``/a/b:c`` share one), so a session belongs to the ``cwd`` its header
records.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from clanker import pistore
from clanker.ids import HarnessId
from clanker.sessions.capability import HarnessSession, SessionScan, SessionsContext
from clanker.stores import (
    FOREIGN,
    FileSample,
    NoSession,
    Witness,
    clean_text,
    head_and_tail,
    parse_timestamp,
    scan_files,
)

if TYPE_CHECKING:
    from clanker_pi.sessions import SessionRoot

HEAD_BYTES: Final = pistore.HEAD_BYTES
TAIL_BYTES: Final = pistore.TAIL_BYTES
parent_from = pistore.parent_from

__all__ = [
    "HEAD_BYTES",
    "TAIL_BYTES",
    "encode_cwd",
    "parent_from",
    "project_dir_filter",
    "scan",
    "summarize",
]

_PI: Final = HarnessId("pi")

# parse_timestamp reads an integer above 10**11 as milliseconds; below 10**14 that is
# before the year 5138, which every platform converts.
_MS_LOW: Final = 10**11
_MS_HIGH: Final = 10**14


# -- project directories ---------------------------------------------------------------------


def encode_cwd(cwd: str) -> str:
    """Pi's project directory name without its ``--`` wrapping.

    One leading separator dropped, then every ``/``, ``\\`` and ``:`` becomes
    ``-``; nothing else is escaped.
    """
    return re.sub(r"[/\\:]", "-", re.sub(r"\A[/\\]", "", cwd))


def project_dir_filter(scopes: Iterable[str]) -> Callable[[int, str], bool] | None:
    """Which project directories can hold sessions of ``scopes`` (``None``: all).

    Conservative: a session in a directory below a scope lives in a directory
    whose name starts with the scope's encoding and ``-``, and so do siblings
    such as ``/a/b-c`` for ``/a/b``; the service drops those by their cwd.
    """
    exact: set[str] = set()
    prefixes: set[str] = set()
    for scope in scopes:
        encoded = encode_cwd(scope)
        if not scope.startswith("/") or not encoded:
            return None  # a relative scope or "/": every project may match
        exact.add(f"--{encoded}--")
        prefixes.add(f"--{encoded}-")
    if not exact:
        return None
    ordered = tuple(prefixes)
    return lambda level, name: (name in exact
                                or (name.startswith(ordered) and pistore.wrapped_dir_name(name)))


# -- one file -------------------------------------------------------------------------------
#
# How lines are chosen is clanker.pistore's (Lines, Want); Pi's fields need these.

# A tail: user and assistant messages (the times, a model), names, models.
_RECENT: Final = pistore.Want((b'"user"', b'"assistant"', b'"session_info"', b'"model_change"'),
                               frozenset({b"message", b"session_info", b"model_change"}),
                               frozenset({b"user", b"assistant"}))
_NAMES: Final = pistore.Want((b'"session_info"',), frozenset({b"session_info"}))
_PROMPTS: Final = pistore.Want((b'"user"',), frozenset({b"message"}), frozenset({b"user"}))
_MODELS: Final = pistore.Want((b'"model_change"', b'"assistant"'),
                               frozenset({b"model_change", b"message"}), frozenset({b"assistant"}))


def _model(entry: dict[str, Any]) -> str | None:
    """``provider/model`` from a ``model_change`` or an assistant message."""
    if entry.get("type") == "model_change":
        provider, model = entry.get("provider"), entry.get("modelId")
    else:
        found = pistore.message(entry)
        if found is None or found.get("role") != "assistant":
            return None
        provider, model = found.get("provider"), found.get("model")
    return pistore.provider_model(provider, model)


def _named(entries: Iterable[dict[str, Any]]) -> tuple[bool, str | None]:
    """The newest ``session_info`` among ``entries`` (newest first): found, and its name.

    An empty or missing name clears an earlier one, as in pi.
    """
    for entry in entries:
        if entry.get("type") == "session_info":
            return True, clean_text(entry.get("name"))
    return False, None


def _times(entries: Iterable[dict[str, Any]]) -> list[datetime]:
    """When the user and assistant messages happened (pi's own "modified" rule)."""
    stamps: list[datetime] = []
    # The usual time, integer milliseconds since 1973, orders exactly as the instant it
    # converts to: only the largest one is converted.
    latest_ms = 0
    for entry in entries:
        found = pistore.message(entry)
        if found is None or found.get("role") not in ("user", "assistant"):
            continue
        value = found.get("timestamp")
        if type(value) is int and _MS_LOW < value < _MS_HIGH:
            latest_ms = max(latest_ms, value)
        else:
            stamp = parse_timestamp(value) or parse_timestamp(entry.get("timestamp"))
            if stamp is not None:
                stamps.append(stamp)
    latest = parse_timestamp(latest_ms) if latest_ms else None
    if latest is not None:
        stamps.append(latest)
    return stamps


def _omp_format(head: pistore.Lines, first: dict[str, Any] | None) -> bool:
    """Oh My Pi's layout: a title slot (or a line caught mid-rewrite), then the header."""
    if len(head.spans) < 2 or (first is not None and first.get("type") != "title"):
        return False
    second = head.entry(1)
    return second is not None and second.get("type") == "session"


def summarize(sample: FileSample) -> HarnessSession | NoSession | None:
    """Summarize one pi session file; ``None`` when it is not one (a counted skip).

    - id, cwd, created: the header on line 1 only. A second ``session`` line
      later in the file (pi re-appends everything after a broken tail) is
      ignored, as is any line that does not parse.
    - title: the newest ``session_info`` name in the tail, else in the head
      (set by ``/name`` or RPC ``set_session_name``; forks inherit it), else
      the first user message.
    - updated: the newest user/assistant message time in the tail, never
      before the header's time (a fork copies its parent's messages); with no
      message in reach, the header time for a file read whole, the file's
      mtime for a larger one.
    - model: the newest ``model_change`` or assistant message, else the
      model of a version-1 header.
    - message_count: every ``message`` entry, de-duplicated by entry id; only
      for a file read whole (``None`` otherwise: a count of part is no count).

    A file whose header is line 2, after a title slot (or a line that does not
    parse: a slot being rewritten), is Oh My Pi's format, which pi never writes:
    :data:`~clanker.stores.FOREIGN` (omp lists it, in a directory the two share).
    """
    head_region, tail_region = head_and_tail(sample)
    head = pistore.Lines(head_region)
    header = head.first()
    if header is None or header.get("type") != "session":
        return FOREIGN if _omp_format(head, header) else None
    place = pistore.header_place(header)
    if place is None:
        return None
    native_id, cwd = place
    created = parse_timestamp(header.get("timestamp"))
    # Line 1 is the header; later `session` lines are re-appended duplicates, and
    # no field reads one.
    older: pistore.Lines | None = None  # the head's older lines, unless read already
    if sample.whole:
        # Every line is decoded: the count takes every message, and a line that does
        # not parse (cut, or glued to the next one after a crash) must not count.
        entries = head.every_entry(1)
        newest_first = entries[::-1]
        prompts: Iterable[dict[str, Any]] = entries
    else:
        if tail_region is not head_region:
            recent = pistore.Lines(tail_region).entries(_RECENT, newest_first=True)
        else:  # nothing read past the head (the file shrank): the head is the tail too
            recent = head.entries(_RECENT, skip=1, newest_first=True)
        newest_first = list(recent)
        prompts = head.entries(_PROMPTS, skip=1)
        older = head

    named, title = _named(newest_first)
    if not named:
        named, title = _named(pistore.older_entries(older, _NAMES, 1))
    if title is None:
        title = next((t for t in map(pistore.user_text, prompts) if t is not None), None)
    model = (
        next((m for m in map(_model, newest_first) if m is not None), None)
        or next((m for m in map(_model, pistore.older_entries(older, _MODELS, 1))
                 if m is not None), None)
        or _model({"type": "model_change", "provider": header.get("provider"),
                   "modelId": header.get("modelId")})
    )
    stamps = _times(newest_first)
    parent = header.get("parentSession")
    if parent is None:
        parent = header.get("branchedFrom")  # before pi 0.31
    return HarnessSession(
        harness=_PI, native_id=native_id, updated_at=pistore.updated(sample, stamps, created),
        title=title, cwd=cwd, created_at=created, model=model,
        message_count=pistore.count_messages(newest_first) if sample.whole else None,
        parent_id=pistore.parent_from(parent),
    )


# -- the scan -----------------------------------------------------------------------------


def _pi_dir(level: int, name: str) -> bool:
    return pistore.wrapped_dir_name(name)


def scan(context: SessionsContext, roots: tuple[SessionRoot, ...]) -> SessionScan:
    """The sessions of the files below ``roots``, within ``context``'s bounds."""
    accept_dir: Callable[[int, str], bool] = _pi_dir
    if context.native_id is None:  # on a re-find the scopes say where the caller is, no more
        accept_dir = project_dir_filter(context.scopes) or _pi_dir

    def read(witness: Witness) -> SessionScan:
        found, cut = pistore.candidates(context, roots, accept_dir, witness)
        return scan_files(context, found, summarize, cut=cut,
                          head_bytes=HEAD_BYTES, tail_bytes=TAIL_BYTES, witness=witness)

    return context.remember(roots, read)
