"""Pi's history: JSON Lines session files, read at their head and tail.

Verified against pi 0.73.1 (docs/harnesses/pi.md, "Sessions"). Layout::

    <agentDir>/sessions/--<encoded cwd>--/<timestamp>_<uuid>.jsonl   (default)
    <session dir>/<timestamp>_<uuid>.jsonl                          (explicit, flat)

Line 1 is the header ``{"type":"session","id","timestamp","cwd"[,"parentSession"]}``;
every later line is one entry. The directory name only pre-filters: it is not
reversible (``/a/b-c``, ``/a/b/c`` and ``/a/b:c`` share one), so a session
belongs to the ``cwd`` its header records.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from attrs import frozen

from clanker.ids import HarnessId
from clanker.sessions.capability import HarnessSession, SessionScan, SessionsContext
from clanker.stores import (
    FOREIGN,
    Candidate,
    FileSample,
    HostFiles,
    LineRegion,
    NoSession,
    Witness,
    bounded_text,
    clean_text,
    decode_object,
    head_and_tail,
    home_directory,
    parse_timestamp,
    scan_files,
)

__all__ = [
    "HEAD_BYTES",
    "TAIL_BYTES",
    "PiSessions",
    "SessionRoot",
    "agent_dir",
    "encode_cwd",
    "parent_from",
    "pi_dir_name",
    "project_dir_filter",
    "session_roots",
    "settings_session_dir",
    "summarize",
]

_PI: Final = HarnessId("pi")

# The header is line 1 and small (< 1 KB unless its paths are huge); the first
# user message, the fallback title, is normally line 4. 64 KiB holds both
# unless that message itself is a large paste (then there is no title).
HEAD_BYTES: Final = 64 * 1024
# The tail gives the newest timestamps, the name and the model. Pi's tools cut
# their output at 50 KB, so a tool result is at most ~50 KB plus JSON escaping:
# 128 KiB still holds the lines after one. An inline image (base64, no cap)
# can fill it: then the file's mtime stands in for the last activity.
TAIL_BYTES: Final = 128 * 1024
# settings.json is a small hand-edited object; anything larger is not read.
_SETTINGS_BYTES: Final = 1024 * 1024
_TEXT_LIMIT: Final = 4096
_UUID: Final = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# Pi names files `<ISO timestamp>_<session id>.jsonl`; other names exist
# (`--session <new path>` creates the file at exactly that path).
_NAMED_BY_ID: Final = re.compile(rf"_({_UUID})\.jsonl\Z")
_STEM_ID: Final = re.compile(rf"(?:\A|_)({_UUID})\Z")
# A line shorter than this is searched for tokens before it is decoded, which costs
# little; a longer one (tool output, a paste) is judged by its opening alone, which
# costs the same at any length (see "one file").
_LONG_LINE: Final = 1024
# An entry opens with `type`, `id`, `parentId`, `timestamp`, then the message's
# `role`: ~150 bytes. An opening not read in this much decodes the line.
_OPENING_BYTES: Final = 1024
_JSON_STRING: Final = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
# `{"type":"<kind>"`, any keys with scalar values, then `"message":{"role":"<role>"` if
# it comes next. Every token is matched whole, so on a valid line without repeated
# keys the groups are the entry's type and its message's role.
_OPENING: Final = re.compile(
    rb'\{\s*"type"\s*:\s*"([A-Za-z_]+)"'
    rb"(?:\s*,\s*" + _JSON_STRING + rb"\s*:\s*(?:" + _JSON_STRING + rb"|[-+.0-9A-Za-z]+))*"
    rb'(?:\s*,\s*"message"\s*:\s*\{\s*"role"\s*:\s*"([A-Za-z_]+)")?'
)
# parse_timestamp reads an integer above 10**11 as milliseconds; below 10**14 that is
# before the year 5138, which every platform converts.
_MS_LOW: Final = 10**11
_MS_HIGH: Final = 10**14


@frozen
class SessionRoot:
    """A directory of session files: ``nested`` ones hold one directory per project."""

    path: Path
    nested: bool


# -- where the store is ---------------------------------------------------------------------


def _expand_tilde(value: str, environ: Mapping[str, str]) -> str | None:
    """Pi's ``expandTildePath``: only ``~`` and ``~/...``; ``~user`` stays literal."""
    if value == "~" or value.startswith("~/"):
        home = home_directory(environ)
        return None if home is None else home + value[1:]
    return value


