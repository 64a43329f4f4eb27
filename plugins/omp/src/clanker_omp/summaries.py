"""How Oh My Pi's JSON Lines session files become sessions (where they are is
:mod:`clanker_omp.sessions`'s), read at their head and tail.

Verified against omp 18.2.3 (docs/harnesses/omp.md, "Sessions"). Line 1 is a fixed
256-byte title slot ``{"type":"title","v":1,"title",...}`` that omp rewrites in place;
line 2 is the header ``{"type":"session","id","timestamp","cwd"[,"parentSession"]}``.
Files written by pi or by older omp have no slot: their header is line 1. The project
directory name only pre-filters: it is not reversible, so a session belongs to its
header's cwd.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from attrs import frozen

from clanker import pistore
from clanker.ids import HarnessId
from clanker.sessions.capability import HarnessSession, SessionScan, SessionsContext
from clanker.stores import (
    FOREIGN,
    FileSample,
    HostFiles,
    LineRegion,
    NoSession,
    Witness,
    bounded_text,
    clean_text,
    head_and_tail,
    home_directory,
    parse_timestamp,
    scan_files,
)
from clanker_omp.sessions import SessionRoot, _join

HEAD_BYTES: Final = pistore.HEAD_BYTES
TAIL_BYTES: Final = pistore.TAIL_BYTES

__all__ = [
    "HEAD_BYTES",
    "TAIL_BYTES",
    "BesidePi",
    "PiPlaces",
    "ProjectDirs",
    "encode_cwd",
    "parent_from",
    "pi_places",
    "project_dir_filter",
    "scan",
    "summarize",
]

_OMP: Final = HarnessId("omp")

# clanker.pistore's bounds hold the 256-byte title slot, the header after it (which can
# carry a long copied `title`, `additionalDirectories` and `previousSessionFiles`: a
# header past HEAD_BYTES makes the file a counted skip) and the lines after one tool
# result (omp caps every persisted string at 500 000 characters and moves images to a
# blob store; its tools cut output at 50 KB).

# A plain `timestamp` string among an opening's keys: within an opening (every token
# matched whole) a `"timestamp"` after `{`, `,` or a space and before `:` is a key of
# the entry itself.
_ENTRY_TIME: Final = re.compile(rb'[{,]\s*"timestamp"\s*:\s*"([^"\\]*)"')


# -- beside Pi -------------------------------------------------------------------------------
#
# A Pi user's PI_CODING_AGENT_DIR moves omp's store into Pi's, and both read
# PI_CODING_AGENT_SESSION_DIR: the two harnesses may write into one directory. A file
# belongs to one of them, by its own format: omp 18 opens every file with the title
# slot, Pi never writes one. A file without a slot is Pi's where Pi reads it (a
# directory Pi lists files from) and omp's elsewhere (older omp wrote no slot). Pi's
# places follow Pi's verified rules (docs/harnesses/pi.md, "Where the store is"), which
# clanker.piplaces holds. They are found only to scan, so they live with the reader:
# knowing where omp's store is defines no class for them.

_PI_DEFAULT_AGENT_DIR: Final = ".pi/agent"


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
        return real in self.flat or (real_root == self.nested and pistore.wrapped_dir_name(name))

    def reading(self, real_roots: Iterable[str]) -> str:
        """What a file's summary depends on beside the file, as text (kept with the cache)."""
        return json.dumps([self.nested, sorted(self.flat), list(real_roots)])


def pi_places(environ: Mapping[str, str], files: HostFiles) -> PiPlaces:
    """Where Pi reads session files, from the same environment (one bounded read of
    Pi's global ``settings.json``, as Pi's own listing makes)."""
    agent = pistore.agent_dir(environ, "PI_CODING_AGENT_DIR", _PI_DEFAULT_AGENT_DIR)
    flat = {pistore.tilde_path(environ.get("PI_CODING_AGENT_SESSION_DIR"), environ)}
    if agent is not None:
        flat.add(pistore.settings_session_dir(agent, environ, files))
    return PiPlaces(
        nested=None if agent is None else files.realpath(_join(agent, "sessions")),
        flat=frozenset(files.realpath(path) for path in flat if path is not None),
    )


