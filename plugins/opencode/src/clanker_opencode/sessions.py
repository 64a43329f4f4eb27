"""OpenCode's history, through its own ``opencode session list --format json``.

Verified against opencode-ai 1.18.33 (docs/harnesses/opencode.md, "Sessions").
OpenCode keeps its sessions in a SQLite database whose location and version
it selects itself (``OPENCODE_DB``, release channels, a legacy JSON store);
the spec makes that storage CLI-owned, so clanker never opens it and only
reads what the CLI prints.

The CLI lists the root sessions of **one project**: the one its working
directory resolves to (a git repository, found by its remote, cached id or
first commit; every directory outside git shares the project ``global``). So
clanker runs it in the workspace and matches each row's ``directory`` itself;
a listing without a workspace can only show the project of the directory
clanker was started in, and says so (``SessionScan.partial``).

A listing takes seconds (a Bun binary booting a project instance), so its
answer is kept across processes (``context.answers``) and handed back while
nothing it depends on changed: the database's files (``opencode db path``
names it; the database, ``-wal`` and ``-shm``), looked at after the listing
since the listing itself writes to them; the binary (an upgrade is another
answer); the variables that select the store; the directory it ran in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from os import stat_result
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from attrs import evolve, frozen

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import MAX_OUTPUT, MAX_TIMEOUT, CommandRequest, CommandResult
from clanker.ids import HarnessId
from clanker.sessions.capability import (
    HarnessSession,
    SessionScan,
    SessionsContext,
    resumable_id,
)
from clanker.stores import Answer, HostFiles, clean_text, home_directory

if TYPE_CHECKING:
    import asyncio

    from clanker_opencode.launch import OpenCodeLaunch

__all__ = [
    "DB_PATH_ARGS",
    "LIST_ARGS",
    "MAX_ROWS",
    "PARTIAL_WITHOUT_WORKSPACE",
    "Listing",
    "OpenCodeSessions",
    "db_path_request",
    "is_default_title",
    "list_request",
    "parse_db_path",
    "parse_session_list",
    "store_files",
    "summarize_row",
]

_OPENCODE: Final = HarnessId("opencode")

MAX_ROWS: Final = 4096
"""The most sessions one listing may hold (the spec's bound)."""

# One more row than clanker accepts, so that "more than 4096" is visible. The
# default page is 100 rows; `--max-count` is the only way past it.
LIST_ARGS: Final = ("session", "list", "--format", "json", "--max-count", str(MAX_ROWS + 1))

# A listing took 2.9-8.8 s on two cores (a Bun binary booting a project
# instance), whatever the number of rows: the longest bound clanker allows.
_TIMEOUT: Final = MAX_TIMEOUT
# About 267 bytes a row pretty-printed (28 KB for 105 rows), so 4097 rows come
# near 1.1 MB: the executor's 1 MiB cap may stop a listing that long first,
# which is the same typed output-limit failure.
_MAX_OUTPUT: Final = MAX_OUTPUT

DB_PATH_ARGS: Final = ("db", "path")
"""Prints the database OpenCode uses (``OPENCODE_DB``, ``XDG_DATA_HOME``, its release
channel), one line; it reads no project."""
# A path line, bounded: `db path` printed 106 bytes with a deep home.
_DB_PATH_OUTPUT: Final = 16 * 1024
# The variables OpenCode 1.18.33 picks its database by (`HOME` through `os.homedir()`
# when `XDG_DATA_HOME` is unset), and every other OPENCODE_* one, to be safe: a change
# of any is another answer. Only their digest is kept (a variable may hold a key).
_STORE_VARIABLES: Final = ("HOME", "XDG_DATA_HOME")

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
    from clanker_opencode.launch import (
        OpenCodeLaunch,  # here: listing an empty store never loads it
    )

    return OpenCodeLaunch()


@frozen(kw_only=True)
class Listing:
    """One parsed listing: usable rows (CLI order) and rows clanker cannot offer."""

    sessions: tuple[HarnessSession, ...]
    skipped: int


def _parse_failure(detail: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(ErrorKind.PARSE_FAILURE, detail, harness=_OPENCODE)


def list_request(scopes: tuple[str, ...]) -> CommandRequest:
    """The listing command, run in the workspace (``scopes[0]``, its canonical path).

    Without a workspace it runs where the executor runs commands (this
    process's directory, locally). The environment is the executor's: it must
    be the user's own, since ``XDG_DATA_HOME`` and ``OPENCODE_DB`` choose the
    database.
    """
    return CommandRequest(
        command="opencode", args=LIST_ARGS, cwd=scopes[0] if scopes else None,
        timeout=_TIMEOUT, max_output_bytes=_MAX_OUTPUT,
    )


def db_path_request() -> CommandRequest:
    """``opencode db path``, with the executor's environment (the one that selects it)."""
    return CommandRequest(command="opencode", args=DB_PATH_ARGS, timeout=_TIMEOUT,
                          max_output_bytes=_DB_PATH_OUTPUT)


def parse_db_path(result: CommandResult) -> str | None:
    """The database ``opencode db path`` printed, or ``None`` when there is no file to watch.

    ``None`` for a failed run, anything but one absolute path line, and
    ``:memory:`` (``OPENCODE_DB=:memory:``: nothing outlives the process).
    """
    if result.exit_code != 0:
        return None
    text = result.stdout
    if text.endswith("\n"):
        text = text[:-1]
    if not text.startswith("/") or "\n" in text or "\r" in text or "\x00" in text:
        return None
    return text


def store_files(database: str) -> tuple[str, ...]:
    """The files an answer depends on: the database and its WAL and shared-memory files.

    OpenCode opens the database in WAL mode: a new session lands in ``-wal``
    first and in the database at a checkpoint; every OpenCode process
    checkpoints when it opens it, and its ``-shm`` changes with either.
    """
    return (database, f"{database}-wal", f"{database}-shm")


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


@frozen(kw_only=True)
class _Plan:
    """What a listing depends on besides the database, and what is already known."""

    key: dict[str, str]
    database: str | None  # from an earlier answer under the same key (any directory)
    recalled: Answer | None


def _identity(stat: stat_result) -> str:
    """The binary as it is installed: another file, or the same one rewritten, differs."""
    return f"{stat.st_dev}:{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ctime_ns}"


def _environment_digest(environ: Mapping[str, str]) -> str:
    chosen = {name: value for name, value in environ.items()
              if name in _STORE_VARIABLES or name.startswith("OPENCODE_")}
    import hashlib  # here: the module is imported by every `sessions`, opencode's or not

    return hashlib.sha256(json.dumps(chosen, sort_keys=True).encode()).hexdigest()


def _plan(context: SessionsContext) -> _Plan | None:
    """The answer's key, the database if an earlier answer named it, and that answer if it
    still holds; ``None`` when nothing can be kept (no binary, no directory to key by).

    Blocking (stats and the cache file): call it from offloaded work.
    """
    answers, files = context.answers, context.files
    if answers is None:
        return None
    try:
        # Without a workspace the command runs where the host runs commands.
        here = context.scopes[0] if context.scopes else files.realpath(".")
    except OSError:  # this process's directory was removed
        return None
    binary = files.which("opencode", context.environ.get("PATH"))
    if binary is None:
        return None  # the listing says binary-unavailable
    real = files.realpath(binary)
    stat = files.stat(real)
    if stat is None:
        return None
    key = {"cwd": here, "opencode": real, "opencode-identity": _identity(stat),
           "environment": _environment_digest(context.environ)}
    shared = {name: value for name, value in key.items() if name != "cwd"}
    database = next((kept["database"] for kept in answers.kept_keys() if "database" in kept
                     and {n: v for n, v in kept.items() if n not in ("cwd", "database")}
                     == shared), None)
    recalled = None
    if database is not None:
        recalled = answers.recall({**key, "database": database}, files)
    return _Plan(key=key, database=database, recalled=recalled)


def _never_used(environ: Mapping[str, str], files: HostFiles) -> bool:
    """Whether OpenCode has kept nothing on this host, so that a listing that cannot
    run (OpenCode is not installed) has nothing to list either.

    That is: no ``OPENCODE_DB`` chosen and no data directory
    (``$XDG_DATA_HOME/opencode``, else ``~/.local/share/opencode``), which holds every
    database OpenCode 1.18.33 picks and its legacy JSON store, and which its first run
    creates. One this user cannot look at is one OpenCode, run as this user, could not
    have kept anything in either. A relative ``XDG_DATA_HOME`` proves nothing. One look
    at the host's files: call it from offloaded work.
    """
    if environ.get("OPENCODE_DB"):
        return False
    base = environ.get("XDG_DATA_HOME")
    if not base:
        home = home_directory(environ)
        if home is None:
            return False
        base = f"{home}/.local/share"
    if not base.startswith("/"):
        return False
    return files.stat(Path(base, "opencode"), follow=False) is None


def _scan(context: SessionsContext, answer: Answer) -> SessionScan:
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


async def _database(running: asyncio.Future[CommandResult]) -> str | None:
    try:
        return parse_db_path(await running)
    except HarnessCapabilityError:
        return None  # not a reason to fail the listing: its answer is just not kept


class OpenCodeSessions:
    """OpenCode's root sessions of the workspace's project, as its CLI lists them."""

    # Verified 2026-11-30 with opencode-ai 1.18.33: `opencode run --session <id>`
    # from another directory finds the session but exits 1 with "Unexpected
    # server error" once its recorded directory is gone (realPath ENOENT), and
    # the TUI opens it only to fail the same way on the first prompt. OpenCode
    # always runs a session in its recorded directory, so clanker refuses.
    resumes_without_original_directory = False

    def store_roots(self, environ: Mapping[str, str], files: HostFiles) -> tuple[Path, ...]:
        # No file of OpenCode's is ever read or passed on: nothing to confine.
        return ()

    async def discover(self, context: SessionsContext) -> SessionScan:
        plan = await context.offload(lambda: _plan(context))
        if plan is not None and plan.recalled is not None:
            return _scan(context, plan.recalled)
        try:
            answer, database = await self._list(context, plan)
        except HarnessCapabilityError as error:
            if error.kind is ErrorKind.BINARY_UNAVAILABLE and await context.offload(
                    lambda: _never_used(context.environ, context.files)):
                return SessionScan()  # not installed, and never used here: nothing to list
            raise
        answers = context.answers
        if plan is not None and database is not None and answers is not None:
            # After the listing (and `db path`): both write to the database as they
            # open it, and what they wrote must not look like a change next time.
            states = await context.settled_states(store_files(database))
            if states is not None:
                key = {**plan.key, "database": database}
                await context.offload(lambda: answers.keep(key, states, answer))
        return _scan(context, answer)

    async def _list(self, context: SessionsContext, plan: _Plan | None
                    ) -> tuple[Answer, str | None]:
        """Run the listing (and ``opencode db path`` beside it when the database is not
        known yet); its answer, and the database to prove it by (``None``: not kept)."""
        naming = None
        if plan is not None and plan.database is None:
            import asyncio  # here: a listing without OpenCode installed does not load it

            naming = asyncio.ensure_future(context.executor.run(db_path_request()))
        try:
            result = await context.executor.run(list_request(context.scopes))
            database = plan.database if plan is not None else None
            if naming is not None:
                database = await _database(naming)
        except BaseException:
            if naming is not None:
                import asyncio

                naming.cancel()
                await asyncio.gather(naming, return_exceptions=True)
            raise
        result.require_success(_OPENCODE)  # stderr is OpenCode's, never shown
        listing = parse_session_list(result.stdout)
        return Answer(sessions=listing.sessions, skipped=listing.skipped), database

implementation = OpenCodeSessions