def _absolute(value: str | None) -> Path | None:
    # A relative value is relative to the directory pi was started in, which
    # clanker cannot know: it is not guessed.
    if not value or "\x00" in value or not value.startswith("/"):
        return None
    return Path(posixpath.normpath(value))


def agent_dir(environ: Mapping[str, str]) -> Path | None:
    """``$PI_CODING_AGENT_DIR`` (``~`` expanded) if set and non-empty, else ``~/.pi/agent``."""
    configured = environ.get("PI_CODING_AGENT_DIR")
    if configured:
        return _absolute(_expand_tilde(configured, environ))
    home = home_directory(environ)
    return None if home is None else _absolute(posixpath.join(home, ".pi", "agent"))


def settings_session_dir(agent: Path, environ: Mapping[str, str], files: HostFiles) -> Path | None:
    """``sessionDir`` from the global ``<agentDir>/settings.json``, if absolute after ``~``.

    One bounded read of one small file. A missing, oversized or malformed file
    is no setting, exactly as for pi (which then uses its default).
    """
    data = files.read_small(agent / "settings.json", _SETTINGS_BYTES)
    if data is None:
        return None
    try:
        settings = json.loads(data)
    except (ValueError, RecursionError):
        return None
    value = settings.get("sessionDir") if isinstance(settings, dict) else None
    if not isinstance(value, str) or not value:
        return None
    return _absolute(_expand_tilde(value, environ))


def session_roots(environ: Mapping[str, str], files: HostFiles) -> tuple[SessionRoot, ...]:
    """Every directory pi may have written sessions to, as clanker can know them.

    Pi writes a new session to the first of: ``--session-dir`` (per
    invocation: invisible here), ``$PI_CODING_AGENT_SESSION_DIR``, ``sessionDir``
    in the project's ``.pi/settings.json`` (not read: see the docs), then the
    global ``settings.json``, else ``<agentDir>/sessions/--<cwd>--/``. Earlier
    sessions stay where they were written, so history reads all of them.
    """
    roots: list[SessionRoot] = []
    agent = agent_dir(environ)
    if agent is not None:
        roots.append(SessionRoot(agent / "sessions", nested=True))
    configured = environ.get("PI_CODING_AGENT_SESSION_DIR")
    explicit = _absolute(_expand_tilde(configured, environ)) if configured else None
    if explicit is not None:
        roots.append(SessionRoot(explicit, nested=False))
    from_settings = settings_session_dir(agent, environ, files) if agent is not None else None
    if from_settings is not None:
        roots.append(SessionRoot(from_settings, nested=False))
    unique: dict[Path, SessionRoot] = {}
    for root in roots:
        unique.setdefault(root.path, root)
    return tuple(unique.values())


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
    return lambda level, name: name in exact or (name.startswith(ordered) and pi_dir_name(name))


def pi_dir_name(name: str) -> bool:
    """Whether ``name`` is one pi gives a project directory: ``--<encoded cwd>--``.

    Pi names every one so; a directory named otherwise in its default root is
    not pi's (Oh My Pi, sharing the directory through ``PI_CODING_AGENT_DIR``,
    names those under the home ``-<path>``), and neither are the files in it.
    """
    return len(name) >= 4 and name.startswith("--") and name.endswith("--")


