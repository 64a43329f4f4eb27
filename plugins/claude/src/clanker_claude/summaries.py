"""How Claude Code's transcripts become sessions (where they are is
:mod:`clanker_claude.sessions`'s), read at their head and tail.

Verified against Claude Code 2.1.197 (docs/harnesses/claude.md, "Sessions").
There is no header record: message records carry ``sessionId``, ``cwd``,
``timestamp`` and ``entrypoint``; metadata records (``custom-title``,
``agent-name``, ``ai-title``, ``summary``, ...) are appended as they happen.
The project directory name is a lossy encoding of the cwd (``/a-b/c`` and
``/a/b-c`` share one), so it only pre-filters; a session belongs to the cwd
its records name.

A listing reads thousands of transcripts, so a file is never decoded line by
line: byte searches find the few lines that matter (Claude's own picker works
the same way) and only those are decoded.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from attrs import evolve, frozen

from clanker.ids import HarnessId
from clanker.sessions.capability import HarnessSession, SessionScan, SessionsContext
from clanker.stores import (
    EMPTY,
    FileSample,
    LineRegion,
    NoSession,
    Witness,
    bounded_text,
    clean_text,
    count,
    decode_object,
    find,
    head_and_tail,
    parse_timestamp,
    rfind,
    scan_files,
)

__all__ = [
    "HEAD_BYTES",
    "TAIL_BYTES",
    "Transcript",
    "encode_project",
    "holds_no_conversation",
    "parse",
    "project_dir_filter",
    "scan",
    "summarize",
]

_CLAUDE: Final = HarnessId("claude")

# Claude's own /resume picker reads the first and the last 64 KiB (`Bw`) for
# exactly what is read here: the first prompt sits in the first ~1 KB (line
# 0-6), titles are appended records. Reading the same bytes gives the same
# titles as the picker.
HEAD_BYTES: Final = 64 * 1024
TAIL_BYTES: Final = 64 * 1024
# Claude encodes at most 200 UTF-16 units of a path, then adds a hash.
_NAME_LIMIT: Final = 200
_TEXT_LIMIT: Final = 4096
# A title is at most 200 characters; only this much of a text is looked at
# (tag patterns are lazy and would cost quadratic time on a huge paste).
_TITLE_SCAN: Final = 4096
_UUID: Final = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# Claude lists only `<uuid>.jsonl` (case-insensitive), never `agent-*.jsonl`.
_TRANSCRIPT: Final = re.compile(rf"({_UUID})\.jsonl\Z")
_SESSION_UUID: Final = re.compile(_UUID)
_NOT_ENCODED: Final = re.compile(r"[^A-Za-z0-9]")
# Texts the picker passes over when it looks for the first prompt (`Occ`).
_MARKUP: Final = re.compile(r"^(?:\s*<[a-z][\w-]*[\s>]|\[Request interrupted by user[^\]]*\])")
# An opening tag; its block runs to the matching close (the picker's `GHs`).
_OPEN_TAG: Final = re.compile(r"<([a-z][\w-]*)(?:\s[^>]{0,200})?>")
# Print-mode (`-p`) and SDK sessions: Claude's picker hides them (`mmn`).
_SDK_ENTRYPOINTS: Final = ("sdk-",)
_META_LINE: Final = b'{"type":"'
_NEXT_META_LINE: Final = b"\n" + _META_LINE
# A message record's own cwd, followed by its own session id (key order of 2.1.197).
_RECORD_CWD: Final = re.compile(rb'"cwd":"(?:[^"\\]|\\.)*","sessionId":"(' + _UUID.encode()
                                + rb')"')
_CWD_KEYS: Final = (b'"cwd":"', b'"relocatedCwd":"')
_COMMAND_NAME: Final = re.compile(r"<command-name(?:\s+[^>]{0,200})?>([\s\S]*?)</command-name>",
                                  re.I)
_BASH_INPUT: Final = re.compile(r"<bash-input(?:\s+[^>]{0,200})?>([\s\S]*?)</bash-input>", re.I)
# Title records, in Claude's order of precedence, and the field holding the text.
_TITLE_FIELDS: Final = {
    b"agent-name": "agentName", b"custom-title": "customTitle", b"ai-title": "aiTitle",
    b"summary": "summary",
}
_TITLE_PREFIXES: Final = tuple((kind, _META_LINE + kind + b'"') for kind in _TITLE_FIELDS)
# Records of the conversation itself (Claude's `insertMessageChain` writes these; the
# first of them creates the file). Anything else is session metadata.
_MESSAGE_TYPES: Final = frozenset({"user", "assistant", "system", "attachment", "progress"})


# -- project directories ---------------------------------------------------------------------


def _string_hash(units: bytes) -> int:
    """Java's ``String.hashCode`` over UTF-16 code units, as a signed 32-bit value."""
    value = 0
    for index in range(0, len(units), 2):
        value = (value * 31 + (units[index] | units[index + 1] << 8)) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, rest = divmod(value, 36)
        out = digits[rest] + out
        if value == 0:
            return out


