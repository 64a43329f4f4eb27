"""Pi's JSON Lines session format, read by every harness that writes it.

Pi and its fork Oh My Pi keep one file a session: a ``{"type":"session",...}``
header (Oh My Pi puts a fixed title slot before it), then one entry a line
(``message``, ``model_change``, ...). Each plugin declares what its harness
does differently (where the store is, which entries it reads, the header's
place); what the two share lives here once:

* :class:`Lines` finds and decodes, at most once each, only the lines of a
  sample that can change a field (:class:`Want`), judging a long line by its
  opening alone, so a listing of thousands of files costs little more than the
  files' headers;
* the entry readers (:func:`header_place`, :func:`message`, :func:`user_text`,
  :func:`provider_model`, :func:`count_messages`, :func:`parent_from`) and
  :func:`updated`, the last-activity rule both apply;
* :func:`candidates`, the walk of the store's roots (``*.jsonl``, one level of
  project directories below a nested root, each file once);
* where the store is, offered here too: Pi's directory rules, :class:`SessionRoot`
  and :class:`SessionFiles`, the capability's base, are :mod:`clanker.piplaces`'s,
  so that knowing where a store is imports none of this reader.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, Final

from attrs import frozen

from clanker.environment.files import FileSample
from clanker.environment.lines import LineRegion, Span, decode_object
from clanker.environment.witness import Witness
from clanker.piplaces import (
    SessionFiles,
    SessionRoot,
    absolute,
    agent_dir,
    settings_session_dir,
    tilde_path,
    wrapped_dir_name,
)
from clanker.sessions.capability import SessionsContext
from clanker.sessions.filestore import Candidate
from clanker.sessions.types import bounded_text, clean_text

__all__ = [
    "HEAD_BYTES",
    "NAMED_BY_ID",
    "TAIL_BYTES",
    "TEXT_LIMIT",
    "Lines",
    "SessionFiles",
    "SessionRoot",
    "Want",
    "absolute",
    "agent_dir",
    "candidates",
    "count_messages",
    "header_place",
    "message",
    "older_entries",
    "parent_from",
    "provider_model",
    "settings_session_dir",
    "tilde_path",
    "updated",
    "user_text",
    "wrapped_dir_name",
]

# The header is small (< 1 KB unless its paths are huge); the first user message, the
# fallback title, is normally line 4 or 5. 64 KiB holds them unless that message is
# itself a large paste (then there is no title).
HEAD_BYTES: Final = 64 * 1024
# The tail gives the newest times and the model. Both harnesses' tools cut their output
# at 50 KB, so a tool result is at most ~50 KB plus JSON escaping: 128 KiB still holds
# the lines after one. When a giant line fills it, the file's mtime stands in.
TAIL_BYTES: Final = 128 * 1024
TEXT_LIMIT: Final = 4096
_UUID: Final = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
NAMED_BY_ID: Final = re.compile(rf"_({_UUID})\.jsonl\Z")
"""Both name files ``<ISO timestamp>_<session id>.jsonl``; other names exist (a path
given to ``--session``/``--resume`` creates exactly that file, a moved file keeps its)."""
_STEM_ID: Final = re.compile(rf"(?:\A|_)({_UUID})\Z")


# -- one file --------------------------------------------------------------------------------
#
# A listing reads thousands of files, and most of a large one is tool output that no field
# uses. So lines are found by position, and a line is decoded (at most once) only when it
# can change a field:
#
# - a short line is passed over when it spells none of the quoted tokens that such a line
#   must contain (``"user"``, ``"model_change"``, ...). JSON can write a letter only as
#   itself or as a ``\u00XX`` escape, so a line with such an escape, and one that does not
#   start with ``{`` (a BOM, UTF-16, leading space), is always decoded;
# - a long line is passed over when its opening, read token by token, names an entry type
#   or message role that no field uses; anything else about it decodes it. Both write
#   lines with JSON.stringify (``type`` first, no key twice): only a line that repeats a
#   key of its opening could be judged by the wrong one.
#
# In a region without a NUL byte (a UTF-16 or UTF-32 line has them), a line that matters
# spells a token in its bytes or holds a ``\u00`` escape, whatever it starts with: such
# lines are found by byte search, and only they are judged as above (``Lines.entries``).
#
# A file read whole is decoded line by line all the same: its count takes every message,
# and a line that does not parse (cut, or glued to the next one after a crash) must not
# count.

# A line shorter than this is searched for tokens before it is decoded, which costs little;
# a longer one (tool output, a paste) is judged by its opening alone, which costs the same
# at any length.
_LONG_LINE: Final = 1024
# An entry opens with `type`, `id`, `parentId`, `timestamp`, then the message's `role`:
# ~150 bytes. An opening not read in this much decodes the line.
_OPENING_BYTES: Final = 1024
_JSON_STRING: Final = rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
# `{"type":"<kind>"`, any keys with scalar values, then `"message":{"role":"<role>"` if it
# comes next. Every token is matched whole, so on a valid line without repeated keys the
# groups are the entry's type and its message's role.
#
# The inner quantifiers are possessive (`*+`, `++`): what follows each in the pattern is a
# character it cannot match (blanks are followed by `"` `,` `:` `{`, a string body by its
# `"` or `\\`), or, for a scalar, the repetition's end, after which the rest is optional.
# Giving characters back therefore never finds another match, and the first path the
# engine takes is the one it returns: the groups are those of the backtracking form
# (tests/core/test_pistore.py compares the two), found in about half the time.
_OPENING: Final = re.compile(
    rb'\{\s*+"type"\s*+:\s*+"([A-Za-z_]++)"'
    rb"(?:\s*+,\s*+" + _JSON_STRING + rb"\s*+:\s*+(?:" + _JSON_STRING
    + rb"|[-+.0-9A-Za-z]++))*"
    rb'(?:\s*+,\s*+"message"\s*+:\s*+\{\s*+"role"\s*+:\s*+"([A-Za-z_]++)")?'
)


@frozen
class Want:
    """Which lines can matter to one use.

    ``tokens``: a line spelling none of these cannot (each is the quoted name of an
    entry type or a message role the use reads, which every line that matters
    spells). ``kinds``: a long line whose opening names another entry type cannot;
    nor can one naming a message role outside ``roles`` (``None``: every role
    counts).
    """

    tokens: tuple[bytes, ...]
    kinds: frozenset[bytes]
    roles: frozenset[bytes] | None = None


# The only way JSON spells a token's letter other than as itself begins so.
_ESCAPE: Final = b"\\u00"


class Lines:
    """The complete, non-blank lines of a region, decoded on demand, each once."""

    def __init__(self, region: LineRegion) -> None:
        self.region = region
        self.buf = region.buf
        self._spans: list[Span] | None = None
        self._searchable: bool | None = None  # no NUL byte: see entries()

    @property
    def spans(self) -> list[Span]:
        """Every line's span, oldest first (found on first use: most reads need few)."""
        if self._spans is None:
            self._spans = self.region.spans()
        return self._spans

    def first(self) -> dict[str, Any] | None:
        """The first line's entry (``None``: no line, or not an object), without
        looking past it."""
        span = self.region.first() if self._spans is None else next(iter(self._spans), None)
        return None if span is None else self.region.object_at(span)

    def entry(self, index: int) -> dict[str, Any] | None:
        return self.region.object_at(self.spans[index])

    def every_entry(self, first: int) -> list[dict[str, Any]]:
        """The entries from line ``first`` on, every line decoded, in order."""
        buf = self.buf
        decoded = (decode_object(buf[start:end]) for start, end in self.spans[first:])
        return [entry for entry in decoded if entry is not None]

    def opening(self, index: int) -> re.Match[bytes] | None:
        """How a long line opens; ``None`` for a short one or an opening not read."""
        return self._opening(self.spans[index])

    def _opening(self, span: Span) -> re.Match[bytes] | None:
        start, end = span
        if end - start < _LONG_LINE:
            return None
        return _OPENING.match(self.buf, start, min(end, start + _OPENING_BYTES))

    def may_matter(self, index: int, want: Want) -> bool:
        return self._may_matter(self.spans[index], want)

    def _may_matter(self, span: Span, want: Want) -> bool:
        start, end = span
        if end - start >= _LONG_LINE:
            opening = self._opening(span)
            if opening is None:
                return True
            kind, role = opening.group(1, 2)
            if kind not in want.kinds:
                return False
            return kind != b"message" or want.roles is None or role is None or role in want.roles
        return self.region.may_hold(span, want.tokens)

    def entries(self, want: Want, *, skip: int = 0,
                newest_first: bool = False) -> Iterator[dict[str, Any]]:
        """The entries that can matter to ``want`` from line ``skip`` on, oldest or
        newest first.

        In a region without a NUL byte, only the lines that spell a token, or hold
        the ``\\u00`` that could spell one, are looked at: they are found by byte
        search (:meth:`LineRegion.spans_with`). Such a line is UTF-8 to json.loads
        (a UTF-16 or UTF-32 object line holds NULs), so the token is in its bytes,
        whatever it starts with. Otherwise every line is judged (:meth:`may_matter`).
        Both pass over only lines that cannot matter, and keep the order."""
        region = self.region
        if self._searchable is None:
            self._searchable = region.buf.find(b"\x00", region.lo, region.hi) < 0
        if self._searchable:
            start = region.lo
            for _ in range(skip):  # past as many lines as spans counts (blank ones are not)
                line = LineRegion(region.buf, start, region.hi).first()
                start = region.hi if line is None else line[1] + 1
            for span in region.spans_with((*want.tokens, _ESCAPE), newest_first=newest_first):
                if span[0] < start:
                    if newest_first:
                        return
                    continue
                if self._may_matter(span, want):
                    entry = region.object_at(span)
                    if entry is not None:
                        yield entry
            return
        indices = range(skip, len(self.spans))
        for index in reversed(indices) if newest_first else indices:
            if self.may_matter(index, want):
                entry = self.entry(index)
                if entry is not None:
                    yield entry