# -- project directories ---------------------------------------------------------------------


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
# How lines are chosen is clanker.pistore's (Lines, Want). One addition: a long message of
# a role no model comes from (tool output) can only move the last activity, so it is
# decoded only when the entry time its opening names is newer than every time already
# decoded.

# A tail: every message (the last activity), model changes.
_RECENT: Final = pistore.Want((b'"message"', b'"model_change"'),
                               frozenset({b"message", b"model_change"}))
_PROMPTS: Final = pistore.Want((b'"user"',), frozenset({b"message"}), frozenset({b"user"}))
_MODEL_CHANGES: Final = pistore.Want((b'"model_change"',), frozenset({b"model_change"}))
_ASSISTANTS: Final = pistore.Want((b'"assistant"',), frozenset({b"message"}),
                                   frozenset({b"assistant"}))


def _claimed_time(lines: pistore.Lines, opening: re.Match[bytes]) -> datetime | None:
    """The entry time an opening names (every key it reads before ``message`` is top-level)."""
    found = _ENTRY_TIME.search(lines.buf, opening.start(), opening.end())
    if found is None:
        return None
    try:
        return parse_timestamp(found.group(1).decode("utf-8"))
    except UnicodeDecodeError:
        return None


def _activity(entry: dict[str, Any]) -> datetime | None:
    """When a message entry was written (``session_exit`` and renames do not count)."""
    found = pistore.message(entry)
    if found is None:
        return None
    return parse_timestamp(entry.get("timestamp")) or parse_timestamp(found.get("timestamp"))


def _default_model(entry: dict[str, Any]) -> str | None:
    """A ``model_change`` of the default role (absent role = default); others are temporary."""
    if entry.get("type") != "model_change" or entry.get("role", "default") != "default":
        return None
    return bounded_text(entry.get("model"), 200)


def _assistant_model(entry: dict[str, Any]) -> str | None:
    found = pistore.message(entry)
    if found is None or found.get("role") != "assistant":
        return None
    return pistore.provider_model(found.get("provider"), found.get("model"))


def _newest(pick: Callable[[dict[str, Any]], str | None],
            *groups: Iterable[dict[str, Any]]) -> str | None:
    for group in groups:
        for entry in group:
            value = pick(entry)
            if value is not None:
                return value
    return None


def parent_from(value: object) -> str | None:
    """The parent's id from ``parentSession``: an id (``--fork``) or a path (``/branch``)."""
    return pistore.parent_from(value, bare_id=True)


def _recent(
    tail: pistore.Lines, indices: Iterable[int]
) -> tuple[list[dict[str, Any]], list[datetime]]:
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


def _header(head: pistore.Lines) -> tuple[dict[str, Any], dict[str, Any] | None, int] | None:
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


def _opens_with_header(head: LineRegion) -> bool:
    """Whether the first line is a header, decided from that line alone (most files where
    Pi reads are Pi's): a header there is _header's "no slot" (its first line is the
    first of head.spans)."""
    first = head.first()
    opening = None if first is None else head.object_at(first)
    return opening is not None and opening.get("type") == "session"


