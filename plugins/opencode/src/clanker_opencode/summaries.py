"""How OpenCode's ``opencode session list --format json`` becomes sessions (running it,
and keeping its answers, is :mod:`clanker_opencode.sessions`'s).

Verified against opencode-ai 1.18.33 (docs/harnesses/opencode.md, "Sessions"). The
CLI lists the root sessions of one project, so a listing without a workspace says so
(``SessionScan.partial``).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from attrs import evolve, frozen

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.ids import HarnessId
from clanker.sessions.capability import (
    HarnessSession,
    SessionScan,
    SessionsContext,
    resumable_id,
)
from clanker.stores import Answer, clean_text
from clanker_opencode.sessions import MAX_ROWS

if TYPE_CHECKING:
    from clanker_opencode.launch import OpenCodeLaunch

__all__ = [
    "PARTIAL_WITHOUT_WORKSPACE",
    "Listing",
    "is_default_title",
    "parse_session_list",
    "scan",
    "summarize_row",
]

_OPENCODE: Final = HarnessId("opencode")

PARTIAL_WITHOUT_WORKSPACE: Final = (
    "OpenCode lists only the project of the directory it runs in (one git repository, "
    "or every directory outside git); list sessions in a workspace to see its OpenCode "
    "sessions"
)

# OpenCode's own `isDefaultTitle`: the placeholder a session carries until a
# model names it. It says nothing a person can use, so it is no title. A
# fork's "<placeholder> (fork #1)" is not a placeholder to OpenCode either.
_DEFAULT_TITLE: Final = re.compile(
    r"(?:New session - |Child session - )\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z"
)
_FIELDS: Final = {
    "id": str, "title": str, "updated": int, "created": int, "directory": str,
}
# Epoch milliseconds that datetime can hold (years 1970 to 9999).
_MAX_MS: Final = 253_402_300_799_999


def _launch() -> OpenCodeLaunch:
    # Here: only a row to summarize needs the launch capability's id check.
    from clanker_opencode.launch import OpenCodeLaunch

    return OpenCodeLaunch()


@frozen(kw_only=True)
class Listing:
    """One parsed listing: usable rows (CLI order) and rows clanker cannot offer."""

    sessions: tuple[HarnessSession, ...]
    skipped: int


def _parse_failure(detail: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(ErrorKind.PARSE_FAILURE, detail, harness=_OPENCODE)


def is_default_title(title: str) -> bool:
    """Whether ``title`` is OpenCode's ``New session - <ISO>`` / ``Child session - <ISO>``."""
    return _DEFAULT_TITLE.fullmatch(title) is not None


def _when(value: int) -> datetime | None:
    if not 0 <= value <= _MAX_MS:
        return None
    return datetime.fromtimestamp(value / 1000, UTC)


def summarize_row(row: dict[str, Any]) -> HarnessSession | None:
    """One well-formed row as a session; ``None`` when clanker cannot offer it.

    - ``id`` must be an id OpenCode mints (``opencode import`` keeps foreign
      ids, which clanker never passes to ``-s``);
    - ``title``: ``None`` for OpenCode's placeholder, else one clean line;
    - ``updated`` / ``created``: epoch milliseconds;
    - ``directory``: the realpath of the directory the session was created
      in, absolute; it is the cwd.

    OpenCode's listing has no model, no message count and no parent: a fork is
    a root session whose only trace of its parent is a title suffix, which is
    not guessed from.
    """
    native_id = resumable_id(row["id"], _launch().validate_session_id)
    if native_id is None:
        return None
    directory = row["directory"]
    if not directory.startswith("/") or "\x00" in directory:
        return None
    updated, created = _when(row["updated"]), _when(row["created"])
    if updated is None or created is None:
        return None
    title = None if is_default_title(row["title"]) else clean_text(row["title"])
    return HarnessSession(harness=_OPENCODE, native_id=native_id, updated_at=updated,
                          title=title, cwd=directory, created_at=created)


def _checked(row: object) -> dict[str, Any]:
    """The row if it has every field clanker reads, with OpenCode's types."""
    if not isinstance(row, dict):
        raise _parse_failure("a session is not a JSON object")
    for name, kind in _FIELDS.items():
        value = row.get(name)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise _parse_failure(f"a session's {name} is missing or not a {kind.__name__}")
    return row


def parse_session_list(stdout: str) -> Listing:
    """Turn ``opencode session list --format json`` stdout into sessions.

    OpenCode prints nothing at all (not ``[]``) when there is no session; else
    one pretty-printed JSON array. More than 4096 rows is ``output-limit``;
    anything that is not an array of objects with OpenCode's fields and types
    is ``parse-failure`` (its format changed). Other keys are ignored: they
    carry nothing clanker shows. A row that is well-formed but cannot be
    offered (a foreign id, a relative directory, a time out of range) is a
    counted skip.
    """
    if not stdout.strip():
        return Listing(sessions=(), skipped=0)
    try:
        rows = json.loads(stdout)
    except (ValueError, RecursionError) as exc:
        raise _parse_failure("the session list is not JSON") from exc
    if not isinstance(rows, list):
        raise _parse_failure("the session list is not a JSON array")
    if len(rows) > MAX_ROWS:
        raise HarnessCapabilityError(ErrorKind.OUTPUT_LIMIT, f"more than {MAX_ROWS} sessions",
                                     harness=_OPENCODE)
    checked = [_checked(row) for row in rows]
    found = [summarize_row(row) for row in checked]
    sessions = [s for s in found if s is not None]
    # OpenCode orders by time_updated alone; ids are minted in descending
    # order, so among equal times the smaller id is the newer session.
    sessions.sort(key=lambda s: (-s.updated_at.timestamp(), s.native_id))
    return Listing(sessions=tuple(sessions), skipped=len(found) - len(sessions))


def scan(context: SessionsContext, answer: Answer) -> SessionScan:
    """The request's part of a whole listing: the newest ``limit`` sessions (the service
    keeps those of the workspace), or the one re-found, in order."""
    sessions = list(answer.sessions)
    if context.native_id is not None:
        # A re-find: the one session, wherever the bound would fall.
        sessions = [s for s in sessions if s.native_id == context.native_id]
    truncated = len(sessions) > context.limit
    return SessionScan(
        sessions=[evolve(s, order=order) for order, s in enumerate(sessions[: context.limit])],
        skipped=answer.skipped,
        truncated=truncated,
        partial=None if context.scopes else PARTIAL_WITHOUT_WORKSPACE,
    )
