"""Oh My Pi's history: JSON Lines session files, read at their head and tail.

Verified against omp 18.2.3 (docs/harnesses/omp.md, "Sessions"). Layout::

    <sessions dir>/<project dir>/<timestamp>_<uuid>.jsonl     (managed)
    <session dir>/<timestamp>_<uuid>.jsonl                    (explicit, flat)

Line 1 is a fixed 256-byte title slot ``{"type":"title","v":1,"title",...}``
that omp rewrites in place; line 2 is the header ``{"type":"session","id",
"timestamp","cwd"[,"parentSession"]}``. Files written by pi or by older omp
have no slot: their header is line 1. The project directory name only
pre-filters: it is not reversible, so a session belongs to its header's cwd.
"""

from __future__ import annotations

import json
import posixpath
import re
import sys
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
    "OmpSessions",
    "PiPlaces",
    "ProjectDirs",
    "SessionRoot",
    "agent_dir",
    "encode_cwd",
    "parent_from",
    "pi_places",
    "profile_name",
    "project_dir_filter",
    "session_roots",
    "sessions_dir",
    "summarize",
]

_OMP: Final = HarnessId("omp")

# The slot is 256 bytes; the header after it can carry a long copied `title`,
# `additionalDirectories` and `previousSessionFiles` (no cap), and the first
# user message (the fallback title) is normally line 5. 64 KiB holds them all
# in practice; a header larger than that makes the file a counted skip.
HEAD_BYTES: Final = 64 * 1024
# The tail gives the newest message times and the model. omp caps every
# persisted string at 500 000 characters and moves images to a blob store, but
# its tools cut output at 50 KB: 128 KiB normally holds the lines after one
# tool result. When a giant line fills it, the file's mtime stands in.
TAIL_BYTES: Final = 128 * 1024
_TEXT_LIMIT: Final = 4096
_UUID: Final = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# omp names files `<ISO timestamp>_<session id>.jsonl`; a moved file keeps its
# name and `--resume <new path>` creates any name.
_NAMED_BY_ID: Final = re.compile(rf"_({_UUID})\.jsonl\Z")
_STEM_ID: Final = re.compile(rf"(?:\A|_)({_UUID})\Z")
_PROFILE: Final = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_RESERVED: Final = re.compile(r"(?:CON|PRN|AUX|NUL|COM[0-9]|LPT[0-9])(?:\..*)?", re.IGNORECASE)
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
# A plain `timestamp` string among an opening's keys: within an opening (every token
# matched whole) a `"timestamp"` after `{`, `,` or a space and before `:` is a key of
# the entry itself.
_ENTRY_TIME: Final = re.compile(rb'[{,]\s*"timestamp"\s*:\s*"([^"\\]*)"')


@frozen
class SessionRoot:
    """A directory of session files: ``nested`` ones hold one directory per project."""

    path: Path
    nested: bool


# -- where the store is ---------------------------------------------------------------------


def _join(*parts: str) -> str:
    # node's path.join: concatenate with "/" (an absolute later part does not
    # restart the path, unlike os.path.join), then normalize.
    return posixpath.normpath("/".join(part for part in parts if part))


def _absolute(value: str | None) -> str | None:
    # A relative value resolves against the directory omp was started in,
    # which clanker cannot know: it is not guessed.
    if not value or "\x00" in value or not value.startswith("/"):
        return None
    return posixpath.normpath(value)


def _normalize_profile(raw: str | None) -> str | None:
    """omp's ``normalizeProfileName``; ``None`` for the default or an invalid name.

    omp refuses to start with an invalid name, so no session is ever written
    under one; its dir resolver falls back to the default profile.
    """
    name = (raw or "").strip()
    if not name or name == "default" or name in (".", "..") or name.endswith("."):
        return None
    if _PROFILE.fullmatch(name) is None or _RESERVED.fullmatch(name) is not None:
        return None
    return name


def profile_name(environ: Mapping[str, str]) -> str | None:
    """``$OMP_PROFILE`` when defined (even empty: the default), else ``$PI_PROFILE``.

    ``--profile`` is per invocation and invisible here.
    """
    raw = environ["OMP_PROFILE"] if "OMP_PROFILE" in environ else environ.get("PI_PROFILE")
    return _normalize_profile(raw)


