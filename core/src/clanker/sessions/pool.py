"""Summarizing many session files on a second core.

A listing of every file of a large store is bound by the interpreter: reading
a head and a tail and summarizing them costs ~0.1 ms a file, nearly all of it
holding the interpreter lock. When more than one processor is ours and a scan
has at least :data:`MIN_FILES` files to summarize on this machine, one worker
process (started on first use, stopped after :data:`IDLE_SECONDS` unused) takes
chunks of them from the front while the scanning thread takes them from the back, so
neither waits for the other: what the worker has not taken when the thread
reaches it, the thread does itself.

The worker is a plain interpreter (``python -I -S -c``, this process's
``sys.path``) speaking length-prefixed pickles over its stdin and stdout: it
never imports the caller's main module, so a script without a ``__main__``
guard is not run twice (multiprocessing's ``spawn`` would run it). Only a
provider's plain summarizing function goes to it (named by its module, as
pickle names it); a closure stays in this process, and so does everything when
the worker cannot start or breaks. A file's summary depends on its bytes alone,
read the same way in either process, so the answer is the one a single process
gives; each side places the sessions it made (:func:`_chunk`), so the scanning
thread has no copies left to make once both are done.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from clanker._logging import get_logger
from clanker.environment.files import FileSample, read_sample
from clanker.environment.witness import FileStat
from clanker.ids import HarnessId
from clanker.sessions.sniffing import Sniff, sniffed_or_sample
from clanker.sessions.types import HarnessSession, NoSession, placed

if TYPE_CHECKING:
    import subprocess  # the worker itself never starts one

__all__ = ["ANSWER_SECONDS", "CHUNK", "IDLE_SECONDS", "MIN_FILES", "Job", "Outcome",
           "summarize_files"]

log = get_logger(__name__)

MIN_FILES: Final = 1024
"""Fewer files than this are summarized in this process: starting the worker
(an interpreter importing the provider's module, ~0.2 s of the other core) would
outweigh its share."""
CHUNK: Final = 64
"""Files per piece of work: small enough that the last pieces leave neither side
waiting long, large enough that sending them costs little."""

IDLE_SECONDS: Final = 30.0
"""The worker stops when no scan has used it for this long."""

ANSWER_SECONDS: Final = 5.0
"""Once the scanning thread has summarized everything but the piece the worker
holds, it waits at most this long for that piece (a piece takes milliseconds,
the worker's start a fraction of a second). A worker that has not answered by
then (stopped, swapped out, stuck) is ended, and its piece summarized here."""

Job = tuple[str, FileStat, int]
"""One file to summarize: its path, the stat the walk took of it, and its place in the
scan (its session's ``order``)."""
Outcome = HarnessSession | NoSession | None | OSError
"""A file's summary (:data:`~clanker.sessions.filestore.Summarize`'s answer), or the
error that kept it from being read."""
Summarize = Callable[[FileSample], HarnessSession | NoSession | None]

class _Worker:
    """The one worker process of this process, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # One request and its answer at a time on the pipes, whichever scan asks
        # (two services in one process may scan at once).
        self.exchange = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._failed = False
        self._idle: threading.Timer | None = None
        self._users = 0  # scans between start() and rest()
        self._retired: set[int] = set()  # workers stopped on purpose (idle, exit)
        self._at_exit = False

    def start(self) -> subprocess.Popen[bytes] | None:
        with self._lock:
            if self._idle is not None:
                self._idle.cancel()
                self._idle = None
            if self._process is None and not self._failed:
                import subprocess

                try:
                    process = subprocess.Popen(
                        [sys.executable, "-I", "-S", "-c", _SERVE], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True)
                    assert process.stdin is not None
                    _send(process.stdin, list(sys.path))
                except (OSError, ValueError) as exc:
                    log.debug("no summary worker: %s", type(exc).__name__)
                    self._failed = True
                else:
                    self._process = process
                    if not self._at_exit:
                        atexit.register(self.stop)
                        self._at_exit = True
            if self._process is not None:
                self._users += 1
            return self._process

    def rest(self) -> None:
        """A scan is done with the worker: when no other uses it, stop it unless a scan
        asks for it within :data:`IDLE_SECONDS` (a grid runs for days; its worker need
        not)."""
        with self._lock:
            self._users = max(self._users - 1, 0)
            if self._process is None or self._users:
                return  # another scan is still using it: the last one arms the timer
            if self._idle is not None:
                self._idle.cancel()
            self._idle = threading.Timer(IDLE_SECONDS, self.stop)
            self._idle.daemon = True
            self._idle.start()

    def fail(self, process: subprocess.Popen[bytes]) -> None:
        """``process`` broke mid-answer: unless it was stopped on purpose (idle) as it
        was asked, stop it and summarize here from now on."""
        with self._lock:
            if process.pid in self._retired:
                return
            self._failed = True
        self.stop()

    def abandon(self, process: subprocess.Popen[bytes]) -> None:
        """``process`` has not answered within :data:`ANSWER_SECONDS`: end it at once
        (a stopped process cannot read the end of its input) and summarize here from
        now on. Its pipes are left to :meth:`close`, once nothing reads them."""
        with self._lock:
            self._failed = True
            if self._process is process:
                self._process = None
        with contextlib.suppress(OSError):
            process.kill()
        process.wait()

    @staticmethod
    def close(process: subprocess.Popen[bytes]) -> None:
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def stop(self) -> None:
        with self._lock:
            process, self._process = self._process, None
            if process is not None and not self._failed:
                self._retired.add(process.pid)
        if process is None:
            return
        # It holds nothing but what it reads: ended at once. Closing its input and
        # waiting for a clean exit cost its interpreter's teardown, ~15 ms at the end
        # of every process that listed a large store.
        with contextlib.suppress(OSError):
            process.kill()
        process.wait()
        self.close(process)


_WORKER: Final = _Worker()
_LENGTH: Final = 8  # bytes of little-endian length before each pickle
# The worker runs without `site` (-S: in a virtual environment, its .pth files were a
# quarter of a bare interpreter's start) and isolated (-I): this process's sys.path
# comes first, as the first message, and only then is clanker importable.
_SERVE: Final = (
    "import pickle, sys\n"
    f"size = sys.stdin.buffer.read({_LENGTH})\n"
    f"if len(size) == {_LENGTH}:\n"
    "    sys.path[:] = pickle.loads(sys.stdin.buffer.read(int.from_bytes(size, 'little')))\n"
    "    from clanker.sessions.pool import serve\n"
    "    serve()\n"
)


def _send(stream: IO[bytes], value: object) -> None:
    import pickle  # loaded by the first large scan only

    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(_LENGTH, "little") + data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    import pickle

    header = stream.read(_LENGTH)
    if len(header) < _LENGTH:
        raise EOFError("the other side closed")
    size = int.from_bytes(header, "little")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the other side closed")
    # Only ever between this process and the worker it started, over their own pipes.
    return pickle.loads(data)  # noqa: S301


def serve() -> None:
    """The worker's loop, once it has ``sys.path``: (summarize, jobs, harness, head,
    tail, sniff) requests, each answered with its outcomes, until its input ends."""
    requests = sys.stdin.buffer
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed by an import goes to stderr, not into the answers
    while True:
        try:
            summarize, jobs, harness, head_bytes, tail_bytes, sniff = _receive(requests)
        except EOFError:
            return
        _send(answers, _chunk(summarize, jobs, harness, head_bytes, tail_bytes, sniff))


def summarize_one(summarize: Summarize, job: Job, head_bytes: int, tail_bytes: int,
                  sniff: Sniff | None = None) -> Outcome:
    """Read one file's sample and summarize it (unless ``sniff`` decides it from its first
    bytes); a file that cannot be read is its error."""
    path, stat, _ = job

    def read(head: int, tail: int) -> FileSample:
        return read_sample(Path(path), head_bytes=head, tail_bytes=tail, stat=stat)

    try:
        sample = sniffed_or_sample(read, sniff, head_bytes, tail_bytes)
    except OSError as exc:
        return exc
    except (ValueError, OverflowError) as exc:  # a time no datetime can hold
        log.debug("skipping %s: %s", path, type(exc).__name__)
        return None
    if isinstance(sample, NoSession):
        return sample  # the sniff's answer
    try:
        return summarize(sample)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
        # A shape the parser did not expect: a counted skip, remembered as one.
        log.debug("skipping %s: %s", path, type(exc).__name__)
        return None


def _chunk(summarize: Summarize, jobs: Sequence[Job], harness: HarnessId, head_bytes: int,
           tail_bytes: int, sniff: Sniff | None = None) -> list[Outcome]:
    """The jobs' outcomes, each session placed (:func:`~clanker.sessions.types.placed`)
    as the scan lists it: the copy is made by whichever side summarized the file, in
    parallel, rather than by the scanning thread once both are done."""
    outcomes: list[Outcome] = []
    shared: dict[str | None, str | None] = {}
    for job in jobs:
        outcome = summarize_one(summarize, job, head_bytes, tail_bytes, sniff)
        if isinstance(outcome, HarnessSession):
            outcome = placed(outcome, harness, job[0], job[2], shared)
        outcomes.append(outcome)
    return outcomes


def _processors() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _sendable(summarize: Summarize, sniff: Sniff | None) -> bool:
    """Whether the worker can be handed these: pickled, and found again by what pickle
    names them by (a method is named by its object and name, and a method patched in
    under another name would not be found: the worker would break on it)."""
    import pickle

    try:
        pickle.loads(pickle.dumps((summarize, sniff)))  # noqa: S301 (made right here)
    except (pickle.PickleError, AttributeError, TypeError, ImportError):
        return False
    return True


def summarize_files(summarize: Summarize, jobs: Sequence[Job], harness: HarnessId, *,
                    head_bytes: int, tail_bytes: int, local_files: bool,
                    sniff: Sniff | None = None) -> list[Outcome]:
    """Each job's :data:`Outcome`, in order, a session placed as ``harness``'s (a file
    ``sniff`` decides from its first bytes is not summarized); a worker process takes
    part of them when there are at least :data:`MIN_FILES`, the files are this
    machine's (``local_files``), more than one processor is ours and ``summarize`` (and
    ``sniff``) can be sent."""
    process = None
    if (len(jobs) >= MIN_FILES and local_files and _processors() > 1
            and _sendable(summarize, sniff)):
        process = _WORKER.start()
    if process is None:
        return _chunk(summarize, jobs, harness, head_bytes, tail_bytes, sniff)
    pieces = [jobs[start:start + CHUNK] for start in range(0, len(jobs), CHUNK)]
    done: list[list[Outcome] | None] = [None] * len(pieces)
    lock = threading.Lock()
    ends = [0, len(pieces)]  # the worker takes ends[0], this thread ends[1] - 1

    def feed(process: subprocess.Popen[bytes]) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        while True:
            with lock:
                if ends[0] >= ends[1]:
                    return
                index = ends[0]
                ends[0] += 1
            try:
                with _WORKER.exchange:
                    _send(process.stdin,
                          (summarize, pieces[index], harness, head_bytes, tail_bytes,
                           sniff))
                    answer = _receive(process.stdout)
            except Exception as exc:  # a broken pipe or answer: this thread redoes it
                log.debug("summary worker failed: %s", type(exc).__name__)
                _WORKER.fail(process)
                return  # what it held is done below
            done[index] = answer

    feeder = threading.Thread(target=feed, args=(process,), name="clanker-summary-worker",
                              daemon=True)
    feeder.start()
    try:
        while True:
            with lock:
                if ends[1] <= ends[0]:
                    break
                ends[1] -= 1
                index = ends[1]
            done[index] = _chunk(summarize, pieces[index], harness, head_bytes, tail_bytes,
                                 sniff)
    finally:
        with lock:
            ends[0] = ends[1]  # on an error here, the worker takes nothing more
        feeder.join(ANSWER_SECONDS)
        if feeder.is_alive():  # the worker holds its piece past the bound
            log.debug("summary worker did not answer in %gs", ANSWER_SECONDS)
            _WORKER.abandon(process)  # its pipes end: the feeder's read returns
            feeder.join()
            _WORKER.close(process)
        _WORKER.rest()
    results: list[Outcome] = []
    for index, piece in enumerate(pieces):
        found = done[index]
        results.extend(found if found is not None
                       else _chunk(summarize, piece, harness, head_bytes, tail_bytes, sniff))
    return results
