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

This module runs the commands and keeps their answers; how a listing's output
becomes sessions is :mod:`clanker_opencode.summaries`'s, imported once there is
output to read: a listing without OpenCode installed, and never used here, reads
nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from os import stat_result
from pathlib import Path
from typing import TYPE_CHECKING, Final

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import MAX_OUTPUT, MAX_TIMEOUT, CommandRequest, CommandResult
from clanker.ids import HarnessId
from clanker.sessions.capability import SessionScan, home_directory

if TYPE_CHECKING:
    import asyncio

    from clanker.sessions.capability import SessionsContext
    from clanker.stores import Answer, HostFiles

__all__ = [
    "DB_PATH_ARGS",
    "LIST_ARGS",
    "MAX_ROWS",
    "OpenCodeSessions",
    "db_path_request",
    "list_request",
    "parse_db_path",
    "store_files",
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


class _Plan:
    """What a listing depends on besides the database, and what is already known.

    A plain class, not an attrs one: it is defined by every start-up that asks where
    the store is, and only a listing that can be kept makes one.
    """

    __slots__ = ("database", "key", "recalled")

    def __init__(self, *, key: dict[str, str], database: str | None,
                 recalled: Answer | None) -> None:
        self.key = key
        self.database = database  # from an earlier answer under the same key (any directory)
        self.recalled = recalled


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
            # The reader, imported with the first answer to hand back.
            from clanker_opencode.summaries import scan

            return scan(context, plan.recalled)
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
        from clanker_opencode.summaries import scan  # loaded by _list, which read the answer

        return scan(context, answer)

    async def _list(self, context: SessionsContext, plan: _Plan | None
                    ) -> tuple[Answer, str | None]:
        """Run the listing (and ``opencode db path`` beside it when the database is not
        known yet); its answer, and the database to prove it by (``None``: not kept)."""
        naming = None
        # An inline context has no loop to run `db path` on (asyncio would make one, and
        # leave the command on it unrun), and its executor runs no command anyway.
        if plan is not None and plan.database is None and not context.inline:
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
        # The reader, imported once there is a listing to read: a listing without
        # OpenCode installed (the listing over empty stores) never loads it.
        from clanker.stores import Answer
        from clanker_opencode.summaries import parse_session_list

        listing = parse_session_list(result.stdout)
        return Answer(sessions=listing.sessions, skipped=listing.skipped), database

implementation = OpenCodeSessions