def agent_dir(environ: Mapping[str, str]) -> tuple[str, bool] | None:
    """The agent dir and whether it is the profile's default (which XDG may relocate).

    A named profile uses ``~/<cfg>/profiles/<name>/agent`` and ignores
    ``$PI_CODING_AGENT_DIR``; otherwise that variable wins (no ``~`` expansion;
    ignored when it equals the agent dir of a ``$PI_PROFILE`` that
    ``$OMP_PROFILE`` overrode), else ``~/<cfg>/agent``, ``<cfg>`` being
    ``$PI_CONFIG_DIR`` or ``.omp``.
    """
    home = home_directory(environ)
    if home is None:
        return None
    config = environ.get("PI_CONFIG_DIR") or ".omp"
    profile = profile_name(environ)
    root = _join(home, config, "profiles", profile) if profile else _join(home, config)
    default = _join(root, "agent")
    override = None if profile else environ.get("PI_CODING_AGENT_DIR") or None
    bypassed = _normalize_profile(environ.get("PI_PROFILE"))
    if override and bypassed and override == _join(home, config, "profiles", bypassed, "agent"):
        override = None  # inherited from a parent's profile switch, not the user's choice
    if override is None:
        return default, True
    resolved = _absolute(override)
    if resolved is None:
        return None
    return resolved, resolved == default


def sessions_dir(
    environ: Mapping[str, str], files: HostFiles, *, platform: str = sys.platform
) -> Path | None:
    """Where omp files managed sessions: ``<agent dir>/sessions``, or XDG's.

    On Linux and macOS, when the agent dir is the profile's default and
    ``$XDG_DATA_HOME/omp`` exists (for a named profile:
    ``$XDG_DATA_HOME/omp/profiles/<name>``), sessions live in its ``sessions/``
    (the ``agent/`` level is dropped). omp checks that existence; so does this.
    """
    agent = agent_dir(environ)
    if agent is None:
        return None
    path, is_default = agent
    data_home = _absolute(environ.get("XDG_DATA_HOME"))
    if is_default and data_home is not None and platform in ("linux", "darwin"):
        profile = profile_name(environ)
        app = _join(data_home, "omp", "profiles", profile) if profile else _join(data_home, "omp")
        if files.stat(app) is not None:
            return Path(app) / "sessions"
    return Path(path) / "sessions"


def session_roots(
    environ: Mapping[str, str], files: HostFiles, *, platform: str = sys.platform
) -> tuple[SessionRoot, ...]:
    """The managed sessions dir and ``$PI_CODING_AGENT_SESSION_DIR`` (flat, absolute only).

    The explicit dir is where omp writes new sessions (``--session-dir`` is
    per invocation and invisible here); sessions written before stay in the
    managed dir, so history reads both.
    """
    roots: list[SessionRoot] = []
    managed = sessions_dir(environ, files, platform=platform)
    if managed is not None:
        roots.append(SessionRoot(managed, nested=True))
    explicit = _absolute(environ.get("PI_CODING_AGENT_SESSION_DIR"))
    if explicit is not None and Path(explicit) != managed:
        roots.append(SessionRoot(Path(explicit), nested=False))
    return tuple(roots)


# -- beside Pi -------------------------------------------------------------------------------
#
# A Pi user's PI_CODING_AGENT_DIR moves omp's store into Pi's, and both read
# PI_CODING_AGENT_SESSION_DIR: the two harnesses may write into one directory. A file
# belongs to one of them, by its own format: omp 18 opens every file with the title
# slot, Pi never writes one. A file without a slot is Pi's where Pi reads it (a
# directory Pi lists files from) and omp's elsewhere (older omp wrote no slot). Pi's
# places follow Pi's verified rules (docs/harnesses/pi.md, "Where the store is").

_PI_SETTINGS_BYTES: Final = 1024 * 1024


def _pi_path(value: str | None, environ: Mapping[str, str]) -> str | None:
    """Pi's reading of a directory setting: ``~`` and ``~/`` expanded, absolute only."""
    if not value:
        return None
    if value == "~" or value.startswith("~/"):
        home = home_directory(environ)
        if home is None:
            return None
        value = home + value[1:]
    return _absolute(value)


