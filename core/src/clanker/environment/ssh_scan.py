"""Reading an SSH host's harness stores in a bounded number of executions.

Providers read a store through :class:`~clanker.environment.HostFiles`, one
blocking call at a time, and what they ask next depends on what they were
told (a configuration file names the root, a walk names the files). Over SSH
each call cannot be an execution of its own, so :class:`RemoteFiles` answers
from what it already fetched and *records* what it could not answer; the scan
(:meth:`RemoteFiles.gather`) is run again once everything it asked for has
been fetched, in one execution per round, until it asks for nothing new.
A round is one standard-library ``python3`` program sent on stdin
(:data:`PROGRAM`), which reads the host the way the local readers do: walks
that never follow a link, samples opened without following a link or
blocking on a FIFO and checked to be regular files, bounded head and tail
reads, small files read only when small. It writes nothing on the host.

A walk's answer lists the directories to the asked depth; the provider's own
filters run here, on the same traversal order, so a walk costs no extra round
for them. The files a walk finds are sampled in the same round (as far as the
answer's budget goes), so listing a store is one round, not two.

Some answers come with what their reader asks next, so that it costs no
round of its own: a ``stat`` of an SQLite database brings its schema (see
:mod:`clanker.environment.ssh_sqlite`, which reads such stores), and a
``stat`` of a directory that follows no link brings its entries' status.

An answer is bounded (:data:`_MAX_ANSWER`, compressed): past it the walk's
samples are left out first, then the largest asked-for ones, to be asked for
again next round; then a walk keeps its newest files and says it was cut,
and a query's rows or a schema say they overflowed (their reader fails alone,
``output-limit``). After :data:`MAX_ROUNDS` rounds a sample still missing is a
skipped file (:class:`OSError`, as an unreadable file is locally) and any
other call that cannot be answered fails the provider that made it
(``command-failed``), never with a guess; so does a command first asked for in
that last pass (:class:`ScanExecutor`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import json
import os
import posixpath
import sqlite3
import threading
import zlib
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

from clanker.environment.files import Candidate, FileSample
from clanker.environment.ssh_sqlite import HOST_PART, MAX_QUERY_BYTES, RemoteConnection
from clanker.environment.witness import FileStat, seconds
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandExecutor, CommandRequest, CommandResult

if TYPE_CHECKING:
    from clanker.environment.witness import Witness

__all__ = ["MAX_PARTS", "MAX_ROUNDS", "NO_PYTHON_EXIT", "PROGRAM", "RemoteFiles",
           "ScanExecutor"]

_T = TypeVar("_T")

MAX_ROUNDS: Final = 2
"""Executions one scan may spend on the host's files. With each harness's own
listing command run once (OpenCode's, for the bundled harnesses), a scan of
every provider costs three executions."""
MAX_PARTS: Final = 16
"""Answers one walk of a search (:meth:`RemoteFiles.gather` with ``complete``) may
take: past the first, each is an execution of its own, not counted in the
scan's rounds. One answer carries the status of some 13,000 files named by
random UUIDs (about 80 bytes each, compressed, of :data:`_MAX_ANSWER`), and a
cut keeps at least half of what fits, so a search reads a store of some
100,000 session files before it says the store is too large to search
completely (``output-limit``): a bound on the executions (each at most the
rounds' timeout) that a store larger than any a harness writes in years of
use does not reach."""
NO_PYTHON_EXIT: Final = 97
"""The exit status of the round's shell line when the host has no ``python3``."""
SAMPLE_HEAD: Final = 128 * 1024
SAMPLE_TAIL: Final = 128 * 1024
"""What a walk's files are sampled with: the largest bounds a provider asks for
(Codex's head, Pi's and Oh My Pi's tail), so that no provider's sample is asked
for again in a round of its own."""
_MAX_ANSWER: Final = 1024 * 1024
_ROUND_TIMEOUT: Final = 30.0
# Prints nothing and exits 97 without python3; otherwise the program on stdin runs.
_SHELL: Final = (f'command -v python3 >/dev/null 2>&1 || exit {NO_PYTHON_EXIT}; '
                 'exec python3 -')

PROGRAM: Final = r'''
import base64, errno, json, os, stat, sys, zlib

MAX_ENTRIES = 200000
MAX_LISTED = 16384
BUDGET = __BUDGET__

def st(info):
    return [info.st_mode, info.st_ino, info.st_dev, info.st_nlink, info.st_uid, info.st_gid,
            info.st_size, info.st_atime_ns, info.st_mtime_ns, info.st_ctime_ns]

def b64(data):
    return base64.b64encode(data).decode("ascii")

def raw(data):
    # Bytes as the code points 0-255: JSON Lines stay mostly themselves, and
    # compress as well as they do on disk.
    return data.decode("latin-1")

def sample(path, head_bytes, tail_bytes):
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        return {"errno": exc.errno or errno.EIO}
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return {"errno": errno.EINVAL}
        head = os.pread(fd, head_bytes, 0)
        tail = b""
        if info.st_size > head_bytes:
            start = max(info.st_size - tail_bytes, head_bytes)
            tail = os.pread(fd, info.st_size - start, start)
    except OSError as exc:
        return {"errno": exc.errno or errno.EIO}
    finally:
        os.close(fd)
    return {"st": st(info), "head": raw(head), "tail": raw(tail),
            "h": head_bytes, "t": tail_bytes}

def walk(root, depth, after=None):
    # With ``after`` (a file's newest-first key: mtime, directory, name), the
    # files up to it are left out, only counted: the older part of a cut walk.
    after = None if after is None else (-after[0], after[1], after[2])
    passed = 0
    listed = {}
    visited = 0
    frontier = [(root, 0)]
    files = []
    while frontier:
        directory, level = frontier.pop()
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            listed[directory] = None
            continue
        except OSError as exc:
            if level == 0:
                return {"errno": exc.errno or errno.EIO}
            listed[directory] = "unreadable"
            continue
        rows = []
        for entry in entries:
            visited += 1
            if visited > MAX_ENTRIES:
                return {"listed": listed, "cut": True, "files": files, "passed": passed}
            try:
                if level < depth:
                    if entry.is_dir(follow_symlinks=False):
                        rows.append([entry.name, "d"])
                        frontier.append((entry.path, level + 1))
                    else:
                        rows.append([entry.name, "-"])
                elif entry.is_file(follow_symlinks=False):
                    info = entry.stat(follow_symlinks=False)
                    if after is not None and (-info.st_mtime_ns, directory, entry.name) <= after:
                        passed += 1
                        continue
                    rows.append([entry.name, "f", st(info)])
                    files.append((info.st_size, entry.path))
                else:
                    rows.append([entry.name, "-"])
            except OSError:
                rows.append([entry.name, "-"])
        listed[directory] = rows
    return {"listed": listed, "cut": False, "files": files, "passed": passed}

def confined(path, roots):
    try:
        resolved = os.path.realpath(path)
        if not os.path.exists(path) or not stat.S_ISREG(os.stat(resolved).st_mode):
            return False
    except (OSError, ValueError):
        return False
    for root in roots:
        if not os.path.exists(root):
            continue
        real = os.path.realpath(root)
        if resolved == real or resolved.startswith(real.rstrip("/") + "/"):
            return True
    return False

def read_regular(path, read):
    # What read(fd) gives of a regular file (through links), or None. O_NONBLOCK:
    # a FIFO put where a file was must not stop the round.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return read(fd)
    except OSError:
        return None
    finally:
        os.close(fd)

def read_small(path, limit):
    data = read_regular(path, lambda fd: os.read(fd, limit + 1))
    return raw(data) if data is not None and len(data) <= limit else None

def entries(path):
    # Opened without following a link: the directory the status was taken of.
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_NOFOLLOW
                     | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return {"error": "unreadable"}
    rows = {}
    try:
        with os.scandir(fd) as found:
            for entry in found:
                if len(rows) >= MAX_LISTED:
                    return {"error": "too-large"}
                try:
                    rows[entry.name] = st(entry.stat(follow_symlinks=False))
                except OSError:
                    pass
    except OSError:
        return {"error": "unreadable"}
    finally:
        os.close(fd)
    return {"entries": rows}

def which(command, path):
    import shutil
    return shutil.which(command, path=os.defpath if path is None else path)

def answer(op, args):
    if op == "stat":
        try:
            return st(os.stat(args[0], follow_symlinks=args[1]))
        except (OSError, ValueError):
            return None
    if op == "realpath":
        return os.path.realpath(args[0])
    if op == "read_small":
        return read_small(args[0], args[1])
    if op == "sample":
        return sample(args[0], args[1], args[2])
    if op == "confined":
        return confined(args[0], args[1])
    if op == "which":
        return which(args[0], args[1])
    if op == "walk":
        return walk(args[0], args[1], args[2] if len(args) > 2 else None)
    if op == "schema":
        return sqlite_schema(args[0])
    if op == "sqlite":
        return sqlite_query(args[0], args[1], args[2])
    return None

def overflowed(row):
    # What an answer too large for the round's bound says instead: a walk keeps
    # its newest half of files and says it was cut, and that older files were
    # left out (the newest are what a listing reads first; a search asks for the
    # older part next); anything else says it overflowed (never a part of it).
    op = row[0]
    if op == "walk":
        value = row[2]
        listed = value.get("listed") if isinstance(value, dict) else None
        files = sorted(((-r[2][8], d, r[0]) for d, rows in (listed or {}).items()
                        if isinstance(rows, list) for r in rows if r[1] == "f"))
        if len(files) < 2:
            return [op, row[1], {"overflow": True}]
        kept = {(d, name) for _, d, name in files[: len(files) // 2]}
        trimmed = {d: rows if not isinstance(rows, list) else
                   [r for r in rows if r[1] != "f" or (d, r[0]) in kept]
                   for d, rows in listed.items()}
        return [op, row[1], dict(value, listed=trimmed, cut=True, older=True)]
    if op in ("schema", "sqlite", "entries"):
        return [op, row[1], {"error": "too-large"}]
    return row  # small by nature (a status, a path, a small file): never replaced

def size(row):
    value = row[2]
    return len(value.get("head", "")) + len(value.get("tail", "")) if isinstance(value, dict) else 0

def main(requests):
    answers = []
    walked = []
    for op, *args in requests:
        value = answer(op, args)
        answers.append([op, args, value])
        if op == "walk" and isinstance(value, dict):
            walked.extend(value.get("files", ()))
            value.pop("files", None)
        # A database's schema comes with its status: a reader's column checks
        # then cost no round of their own.
        if op == "stat" and value is not None and stat.S_ISREG(value[0]) \
                and sqlite_header(args[0]) is not None:
            answers.append(["schema", [args[0]], sqlite_schema(args[0])])
        # A directory looked at without following links comes with its entries'
        # status: looking at what is in it then costs no round either.
        if op == "stat" and value is not None and not args[1] and stat.S_ISDIR(value[0]):
            answers.append(["entries", [args[0]], entries(args[0])])
    # The smallest first: within the budget, as many files as can be.
    spent = 0
    extra = []
    for _, path in sorted(walked):
        if spent > BUDGET:
            break
        value = sample(path, __HEAD__, __TAIL__)
        spent += len(value.get("head", "")) + len(value.get("tail", ""))
        extra.append(["sample", [path, __HEAD__, __TAIL__], value])
    # Past the answer's bound, the walk's samples go first, then the asked-for
    # samples, the largest first (so that most files fit): what is left out is
    # asked for again next round.
    plain = [row for row in answers if row[0] != "sample"]
    asked = sorted((row for row in answers if row[0] == "sample"), key=size)
    extra.sort(key=size)
    while True:
        text = json.dumps(plain + asked + extra, ensure_ascii=False)
        out = b64(zlib.compress(text.encode("utf-8", "surrogatepass"), 6))
        if len(out) < __LIMIT__:
            break
        if extra:
            extra = extra[: len(extra) // 2]
        elif asked:
            asked = asked[: len(asked) // 2]
        else:
            # Only answers that cannot be split are left: the largest that can
            # says it overflowed instead, so that its reader fails alone, typed.
            smaller = [(len(json.dumps(row)), i, shrunk) for i, row in enumerate(plain)
                       for shrunk in [overflowed(row)] if shrunk[2] != row[2]]
            if not smaller:
                break  # nothing left to make smaller (the transport's cap decides)
            _, largest, shrunk = max(smaller)
            plain[largest] = shrunk
    sys.stdout.write(out)

''' + HOST_PART + r'''
main(json.loads(base64.b64decode("__REQUESTS__").decode("utf-8")))
'''


def _listing(top: str, answer: dict[str, Any]) -> dict[str, Any]:
    """A walk's directories, or its failure raised."""
    if "errno" in answer:
        code = answer["errno"]
        raise OSError(code, os.strerror(code), top)
    if answer.get("overflow"):
        raise HarnessCapabilityError(
            ErrorKind.OUTPUT_LIMIT,
            "the store's directories alone are more than one answer from the host carries")
    listed: dict[str, Any] = answer["listed"]
    return listed


class _Miss(Exception):
    """A call the fetched answers cannot answer (recorded for the next round)."""


def _file_stat(row: list[int]) -> FileStat:
    _, ino, dev, _, _, _, size, _, mtime, ctime = row
    return FileStat(dev, ino, size, mtime, ctime)


def _stat_result(row: list[int]) -> os.stat_result:
    mode, ino, dev, nlink, uid, gid, size, atime, mtime, ctime = row
    return os.stat_result((mode, ino, dev, nlink, uid, gid, size,
                           atime // 10**9, mtime // 10**9, ctime // 10**9,
                           seconds(atime), seconds(mtime), seconds(ctime),
                           atime, mtime, ctime))


class ScanExecutor:
    """The host's command executor as a scan's rounds see it: within
    :meth:`RemoteFiles.gather`, a request already made in this scan is answered
    with its first result (a harness's own listing runs once, not once a round),
    and one first made in the last pass is refused (``command-failed``), as a
    file read first asked for there is: the scan's executions stay bounded by
    what its earlier passes asked for. Outside, every request runs."""

    def __init__(self, executor: CommandExecutor, files: RemoteFiles) -> None:
        self._executor = executor
        self._files = files
        self._runs: dict[tuple[Any, ...], asyncio.Task[CommandResult]] = {}

    @property
    def executions(self) -> int:
        """Commands the host has run (the transport's count; shared answers are not)."""
        return int(getattr(self._executor, "executions", 0))

    def forget(self) -> None:
        self._runs.clear()

    async def run(self, request: CommandRequest) -> CommandResult:
        if not self._files.gathering:
            return await self._executor.run(request)
        key = (request.argv, request.cwd, tuple(sorted(request.env.items())), request.stdin,
               request.timeout, request.inference, request.attended, request.max_output_bytes)
        task = self._runs.get(key)
        if task is None and self._files.final:
            raise HarnessCapabilityError(
                ErrorKind.COMMAND_FAILED,
                f"running {request.command} on the host here needs more than a scan's "
                "executions")
        if task is None:
            task = self._runs[key] = asyncio.ensure_future(self._executor.run(request))
        return await asyncio.shield(task)


class RemoteFiles:
    """The :class:`~clanker.environment.HostFiles` of an SSH host, answered in rounds.

    Outside :meth:`gather` nothing has been fetched and every read is refused
    (``unsupported``): reading a host's files costs executions, which only a
    scan through :meth:`gather` bounds.
    """

    def __init__(self, executor: CommandExecutor) -> None:
        self._executor = executor
        self.executor = ScanExecutor(executor, self)
        """The executor a scan's providers are handed (see :class:`ScanExecutor`)."""
        self._answers: dict[tuple[Any, ...], Any] = {}
        self._samples: dict[str, dict[str, Any]] = {}
        self._pending: dict[tuple[Any, ...], None] = {}
        self._lock = threading.Lock()
        self._gathering = False
        self._final = False
        self._complete = False
        self._parted = False  # whether this pass asked for a walk's further answer
        self._serial = asyncio.Lock()  # one scan's rounds at a time
        self.rounds = 0
        """Executions spent by the last :meth:`gather`."""

    # -- the rounds ---------------------------------------------------------

    @property
    def gathering(self) -> bool:
        return self._gathering

    @property
    def final(self) -> bool:
        """Whether this pass of :meth:`gather` is its last (nothing more is fetched)."""
        return self._gathering and self._final

    async def gather(self, work: Callable[[], Awaitable[_T]], *, rounds: int = MAX_ROUNDS,
                     complete: bool = False) -> _T:
        """Run ``work`` (a scan through these files) until it asks for nothing new,
        fetching what it asked for in one execution per round, at most ``rounds``
        (:data:`MAX_ROUNDS`; re-finding one session takes one more); answers are
        fresh for each call of this method.

        With ``complete`` (a search, which must see every file a walk finds), a
        walk whose answer was cut goes on over the older files in further answers,
        one round each, not counted in ``rounds``, nor is one more round for the
        samples they left out; at most :data:`MAX_PARTS` answers a walk, past them
        ``output-limit`` (so at most ``rounds + MAX_PARTS`` rounds in all).
        Without it a cut walk says it was cut (a listing of the newest files).

        Raises ``not-configured`` when the host has no ``python3``, and the
        transport's errors (``transport-failure``, ``timeout``, ``output-limit``).
        Scans of the same host wait for each other.
        """
        async with self._serial:
            return await self._gather(work, rounds, complete)

    async def _gather(self, work: Callable[[], Awaitable[_T]], rounds: int,
                      complete: bool) -> _T:
        self._answers.clear()
        self._samples.clear()
        self.rounds = 0
        self.executor.forget()
        self._gathering = True
        self._complete = complete
        # The rounds that fetched a walk's further answer, and then one for the
        # samples those answers left out (the newest files' samples filled them).
        parts = 0
        try:
            while True:
                self._pending.clear()
                self._parted = False
                self._final = self.rounds >= rounds + parts + bool(parts)
                result = await work()
                if not self._pending or self._final:
                    return result
                if self._parted and parts < MAX_PARTS - 1:
                    parts += 1
                await self._fetch(list(self._pending))
        finally:
            self._gathering = False
            self._final = False
            self._complete = False
            self.executor.forget()

    async def _fetch(self, requests: list[tuple[Any, ...]]) -> None:
        self.rounds += 1
        payload = base64.b64encode(json.dumps(requests).encode("utf-8")).decode("ascii")
        program = (PROGRAM.replace("__BUDGET__", str(6 * _MAX_ANSWER))
                   .replace("__HEAD__", str(SAMPLE_HEAD)).replace("__TAIL__", str(SAMPLE_TAIL))
                   .replace("__LIMIT__", str(_MAX_ANSWER - 1024))
                   .replace("__QUERY_BYTES__", str(MAX_QUERY_BYTES))
                   .replace("__REQUESTS__", payload))
        result = await self._executor.run(CommandRequest(
            command="sh", args=("-c", _SHELL), stdin=program.encode("utf-8"),
            timeout=_ROUND_TIMEOUT, max_output_bytes=_MAX_ANSWER))
        if result.exit_code == NO_PYTHON_EXIT:
            raise HarnessCapabilityError(
                ErrorKind.NOT_CONFIGURED,
                "reading session history on this host needs python3 on its PATH")
        if result.exit_code != 0:
            raise HarnessCapabilityError(ErrorKind.COMMAND_FAILED,
                                         "the host could not read its session stores")
        try:
            answers = json.loads(zlib.decompress(base64.b64decode(result.stdout.strip()))
                                 .decode("utf-8"))
        except (ValueError, zlib.error) as exc:
            raise HarnessCapabilityError(ErrorKind.PARSE_FAILURE,
                                         "the host's answer could not be read",
                                         cause=exc) from exc
        with self._lock:
            for op, args, value in answers:
                if op == "sample" and isinstance(value, dict) and "st" in value:
                    self._samples[args[0]] = value
                # A list argument (the roots of `confined`) is a tuple in the key.
                self._answers[(op, *(tuple(a) if isinstance(a, list) else a
                                     for a in args))] = value

    def _ask(self, *key: Any, skip: bool = False, part: bool = False) -> Any:
        """The fetched answer for ``key``; else, while gathering, a recorded miss.
        In the last pass a miss fails the provider, or with ``skip`` (a file's
        sample: more than the rounds' answers could carry) is a skipped file;
        ``part``: a walk's further answer, whose round is not a scan's."""
        with self._lock:
            if key in self._answers:
                return self._answers[key]
            if not self._gathering:
                raise HarnessCapabilityError(
                    ErrorKind.UNSUPPORTED,
                    "a host's files are read only within a scan of its stores")
            if self._final and skip:
                raise OSError(errno.EFBIG, "past what one scan reads on a host", key[1])
            if self._final and part:
                raise HarnessCapabilityError(
                    ErrorKind.OUTPUT_LIMIT,
                    "the store is too large to search completely on the host: more files "
                    f"than {MAX_PARTS} answers from it carry")
            if self._final:
                raise HarnessCapabilityError(
                    ErrorKind.COMMAND_FAILED,
                    f"reading this store on the host needs more than {MAX_ROUNDS} executions")
            self._pending[key] = None
            self._parted = self._parted or part
        raise _Miss

    # -- HostFiles ------------------------------------------------------------

    def walk(
        self,
        root: str | os.PathLike[str],
        *,
        depth: int,
        accept_file: Callable[[str], bool],
        accept_dir: Callable[[int, str], bool] = lambda level, name: True,
        witness: Witness | None = None,
    ) -> tuple[list[Candidate], bool]:
        if witness is not None:
            witness.usable = False  # nothing here can watch the host's files
        top = os.fspath(root)
        try:
            listed, answer = self._walked(top, depth)
        except _Miss:
            return [], False
        found: list[Candidate] = []
        frontier: list[tuple[str, int]] = [(top, 0)]
        while frontier:
            directory, level = frontier.pop()
            if directory not in listed:
                return found, True  # the host's walk stopped before it (not in a search)
            rows = listed[directory]
            if rows is None:
                continue
            if rows == "unreadable":
                if witness is not None:
                    witness.unreadable += 1
                continue
            for row in rows:
                name, kind = row[0], row[1]
                path = posixpath.join(directory, name)
                if level < depth:
                    if kind == "d" and accept_dir(level, name):
                        frontier.append((path, level + 1))
                elif kind == "f" and accept_file(name):
                    found.append(Candidate(path, _file_stat(row[2])))
        return found, bool(answer["cut"]) and not frontier

    def _walked(self, top: str, depth: int) -> tuple[dict[str, Any], dict[str, Any]]:
        """A walk's directories and its (last) answer; in a search, all of them."""
        answer = self._ask("walk", top, depth)
        listed = _listing(top, answer)
        if not self._complete:
            return listed, answer
        if answer.get("older"):
            listed, answer = self._older(top, depth, answer)
        if answer["cut"]:  # the host's walk stopped: more entries than it visits
            raise HarnessCapabilityError(
                ErrorKind.OUTPUT_LIMIT,
                "the store is too large to search completely on the host: more entries "
                "than one walk there visits")
        return listed, answer

    def _older(self, top: str, depth: int, answer: dict[str, Any]
               ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A search's walk that the answer's bound cut (it kept the newest files):
        the older files, asked for in further answers, each after the oldest file
        the one before it kept, until one is not cut (at most :data:`MAX_PARTS`
        answers). Returns the directories as one answer would list them, and the
        last answer."""
        listed = {d: list(rows) if isinstance(rows, list) else rows
                  for d, rows in _listing(top, answer).items()}
        seen = 0
        parts = 1
        while answer.get("older"):
            kept = [(-r[2][8], d, r[0]) for d, rows in answer["listed"].items()
                    if isinstance(rows, list) for r in rows if r[1] == "f"]
            if parts >= MAX_PARTS or not kept:
                raise HarnessCapabilityError(
                    ErrorKind.OUTPUT_LIMIT,
                    "the store is too large to search completely on the host: more files "
                    f"than {MAX_PARTS} answers from it carry")
            seen += len(kept)
            newest_first_mtime, directory, name = max(kept)
            answer = self._ask("walk", top, depth, (-newest_first_mtime, directory, name),
                               part=True)
            parts += 1
            if answer.get("passed") != seen:
                # A file written or removed between two answers: one newer than the
                # cursor now may have been older than it before, and read by neither.
                raise HarnessCapabilityError(
                    ErrorKind.STORAGE_CHANGED,
                    "the store changed while it was searched on the host; try again")
            for d, rows in _listing(top, answer).items():
                if isinstance(rows, list) and isinstance(listed.get(d), list):
                    listed[d].extend(r for r in rows if r[1] == "f")
                elif d not in listed:
                    listed[d] = rows
        return listed, answer

    def sample(
        self,
        path: str | os.PathLike[str],
        *,
        head_bytes: int,
        tail_bytes: int,
        stat: os.stat_result | FileStat | None = None,
    ) -> FileSample:
        where = os.fspath(path)
        with self._lock:
            kept = self._samples.get(where)
        if kept is not None and head_bytes <= kept["h"] and tail_bytes <= kept["t"]:
            return self._slice(where, kept, head_bytes, tail_bytes)
        try:
            answer = self._ask("sample", where, head_bytes, tail_bytes, skip=True)
        except _Miss:
            raise OSError(errno.EAGAIN, "not read yet", where) from None
        if "errno" in answer:
            code = answer["errno"]
            raise OSError(code, os.strerror(code), where)
        return self._slice(where, answer, head_bytes, tail_bytes)

    @staticmethod
    def _slice(where: str, kept: dict[str, Any], head_bytes: int, tail_bytes: int
               ) -> FileSample:
        info = _stat_result(kept["st"])
        size = info.st_size
        head_read = kept["head"].encode("latin-1")
        tail_read = kept["tail"].encode("latin-1")
        # The bytes read: [0, len(head_read)) and [size - len(tail_read), size).
        head = head_read[:head_bytes]
        tail = b""
        if size > head_bytes:
            start = max(size - tail_bytes, head_bytes)
            tail_start = size - len(tail_read)
            if start >= tail_start:
                tail = tail_read[start - tail_start:]
            else:  # the rest of the wanted tail is in what the head read
                tail = head_read[start:tail_start] + tail_read
        mtime = datetime.fromtimestamp(info.st_mtime, UTC)
        return FileSample(path=Path(where), size=size, mtime=mtime, head=head, tail=tail)

    def read_small(self, path: str | os.PathLike[str], limit: int) -> bytes | None:
        try:
            answer = self._ask("read_small", os.fspath(path), limit)
        except _Miss:
            return None
        return None if answer is None else str(answer).encode("latin-1")

    def stat(self, path: str | os.PathLike[str], *, follow: bool = True) -> os.stat_result | None:
        where = os.fspath(path)
        if not follow:
            # What a directory's answer listed (see PROGRAM, `entries`).
            parent, name = posixpath.split(where)
            with self._lock:
                listed = self._answers.get(("entries", parent))
            if isinstance(listed, dict) and "entries" in listed and name:
                row = listed["entries"].get(name)
                return None if row is None else _stat_result(row)
        try:
            answer = self._ask("stat", where, follow)
        except _Miss:
            return None
        return None if answer is None else _stat_result(answer)

    def realpath(self, path: str | os.PathLike[str]) -> str:
        where = os.fspath(path)
        try:
            return str(self._ask("realpath", where))
        except _Miss:
            return posixpath.normpath(where)

    def confined(self, path: str | os.PathLike[str], roots: Iterable[os.PathLike[str]]) -> bool:
        try:
            return bool(self._ask("confined", os.fspath(path),
                                  tuple(sorted(os.fspath(root) for root in roots))))
        except _Miss:
            return False

    def sqlite(
        self, path: str | os.PathLike[str], *, harness: str
    ) -> AbstractContextManager[sqlite3.Connection]:
        # Duck-typed: the queries a reader makes, answered by the rounds
        # (see clanker.environment.ssh_sqlite).
        return cast("AbstractContextManager[sqlite3.Connection]",
                    self._sqlite(os.fspath(path), harness))

    @contextlib.contextmanager
    def _sqlite(self, where: str, harness: str) -> Iterator[RemoteConnection]:
        try:
            schema = self._ask("schema", where)
        except _Miss:
            # Not this pass's answer (the rounds run it again): nothing to read yet.
            raise HarnessCapabilityError(ErrorKind.STORAGE_CHANGED,
                                         "the history database is not read yet",
                                         harness=harness) from None
        if not isinstance(schema, dict):
            raise HarnessCapabilityError(ErrorKind.STORAGE_CHANGED,
                                         "the history database cannot be opened",
                                         harness=harness)

        def ask(sql: str, params: str) -> dict[str, Any] | None:
            try:
                answer = self._ask("sqlite", where, sql, params)
            except _Miss:
                return None
            return answer if isinstance(answer, dict) else {"error": "unreadable"}

        connection = RemoteConnection(harness=harness, schema=schema, ask=ask)
        try:
            yield connection
        except sqlite3.DatabaseError as exc:
            raise HarnessCapabilityError(
                ErrorKind.STORAGE_CHANGED, "the history database could not be read",
                harness=harness, cause=exc) from exc
        finally:
            connection.close()

    def which(self, command: str, search_path: str | None) -> str | None:
        try:
            answer = self._ask("which", command, search_path)
        except _Miss:
            return None
        return None if answer is None else str(answer)