# -- one file -------------------------------------------------------------------------------
#
# A listing reads thousands of files, and most of a large one is tool output that no
# field uses. So lines are found by position, and a line past the header is decoded (at
# most once) only when it can change a field:
#
# - a short line is passed over when it spells none of the quoted tokens that such a
#   line must contain (``"user"``, ``"session_info"``, ...). JSON can write a letter only
#   as itself or as a ``\u00XX`` escape, so a line with such an escape, and one that
#   does not start with ``{`` (a BOM, UTF-16, leading space), is always decoded;
# - a long line is passed over when its opening, read token by token, names an entry
#   type or message role that no field uses; anything else about it decodes it. Pi
#   writes lines with JSON.stringify (``type`` first, no key twice): only a line that
#   repeats ``type``, ``message`` or ``role`` could be judged by the wrong one.
#
# A file read whole is decoded line by line all the same: its count takes every message,
# and a line that does not parse (cut, or glued to the next one after a crash) must not
# count.


@frozen
class _Want:
    """Which lines can matter to one use.

    ``tokens``: a short line spelling none of these cannot. ``kinds``: a long line
    whose opening names another entry type cannot; nor can one naming a message
    role outside ``roles`` (``None``: every role counts).
    """

    tokens: tuple[bytes, ...]
    kinds: frozenset[bytes]
    roles: frozenset[bytes] | None = None


# A tail: user and assistant messages (the times, a model), names, models.
_RECENT: Final = _Want((b'"user"', b'"assistant"', b'"session_info"', b'"model_change"'),
                       frozenset({b"message", b"session_info", b"model_change"}),
                       frozenset({b"user", b"assistant"}))
_NAMES: Final = _Want((b'"session_info"',), frozenset({b"session_info"}))
_PROMPTS: Final = _Want((b'"user"',), frozenset({b"message"}), frozenset({b"user"}))
_MODELS: Final = _Want((b'"model_change"', b'"assistant"'),
                       frozenset({b"model_change", b"message"}), frozenset({b"assistant"}))


class _Lines:
    """The complete, non-blank lines of a region, decoded on demand, each once."""

    def __init__(self, region: LineRegion) -> None:
        self.region = region
        self.buf = region.buf
        self.spans = region.spans()

    def entry(self, index: int) -> dict[str, Any] | None:
        return self.region.object_at(self.spans[index])

    def may_matter(self, index: int, want: _Want) -> bool:
        span = self.spans[index]
        start, end = span
        if end - start >= _LONG_LINE:
            opening = _OPENING.match(self.buf, start, min(end, start + _OPENING_BYTES))
            if opening is None:
                return True
            kind, role = opening.group(1, 2)
            if kind not in want.kinds:
                return False
            return kind != b"message" or want.roles is None or role is None or role in want.roles
        return self.region.may_hold(span, want.tokens)

    def every_entry(self, first: int) -> list[dict[str, Any]]:
        """The entries from line ``first`` on, every line decoded, in order."""
        buf = self.buf
        decoded = (decode_object(buf[start:end]) for start, end in self.spans[first:])
        return [entry for entry in decoded if entry is not None]

    def entries(self, indices: Iterable[int], want: _Want) -> Iterator[dict[str, Any]]:
        """The entries among ``indices`` that can matter to ``want``, in that order."""
        for index in indices:
            if self.may_matter(index, want):
                entry = self.entry(index)
                if entry is not None:
                    yield entry


def _message(entry: dict[str, Any]) -> dict[str, Any] | None:
    if entry.get("type") != "message":
        return None
    message = entry.get("message")
    return message if isinstance(message, dict) else None