def _pi_dir_name(name: str) -> bool:
    """Pi's project directory names: ``--<encoded cwd>--``."""
    return len(name) >= 4 and name.startswith("--") and name.endswith("--")


@frozen
class PiPlaces:
    """The directories Pi lists session files from, resolved through links.

    ``nested``: Pi's default root, whose ``--<cwd>--`` children hold its files;
    ``flat``: the directories it reads directly (``$PI_CODING_AGENT_SESSION_DIR``,
    ``sessionDir`` in its global settings).
    """

    nested: str | None
    flat: frozenset[str]

    def holds(self, directory: str, root: SessionRoot, real_root: str) -> bool:
        """Whether Pi reads files in ``directory`` (of the walk of ``root``, which
        resolves to ``real_root``): the walk follows no link below its root."""
        if not root.nested:
            return real_root in self.flat
        name = directory.rpartition("/")[2]
        real = real_root.rstrip("/") + "/" + name
        return real in self.flat or (real_root == self.nested and _pi_dir_name(name))

    def reading(self, real_roots: Iterable[str]) -> str:
        """What a file's summary depends on beside the file, as text (kept with the cache)."""
        return json.dumps([self.nested, sorted(self.flat), list(real_roots)])


def pi_places(environ: Mapping[str, str], files: HostFiles) -> PiPlaces:
    """Where Pi reads session files, from the same environment (one bounded read of
    Pi's global ``settings.json``, as Pi's own listing makes)."""
    configured = environ.get("PI_CODING_AGENT_DIR")
    if configured:
        agent = _pi_path(configured, environ)
    else:
        home = home_directory(environ)
        agent = None if home is None else _join(home, ".pi", "agent")
    flat = {_pi_path(environ.get("PI_CODING_AGENT_SESSION_DIR"), environ)}
    if agent is not None:
        data = files.read_small(_join(agent, "settings.json"), _PI_SETTINGS_BYTES)
        try:
            settings = json.loads(data) if data is not None else None
        except (ValueError, RecursionError):
            settings = None
        value = settings.get("sessionDir") if isinstance(settings, dict) else None
        flat.add(_pi_path(value, environ) if isinstance(value, str) else None)
    return PiPlaces(
        nested=None if agent is None else files.realpath(_join(agent, "sessions")),
        flat=frozenset(files.realpath(path) for path in flat if path is not None),
    )


def encode_cwd(relative: str) -> str:
    """omp's separator rule: every ``/``, ``\\`` and ``:`` becomes ``-``; nothing else changes."""
    return re.sub(r"[/\\:]", "-", relative)