def older_entries(head: Lines | None, want: Want, skip: int) -> Iterable[dict[str, Any]]:
    """The head's entries from line ``skip`` (past the header) that can matter to
    ``want``, newest first: the ones older than the tail's. None when ``head`` is
    ``None``: a file read whole was read as its tail already."""
    return () if head is None else head.entries(want, skip=skip, newest_first=True)


def header_place(header: Mapping[str, Any]) -> tuple[str, str] | None:
    """A ``session`` header's id and cwd, or ``None`` when the header names no session.

    The id must be printable text without surrounding white space (it is what a
    resume names), the cwd absolute: both harnesses record ``process.cwd()``, so a
    relative one is no header they wrote.
    """
    native_id = bounded_text(header.get("id"), 200)
    cwd = bounded_text(header.get("cwd"), TEXT_LIMIT)
    if native_id is None or not native_id.isprintable() or native_id != native_id.strip():
        return None
    if cwd is None or not cwd.startswith("/"):
        return None
    return native_id, cwd


def message(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The ``message`` object of a ``message`` entry, else ``None``."""
    if entry.get("type") != "message":
        return None
    found = entry.get("message")
    return found if isinstance(found, dict) else None


def user_text(entry: dict[str, Any]) -> str | None:
    """A user message's text: ``content`` as a string, or its text blocks joined by a space."""
    found = message(entry)
    if found is None or found.get("role") != "user":
        return None
    content = found.get("content")
    if isinstance(content, list):
        parts = [
            block["text"] for block in content
            if isinstance(block, dict) and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
        content = " ".join(parts)
    return clean_text(content)


def provider_model(provider: object, model: object) -> str | None:
    """``provider/model``, or the model alone; ``None`` without a model."""
    model_text, provider_text = bounded_text(model, 200), bounded_text(provider, 200)
    if model_text is None:
        return None
    return model_text if provider_text is None else f"{provider_text}/{model_text}"


def count_messages(entries: Iterable[dict[str, Any]]) -> int:
    """``message`` entries, each id once (a broken tail makes the harness re-append them)."""
    seen: set[str] = set()
    count = 0
    for entry in entries:
        if message(entry) is None:
            continue
        entry_id = entry.get("id")
        if isinstance(entry_id, str):
            if entry_id in seen:
                continue
            seen.add(entry_id)
        count += 1
    return count


def parent_from(value: object, *, bare_id: bool = False) -> str | None:
    """The parent's id from a header's parent field: the source file's path.

    The id is the UUID the file name ends with; a path whose name carries no id
    gives no parent id. With ``bare_id`` (Oh My Pi's ``--fork`` records the id
    itself), a value with no separator and no ``.jsonl`` ending is the id.
    """
    text = bounded_text(value, TEXT_LIMIT)
    if text is None:
        return None
    if bare_id and "/" not in text and "\\" not in text and not text.endswith(".jsonl"):
        return text if text.isprintable() and text == text.strip() else None
    name = re.split(r"[/\\]", text)[-1]
    stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
    match = _STEM_ID.search(stem)
    return match.group(1).lower() if match else None


def updated(sample: FileSample, stamps: list[datetime], created: datetime | None) -> datetime:
    """The last activity: the newest message time, never before the header's (a fork
    copies its parent's messages); with none in reach, the header time for a file read
    whole, the file's mtime for a larger one (the tail was one giant line)."""
    if stamps:
        return max([*stamps, created]) if created is not None else max(stamps)
    if sample.whole:
        return created or sample.mtime
    return sample.mtime


# -- the walk --------------------------------------------------------------------------------


def _accept_file(native_id: str | None) -> Callable[[str], bool]:
    def accept(name: str) -> bool:
        # Dot files are Oh My Pi's locks (`.<name>.jsonl.lock`) and atomic-rewrite temps
        # (`.<name>.jsonl.<n>.tmp`); `.jsonl.<n>.bak` and `.jsonl.gz` end otherwise.
        if name.startswith(".") or not name.endswith(".jsonl"):
            return False
        if native_id is None:
            return True
        # Narrow a re-find by the id in the name; a file named otherwise is still read.
        match = NAMED_BY_ID.search(name)
        return match is None or match.group(1) == native_id

    return accept


def candidates(
    context: SessionsContext,
    roots: tuple[SessionRoot, ...],
    accept_dir: Callable[[int, str], bool],
    witness: Witness,
) -> tuple[list[Candidate], bool]:
    """The session files below ``roots``, each once, and whether the walk was cut.

    Exactly one level of project directories below a nested root (a flat one:
    none); deeper files (Oh My Pi's sub-agent transcripts in a session's
    artifacts directory) are no sessions of their own.
    """
    accept_file = _accept_file(context.native_id)
    found: dict[tuple[int, int], Candidate] = {}
    cut = False
    for root in roots:
        walked, root_cut = context.files.walk(
            root.path, depth=1 if root.nested else 0, accept_file=accept_file,
            accept_dir=accept_dir, witness=witness,
        )
        cut = cut or root_cut
        for candidate in walked:
            # Two roots may overlap (a session dir inside the default root): one file, one
            # session.
            found.setdefault((candidate.stat.st_dev, candidate.stat.st_ino), candidate)
    return list(found.values()), cut
