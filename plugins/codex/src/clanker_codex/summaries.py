"""How Codex's rollout files, and its index, become sessions (where they are is
:mod:`clanker_codex.sessions`'s).

Verified against Codex CLI 0.171.0 (docs/harnesses/codex.md, "Sessions"). Line 1 of
a rollout is ``session_meta`` (id, cwd, source, fork parent); every later line is
``{"timestamp","ordinal","type","payload"}``. Sub-agent rollouts sit beside their
parents and are not listed.

A listing reads thousands of files, so a file is never decoded line by line:
byte searches find the few lines that matter and only those are decoded. The
optional index (``state_5.sqlite``) adds user-given names and titles; the
rollouts stay the source of truth, and any doubt about the index means it is
not used.
"""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from attrs import evolve, frozen

from clanker.ids import HarnessId
from clanker.sessions.capability import HarnessSession, SessionScan, SessionsContext
from clanker.stores import (
    FileSample,
    HostFiles,
    LineRegion,
    Witness,
    bounded_text,
    clean_text,
    decode_object,
    find,
    head_and_tail,
    parse_timestamp,
    scan_files,
)
from clanker_codex.sessions import index_path

__all__ = [
    "HEAD_BYTES",
    "TAIL_BYTES",
    "IndexEntry",
    "read_index",
    "scan",
    "summarize",
]

_CODEX: Final = HarnessId("codex")

# The first user prompt (the title) is no earlier than line 12: `session_meta`
# (~27 KB, the model's base instructions), `additional_tools` (~26 KB) and the
# developer messages (~27 KB + 4-8 KB + ...) come first, so it ends at
# 100.5 KB in an exec rollout and 107.2 KB in a TUI one (0.171.0). 128 KiB
# reaches it with ~20 KB to spare for the user's own instructions; past that
# the file has no title of its own (the index's title may stand in).
HEAD_BYTES: Final = 128 * 1024
# The newest `turn_context`/`thread_settings_applied` (2-4 KB each: cwd and
# model) and the last line's timestamp. A turn's output after its settings is
# unbounded (tool output, inline images): when 64 KiB holds no settings line,
# the head's stand in, and the file's mtime when not even a line fits.
TAIL_BYTES: Final = 64 * 1024
_TEXT_LIMIT: Final = 4096
# A title is at most 200 characters: only this much of a prompt is cleaned.
_TITLE_SCAN: Final = 4096
_INDEX_COLUMNS: Final = frozenset({"rollout_path", "name", "title", "archived"})
# Readers never wait on Codex's writer (WAL), but a checkpoint or a recovery
# can hold the file briefly; a listing does not wait longer than this for it.
_INDEX_BUSY_MS: Final = 250
_UUID: Final = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
# Every rollout line starts with its timestamp (serde writes fields in order),
# so the newest time is read without decoding a line that may be megabytes.
_LINE_TIMESTAMP: Final = re.compile(rb'\{"timestamp":"([^"\\]{1,64})"')
_LINE_OPENING: Final = b'{"timestamp":"'
_META: Final = b'"type":"session_meta"'
_INSTRUCTIONS: Final = b',"base_instructions":'
_IDENTITY: Final = frozenset({"id", "cwd", "timestamp", "source", "thread_source"})
_SETTINGS: Final = (b'"type":"turn_context"', b'"type":"thread_settings_applied"')
# The prompt event: `item_completed` with a `UserMessage` item (0.171.0), or
# the `user_message` event of legacy (pre-paginated) rollouts.
_PROMPTS: Final = (b'"type":"UserMessage"', b'"type":"user_message"')
_NOT_PROMPTS: Final = ("<environment_context>", "<user_instructions>")


# -- one file -------------------------------------------------------------------------------


def _uuid(value: object) -> str | None:
    return value if isinstance(value, str) and _UUID.fullmatch(value) else None


def _last_line_time(region: LineRegion) -> datetime | None:
    """The timestamp that starts the newest line carrying one (no line is decoded)."""
    buf = region.buf
    # A line that does not hold the opening cannot start with it: only those are tried.
    for start, end in region.spans_with(_LINE_OPENING, newest_first=True):
        match = _LINE_TIMESTAMP.match(buf, start, end)
        if match is not None:
            when = parse_timestamp(match.group(1).decode("ascii", "replace"))
            if when is not None:
                return when
    return None


def _meta(sample: FileSample) -> tuple[dict[str, Any], int] | None:
    """The ``session_meta`` payload on line 1, and where line 2 starts."""
    head = sample.head
    end = head.find(b"\n")
    if end < 0:
        if not sample.whole:
            return None  # line 1 is larger than the head: no way to tell what this is
        end = len(head)
    # Searched in place: line 1 is ~27 KB, and only a part of it is ever copied.
    if find(head, _META, 0, end) < 0:
        return None
    # Nearly all of line 1 is `base_instructions` (~26 KB), which clanker does
    # not use. Every field it does use comes before it (0.171.0), so the
    # prefix, closed, is decoded instead; any doubt decodes the whole line.
    record = None
    cut = find(head, _INSTRUCTIONS, 0, end)
    if cut > 0:
        record = decode_object(head[:cut] + b"}}")
        payload = None if record is None else record.get("payload")
        if not isinstance(payload, dict) or not payload.keys() >= _IDENTITY:
            record = None
    if record is None:
        record = decode_object(head[:end])
    if record is None or record.get("type") != "session_meta":
        return None
    payload = record.get("payload")
    return (payload, end + 1) if isinstance(payload, dict) else None


