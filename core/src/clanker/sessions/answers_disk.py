"""The disk format of :class:`~clanker.sessions.answers.AnswerCache`'s file.

Apart from the cache: its classes are built when an answer is first kept or
read, not by every import of the sessions contract (a listing with nothing to
keep never pays for them).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from attrs import frozen

from clanker.converters import make_boundary_converter
from clanker.ids import HarnessId
from clanker.sessions.types import HarnessSession

if TYPE_CHECKING:
    from cattrs.preconf.json import JsonConverter

__all__ = ["Document", "Entry", "File", "Session", "converter", "document", "record",
           "session"]


@functools.cache
def converter() -> JsonConverter:
    # Built when an answer is first kept or read, not at import: a listing over
    # stores with nothing to keep never pays for cattrs.
    return make_boundary_converter()


@frozen(kw_only=True)
class Session:
    native_id: str
    updated_at: datetime
    title: str | None
    cwd: str | None
    created_at: datetime | None
    model: str | None
    message_count: int | None
    parent_id: str | None
    hidden: bool


@frozen
class File:
    """A :class:`~clanker.sessions.answers.FileState` as the file holds it."""

    path: str
    identity: tuple[int, int, int, int, int] | None


@frozen(kw_only=True)
class Entry:
    key: dict[str, str]
    files: tuple[File, ...]
    sessions: tuple[Session, ...]
    skipped: int


@frozen(kw_only=True)
class Document:
    version: int
    harness: str
    entries: tuple[Entry, ...]


def record(session: HarnessSession) -> Session:
    return Session(
        native_id=session.native_id, updated_at=session.updated_at, title=session.title,
        cwd=session.cwd, created_at=session.created_at, model=session.model,
        message_count=session.message_count, parent_id=session.parent_id, hidden=session.hidden,
    )


def session(harness: HarnessId, record: Session) -> HarnessSession:
    return HarnessSession(
        harness=harness, native_id=record.native_id, updated_at=record.updated_at,
        title=record.title, cwd=record.cwd, created_at=record.created_at, model=record.model,
        message_count=record.message_count, parent_id=record.parent_id, hidden=record.hidden,
    )


def document(harness: HarnessId, version: int,
             entries: Iterable[tuple[dict[str, str], tuple[File, ...],
                                     tuple[HarnessSession, ...], int]]) -> Document:
    """The file's document of ``entries``: each a key, its files, its sessions and
    its skips."""
    return Document(version=version, harness=harness, entries=tuple(
        Entry(key=key, files=files, sessions=tuple(map(record, sessions)), skipped=skipped)
        for key, files, sessions, skipped in entries
    ))
