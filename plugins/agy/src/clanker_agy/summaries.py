"""How Antigravity's picker index becomes sessions (where it is is
:mod:`clanker_agy.sessions`'s), read-only.

**Written from the spec and public material, never run against agy** (it
cannot be installed here): see docs/harnesses/agy.md, "Sessions". agy has no
command that lists conversations (``/resume`` is an interactive picker), so
clanker reads the picker's own index, as the spec does: one row per
conversation in ``conversation_summaries``. The conversation itself lives in
``conversations/<id>.db`` next to it, which is what ``--conversation=<id>``
resumes; the index lags and can outlive it, so a row is offered only while
that file exists.
"""

from __future__ import annotations

import json
import re
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote, urlsplit

from attrs import evolve, frozen

from clanker.ids import HarnessId
from clanker.sessions.capability import (
    HarnessSession,
    SessionScan,
    SessionsContext,
    resumable_id,
)
from clanker.stores import HostFiles, clean_text, require_columns

if TYPE_CHECKING:
    from clanker_agy.launch import AgyLaunch

__all__ = [
    "REQUIRED_COLUMNS",
    "SummaryRow",
    "parse_time",
    "scan",
    "summarize_row",
    "workspace_path",
]

_AGY: Final = HarnessId("agy")
_TABLE: Final = "conversation_summaries"
REQUIRED_COLUMNS: Final = {
    _TABLE: frozenset({
        "conversation_id", "title", "preview", "last_modified_time", "workspace_uris",
        "parent_conversation_id", "nesting_depth", "app_data_dir",
    }),
}
# The CLI's rows carry "antigravity-cli" (or nothing); the IDE's carry its own
# directory, and are not conversations the CLI resumes.
_CLI_APP_DIRS: Final = frozenset({"", "antigravity-cli"})
_TEXT_CHARS: Final = 1000
# A workspace list is a few paths; anything longer is not read as one.
_URIS_CHARS: Final = 16 * 1024
# Rows read at most. The index has one row per conversation; past this many,
# the newest by their text (right for agy's UTC times) are read and the scan
# says it was cut.
_MAX_ROWS: Final = 20_000
_PATH_LIMIT: Final = 4096
# Go's time.Time as mattn/go-sqlite3 writes it: "2006-01-02 15:04:05.999999999-07:00"
# (trailing zeros of the fraction trimmed, so 0 to 9 digits).
_TIME: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(Z|[+-]\d{2}:\d{2})"
)
_DRIVE: Final = re.compile(r"/[A-Za-z]:(?:/|\Z)")


def _launch() -> AgyLaunch:
    # Here: only a row to summarize needs the launch capability's id check.
    from clanker_agy.launch import AgyLaunch

    return AgyLaunch()


# -- one row --------------------------------------------------------------------------------


@frozen(kw_only=True)
class SummaryRow:
    """The columns clanker reads of one ``conversation_summaries`` row, as SQLite returned them."""

    conversation_id: object
    title: object
    preview: object
    last_modified_time: object
    workspace_uris: object


def parse_time(value: object) -> datetime | None:
    """A Go time stored as text, as UTC; ``None`` for Go's zero time or anything else.

    The fraction is cut to microseconds. A time without an offset is not
    guessed at (mattn/go-sqlite3 always writes one).
    """
    if not isinstance(value, str):
        return None
    match = _TIME.fullmatch(value.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    if year == "0001":
        return None  # Go's zero time: "unset"
    try:
        offset = timedelta(0)
        if zone != "Z":
            sign = -1 if zone[0] == "-" else 1
            offset = sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
        local = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                         int((fraction or "0")[:6].ljust(6, "0")))
        return (local - offset).replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        return None


def workspace_path(uri: str) -> str | None:
    """The local directory a ``file://`` workspace URI names, percent-decoded; else ``None``.

    Other schemes (a remote workspace) and paths that are not absolute POSIX
    paths (``file:///C:/...`` from Windows) are not local directories here.
    """
    try:
        parts = urlsplit(uri)
        path = unquote(parts.path, errors="strict")
    except (ValueError, UnicodeDecodeError):
        return None
    if parts.scheme.lower() != "file" or parts.netloc not in ("", "localhost"):
        return None
    if parts.query or parts.fragment or not path.startswith("/") or "\x00" in path:
        return None
    if _DRIVE.match(path):
        return None  # file:///C:/... is a Windows directory
    path = path.rstrip("/") or "/"
    if len(path) > _PATH_LIMIT or not path.isprintable():
        return None
    return path


def _workspace(value: object) -> tuple[bool, str | None]:
    """(usable, cwd) from ``workspace_uris``.

    ``""`` or ``[]``: no workspace (a global conversation: usable, no cwd).
    Not a JSON list of strings: malformed, skipped. Otherwise the first URI
    that is a local directory; a list with none is not a local conversation.
    """
    if value in ("", "[]"):
        return True, None
    if not isinstance(value, str):
        return False, None
    try:
        uris = json.loads(value)
    except (ValueError, RecursionError):
        return False, None
    if not isinstance(uris, list) or not all(isinstance(uri, str) for uri in uris):
        return False, None
    if not uris:
        return True, None
    path = next((p for p in map(workspace_path, uris) if p is not None), None)
    return path is not None, path