def _utf16(path: str) -> bytes:
    return path.encode("utf-16-le", "surrogatepass")


def encode_project(path: str) -> str:
    """The project directory name Claude uses for ``path`` (its real path).

    Every UTF-16 code unit that is not ``[A-Za-z0-9]`` becomes ``-`` (so a
    character outside the BMP becomes ``--``); past 200 units, the first 200
    plus ``-`` and the base-36 absolute value of the path's 32-bit string hash.
    """
    encoded = _NOT_ENCODED.sub(lambda m: "--" if ord(m.group()) > 0xFFFF else "-", path)
    if len(encoded) <= _NAME_LIMIT:
        return encoded
    return f"{encoded[:_NAME_LIMIT]}-{_base36(abs(_string_hash(_utf16(path))))}"


def project_dir_filter(scopes: Iterable[str]) -> Callable[[int, str], bool] | None:
    """Which project directories can hold sessions started in ``scopes`` (``None``: all).

    Conservative: a directory at or below a scope is named by the scope's
    encoding, or by it plus ``-`` (its first 200 units plus ``-`` for a long
    one, whatever the hash). Siblings that share the prefix (``/a/b-c`` for
    ``/a/b``) are read too; the service drops them by their cwd.
    """
    exact: set[str] = set()
    prefixes: set[str] = set()
    for scope in scopes:
        if not scope.startswith("/") or posixpath.normpath(scope) == "/":
            return None
        path = posixpath.normpath(scope)
        encoded = _NOT_ENCODED.sub(lambda m: "--" if ord(m.group()) > 0xFFFF else "-", path)
        exact.add(encode_project(path))
        prefixes.add(encoded[:_NAME_LIMIT] + "-")
    if not exact:
        return None
    ordered = tuple(prefixes)
    return lambda level, name: name in exact or name.startswith(ordered)


# -- reading bytes ----------------------------------------------------------------------------


def _string_after(buf: bytes, start: int, hi: int) -> str | None:
    """The JSON string whose body starts at ``start``, decoded; ``None`` if cut or invalid."""
    pos = start
    while True:
        quote = buf.find(b'"', pos, hi)
        if quote < 0:
            return None
        escapes = 0
        while quote - escapes - 1 >= start and buf[quote - escapes - 1] == 0x5C:
            escapes += 1
        if escapes % 2 == 0:
            break
        pos = quote + 1
    raw = buf[start:quote]
    try:
        value = json.loads(b'"' + raw + b'"') if b"\\" in raw else raw.decode("utf-8")
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def _first_string(region: LineRegion, key: str) -> str | None:
    """Claude's ``UG``: the value of the first ``"key":"`` in the region."""
    needle = f'"{key}":"'.encode()
    pos = find(region.buf, needle, region.lo, region.hi)
    return None if pos < 0 else _string_after(region.buf, pos + len(needle), region.hi)


def _last_string(region: LineRegion, key: str) -> str | None:
    """Claude's ``eS``: the value of the last complete ``"key":"`` in the region."""
    needle = f'"{key}":"'.encode()
    hi = region.hi
    while True:
        pos = rfind(region.buf, needle, region.lo, hi)
        if pos < 0:
            return None
        value = _string_after(region.buf, pos + len(needle), region.hi)
        if value is not None:
            return value
        hi = pos


# -- one transcript -------------------------------------------------------------------------


def _metadata_lines(region: LineRegion) -> dict[bytes, bytes]:
    """The newest title-bearing metadata line of each kind in ``region``.

    Metadata records are written as ``{"type":"<kind>",...}``, so one pass over
    the line starts finds them all (message records start ``{"parentUuid"``).
    """
    buf, found = region.buf, {}
    start = region.lo  # always a line start
    while start < region.hi:
        if buf.startswith(_META_LINE, start):
            for kind, prefix in _TITLE_PREFIXES:
                if buf.startswith(prefix, start):
                    end = buf.find(b"\n", start, region.hi)
                    found[kind] = buf[start:region.hi if end < 0 else end]
                    break
        following = find(buf, _NEXT_META_LINE, start, region.hi)
        if following < 0:
            break
        start = following + 1
    return found