def _is_subagent(meta: Mapping[str, Any]) -> bool:
    """A sub-agent's rollout (review, compact, spawned agents): part of its parent's work."""
    source = meta.get("source")
    return (
        (isinstance(source, dict) and "subagent" in source)
        or meta.get("thread_source") == "subagent"
        or meta.get("parent_thread_id") is not None
    )


def _prompt_text(record: dict[str, Any], native_id: str) -> str | None:
    """The text of this session's own user prompt in ``record``, else ``None``."""
    payload = record.get("payload")
    if record.get("type") != "event_msg" or not isinstance(payload, dict):
        return None
    kind = payload.get("type")
    if kind == "item_completed":
        item = payload.get("item")
        # A review parent holds its sub-agent's prompt under the child's id.
        if payload.get("thread_id") != native_id or not isinstance(item, dict):
            return None
        content = item.get("content")
        if item.get("type") != "UserMessage" or not isinstance(content, list):
            return None
        text: object = " ".join(
            part["text"] for part in content
            if isinstance(part, dict) and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        )
    elif kind == "user_message":
        text = payload.get("message")
    else:
        return None
    if not isinstance(text, str) or text.lstrip().startswith(_NOT_PROMPTS):
        return None
    return clean_text(text[:_TITLE_SCAN])


def _title(region: LineRegion, native_id: str) -> str | None:
    # One marker at a time: the legacy one is searched only when the current
    # one gave nothing, so a current file pays for one pass, not two.
    for marker in _PROMPTS:
        for span in region.spans_with(marker):
            record = region.object_at(span)
            text = None if record is None else _prompt_text(record, native_id)
            if text is not None:
                return text
    return None


def _settings(record: dict[str, Any], native_id: str) -> dict[str, Any] | None:
    """The cwd/model carrier of a ``turn_context`` or ``thread_settings_applied`` line."""
    payload = record.get("payload")
    if not isinstance(payload, dict):
        return None
    if record.get("type") == "turn_context":
        return payload
    if record.get("type") == "event_msg" and payload.get("type") == "thread_settings_applied":
        settings = payload.get("thread_settings")
        if payload.get("thread_id", native_id) == native_id and isinstance(settings, dict):
            return settings
    return None


def _latest_settings(regions: Sequence[LineRegion],
                     native_id: str) -> tuple[str | None, str | None]:
    """The newest recorded cwd and model, each from the newest line that has it."""
    cwd: str | None = None
    model: str | None = None
    for region in regions:
        for span in region.spans_with(_SETTINGS, newest_first=True):
            record = region.object_at(span)
            settings = None if record is None else _settings(record, native_id)
            if settings is None:
                continue
            if cwd is None:
                found = bounded_text(settings.get("cwd"), _TEXT_LIMIT)
                cwd = found if found is not None and found.startswith("/") else None
            if model is None:
                model = bounded_text(settings.get("model"), 200)
            if cwd is not None and model is not None:
                return cwd, model
    return cwd, model


def _classify(sample: FileSample) -> HarnessSession | None:
    """The session in ``sample`` (hidden when it is a sub-agent's), or ``None``."""
    found = _meta(sample)
    if found is None:
        return None
    meta, body = found
    native_id = _uuid(meta.get("id"))
    first_cwd = bounded_text(meta.get("cwd"), _TEXT_LIMIT)
    if native_id is None or first_cwd is None or not first_cwd.startswith("/"):
        return None
    # With nothing past the head, the tail is the head from line 2: line 1 is
    # no settings line.
    head, tail = head_and_tail(sample, start=body)
    title = _title(head, native_id)
    cwd, model = _latest_settings([tail] if tail is head else [tail, head], native_id)
    created = parse_timestamp(meta.get("timestamp"))
    updated = _last_line_time(tail) or sample.mtime
    if created is not None and updated < created:
        updated = created
    parent = _uuid(meta.get("forked_from_id"))
    return HarnessSession(
        harness=_CODEX, native_id=native_id, updated_at=updated, title=title,
        cwd=cwd or first_cwd, created_at=created, model=model,
        parent_id=parent if parent != native_id else None, hidden=_is_subagent(meta),
    )


def summarize(sample: FileSample) -> HarnessSession | None:
    """Summarize one rollout; ``None`` when it is not a listed session (a counted skip).

    - id, created, parent: ``session_meta`` (``payload.id``, ``timestamp``,
      ``forked_from_id``). A sub-agent's rollout (``source`` ``{"subagent":...}``,
      ``thread_source`` ``subagent`` or a ``parent_thread_id``) is not listed.
    - cwd and model: the newest ``turn_context`` or ``thread_settings_applied``
      (a resume appends one with the directory it ran in, even without a
      message), tail first, then the head; else ``session_meta.cwd``.
    - title: the first ``item_completed`` ``UserMessage`` of this thread (a
      review parent holds its sub-agent's), never the ``<environment_context>``
      message; legacy rollouts' ``user_message`` event. Past the head: none.
    - updated: the newest line's timestamp in the tail, else the file's
      mtime; never before ``created``.
    - message_count: not recorded (a count needs the whole file).
    """
    return _classify(sample)


