"""The shared store readers a harness plugin builds its history discovery from.

A provider walks and reads through the host's files it is handed
(``context.files``: :class:`~clanker.environment.HostFiles`); what it does with
the bytes it gets back is built from these pieces, so every store is bounded,
cached and counted the same way:

* :func:`scan_files` summarizes the newest files of a walk through the
  per-file cache; a summarizer sees a :class:`FileSample` (a bounded head
  and tail, never the whole file) and returns its session, ``None`` (not a
  session: a counted skip), :data:`EMPTY` (a session file the harness wrote
  no conversation into yet: neither listed nor a skip) or :data:`FOREIGN`
  (another harness's session, in a directory the two share: not listed, no skip);
  a provider that can tell such a file from its first :data:`SNIFF_BYTES` passes
  ``scan_files`` a :data:`Sniff`, so that file costs no whole sample;
* :class:`LineRegion` finds the complete lines of a sample's head or tail
  that hold a byte marker, oldest or newest first, and decodes each at most
  once (:func:`head_and_tail`, :func:`decode_object`): a cut line is never one;
  :func:`find`, :func:`rfind` and :func:`count` are its byte searches (``bytes``'
  methods of those names, SIMD-fast), for a reader's own searches in a sample;
* :class:`Witness` records what a scan read, for
  :meth:`~clanker.sessions.capability.SessionsContext.remember`;
* :class:`Answer` and :class:`FileState` are what a provider that lists
  through its harness's own command keeps across processes
  (``context.answers``, :mod:`clanker.sessions.answers`), proved by the files'
  states from :meth:`~clanker.sessions.capability.SessionsContext.settled_states`;
* :func:`clean_text`, :func:`bounded_text`, :func:`parse_timestamp`,
  :func:`require_columns` and :func:`read_regular_file` are the small, strict
  readers every provider would otherwise write again, and :func:`home_directory`
  (:mod:`clanker.sessions.capability`'s, where a store's place is found from).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from clanker.environment import HostFiles
from clanker.environment.files import (
    DEFAULT_HEAD_BYTES,
    DEFAULT_TAIL_BYTES,
    FileSample,
    head_and_tail,
)
from clanker.environment.lines import LineRegion, count, decode_object, find, rfind
from clanker.environment.witness import Witness
from clanker.sessions.answers import Answer, FileState
from clanker.sessions.capability import home_directory
from clanker.sessions.filestore import MAX_ENTRIES, Candidate, scan_files
from clanker.sessions.sniffing import SNIFF_BYTES, Sniff
from clanker.sessions.types import (
    EMPTY,
    FOREIGN,
    NoSession,
    bounded_text,
    clean_text,
    parse_timestamp,
)
from clanker.storage import read_regular_file

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "DEFAULT_HEAD_BYTES",
    "DEFAULT_TAIL_BYTES",
    "EMPTY",
    "FOREIGN",
    "MAX_ENTRIES",
    "SNIFF_BYTES",
    "Answer",
    "Candidate",
    "FileSample",
    "FileState",
    "HostFiles",
    "LineRegion",
    "NoSession",
    "Sniff",
    "Witness",
    "bounded_text",
    "clean_text",
    "count",
    "decode_object",
    "find",
    "head_and_tail",
    "home_directory",
    "parse_timestamp",
    "read_regular_file",
    "require_columns",
    "rfind",
    "scan_files",
]


def require_columns(
    connection: sqlite3.Connection,
    tables: Mapping[str, frozenset[str]],
    *,
    harness: str,
) -> None:
    """Raise ``storage-changed`` unless every table has at least these columns
    (:func:`clanker.environment.sqlite.require_columns`, imported with the first
    database read: a provider whose store is absent never loads ``sqlite3``)."""
    from clanker.environment.sqlite import require_columns as check

    check(connection, tables, harness=harness)