def summarize_row(row: SummaryRow) -> HarnessSession | None:
    """One conversation as a session; ``None`` when it cannot be offered (a counted skip).

    - id: the conversation id, which must be the canonical lowercase UUID
      ``--conversation=`` is given;
    - updated: ``last_modified_time``; a row without one is skipped;
    - title: ``title``, else ``preview`` (the first prompt), else none;
    - cwd: the first local workspace (see :func:`workspace_path`); none for a
      conversation started without one (``agy -p``), which the service
      lists in every workspace.

    agy's index records no model, no creation time and steps rather than
    messages: those stay unknown.
    """
    native_id = resumable_id(row.conversation_id, _launch().validate_session_id)
    if native_id is None:
        return None
    updated = parse_time(row.last_modified_time)
    if updated is None:
        return None
    usable, cwd = _workspace(row.workspace_uris)
    if not usable:
        return None
    return HarnessSession(harness=_AGY, native_id=native_id, updated_at=updated,
                          title=clean_text(row.title) or clean_text(row.preview), cwd=cwd)


# -- the scan -----------------------------------------------------------------------------


# Composed of constants only; the values are bound.
_QUERY: Final = f"""
    SELECT conversation_id, substr(title, 1, {_TEXT_CHARS}), substr(preview, 1, {_TEXT_CHARS}),
           last_modified_time,
           CASE WHEN length(workspace_uris) <= {_URIS_CHARS} THEN workspace_uris END,
           parent_conversation_id, nesting_depth, app_data_dir
    FROM {_TABLE}
    WHERE ? IS NULL OR conversation_id = ?
    ORDER BY last_modified_time DESC
    LIMIT ?
"""  # noqa: S608


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _is_child(parent: object, depth: object) -> bool:
    """A sub-agent's conversation: a parent id, or a nesting depth above zero."""
    if parent is not None and parent != "":
        return True
    return depth not in (None, 0, "0")


def _conversations(directory: Path, files: HostFiles) -> Path | None:
    """``conversations/`` if it is a directory itself (a link could lead out of the store)."""
    path = directory / "conversations"
    info = files.stat(path, follow=False)
    return path if info is not None and stat.S_ISDIR(info.st_mode) else None


def _conversation_file(conversations: Path, native_id: str, files: HostFiles) -> Path | None:
    """``<id>.db`` in ``conversations`` if it is a regular file (not a link)."""
    path = conversations / f"{native_id}.db"
    info = files.stat(path, follow=False)
    return path if info is not None and stat.S_ISREG(info.st_mode) else None


def _read(
    db: Path, native_id: str | None, files: HostFiles
) -> tuple[list[HarnessSession], int, bool]:
    """Top-level CLI conversations in the index, the malformed rows, and whether it was cut."""
    sessions: list[HarnessSession] = []
    skipped = 0
    with files.sqlite(db, harness=_AGY) as connection:
        connection.text_factory = _decode
        require_columns(connection, REQUIRED_COLUMNS, harness=_AGY)
        rows = connection.execute(_QUERY, (native_id, native_id, _MAX_ROWS + 1)).fetchall()
        cut = len(rows) > _MAX_ROWS
        for found in rows[:_MAX_ROWS]:
            (conversation_id, title, preview, modified, uris, parent, depth, app_dir) = found
            if _is_child(parent, depth) or app_dir not in _CLI_APP_DIRS:
                continue  # sub-agents and the IDE's conversations: not the CLI's to resume
            session = summarize_row(SummaryRow(
                conversation_id=conversation_id, title=title, preview=preview,
                last_modified_time=modified, workspace_uris=uris))
            if session is None:
                skipped += 1
            else:
                sessions.append(session)
    return sessions, skipped, cut


def scan(context: SessionsContext, directory: Path) -> SessionScan:
    """Top-level CLI conversations of the index in ``directory`` (agy's), offered while
    their store file exists."""
    db = directory / "conversation_summaries.db"
    found = context.files.stat(db)
    if found is None or not stat.S_ISREG(found.st_mode):
        return SessionScan()
    sessions, skipped, truncated = _read(db, context.native_id, context.files)
    conversations = _conversations(directory, context.files)
    # Text times of mixed fraction lengths and offsets do not sort as text.
    sessions.sort(key=lambda s: (-s.updated_at.timestamp(), s.native_id))
    kept: list[HarnessSession] = []
    for session in sessions:
        # Matched before the bound so the newest conversations *of the
        # workspace* are the ones kept.
        if not context.wants(session.cwd):
            continue
        store_file = None if conversations is None else _conversation_file(
            conversations, session.native_id, context.files)
        if store_file is None:
            continue  # the index outlived the conversation: nothing to resume
        if len(kept) == context.limit:
            truncated = True
            break
        kept.append(evolve(session, store_path=str(store_file), order=len(kept)))
    return SessionScan(sessions=kept, skipped=skipped, truncated=truncated)