def _contains(outer: str, inner: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


@frozen
class ProjectDirs:
    """A project-directory filter that is also a value: a remembered listing is keyed by it."""

    exact: frozenset[str]
    prefixes: tuple[str, ...]

    def __call__(self, level: int, name: str) -> bool:
        return not name.startswith("-") or name in self.exact or name.startswith(self.prefixes)


def project_dir_filter(
    scopes: Iterable[str], environ: Mapping[str, str], files: HostFiles
) -> ProjectDirs | None:
    """Which project directories can hold sessions of ``scopes`` (``None``: all).

    omp names a project dir from its canonical cwd: ``-<rel>`` under the
    (canonical) home, ``-tmp-<rel>`` under the temp root, else pi's
    ``--<abs>--``. Un-migrated stores also hold pi-style names and the hashed
    ``<scope>-<name>-<sha256>`` names of omp 17.2.5-17.2.8, so every name not
    starting with ``-`` is kept, and so is everything when a scope contains the
    home or the temp root (their sessions carry relative names). Siblings that
    share a prefix are kept too; the service drops them by their cwd.
    """
    home = home_directory(environ)
    homes = {h for h in (home, home and files.realpath(home)) if h and h.startswith("/")}
    # os.tmpdir(): $TMPDIR, $TMP, $TEMP, else /tmp. Every candidate counts.
    temp_values = (environ.get("TMPDIR"), environ.get("TMP"), environ.get("TEMP"), "/tmp")  # noqa: S108
    temps = {files.realpath(t.rstrip("/") or "/") for t in temp_values if t and t.startswith("/")}
    temps |= {t.rstrip("/") or "/" for t in temp_values if t and t.startswith("/")}
    exact: set[str] = set()
    prefixes: set[str] = set()

    def add(name: str) -> None:
        exact.add(name)
        prefixes.add(name if name.endswith("-") else name + "-")

    for given in scopes:
        if not given.startswith("/"):
            return None
        scope = posixpath.normpath(given)
        if any(_contains(scope, base) for base in homes | temps):
            return None
        # The same directory spelled through each spelling of the home: older
        # omp named directories from the home as $HOME spells it.
        spellings = {scope}
        for base in homes:
            if _contains(base, scope):
                rest = scope[len(base.rstrip("/")):]
                spellings |= {other.rstrip("/") + rest for other in homes}
        for spelling in spellings:
            add(f"--{encode_cwd(spelling[1:])}--")
            for base, prefix in [(h, "-") for h in homes] + [(t, "-tmp") for t in temps]:
                if _contains(base, spelling):
                    relative = encode_cwd(spelling[len(base.rstrip("/")) + 1:])
                    if not relative:
                        add(prefix)
                    else:
                        add(prefix + relative if prefix.endswith("-") else f"{prefix}-{relative}")
    if not exact:
        return None
    return ProjectDirs(frozenset(exact), tuple(sorted(prefixes)))


# -- one file -------------------------------------------------------------------------------
#
# A listing reads thousands of files, so a file is not decoded line by line: most of a
# large one is tool output that no field uses. Lines are found by position; a line is
# decoded (at most once) only when it can change a field:
#
# - a short line is passed over when it spells none of the quoted tokens that such a
#   line must contain (``"message"``, ``"model_change"``, ...). JSON can write a letter
#   only as itself or as a ``\u00XX`` escape, so a line with such an escape, and one
#   that does not start with ``{`` (a BOM, UTF-16, leading space), is always decoded;
# - a long line is passed over when its opening, read token by token, names an entry
#   type that no field uses. A long message of a role no model comes from (tool output)
#   can only move the last activity: it is decoded only when the entry time its opening
#   names is newer than every time already decoded. omp writes lines with
#   JSON.stringify (``type`` first, no key twice): only a line that repeats a key of its
#   opening could be judged by the wrong one.
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


# A tail: every message (the last activity), model changes.
_RECENT: Final = _Want((b'"message"', b'"model_change"'),
                       frozenset({b"message", b"model_change"}))
_PROMPTS: Final = _Want((b'"user"',), frozenset({b"message"}), frozenset({b"user"}))
_MODEL_CHANGES: Final = _Want((b'"model_change"',), frozenset({b"model_change"}))
_ASSISTANTS: Final = _Want((b'"assistant"',), frozenset({b"message"}),
                           frozenset({b"assistant"}))


class _Lines:
    """The complete, non-blank lines of a region, decoded on demand, each once."""

    def __init__(self, region: LineRegion) -> None:
        self.region = region
        self.buf = region.buf
        self.spans = region.spans()

    def entry(self, index: int) -> dict[str, Any] | None:
        return self.region.object_at(self.spans[index])

    def every_entry(self, first: int) -> list[dict[str, Any]]:
        """The entries from line ``first`` on, every line decoded, in order."""
        buf = self.buf
        decoded = (decode_object(buf[start:end]) for start, end in self.spans[first:])
        return [entry for entry in decoded if entry is not None]

    def opening(self, index: int) -> re.Match[bytes] | None:
        """How a long line opens; ``None`` for a short one or an opening not read."""
        start, end = self.spans[index]
        if end - start < _LONG_LINE:
            return None
        return _OPENING.match(self.buf, start, min(end, start + _OPENING_BYTES))

    def may_matter(self, index: int, want: _Want) -> bool:
        span = self.spans[index]
        start, end = span
        if end - start >= _LONG_LINE:
            opening = self.opening(index)
            if opening is None:
                return True
            kind, role = opening.group(1, 2)
            if kind not in want.kinds:
                return False
            return kind != b"message" or want.roles is None or role is None or role in want.roles
        return self.region.may_hold(span, want.tokens)

    def entries(self, indices: Iterable[int], want: _Want) -> Iterator[dict[str, Any]]:
        """The entries among ``indices`` that can matter to ``want``, in that order."""
        for index in indices:
            if self.may_matter(index, want):
                entry = self.entry(index)
                if entry is not None:
                    yield entry


def _claimed_time(lines: _Lines, opening: re.Match[bytes]) -> datetime | None:
    """The entry time an opening names (every key it reads before ``message`` is top-level)."""
    found = _ENTRY_TIME.search(lines.buf, opening.start(), opening.end())
    if found is None:
        return None
    try:
        return parse_timestamp(found.group(1).decode("utf-8"))
    except UnicodeDecodeError:
        return None


def _message(entry: dict[str, Any]) -> dict[str, Any] | None:
    if entry.get("type") != "message":
        return None
    message = entry.get("message")
    return message if isinstance(message, dict) else None


def _user_text(entry: dict[str, Any]) -> str | None:
    """The text of a user message: ``content`` as a string, or its text blocks joined."""
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


def _activity(entry: dict[str, Any]) -> datetime | None:
    """When a message entry was written (``session_exit`` and renames do not count)."""
    message = _message(entry)
    if message is None:
        return None
    return parse_timestamp(entry.get("timestamp")) or parse_timestamp(message.get("timestamp"))


def _default_model(entry: dict[str, Any]) -> str | None:
    """A ``model_change`` of the default role (absent role = default); others are temporary."""
    if entry.get("type") != "model_change" or entry.get("role", "default") != "default":
        return None
    return bounded_text(entry.get("model"), 200)


def _assistant_model(entry: dict[str, Any]) -> str | None:
    message = _message(entry)
    if message is None or message.get("role") != "assistant":
        return None
    return _provider_model(message.get("provider"), message.get("model"))


def _provider_model(provider: object, model: object) -> str | None:
    model_text, provider_text = bounded_text(model, 200), bounded_text(provider, 200)
    if model_text is None:
        return None
    return model_text if provider_text is None else f"{provider_text}/{model_text}"


def _newest(pick: Callable[[dict[str, Any]], str | None],
            *groups: Iterable[dict[str, Any]]) -> str | None:
    for group in groups:
        for entry in group:
            value = pick(entry)
            if value is not None:
                return value
    return None


def parent_from(value: object) -> str | None:
    """The parent's id from ``parentSession``: an id (``--fork``) or a path (``/branch``).

    A value with a separator or a ``.jsonl`` ending is a path; its id is the
    UUID the file name ends with (none when the name carries no id).
    """
    text = bounded_text(value, _TEXT_LIMIT)
    if text is None:
        return None
    if "/" not in text and "\\" not in text and not text.endswith(".jsonl"):
        return text if text.isprintable() and text == text.strip() else None
    name = re.split(r"[/\\]", text)[-1]
    stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
    match = _STEM_ID.search(stem)
    return match.group(1).lower() if match else None


def _recent(tail: _Lines, indices: Iterable[int]) -> tuple[list[dict[str, Any]], list[datetime]]:
    """The tail's entries that can name a model, newest first, and its messages' times."""
    entries: list[dict[str, Any]] = []
    times_only: list[tuple[int, re.Match[bytes]]] = []
    for index in indices:
        opening = tail.opening(index)
        if (opening is not None and opening.group(1) == b"message"
                and opening.group(2) not in (None, b"assistant")):
            times_only.append((index, opening))  # names no model: only its time can count
        elif tail.may_matter(index, _RECENT):
            entry = tail.entry(index)
            if entry is not None:
                entries.append(entry)
    stamps = [t for t in map(_activity, entries) if t is not None]
    latest = max(stamps, default=None)
    for index, opening in reversed(times_only):
        claimed = _claimed_time(tail, opening)
        if claimed is not None and latest is not None and claimed <= latest:
            continue  # whatever the line holds, it moves no time
        entry = tail.entry(index)
        stamp = None if entry is None else _activity(entry)
        if stamp is not None:
            stamps.append(stamp)
            latest = stamp if latest is None else max(latest, stamp)
    return entries[::-1], stamps


def _updated(sample: FileSample, stamps: list[datetime], created: datetime | None) -> datetime:
    if stamps:
        return max([*stamps, created]) if created is not None else max(stamps)
    if sample.whole:
        return created or sample.mtime
    return sample.mtime  # the tail was one giant line: the last write is the best guess


def _count(body: list[dict[str, Any]]) -> int:
    """``message`` entries, each id once."""
    seen: set[str] = set()
    count = 0
    for entry in body:
        if _message(entry) is None:
            continue
        entry_id = entry.get("id")
        if isinstance(entry_id, str):
            if entry_id in seen:
                continue
            seen.add(entry_id)
        count += 1
    return count


def _header(head: _Lines) -> tuple[dict[str, Any], dict[str, Any] | None, int] | None:
    """The header, the title slot before it (if any), and how many lines they take."""
    first = head.entry(0) if head.spans else None
    if first is not None and first.get("type") == "session":
        return first, None, 1  # no slot: written by pi or an older omp
    second = head.entry(1) if len(head.spans) > 1 else None
    if second is not None and second.get("type") == "session":
        if first is None:
            return second, None, 2  # a slot caught mid-rewrite: as if there were none
        if first.get("type") == "title":
            return second, first, 2
    return None


def summarize(sample: FileSample) -> HarnessSession | None:
    """Summarize one omp session file; ``None`` when it is not one (a counted skip).

    - Line 1 a title slot: the header must be line 2. Line 1 a header: no slot
      (pi-format or older omp). Line 1 unreadable but line 2 a header: a slot
      caught mid-rewrite, treated as no slot.
    - title: a non-empty slot title; an empty slot means "untitled" (omp then
      ignores a header ``title`` too), so the first user message; without a
      slot, the header ``title``, else the first user message.
    - updated: the newest ``message`` entry in the tail, never before the
      header's time (a fork copies its parent's messages); with none in reach,
      the header time for a file read whole, the file's mtime for a larger one.
      ``session_exit`` and ``title_change`` entries are not activity.
    - model: the newest ``model_change`` of the default role, else the newest
      assistant message's ``provider/model``, else a version-1 header's model.
    - message_count: ``message`` entries, de-duplicated by id, for a file read
      whole only (``None`` otherwise).
    - parent_id: ``parentSession`` as an id, or the id in a parent path's name.
    """
    found = _summarize(sample, pi_reads=False)
    assert not isinstance(found, NoSession)
    return found


def _summarize(sample: FileSample, *, pi_reads: bool) -> HarnessSession | NoSession | None:
    """:func:`summarize`, for a file in a directory Pi reads when ``pi_reads``: one
    without a title slot is then Pi's (:data:`~clanker.stores.FOREIGN`)."""
    head_region, tail_region = head_and_tail(sample)
    head = _Lines(head_region)
    found = _header(head)
    if found is None:
        return None
    header, slot, start = found
    if pi_reads and start == 1:
        return FOREIGN  # Pi's format, where Pi reads: Pi lists it
    native_id = bounded_text(header.get("id"), 200)
    cwd = bounded_text(header.get("cwd"), _TEXT_LIMIT)
    if native_id is None or not native_id.isprintable() or native_id != native_id.strip():
        return None
    if cwd is None or not cwd.startswith("/"):
        return None  # omp records an absolute cwd
    created = parse_timestamp(header.get("timestamp"))
    body = range(start, len(head.spans))
    if sample.whole:
        entries = head.every_entry(start)
        newest_first = entries[::-1]
        stamps = [t for t in map(_activity, entries) if t is not None]
        prompts: Iterable[dict[str, Any]] = entries
        older = range(0)  # the head is the tail
        count: int | None = _count(entries)
    else:
        # Nothing read past the head (the file shrank): the head is the tail too; its
        # slot and header are no activity and name no model.
        tail = head if tail_region is head_region else _Lines(tail_region)
        newest_first, stamps = _recent(tail, body if tail is head else range(len(tail.spans)))
        prompts = head.entries(body, _PROMPTS)
        older = body[::-1]
        count = None  # a count of part is no count

    title = clean_text((header if slot is None else slot).get("title"))
    if title is None:
        title = next((t for t in map(_user_text, prompts) if t is not None), None)
    model = (
        _newest(_default_model, newest_first, head.entries(older, _MODEL_CHANGES))
        or _newest(_assistant_model, newest_first, head.entries(older, _ASSISTANTS))
        or _provider_model(header.get("provider"), header.get("modelId"))
    )
    return HarnessSession(
        harness=_OMP, native_id=native_id, updated_at=_updated(sample, stamps, created),
        title=title, cwd=cwd, created_at=created, model=model,
        message_count=count, parent_id=parent_from(header.get("parentSession")),
    )


# -- the capability -------------------------------------------------------------------------


def _accept_file(native_id: str | None) -> Callable[[str], bool]:
    def accept(name: str) -> bool:
        # Dot files are omp's locks (`.<name>.jsonl.lock`) and atomic-rewrite
        # temps (`.<name>.jsonl.<n>.tmp`); `<name>.jsonl.<n>.bak` and the
        # archive's `.jsonl.gz` do not end in `.jsonl`.
        if name.startswith(".") or not name.endswith(".jsonl"):
            return False
        if native_id is None:
            return True
        # Narrow a re-find by the id in the name; a file named otherwise is still read.
        match = _NAMED_BY_ID.search(name)
        return match is None or match.group(1) == native_id

    return accept


def _every_dir(level: int, name: str) -> bool:
    return True


def _candidates(
    context: SessionsContext,
    roots: tuple[SessionRoot, ...],
    accept_dir: Callable[[int, str], bool],
    witness: Witness,
) -> tuple[list[Candidate], bool]:
    accept_file = _accept_file(context.native_id)
    found: dict[tuple[int, int], Candidate] = {}
    cut = False
    for root in roots:
        # Exactly one level of project dirs (flat: none). Sub-agent transcripts
        # live one level deeper, in a session's artifacts dir, and are not
        # sessions of their own; the gc archive lies outside the sessions dir.
        walked, root_cut = context.files.walk(
            root.path, depth=1 if root.nested else 0, accept_file=accept_file,
            accept_dir=accept_dir, witness=witness,
        )
        cut = cut or root_cut
        for candidate in walked:
            # A session dir inside the managed one would list a file twice.
            found.setdefault((candidate.stat.st_dev, candidate.stat.st_ino), candidate)
    return list(found.values()), cut


class OmpSessions:
    """omp's session files, from the managed sessions dir and an explicit session dir."""

    # Verified 2026-11-30 with omp 18.2.3: `omp --resume <path> -p ...` from
    # another directory loads a session whose recorded cwd is gone and appends
    # to the same file (by id it refuses). Clanker resumes and forks by the
    # store path it re-found (launch.session_argument), so True holds for
    # clanker's argv only.
    resumes_without_original_directory = True

    def store_roots(self, environ: Mapping[str, str], files: HostFiles) -> tuple[Path, ...]:
        return tuple(root.path for root in session_roots(environ, files))

    async def discover(self, context: SessionsContext) -> SessionScan:
        return await context.offload(lambda: self._discover(context))

    def _discover(self, context: SessionsContext) -> SessionScan:
        roots = session_roots(context.environ, context.files)
        # The filter resolves the home and the temp root through links, so it is
        # part of what a remembered answer is keyed by.
        accept_dir: Callable[[int, str], bool] = _every_dir
        if context.native_id is None:  # on a re-find the scopes say where the caller is, no more
            accept_dir = (project_dir_filter(context.scopes, context.environ, context.files)
                          or _every_dir)

        # Which of omp's directories Pi reads too (a shared PI_CODING_AGENT_DIR, say):
        # there a file without a title slot is Pi's. It is part of how each file is
        # read, so a summary kept under other places is not reused.
        places = pi_places(context.environ, context.files)
        real_roots = tuple(context.files.realpath(root.path) for root in roots)
        beside = {str(root.path): (root, real) for root, real in zip(roots, real_roots,
                                                                       strict=True)}
        shared: dict[str, bool] = {}

        def pi_reads(path: str) -> bool:
            directory = path.rpartition("/")[0] or "/"
            known = shared.get(directory)
            if known is None:
                top = directory if directory in beside else directory.rpartition("/")[0] or "/"
                root, real = beside[top]
                known = shared[directory] = places.holds(directory, root, real)
            return known

        def summarize_here(sample: FileSample) -> HarnessSession | NoSession | None:
            return _summarize(sample, pi_reads=pi_reads(str(sample.path)))

        def scan(witness: Witness) -> SessionScan:
            candidates, cut = _candidates(context, roots, accept_dir, witness)
            return scan_files(context, candidates, summarize_here, cut=cut,
                              head_bytes=HEAD_BYTES, tail_bytes=TAIL_BYTES, witness=witness,
                              reading=places.reading(real_roots))

        return context.remember((roots, accept_dir, places, real_roots), scan)