def _user_text(entry: dict[str, Any]) -> str | None:
    """Pi's picker text: ``content`` as a string, or its text blocks joined by a space."""
    message = _message(entry)
    if message is None or message.get("role") != "user":
        return None
    content = message.get("content")
    if isinstance(content, list):
        parts = [
            block["text"] for block in content
            if isinstance(block, dict) and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
        content = " ".join(parts)
    return clean_text(content)


def _model(entry: dict[str, Any]) -> str | None:
    """``provider/model`` from a ``model_change`` or an assistant message."""
    if entry.get("type") == "model_change":
        provider, model = entry.get("provider"), entry.get("modelId")
    else:
        message = _message(entry)
        if message is None or message.get("role") != "assistant":
            return None
        provider, model = message.get("provider"), message.get("model")
    model_text, provider_text = bounded_text(model, 200), bounded_text(provider, 200)
    if model_text is None:
        return None
    return model_text if provider_text is None else f"{provider_text}/{model_text}"


def _named(entries: Iterable[dict[str, Any]]) -> tuple[bool, str | None]:
    """The newest ``session_info`` among ``entries`` (newest first): found, and its name.

    An empty or missing name clears an earlier one, as in pi.
    """
    for entry in entries:
        if entry.get("type") == "session_info":
            return True, clean_text(entry.get("name"))
    return False, None


def parent_from(value: object) -> str | None:
    """The parent's id from ``parentSession``/``branchedFrom``: the source file's path.

    Pi records the path; the id is the UUID the file name ends with. A path
    whose name carries no id gives no parent id.
    """
    text = bounded_text(value, _TEXT_LIMIT)
    if text is None:
        return None
    name = re.split(r"[/\\]", text)[-1]
    stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
    match = _STEM_ID.search(stem)
    return match.group(1).lower() if match else None


def _messages(entries: Iterable[dict[str, Any]]) -> tuple[list[datetime], int]:
    """When the user and assistant messages happened (pi's own "modified" rule), and
    how many ``message`` entries there are, each id once (a broken tail makes pi
    re-append them all)."""
    stamps: list[datetime] = []
    # The usual time, integer milliseconds since 1973, orders exactly as the instant it
    # converts to: only the largest one is converted.
    latest_ms = 0
    seen: set[str] = set()
    count = 0
    for entry in entries:
        message = _message(entry)
        if message is None:
            continue
        if message.get("role") in ("user", "assistant"):
            value = message.get("timestamp")
            if type(value) is int and _MS_LOW < value < _MS_HIGH:
                latest_ms = max(latest_ms, value)
            else:
                stamp = parse_timestamp(value) or parse_timestamp(entry.get("timestamp"))
                if stamp is not None:
                    stamps.append(stamp)
        entry_id = entry.get("id")
        if isinstance(entry_id, str):
            if entry_id in seen:
                continue
            seen.add(entry_id)
        count += 1
    latest = parse_timestamp(latest_ms) if latest_ms else None
    if latest is not None:
        stamps.append(latest)
    return stamps, count


def _omp_format(head: _Lines, first: dict[str, Any] | None) -> bool:
    """Oh My Pi's layout: a title slot (or a line caught mid-rewrite), then the header."""
    if len(head.spans) < 2 or (first is not None and first.get("type") != "title"):
        return False
    second = head.entry(1)
    return second is not None and second.get("type") == "session"


def _updated(sample: FileSample, stamps: list[datetime], created: datetime | None) -> datetime:
    if stamps:
        return max([*stamps, created]) if created is not None else max(stamps)
    if sample.whole:
        return created or sample.mtime
    return sample.mtime  # the tail was one giant line: the last write is the best guess


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
    head = _Lines(head_region)
    header = head.entry(0) if head.spans else None
    if header is None or header.get("type") != "session":
        return FOREIGN if _omp_format(head, header) else None
    native_id = bounded_text(header.get("id"), 200)
    cwd = bounded_text(header.get("cwd"), _TEXT_LIMIT)
    if native_id is None or not native_id.isprintable() or native_id != native_id.strip():
        return None
    if cwd is None or not cwd.startswith("/"):
        return None  # pi records process.cwd(), always absolute
    created = parse_timestamp(header.get("timestamp"))
    # Line 1 is the header; later `session` lines are re-appended duplicates, and
    # no field reads one.
    body = range(1, len(head.spans))
    if sample.whole:
        # Every line is decoded: the count takes every message, and a line that does
        # not parse (cut, or glued to the next one after a crash) must not count.
        entries = head.every_entry(1)
        newest_first = entries[::-1]
        prompts: Iterable[dict[str, Any]] = entries
        older = range(0)  # the head is the tail
    else:
        if tail_region is not head_region:
            tail = _Lines(tail_region)
            recent = range(len(tail.spans))
        else:  # nothing read past the head (the file shrank): the head is the tail too
            tail, recent = head, body
        newest_first = list(tail.entries(recent, _RECENT))[::-1]
        prompts = head.entries(body, _PROMPTS)
        older = body[::-1]

    named, title = _named(newest_first)
    if not named:
        named, title = _named(head.entries(older, _NAMES))
    if title is None:
        title = next((t for t in map(_user_text, prompts) if t is not None), None)
    model = (
        next((m for m in map(_model, newest_first) if m is not None), None)
        or next((m for m in map(_model, head.entries(older, _MODELS)) if m is not None), None)
        or _model({"type": "model_change", "provider": header.get("provider"),
                   "modelId": header.get("modelId")})
    )
    stamps, count = _messages(newest_first)
    parent = header.get("parentSession")
    if parent is None:
        parent = header.get("branchedFrom")  # before pi 0.31
    return HarnessSession(
        harness=_PI, native_id=native_id, updated_at=_updated(sample, stamps, created),
        title=title, cwd=cwd, created_at=created, model=model,
        message_count=count if sample.whole else None,
        parent_id=parent_from(parent),
    )


# -- the capability -------------------------------------------------------------------------


def _accept_file(native_id: str | None) -> Callable[[str], bool]:
    def accept(name: str) -> bool:
        if name.startswith(".") or not name.endswith(".jsonl"):
            return False
        if native_id is None:
            return True
        # Narrow a re-find by the id in the name; a file named otherwise is still read.
        match = _NAMED_BY_ID.search(name)
        return match is None or match.group(1) == native_id

    return accept


def _pi_dir(level: int, name: str) -> bool:
    return pi_dir_name(name)


def _candidates(
    context: SessionsContext, roots: tuple[SessionRoot, ...], witness: Witness
) -> tuple[list[Candidate], bool]:
    accept_file = _accept_file(context.native_id)
    accept_dir: Callable[[int, str], bool] = _pi_dir
    if context.native_id is None:  # on a re-find the scopes say where the caller is, no more
        accept_dir = project_dir_filter(context.scopes) or _pi_dir
    found: dict[tuple[int, int], Candidate] = {}
    cut = False
    for root in roots:
        walked, root_cut = context.files.walk(root.path, depth=1 if root.nested else 0,
                                              accept_file=accept_file, accept_dir=accept_dir,
                                              witness=witness)
        cut = cut or root_cut
        for candidate in walked:
            # Two roots may overlap (a session dir inside the default root): one file, one session.
            found.setdefault((candidate.stat.st_dev, candidate.stat.st_ino), candidate)
    return list(found.values()), cut


class PiSessions:
    """Pi's session files, from every root clanker can know of."""

    # Verified 2026-11-30 with pi 0.73.1: `pi --session <path> -p ...` from
    # another directory exits 1 with "Stored session working directory does
    # not exist" when the recorded cwd is gone (a bare id offers a fork on
    # stdin instead). Clanker refuses and asks for the directory back.
    resumes_without_original_directory = False

    def store_roots(self, environ: Mapping[str, str], files: HostFiles) -> tuple[Path, ...]:
        return tuple(root.path for root in session_roots(environ, files))

    async def discover(self, context: SessionsContext) -> SessionScan:
        return await context.offload(lambda: self._discover(context))

    def _discover(self, context: SessionsContext) -> SessionScan:
        roots = session_roots(context.environ, context.files)

        def scan(witness: Witness) -> SessionScan:
            candidates, cut = _candidates(context, roots, witness)
            return scan_files(context, candidates, summarize, cut=cut,
                              head_bytes=HEAD_BYTES, tail_bytes=TAIL_BYTES, witness=witness)

        return context.remember(roots, scan)