def _summarize(sample: FileSample, *, pi_reads: bool) -> HarnessSession | NoSession | None:
    """:func:`summarize`, for a file in a directory Pi reads when ``pi_reads``: one
    without a title slot is then Pi's (:data:`~clanker.stores.FOREIGN`)."""
    head_region, tail_region = head_and_tail(sample)
    if pi_reads and _opens_with_header(head_region):
        return FOREIGN  # Pi's format, where Pi reads: Pi lists it
    head = pistore.Lines(head_region)
    found = _header(head)
    if found is None:
        return None
    header, slot, start = found  # start is 2 where Pi reads: line 1 was no header
    place = pistore.header_place(header)
    if place is None:
        return None
    native_id, cwd = place
    created = parse_timestamp(header.get("timestamp"))
    older: pistore.Lines | None = None  # the head's older lines, unless read already
    if sample.whole:
        entries = head.every_entry(start)
        newest_first = entries[::-1]
        stamps = [t for t in map(_activity, entries) if t is not None]
        prompts: Iterable[dict[str, Any]] = entries
        count: int | None = pistore.count_messages(entries)
    else:
        # Nothing read past the head (the file shrank): the head is the tail too; its
        # slot and header are no activity and name no model.
        tail = head if tail_region is head_region else pistore.Lines(tail_region)
        body = range(start, len(head.spans))
        newest_first, stamps = _recent(tail, body if tail is head else range(len(tail.spans)))
        prompts = head.entries(_PROMPTS, skip=start)
        older = head
        count = None  # a count of part is no count

    title = clean_text((header if slot is None else slot).get("title"))
    if title is None:
        title = next((t for t in map(pistore.user_text, prompts) if t is not None), None)
    model = (
        _newest(_default_model, newest_first, pistore.older_entries(older, _MODEL_CHANGES, start))
        or _newest(_assistant_model, newest_first, pistore.older_entries(older, _ASSISTANTS, start))
        or pistore.provider_model(header.get("provider"), header.get("modelId"))
    )
    return HarnessSession(
        harness=_OMP, native_id=native_id, updated_at=pistore.updated(sample, stamps, created),
        title=title, cwd=cwd, created_at=created, model=model,
        message_count=count, parent_id=parent_from(header.get("parentSession")),
    )


# -- the scan -----------------------------------------------------------------------------


def _every_dir(level: int, name: str) -> bool:
    return True


class BesidePi:
    """omp's summarizer for one scan: :func:`_summarize`, told whether Pi reads the
    file's directory (``beside``: each root's path, the root and where it resolves).

    An object of a module's class rather than a closure, so that the summary worker
    (:mod:`clanker.sessions.pool`) can be sent it and summarize omp's files on the
    other core; what it answers depends on the strings it holds, not on the process.
    """

    __slots__ = ("_beside", "_places", "_shared")

    def __init__(self, places: PiPlaces, beside: Mapping[str, tuple[SessionRoot, str]]) -> None:
        self._places = places
        self._beside = dict(beside)
        self._shared: dict[str, bool] = {}  # a directory: whether Pi reads it

    def __reduce__(self) -> tuple[type[BesidePi], tuple[PiPlaces, dict[str, Any]]]:
        return BesidePi, (self._places, self._beside)

    def pi_reads(self, path: str) -> bool:
        directory = path.rpartition("/")[0] or "/"
        known = self._shared.get(directory)
        if known is None:
            beside = self._beside
            top = directory if directory in beside else directory.rpartition("/")[0] or "/"
            root, real = beside[top]
            known = self._shared[directory] = self._places.holds(directory, root, real)
        return known

    def __call__(self, sample: FileSample) -> HarnessSession | NoSession | None:
        return _summarize(sample, pi_reads=self.pi_reads(str(sample.path)))

    def sniff(self, sample: FileSample) -> NoSession | None:
        """:data:`~clanker.stores.FOREIGN` for a Pi-format file where Pi reads, told from
        its first bytes (:data:`~clanker.stores.Sniff`): its whole sample is never read.
        ``None`` when its first line is not in them, or the file may be omp's."""
        if self.pi_reads(str(sample.path)) and _opens_with_header(head_and_tail(sample)[0]):
            return FOREIGN
        return None


def scan(context: SessionsContext, roots: tuple[SessionRoot, ...]) -> SessionScan:
    """The sessions of the files below ``roots``, within ``context``'s bounds."""
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
    summarize_here = BesidePi(places, {str(root.path): (root, real) for root, real
                                       in zip(roots, real_roots, strict=True)})

    def read(witness: Witness) -> SessionScan:
        found, cut = pistore.candidates(context, roots, accept_dir, witness)
        return scan_files(context, found, summarize_here, cut=cut,
                          head_bytes=HEAD_BYTES, tail_bytes=TAIL_BYTES, witness=witness,
                          reading=places.reading(real_roots), sniff=summarize_here.sniff)

    return context.remember((roots, accept_dir, places, real_roots), read)
