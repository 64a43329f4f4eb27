"""How Hermes's ``state.db`` becomes sessions (where it is is
:mod:`clanker_hermes.sessions`'s), read-only.

Verified against hermes-agent 0.19.0 (docs/harnesses/hermes.md, "Sessions").
``hermes sessions list`` is for people only (cut titles, relative times, a
column set that changes with the data) and ``hermes sessions export`` dumps
every message and system prompt, so clanker reads the database itself, the way
Hermes's own read-only reader does: ``mode=ro``, no schema work, no write lock
(Hermes writes in WAL mode, so neither side waits for the other).

What is listed mirrors Hermes's own picker (``list_sessions_rich``): root
sessions and ``/branch`` children, without delegate sub-agents, archived
sessions and ``source='tool'`` runs. A conversation that Hermes compressed
into a chain of rows is one entry, shown as its newest continuation (the
"tip", found exactly as Hermes's ``get_compression_tip`` finds it).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

from attrs import evolve, frozen

from clanker.ids import HarnessId
from clanker.sessions.capability import HarnessSession, SessionScan, SessionsContext, resumable_id
from clanker.stores import clean_text, require_columns

if TYPE_CHECKING:
    import sqlite3

    from clanker_hermes.launch import HermesLaunch

__all__ = [
    "REQUIRED_COLUMNS",
    "SessionRow",
    "scan",
    "summarize_row",
]

_HERMES: Final = HarnessId("hermes")

# Only the columns clanker reads; `system_prompt` (tens of KB a row) never is.
REQUIRED_COLUMNS: Final = {
    "sessions": frozenset({
        "id", "source", "title", "cwd", "model", "parent_session_id", "started_at",
        "ended_at", "message_count", "end_reason",
    }),
    "messages": frozenset({"id", "session_id", "role", "content", "timestamp"}),
}
# Added by Hermes's column reconciliation: a database no recent Hermes opened
# may lack them. Absent, nothing is archived and no row carries a marker.
_OPTIONAL_COLUMNS: Final = ("archived", "model_config")

# Hermes bounds its own chain walk at 100 continuations.
_CHAIN_DEPTH: Final = 100
# Characters of a title or first message fetched: a title shows 200 at most,
# and a pasted first message may be megabytes.
_TEXT_CHARS: Final = 1000
_PATH_LIMIT: Final = 4096
# A multimodal message is stored as "\x00json:" + JSON: not a title.
_MULTIMODAL: Final = "X'006A736F6E3A'"


def _launch() -> HermesLaunch:
    # Here: only a row to summarize needs the launch capability's id check.
    from clanker_hermes.launch import HermesLaunch

    return HermesLaunch()


# -- one row --------------------------------------------------------------------------------


@frozen(kw_only=True)
class SessionRow:
    """The columns clanker reads of one ``sessions`` row, as SQLite returned them."""

    id: object
    title: object
    cwd: object
    model: object
    parent_session_id: object
    started_at: object
    message_count: object
    first_user: object


def _when(value: object) -> datetime | None:
    """Epoch seconds (Hermes stores ``time.time()``) as UTC."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _cwd(value: object) -> tuple[bool, str | None]:
    """(usable, cwd): NULL or empty is no directory; a relative or odd path is unusable."""
    if value is None or value == "":
        return True, None
    if not isinstance(value, str) or not value.startswith("/") or "\x00" in value:
        return False, None
    if len(value) > _PATH_LIMIT or not value.isprintable():
        return False, None
    return True, value