# -- the index ------------------------------------------------------------------------------


@frozen
class IndexEntry:
    """What the index adds to one rollout: a user-given name, the full title, archived."""

    name: str | None
    title: str | None
    archived: bool


def read_index(
    files: HostFiles, path: Path | None, rollouts: Sequence[str]
) -> dict[str, IndexEntry] | None:
    """The index's entries for ``rollouts`` (absolute paths), keyed by path.

    One read-only query. A missing index gives no entries; ``None`` says one
    was there but could not be read (busy, corrupt, changed). Either way the
    rollouts alone are a complete answer; only a failure may pass.
    """
    if path is None:
        return {}
    # Looked at before the rollouts are known: on an SSH host that status (and
    # the schema that comes with it) is fetched in the walk's round.
    info = files.stat(path)
    if info is None or not stat.S_ISREG(info.st_mode) or not rollouts:
        return {}
    import sqlite3  # once there is an index to read

    from clanker.errors import HarnessCapabilityError
    from clanker.stores import require_columns

    query = ("SELECT rollout_path, name, title, archived FROM threads "
             "WHERE rollout_path IN (SELECT value FROM json_each(?))")
    try:
        with files.sqlite(path, harness=_CODEX) as connection:
            connection.execute(f"PRAGMA busy_timeout = {_INDEX_BUSY_MS}")
            require_columns(connection, {"threads": _INDEX_COLUMNS}, harness=_CODEX)
            rows = connection.execute(query, (json.dumps(list(rollouts)),)).fetchall()
    except (HarnessCapabilityError, sqlite3.Error):
        return None
    entries: dict[str, IndexEntry] = {}
    for rollout, name, title, archived in rows:
        if isinstance(rollout, str):
            entries[rollout] = IndexEntry(
                name=clean_text(name[:_TITLE_SCAN] if isinstance(name, str) else None),
                title=clean_text(title[:_TITLE_SCAN] if isinstance(title, str) else None),
                archived=isinstance(archived, int) and archived != 0,
            )
    return entries


def _enrich(scan: SessionScan, index: Mapping[str, IndexEntry]) -> SessionScan:
    """Names and titles from the index; sessions it calls archived are not resumable."""
    if not index:
        return scan
    sessions = []
    for session in scan.sessions:
        entry = index.get(session.store_path or "")
        if entry is None:
            sessions.append(session)
        elif not entry.archived:
            sessions.append(evolve(session, title=entry.name or session.title or entry.title))
    return evolve(scan, sessions=sessions)


# -- the scan -----------------------------------------------------------------------------


def _accept_dir(level: int, name: str) -> bool:
    # YYYY/MM/DD, as Codex writes them (local time).
    return name.isascii() and name.isdigit() and len(name) == (4 if level == 0 else 2)


def _accept_file(native_id: str | None) -> Callable[[str], bool]:
    suffix = None if native_id is None else f"-{native_id.lower()}.jsonl"

    def accept(name: str) -> bool:
        if not name.startswith("rollout-") or not name.endswith(".jsonl"):
            return False
        # Codex finds a rollout by the id its name ends with; so does a re-find.
        return suffix is None or name.lower().endswith(suffix)

    return accept


def scan(context: SessionsContext, root: Path) -> SessionScan:
    """The sessions of the rollouts under ``root`` (the sessions directory), enriched by
    the index when it can be trusted."""
    # The index records canonical paths (Codex resolves its home), so the
    # walk starts from the resolved root and store paths compare equal.
    real_root = Path(context.files.realpath(root))
    index = index_path(context.environ, context.files)

    def read(witness: Witness) -> SessionScan:
        # Rollouts carry no cwd in their path, so scopes cannot narrow the walk.
        candidates, cut = context.files.walk(
            real_root, depth=3, accept_dir=_accept_dir,
            accept_file=_accept_file(context.native_id), witness=witness,
        )
        found = scan_files(context, candidates, summarize, cut=cut,
                           head_bytes=HEAD_BYTES, tail_bytes=TAIL_BYTES, witness=witness)
        if index is not None:  # SQLite writes go to the -wal file first
            witness.path(index)
            witness.path(f"{index}-wal")
        # Asked about the files the scan chose (scan_files' newest `limit`), not
        # the sessions it made of them: on an SSH host the question is then the
        # same in every pass of the scan, however many samples each round carried.
        chosen = sorted(candidates, key=lambda c: (-c.stat.st_mtime_ns, c.path))
        entries = read_index(context.files, index,
                             [c.path for c in chosen[: context.limit]])
        if entries is None:
            witness.usable = False  # locked or broken now, perhaps not next time
        return _enrich(found, entries or {})

    return context.remember((real_root, index), read)