def _titles(tail: LineRegion, head: LineRegion | None) -> list[str | None]:
    """agentName, customTitle, aiTitle, summary: the newest of each, tail before head.

    Like Claude's picker, ``summary`` (a legacy record) is looked for in the
    tail only.
    """
    in_tail = _metadata_lines(tail)
    in_head = {} if head is None else _metadata_lines(head)
    titles: list[str | None] = []
    for kind, field in _TITLE_FIELDS.items():
        line = in_tail.get(kind) if kind == b"summary" else in_tail.get(kind) or in_head.get(kind)
        record = None if line is None else decode_object(line)
        value = None if record is None else record.get(field)
        titles.append(value if isinstance(value, str) else None)
    return titles


def _tag(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    return match.group(1) if match and match.group(1) else None


def _first_prompt(region: LineRegion) -> str | None:
    """Claude's picker rule for the first prompt (``_im``), over the head.

    The first ``user`` record that is not meta and carries no tool result;
    its text (a string, or the text blocks) with newlines as spaces. Markup
    such as ``<command-name>`` or ``<system-reminder>`` is passed over; a
    ``<bash-input>`` becomes ``! command``; a slash command is only a
    fallback (clanker cannot know which commands are built in).
    """
    fallback = None
    buf = region.buf
    for span in region.spans_with(b'"type":"user"'):
        if find(buf, b'"tool_result"', *span) >= 0 or find(buf, b'"isMeta":true', *span) >= 0:
            continue
        for raw in _user_texts(region.object_at(span)):
            text = raw[:_TITLE_SCAN].replace("\n", " ").strip()
            if not text:
                continue
            command = _tag(_COMMAND_NAME, text)
            if command is not None:
                fallback = fallback or command
                continue
            shell = _tag(_BASH_INPUT, text)
            if shell is not None:
                return f"! {shell}"
            if _MARKUP.match(text):
                continue
            return text
    return fallback


def _user_texts(record: dict[str, Any] | None) -> list[str]:
    """A real user message's texts: a string content, or its text blocks."""
    if record is None or record.get("type") != "user":
        return []
    if record.get("isMeta") is True or record.get("isCompactSummary") is True:
        return []
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [block["text"] for block in content if isinstance(block, dict)
            and block.get("type") == "text" and isinstance(block.get("text"), str)]


def _strip_tag_blocks(text: str) -> str:
    """``text`` without ``<tag ...>...</tag>`` blocks (and a newline after each).

    The same result as the picker's lazy regex, in linear passes of ``find``
    rather than a backtracking search from every unclosed ``<``.
    """
    out: list[str] = []
    pos = 0
    search = 0
    while (opened := _OPEN_TAG.search(text, search)) is not None:
        closer = f"</{opened.group(1)}>"
        close = text.find(closer, opened.end())
        if close < 0:
            search = opened.start() + 1
            continue
        out.append(text[pos:opened.start()])
        pos = search = close + len(closer) + text.startswith("\n", close + len(closer))
    out.append(text[pos:])
    return "".join(out)


def _display(value: str | None) -> str | None:
    """The picker's cleanup: tag blocks removed (kept when nothing else is left), one line."""
    if value is None:
        return None
    value = value[:_TITLE_SCAN]
    stripped = _strip_tag_blocks(value).strip()
    return clean_text(stripped or value)


def _cwd_of(record: dict[str, Any] | None) -> str | None:
    """A record's top-level ``cwd``, or a ``relocated`` record's new one."""
    if record is None:
        return None
    value = record.get("relocatedCwd") if record.get("type") == "relocated" else record.get("cwd")
    text = bounded_text(value, _TEXT_LIMIT)
    return text if text is not None and text.startswith("/") else None


def _latest_cwd(region: LineRegion) -> tuple[str, object] | None:
    """The newest cwd in ``region`` and the ``sessionId`` of the record naming it.

    A message record ends ``..."cwd":"<dir>","sessionId":"<id>",...`` after all
    its nested content, so the last ``"cwd":"`` followed by that ``sessionId``
    is the record's own and is read in place; anything else is decoded.
    """
    buf = region.buf
    for span in region.spans_with(_CWD_KEYS, newest_first=True):
        # The line's last cwd key is the one the search stopped at.
        pos = max(rfind(buf, key, *span) for key in _CWD_KEYS)
        fast = _RECORD_CWD.match(buf, pos, span[1])
        if fast is not None:
            cwd = _string_after(buf, pos + len(b'"cwd":"'), span[1])
            if (cwd is not None and bounded_text(cwd, _TEXT_LIMIT) is not None
                    and cwd.startswith("/")):
                return cwd, fast.group(1).decode("ascii")
        record = region.object_at(span)
        cwd = _cwd_of(record)
        if record is not None and cwd is not None:
            return cwd, record.get("sessionId")
    return None


def _first_cwd(region: LineRegion) -> tuple[str, object] | None:
    for span in region.spans_with(b'"cwd":"'):
        record = region.object_at(span)
        cwd = _cwd_of(record)
        if record is not None and cwd is not None:
            return cwd, record.get("sessionId")
    return None


def _first_time(region: LineRegion) -> datetime | None:
    """The top-level ``timestamp`` of the first record that has one."""
    for span in region.spans_with(b'"timestamp":"'):
        record = region.object_at(span)
        when = None if record is None else parse_timestamp(record.get("timestamp"))
        if when is not None:
            return when
    return None


def _updated(regions: Sequence[LineRegion], mtime: datetime) -> datetime:
    """The file's mtime, unless the newest timestamped record is newer.

    Every ``"timestamp":"`` on that line bounds its record's own time, so the
    line is decoded only when one of them is later than the mtime (a copied
    or synced file); normally nothing is decoded.
    """
    needle = b'"timestamp":"'
    for region in regions:
        for span in region.spans_with(needle, newest_first=True):
            later = False
            pos = find(region.buf, needle, span[0], span[1])
            while pos >= 0 and not later:
                when = parse_timestamp(_string_after(region.buf, pos + len(needle), span[1]))
                later = when is not None and when > mtime
                pos = find(region.buf, needle, pos + 1, span[1])
            if not later:
                return mtime
            record = region.object_at(span)
            when = None if record is None else parse_timestamp(record.get("timestamp"))
            if when is not None:
                return max(when, mtime)
    return mtime


def _model(regions: Sequence[LineRegion]) -> str | None:
    """The newest assistant record's model; ``<synthetic>`` marks local errors, not a model."""
    for region in regions:
        for start, end in region.spans_with(b'"type":"assistant"', newest_first=True):
            named = count(region.buf, b'"model":"', start, end)
            if named <= count(region.buf, b'"model":"<synthetic>"', start, end):
                continue  # nothing but local errors here: not worth decoding
            record = region.object_at((start, end))
            message = None if record is None else record.get("message")
            if record is None or record.get("type") != "assistant" or not isinstance(
                message, dict
            ):
                continue
            model = bounded_text(message.get("model"), 200)
            if model is not None and model != "<synthetic>":
                return model
    return None


def _parent(region: LineRegion, native_id: str) -> str | None:
    """``forkedFrom.sessionId`` of the first message record (``/branch``, SDK forks).

    Every copied record carries it, so the first message record tells;
    ``--fork-session`` copies record no parent at all.
    """
    for span in region.spans_with(b'"parentUuid":'):
        if find(region.buf, b'"forkedFrom":{', span[0], span[1]) < 0:
            return None
        record = region.object_at(span)
        forked = None if record is None else record.get("forkedFrom")
        parent = forked.get("sessionId") if isinstance(forked, dict) else None
        if isinstance(parent, str) and _SESSION_UUID.fullmatch(parent) and parent != native_id:
            return parent
        return None
    return None


def holds_no_conversation(sample: FileSample) -> bool:
    """Whether the transcript is only session metadata: no message was ever written.

    Claude 2.1.197 creates the file for a title (``claude -n NAME``, ``/rename``)
    before any message, and appends ``mode`` / ``permission-mode`` records when
    it quits: a TUI opened and quit leaves such a file. It cannot be resumed
    (``--resume <path>``: "Unable to load transcript from file"; by id: "No
    conversation found"). Only a file read whole can show this: every line a
    JSON object of a metadata type, none naming another session than the file's
    name. An empty file is one too. A line that does not parse or a message
    record is not.
    """
    match = _TRANSCRIPT.fullmatch(sample.path.name)
    if match is None or not sample.whole:
        return False
    native_id = match.group(1)
    region, _ = head_and_tail(sample)
    for span in region.spans():
        record = region.object_at(span)
        if record is None:
            return False
        kind = record.get("type")
        if (not isinstance(kind, str) or kind in _MESSAGE_TYPES
                or "uuid" in record or "parentUuid" in record):
            return False
        if record.get("sessionId", native_id) != native_id:
            return False
    return True


@frozen(kw_only=True)
class Transcript:
    """One transcript: its session and the entrypoint it was started from."""

    session: HarnessSession
    entrypoint: str | None

    @property
    def listed(self) -> bool:
        """Whether Claude's own picker shows it (print-mode and SDK sessions are hidden)."""
        return self.shows(self.entrypoint)

    @staticmethod
    def shows(entrypoint: str | None) -> bool:
        return not (entrypoint or "").startswith(_SDK_ENTRYPOINTS)


def parse(sample: FileSample) -> Transcript | None:
    """Read one transcript; ``None`` when it is not a session (see :func:`summarize`).

    - id: the file name (``<uuid>.jsonl``); when the record that gives the cwd
      names another ``sessionId``, it is no session. A file whose first line is a side chain
      (``"isSidechain":true``, sub-agents of old versions) is none either.
    - cwd: the newest record ``cwd`` (or ``relocated`` ``relocatedCwd``) in
      the tail, else the first in the head; a transcript with none is skipped.
    - title, Claude's order: the newest ``agent-name``, ``custom-title``,
      ``ai-title`` (tail, then head), ``summary`` (tail), then the first prompt.
    - updated: the file's mtime (Claude's own rule), never before the newest
      record ``timestamp``; created: the first record ``timestamp``.
    - model: the newest assistant ``message.model`` other than ``<synthetic>``.
    - parent: ``forkedFrom.sessionId``; ``--fork-session`` copies record none.
    """
    match = _TRANSCRIPT.fullmatch(sample.path.name)
    if match is None:
        return None
    native_id = match.group(1)
    first_end = sample.head.find(b"\n")
    first = sample.head if first_end < 0 else sample.head[:first_end]
    if b'"isSidechain":true' in first or b'"isSidechain": true' in first:
        return None
    head, tail = head_and_tail(sample)  # one region when the head is the whole file
    newest_first = [tail] if tail is head else [tail, head]
    placed = _latest_cwd(tail) or _first_cwd(head)
    if placed is None:
        return None  # no message record in reach: nothing to place or resume
    cwd, recorded = placed
    if isinstance(recorded, str) and recorded != native_id:
        return None  # renamed or copied by hand: the name is not its id
    title = next(
        (text for text in map(_display, _titles(tail, None if tail is head else head))
         if text is not None), None,
    ) or _display(_first_prompt(head))
    entrypoint = _first_string(head, "entrypoint") or _last_string(tail, "entrypoint")
    session = HarnessSession(
        harness=_CLAUDE, native_id=native_id,
        updated_at=_updated(newest_first, sample.mtime),
        title=title, cwd=cwd, created_at=_first_time(head),
        model=_model(newest_first), parent_id=_parent(head, native_id),
    )
    return Transcript(session=session, entrypoint=entrypoint)


def summarize(sample: FileSample) -> HarnessSession | NoSession | None:
    """One transcript: ``None`` for no session (a counted skip), :data:`~clanker.stores.EMPTY`
    for one that holds no conversation yet (:func:`holds_no_conversation`: neither
    listed nor a skip); print-mode/SDK runs come back hidden.

    Claude's own picker hides sessions whose entrypoint is ``sdk-cli``,
    ``sdk-ts`` or ``sdk-py`` (every ``claude -p``); so does a listing. A
    re-find by id still finds them: ``--resume`` takes them.
    """
    found = parse(sample)
    if found is None:
        # A file of metadata only is a session not begun, not an unreadable one.
        return EMPTY if holds_no_conversation(sample) else None
    return found.session if found.listed else evolve(found.session, hidden=True)


# -- the scan -----------------------------------------------------------------------------


def _accept_file(native_id: str | None) -> Callable[[str], bool]:
    def accept(name: str) -> bool:
        match = _TRANSCRIPT.fullmatch(name)
        return match is not None and (native_id is None or match.group(1) == native_id)

    return accept


def _every_dir(level: int, name: str) -> bool:
    return True


def scan(context: SessionsContext, root: Path) -> SessionScan:
    """The sessions of the transcripts under ``root`` (the projects directory)."""
    # A re-find reads every project (the scopes only say where the caller is).
    accept_dir = (project_dir_filter(context.scopes) or _every_dir
                  if context.native_id is None else _every_dir)

    def read(witness: Witness) -> SessionScan:
        # Exactly one level: `<session>/subagents/` transcripts lie deeper.
        candidates, cut = context.files.walk(root, depth=1, witness=witness,
                                     accept_file=_accept_file(context.native_id),
                                     accept_dir=accept_dir)
        return scan_files(context, candidates, summarize, cut=cut,
                          head_bytes=HEAD_BYTES, tail_bytes=TAIL_BYTES, witness=witness)

    return context.remember(root, read)