def summarize_row(member: SessionRow, root: SessionRow, updated: object) -> HarnessSession | None:
    """One conversation as a session; ``None`` when a row cannot be offered (a counted skip).

    ``member`` is the row clanker names (the compression tip when listing,
    the requested row when re-finding), ``root`` the listed row its chain
    starts from (the same row when there is no chain), ``updated`` the
    chain's last activity: its newest message, else its start.

    - id: ``member.id``, an id the Hermes CLI mints (ACP sessions carry
      UUIDs, which ``hermes --resume`` is not given by clanker);
    - title: ``member.title``, else its first user message (multimodal
      messages are passed over in the query);
    - cwd: ``member.cwd``, else ``root.cwd`` (continuations record none);
      ``None`` when neither has one (TUI sessions and branches record none);
    - created: the root's start; model and message count: the member's;
    - parent: the root's ``parent_session_id`` (set only for a branch).
    """
    native_id = resumable_id(member.id, _launch().validate_session_id)
    if native_id is None:
        return None
    updated_at, created_at = _when(updated), _when(root.started_at)
    if updated_at is None or created_at is None:
        return None
    usable, cwd = _cwd(member.cwd)
    if usable and cwd is None:
        usable, cwd = _cwd(root.cwd)
    if not usable:
        return None
    count = member.message_count
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        count = None
    parent = root.parent_session_id if root.parent_session_id != root.id else None
    return HarnessSession(
        harness=_HERMES, native_id=native_id, updated_at=max(updated_at, created_at),
        title=clean_text(member.title) or clean_text(member.first_user), cwd=cwd,
        created_at=created_at, model=clean_text(member.model), message_count=count,
        parent_id=parent if isinstance(parent, str) and clean_text(parent) == parent else None,
    )


# -- the queries ----------------------------------------------------------------------------


@frozen
class _Sql:
    """The queries for one database's columns."""

    listing: str
    row: str
    tip: str


def _marker(alias: str, key: str, has_config: bool) -> str:
    if not has_config:
        return "NULL"
    column = f"{alias}.model_config"
    # Guarded: one malformed model_config must not fail the whole query.
    return f"(CASE WHEN json_valid({column}) THEN json_extract({column}, '$.{key}') END)"


def _queries(columns: frozenset[str]) -> _Sql:
    # Composed of constants and column names checked above; every value is bound.
    config = "model_config" in columns
    archived = "COALESCE(s.archived, 0) = 0" if "archived" in columns else "1"
    # Hermes's listable rows: roots, and children that are /branch sessions (the
    # `_branched_from` marker, or the legacy test on the parent's end).
    listable = f"""
        (s.parent_session_id IS NULL
         OR {_marker('s', '_branched_from', config)} IS NOT NULL
         OR EXISTS (SELECT 1 FROM sessions p WHERE p.id = s.parent_session_id
                    AND p.end_reason = 'branched' AND s.started_at >= p.ended_at))
        AND {_marker('s', '_delegate_from', config)} IS NULL
        AND {archived}
        AND COALESCE(s.source, '') != 'tool'
    """  # noqa: S608
    continuation = f"""
        parent.end_reason = 'compression'
        AND {_marker('child', '_branched_from', config)} IS NULL
        AND {_marker('child', '_delegate_from', config)} IS NULL
        AND COALESCE(child.source, '') != 'tool'
    """
    activity = """COALESCE((SELECT MAX(m.timestamp) FROM messages m WHERE m.session_id = {id}),
                           (SELECT x.started_at FROM sessions x WHERE x.id = {id}))"""
    # Every listed conversation with its last activity over its whole chain,
    # newest first (Hermes's order_by_last_active). `cur_id` filters a re-find.
    listing = f"""
        WITH RECURSIVE chain(root_id, cur_id, depth) AS (
            SELECT s.id, s.id, 0 FROM sessions s WHERE {listable}
            UNION ALL
            SELECT c.root_id, child.id, c.depth + 1
            FROM chain c
            JOIN sessions parent ON parent.id = c.cur_id
            JOIN sessions child ON child.parent_session_id = parent.id
            WHERE {continuation} AND c.depth < {_CHAIN_DEPTH}
        ),
        latest(root_id, updated) AS (
            SELECT c.root_id, MAX({activity.format(id='c.cur_id')}) FROM chain c GROUP BY c.root_id
        )
        SELECT l.root_id, l.updated, s.cwd, s.end_reason
        FROM latest l JOIN sessions s ON s.id = l.root_id
        WHERE ? IS NULL OR l.root_id IN (SELECT root_id FROM chain WHERE cur_id = ?)
        ORDER BY l.updated DESC, s.started_at DESC, s.id DESC
    """  # noqa: S608
    row = f"""
        SELECT s.id, substr(s.title, 1, {_TEXT_CHARS}), s.cwd, substr(s.model, 1, {_TEXT_CHARS}),
               s.parent_session_id, s.started_at, s.message_count,
               (SELECT substr(m.content, 1, {_TEXT_CHARS}) FROM messages m
                WHERE m.session_id = s.id AND m.role = 'user' AND m.content IS NOT NULL
                  AND m.content != ''
                  AND substr(CAST(m.content AS BLOB), 1, 6) != {_MULTIMODAL}
                ORDER BY m.timestamp, m.id LIMIT 1)
        FROM sessions s WHERE s.id = ?
    """  # noqa: S608
    # Hermes's get_compression_tip, one step: the continuation to follow.
    tip = f"""
        SELECT child.id
        FROM sessions parent JOIN sessions child ON child.parent_session_id = parent.id
        WHERE parent.id = ? AND {continuation}
        ORDER BY CASE WHEN child.end_reason = 'compression' THEN 0
                      WHEN child.ended_at IS NULL THEN 1 ELSE 2 END,
                 {activity.format(id='child.id')} DESC,
                 child.started_at DESC, child.id DESC
        LIMIT 1
    """  # noqa: S608
    return _Sql(listing=listing, row=row, tip=tip)


def _decode(data: bytes) -> str:
    # One message with bytes that are not UTF-8 must not fail the listing.
    return data.decode("utf-8", errors="replace")


def _tables(connection: sqlite3.Connection) -> set[str]:
    rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {row[0] for row in rows}


def _columns(connection: sqlite3.Connection) -> frozenset[str]:
    rows = connection.execute("PRAGMA table_info(sessions)").fetchall()
    return frozenset(row[1] for row in rows)


def _row(connection: sqlite3.Connection, sql: _Sql, native_id: object) -> SessionRow | None:
    found = connection.execute(sql.row, (native_id,)).fetchone()
    if found is None:
        return None
    (id_, title, cwd, model, parent, started, count, first_user) = found
    return SessionRow(id=id_, title=title, cwd=cwd, model=model, parent_session_id=parent,
                      started_at=started, message_count=count, first_user=first_user)


def _tip(connection: sqlite3.Connection, sql: _Sql, root_id: object) -> object:
    current, seen = root_id, {root_id}
    for _ in range(_CHAIN_DEPTH):
        found = connection.execute(sql.tip, (current,)).fetchone()
        if found is None or found[0] in seen:
            break
        current = found[0]
        seen.add(current)
    return current


@frozen
class _Listed:
    root_id: object
    updated: object
    cwd: object
    compressed: bool


def _listed(connection: sqlite3.Connection, sql: _Sql,
            native_id: str | None) -> Iterator[_Listed]:
    cursor = connection.execute(sql.listing, (native_id, native_id))
    for root_id, updated, cwd, end_reason in cursor:
        yield _Listed(root_id, updated, cwd, end_reason == "compression")


def _wanted(context: SessionsContext, cwd: object) -> bool:
    """The service's matching rule, applied before the bound so that the newest
    sessions *of the workspace* are the ones kept; an unusable directory is
    judged by the session's summary later."""
    usable, path = _cwd(cwd)
    return not usable or context.wants(path)


def scan(db: Path, context: SessionsContext) -> SessionScan:
    """The listed conversations in the database at ``db``, within ``context``'s bounds."""
    with context.files.sqlite(db, harness=_HERMES) as connection:
        connection.text_factory = _decode
        tables = _tables(connection)
        if not tables & {"sessions", "schema_version"}:
            # What a failed first run leaves: Hermes has not created its schema yet.
            return SessionScan()
        require_columns(connection, REQUIRED_COLUMNS, harness=_HERMES)
        sql = _queries(_columns(connection) & frozenset(_OPTIONAL_COLUMNS))
        sessions: list[HarnessSession] = []
        skipped = 0
        truncated = False
        for listed in _listed(connection, sql, context.native_id):
            # A conversation is its root row unless it was compressed, when the
            # tip (which may record its own directory) decides.
            if not listed.compressed and not _wanted(context, listed.cwd):
                continue
            root = _row(connection, sql, listed.root_id)
            if context.native_id is not None:
                member_id: object = context.native_id
            elif listed.compressed:
                member_id = _tip(connection, sql, listed.root_id)
            else:
                member_id = listed.root_id
            member = root if member_id == listed.root_id else _row(connection, sql, member_id)
            found = None if root is None or member is None else summarize_row(
                member, root, listed.updated)
            if found is not None and not context.wants(found.cwd):
                continue
            if len(sessions) + skipped >= context.limit:
                truncated = True
                break
            if found is None:
                skipped += 1
                continue
            sessions.append(evolve(found, order=len(sessions)))
    return SessionScan(sessions=sessions, skipped=skipped, truncated=truncated)
