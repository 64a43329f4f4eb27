"""The hook bridge: the command a harness hook runs, standard library only.

A harness runs ``$CLANKER_ATTENTION_COMMAND`` for each native event, which
executes ``python -I -S hook.py``. This module imports nothing outside the
standard library; it loads two files by path, the envelope's wire schema
(``wire.py`` beside it, itself import-free) and exactly one provider
interpreter (``$CLANKER_ATTENTION_INTERPRETER``), and runs one bounded
transaction:

1. read the payload from stdin (at most 1 MiB, within ``STDIN_SECONDS``) and
   load the interpreter (within ``LOAD_SECONDS``);
2. take this terminal's exclusive lock (``flock`` on ``lock`` in
   ``$CLANKER_ATTENTION_STATE``, waiting until :func:`lock_deadline`: as long
   as the rest of the transaction can still finish within its bounds; the
   kernel drops a dead holder's lock, a live holder is never broken);
3. read ``state.json`` (a JSON object of at most 64 KiB; missing = ``{}``),
   call ``interpret(payload, state)`` (within ``INTERPRET_SECONDS``), write the
   new state atomically (``state.json.tmp``, fsync, rename) and deliver the
   sanitized envelopes to the grid in one ``deliver`` request (within
   ``DELIVERY_SECONDS``), all while holding the lock, so the broker sees
   events in the order the state produced them. ``inflight`` exists for as
   long as the lock is held, so a holder that dies leaves it behind.

Two transports carry the ``deliver`` request. By default it goes to the grid's
socket (``$CLANKER_ATTENTION_SOCKET``) and the grid's decisions come back. On
an SSH host (``CLANKER_ATTENTION_TRANSPORT=tty``) it is written to the
harness's terminal as one bounded OSC frame
(:data:`~clanker.attention.wire.FRAME_START`, base64 of the JSON line,
:data:`~clanker.attention.wire.FRAME_END`), which the local launcher takes out
of the terminal stream and hands to the grid. That transport hears no decision:
a written frame counts as delivered, and a poison marker is never cleared
through it (fail closed: ``input_resolved`` stays dropped once a transaction
of the launch failed closed). The terminal is the hook's controlling terminal
(``/dev/tty``) or, for a harness that runs its hooks in a session of their own
(Codex does), the terminal of the nearest ancestor that belongs to the launch
(its environment holds this hook's ``CLANKER_ATTENTION_COMMAND``): the first of
its standard descriptors that is a pseudo-terminal of this user (Linux
``/proc``). Nothing else's terminal is ever written to.

Fail closed. A transaction either completes, or it *fails closed*: whenever
any step cannot be done within its bound, or at all. That is a payload that
is too large, too late, unreadable or not JSON; an interpreter that cannot be
loaded in time; the lock not acquired in time; state that is unreadable,
corrupt, oversized or unwritable; an interpreter that runs past its bound,
raises or answers malformed; an envelope the wire schema refuses or more
than 16; a failed delivery (not of a batch of ``location_changed`` only);
and a holder that died inside its transaction (``inflight`` left behind,
counted by the next holder). A transaction that fails closed

- creates the ``poison`` marker: while it exists ``input_resolved`` is
  dropped until a healthy transaction delivers a turn boundary the grid
  accepts; the marker is then removed and the rest of that batch goes through;
- once it has failed, delivers no ``input_resolved`` but still the evidence
  of a possible human wait: when it has a payload and an interpreter but could
  not use the stored state (no lock, state unusable, or the interpreter failed
  on it), the interpreter runs again on empty state and everything else it
  reports is delivered. The stored state is replaced only when it is unusable
  (or the new one cannot be written); otherwise it stays as the last healthy
  transaction left it, which is what the grid has seen;
- is counted: one byte is appended to ``failed`` (its size is how many of this
  terminal's transactions failed closed), every delivery carries that count
  as ``failedClosed``, and a transaction that failed closed with nothing else
  to deliver delivers the count alone, so ``clanker attention explain`` shows it.

The hook always exits 0 and writes nothing but the interpreter's optional
``HOOK_STDOUT``; payload content and the credential are never printed, logged
or stored. Every step is bounded, so the whole hook ends within
``TOTAL_SECONDS`` of starting, inside the 3 s the harnesses give their hooks.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import select
import signal
import socket
import stat
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import FrameType, ModuleType
    from typing import TypeVar

    from clanker.attention import wire

    T = TypeVar("T")


def _load_wire() -> ModuleType:
    """Load ``wire.py`` from beside this file: under ``-I`` its directory is not on the path."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wire.py")
    spec = importlib.util.spec_from_file_location(WIRE_MODULE, path)
    if spec is None or spec.loader is None:
        raise ImportError(path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[WIRE_MODULE] = module
    spec.loader.exec_module(module)
    return module


WIRE_MODULE = "_clanker_attention_wire"
INTERPRETER_MODULE = "_clanker_attention_interpreter"

if not TYPE_CHECKING:
    try:
        wire = _load_wire()
    except BaseException:
        if __name__ != "__main__":
            raise
        os._exit(0)  # a broken installation: the hook still exits 0, silently

# Bounds (bytes).
MAX_PAYLOAD = 1 << 20
MAX_STATE = 64 * 1024
MAX_LINE = 65_536
MAX_ENVELOPES = wire.MAX_ENVELOPES
MAX_FAILED_CLOSED = 1 << 16
"""The count of failed-closed transactions stops here (``failed`` stays small)."""

# Bounds (seconds). They are synchronization, not guesses of how fast Python runs, and each is many
# times what ``benchmarks/attention.py`` measures with one busy loop per core
# (see ``benchmarks/RESULTS.md``): the payload is already written when the hook
# starts, loading an interpreter is compiling one file (under 100 ms there), and
# interpreting one event or a round trip to the grid takes under 10 ms. The whole
# hook must end inside the 3 s Codex and Claude Code give a hook, start-up (under
# 200 ms there) included: a hook they kill while it waits for the lock would be
# lost without a trace. So the lock is not given a bound of its own: it is waited
# for as long as the transaction can still finish within its bounds after it
# (:func:`lock_deadline`), which lets a waiter outlast one holder's whole bounded
# transaction.
STDIN_SECONDS = 0.5
LOAD_SECONDS = 0.5
INTERPRET_SECONDS = 0.25
DELIVERY_SECONDS = 0.5
TOTAL_SECONDS = 2.5

# The private files this bridge keeps in the state directory (and nothing else).
LOCK_FILE = "lock"
STATE_FILE = "state.json"
STATE_TEMPORARY = "state.json.tmp"
POISON_FILE = "poison"
POISON_CLEARING = "poison.clearing"
INFLIGHT_FILE = "inflight"
FAILED_FILE = "failed"
STATE_FILES = (LOCK_FILE, STATE_FILE, STATE_TEMPORARY, POISON_FILE, POISON_CLEARING,
               INFLIGHT_FILE, FAILED_FILE)
"""Every name the bridge may create, for cleanup that removes exactly these."""

ENVELOPE_KEYS = wire.KEYS
"""The wire keys of an envelope, in the order the bridge sends them."""
EVENTS = wire.SOURCE_EVENTS
"""What an interpreter may report (``agent_exited`` is clanker's launcher's alone)."""
BOUNDARIES = wire.BOUNDARIES
RESOLUTION = "input_resolved"
LOCATION = "location_changed"

_OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC

Envelope = dict[str, object]


class _Expired(BaseException):
    """A bounded step ran out of time (raised from the SIGALRM handler)."""


class Environment:
    """The validated ``CLANKER_ATTENTION_*`` variables."""

    __slots__ = ("interpreter", "socket", "state", "terminal", "token", "tty")

    def __init__(self, *, interpreter: str, socket: str, terminal: str, token: str,
                 state: str, tty: bool = False) -> None:
        self.interpreter = interpreter
        self.socket = socket
        self.tty = tty
        """Deliver as OSC frames on the controlling terminal (``socket`` is then unused)."""
        self.terminal = terminal
        self.token = token
        self.state = state


# -- input ----------------------------------------------------------------------------------


def read_stdin(deadline: float, fd: int = 0) -> bytes | None:
    """Read all of ``fd`` until end of file; ``None`` if too large, too late or unreadable."""
    chunks: list[bytes] = []
    size = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        try:
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(fd, 65_536)
        except (OSError, ValueError):
            return None
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_PAYLOAD:
            return None
        chunks.append(chunk)


def _reject_constant(name: str) -> object:
    raise ValueError("not JSON")


def parse_json(raw: bytes) -> tuple[bool, object]:
    """Strict JSON (UTF-8, no NaN or Infinity): ``(True, value)`` or ``(False, None)``."""
    try:
        return True, json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except Exception:
        return False, None


def _printable(value: str, limit: int) -> bool:
    return 0 < len(value) <= limit and value.isprintable()


def read_environment(environ: Mapping[str, str]) -> Environment | None:
    """The bridge's variables, or ``None`` when any is missing or invalid."""
    interpreter = environ.get("CLANKER_ATTENTION_INTERPRETER", "")
    sock = environ.get("CLANKER_ATTENTION_SOCKET", "")
    terminal = environ.get("CLANKER_ATTENTION_TERMINAL", "")
    token = environ.get("CLANKER_ATTENTION_TOKEN", "")
    state = environ.get("CLANKER_ATTENTION_STATE", "")
    transport = environ.get("CLANKER_ATTENTION_TRANSPORT", "socket")
    if not (os.path.isabs(interpreter) and os.path.isfile(interpreter)):
        return None
    tty = transport == "tty"
    if not (tty or (transport == "socket" and os.path.isabs(sock) and _printable(sock, 4096))):
        return None
    if not _printable(terminal, 256):
        return None
    if not (16 <= len(token) <= 512 and token.isascii() and token.isprintable()
            and " " not in token):
        return None
    if not (os.path.isabs(state) and _private_directory(state)):
        return None
    return Environment(interpreter=interpreter, socket=sock, terminal=terminal, token=token,
                       state=state, tty=tty)


def _private_directory(path: str) -> bool:
    """A real directory (not a link) owned by this user, closed to everyone else."""
    try:
        info = os.lstat(path)
    except (OSError, ValueError):
        return False
    return (stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
            and info.st_mode & 0o077 == 0)


# -- bounded calls --------------------------------------------------------------------------


def _expire(signum: int, frame: FrameType | None) -> None:
    raise _Expired


def bounded(seconds: float, call: Callable[[], T]) -> T:
    """Run ``call``, interrupting it with :class:`_Expired` after ``seconds``."""
    if seconds <= 0:
        raise _Expired
    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return call()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def load_interpreter(path: str, deadline: float) -> ModuleType | None:
    """Load the interpreter module by path; ``None`` if it cannot be loaded in time."""
    sys.dont_write_bytecode = True  # no files outside the state directory

    def load() -> ModuleType | None:
        spec = importlib.util.spec_from_file_location(INTERPRETER_MODULE, path)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        sys.modules[INTERPRETER_MODULE] = module
        spec.loader.exec_module(module)
        return module if callable(getattr(module, "interpret", None)) else None

    try:
        return bounded(min(LOAD_SECONDS, deadline - time.monotonic()), load)
    except BaseException:
        return None


def run_interpreter(
    module: ModuleType, raw: bytes, state: dict[str, object], deadline: float,
) -> tuple[list[object], dict[str, object]] | None:
    """Call ``interpret`` on a fresh parse of the payload; ``None`` if it raised or misbehaved."""
    ok, payload = parse_json(raw)
    if not ok:
        return None

    def call() -> object:
        return module.interpret(payload, state)

    try:
        result = bounded(min(INTERPRET_SECONDS, deadline - time.monotonic()), call)
    except BaseException:
        return None
    if not (isinstance(result, tuple | list) and len(result) == 2):
        return None
    envelopes, new_state = result
    if not (isinstance(envelopes, list) and isinstance(new_state, dict)):
        return None
    return envelopes, new_state


# -- envelopes ------------------------------------------------------------------------------


def sanitize(envelopes: list[object]) -> list[Envelope]:
    """The wire form of each well-formed envelope, in order; the others are dropped.

    The grid refuses a whole request for one malformed envelope, so each one
    is held to the wire schema (:mod:`~clanker.attention.wire`) here: an
    object whose ``event`` a source may report and whose keys all follow their
    rule, written in the schema's key order. Unknown keys and null values are
    left out; a bad droppable value (``cwd``, ``nativeEvent``) is left out and
    the event still goes; any other bad value drops the envelope.
    """
    clean: list[Envelope] = []
    for item in envelopes:
        if isinstance(item, dict):
            envelope = _wire_form(item)
            if envelope is not None:
                clean.append(envelope)
    return clean


def _wire_form(item: dict[object, object]) -> Envelope | None:
    event = item.get("event")
    if not (isinstance(event, str) and event in EVENTS):
        return None
    envelope: Envelope = {}
    for key in ENVELOPE_KEYS:
        value = item.get(key)
        if value is None:
            if key in wire.REQUIRED:
                return None
            continue
        if wire.problem(key, value) is not None or wire.misplaced(key, event) is not None:
            if key in wire.DROPPABLE:
                continue
            return None
        envelope[key] = value
    return envelope


def without_early_resolutions(batch: list[Envelope]) -> list[Envelope]:
    """Drop every ``input_resolved`` before the first turn boundary (poisoned state)."""
    kept: list[Envelope] = []
    crossed = False
    for envelope in batch:
        crossed = crossed or envelope["event"] in BOUNDARIES
        if crossed or envelope["event"] != RESOLUTION:
            kept.append(envelope)
    return kept


def encode_state(state: dict[str, object]) -> bytes | None:
    """The state as compact JSON, or ``None`` if it is not JSON-able or over 64 KiB."""
    try:
        data = json.dumps(state, separators=(",", ":"), allow_nan=False).encode("ascii")
    except Exception:
        return None
    return data if len(data) <= MAX_STATE else None


# -- state directory ------------------------------------------------------------------------


def acquire_lock(directory: str, deadline: float) -> int | None:
    """Take the terminal's exclusive ``flock``, waiting until ``deadline``; ``None`` if not.

    A blocking wait interrupted by a timer rather than polling: the kernel wakes
    a waiter the moment the holder lets go, so a hook is not starved by others
    that happened to retry at the right time.
    """
    try:
        fd = os.open(os.path.join(directory, LOCK_FILE),
                     os.O_RDWR | os.O_CREAT | _OPEN_FLAGS, 0o600)
    except OSError:
        return None
    try:
        bounded(deadline - time.monotonic(), lambda: fcntl.flock(fd, fcntl.LOCK_EX))
        return fd
    except (_Expired, OSError):
        os.close(fd)
        return None


def _read_file(path: str, limit: int) -> bytes | None:
    """A regular file's bytes if it holds at most ``limit``; ``FileNotFoundError`` if absent."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _OPEN_FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = os.read(fd, limit + 1)
        return data if len(data) <= limit else None
    finally:
        os.close(fd)


def read_state(directory: str) -> tuple[dict[str, object], bytes] | None:
    """The stored state and its bytes (``{}`` and ``b""`` when there is none yet), or
    ``None`` if it cannot be trusted."""
    try:
        data = _read_file(os.path.join(directory, STATE_FILE), MAX_STATE)
    except FileNotFoundError:
        return {}, b""
    except OSError:
        return None
    if data is None:
        return None
    ok, value = parse_json(data)
    return (value, data) if ok and isinstance(value, dict) else None


def _create(path: str, data: bytes, *, sync: bool = False) -> None:
    """Create ``path`` afresh (0600, never through a link) holding ``data``."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def write_state(directory: str, data: bytes) -> bool:
    """Replace the state atomically (temporary file, fsync, rename); say whether it worked."""
    temporary = os.path.join(directory, STATE_TEMPORARY)
    try:
        _create(temporary, data, sync=True)
        os.replace(temporary, os.path.join(directory, STATE_FILE))
    except OSError:
        _unlink(temporary)
        return False
    return True


def mark_poison(directory: str) -> bytes:
    """Create (or renew) the poison marker with a fresh nonce, best effort; return the nonce.

    The marker is truncated on open and then written, so a holder clearing it
    can tell whether anyone touched it since the holder's transaction began.
    """
    nonce = os.urandom(8).hex().encode("ascii")
    try:
        fd = os.open(os.path.join(directory, POISON_FILE),
                     os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _OPEN_FLAGS, 0o600)
        try:
            os.write(fd, nonce)
        finally:
            os.close(fd)
    except OSError:
        pass
    return nonce


def poison_nonce(directory: str) -> bytes | None:
    """The current marker's nonce (renewed if unreadable or empty), or ``None`` if healthy."""
    try:
        data = _read_file(os.path.join(directory, POISON_FILE), 64)
    except FileNotFoundError:
        return None
    except OSError:
        data = None
    return data if data else mark_poison(directory)


def clear_poison(directory: str, expected: bytes) -> None:
    """Remove the marker unless it was renewed since ``expected`` was read (lock held).

    A poisoned transaction that could not take the lock may renew the marker at
    any moment: moving it aside first and comparing afterwards means such a
    renewal either lands in a fresh ``poison`` or is seen and put back.
    """
    marker = os.path.join(directory, POISON_FILE)
    aside = os.path.join(directory, POISON_CLEARING)
    try:
        os.replace(marker, aside)
    except OSError:
        return
    try:
        current = _read_file(aside, 64)
    except OSError:
        current = None
    if current != expected:
        with contextlib.suppress(OSError):
            os.replace(aside, marker)
        return
    _unlink(aside)


def count_failure(directory: str) -> None:
    """Count one failed-closed transaction: append a byte to ``failed``, best effort.

    An append is atomic, so transactions that do not hold the lock can count
    too, and the file's size is the count; it stops at :data:`MAX_FAILED_CLOSED`.
    """
    try:
        fd = os.open(os.path.join(directory, FAILED_FILE),
                     os.O_WRONLY | os.O_CREAT | os.O_APPEND | _OPEN_FLAGS, 0o600)
        try:
            if os.fstat(fd).st_size < MAX_FAILED_CLOSED:
                os.write(fd, b"x")
        finally:
            os.close(fd)
    except OSError:
        pass


def failed_count(directory: str) -> int:
    """How many of this terminal's transactions failed closed (0 when none, or unreadable)."""
    try:
        info = os.lstat(os.path.join(directory, FAILED_FILE))
    except OSError:
        return 0
    return min(info.st_size, MAX_FAILED_CLOSED) if stat.S_ISREG(info.st_mode) else 0


# -- delivery -------------------------------------------------------------------------------


def deliver(env: Environment, batch: list[Envelope], deadline: float) -> list[object] | None:
    """Send one ``deliver`` request and read its reply; the decisions, or ``None`` on failure.

    The request carries this terminal's count of failed-closed transactions
    (``failedClosed``) whenever it is not zero; with a count, ``batch`` may be
    empty (the count alone is reported). One connection, one line out, one line
    back, at most ``DELIVERY_SECONDS`` in all.
    """
    failed = failed_count(env.state)
    if not (batch or failed):
        return []
    end = min(time.monotonic() + DELIVERY_SECONDS, deadline)
    request: dict[str, object] = {"v": 1, "op": "deliver", "terminal": env.terminal,
                                  "token": env.token, "envelopes": batch}
    if failed:
        request["failedClosed"] = failed
    try:
        line = json.dumps(request, separators=(",", ":"), allow_nan=False).encode("ascii")
    except Exception:
        return None
    if env.tty:
        return [] if _write_frame(line, end) else None
    reply = _exchange(env.socket, line, end) if len(line) < MAX_LINE else None
    if reply is None:
        return None
    ok, answer = parse_json(reply)
    if not (ok and isinstance(answer, dict) and answer.get("v") == 1
            and answer.get("ok") is True):
        return None
    decisions = answer.get("decisions")
    return decisions if isinstance(decisions, list) else []


def _exchange(path: str, line: bytes, end: float) -> bytes | None:
    """Connect, send ``line`` and its newline, and read one reply line before ``end``."""
    reply = b""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(_remaining(end))
            connection.connect(path)
            connection.settimeout(_remaining(end))
            connection.sendall(line + b"\n")
            while b"\n" not in reply and len(reply) <= MAX_LINE:
                connection.settimeout(_remaining(end))
                chunk = connection.recv(MAX_LINE + 1 - len(reply))
                if not chunk:
                    break
                reply += chunk
    except (OSError, ValueError):
        return None
    if b"\n" not in reply:
        return None
    line_out = reply.split(b"\n", 1)[0]
    return line_out if len(line_out) <= MAX_LINE else None


def frame(line: bytes) -> bytes | None:
    """``line`` (a ``deliver`` request) as one OSC frame, or ``None`` past its bound."""
    import base64

    data = (wire.FRAME_START.encode("ascii") + base64.b64encode(line)
            + wire.FRAME_END.encode("ascii"))
    return data if len(data) <= wire.MAX_FRAME_BYTES else None


_TERMINAL_FLAGS = os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC
MAX_ANCESTORS = 8


MAX_ENVIRON = 1 << 20


def open_terminal(command: str | None) -> int | None:
    """The harness's terminal, open for writing: the controlling terminal, else that
    of the nearest ancestor whose environment holds ``CLANKER_ATTENTION_COMMAND`` =
    ``command`` (see the module notes); ``None`` when there is none."""
    try:
        return os.open("/dev/tty", _TERMINAL_FLAGS)
    except OSError:
        pass
    if not command:
        return None
    entry = b"CLANKER_ATTENTION_COMMAND=" + os.fsencode(command)
    pid = os.getppid()
    for _ in range(MAX_ANCESTORS):
        if pid <= 1:
            return None
        if _launched(pid, entry):
            for number in (1, 2, 0):
                fd = _own_terminal(f"/proc/{pid}/fd/{number}")
                if fd is not None:
                    return fd
        pid = _parent(pid)
    return None


def _launched(pid: int, entry: bytes) -> bool:
    """Whether process ``pid``'s environment holds ``entry`` (it belongs to the launch)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            data = file.read(MAX_ENVIRON)
    except OSError:
        return False
    return entry in data.split(b"\0")


def _own_terminal(link: str) -> int | None:
    try:
        path = os.readlink(link)
    except OSError:
        return None
    if not path.startswith("/dev/pts/"):
        return None
    try:
        fd = os.open(path, _TERMINAL_FLAGS | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if os.isatty(fd) and os.fstat(fd).st_uid == os.geteuid():
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _parent(pid: int) -> int:
    """``pid``'s parent from ``/proc/<pid>/stat`` (0 when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read(4096).rsplit(b")", 1)[1].split()
        return int(fields[1])
    except (OSError, IndexError, ValueError):
        return 0


def _write_frame(line: bytes, end: float) -> bool:
    """Write ``line``'s frame to the harness's terminal before ``end``; say whether all
    of it was written (a terminal that stops reading is not waited on past ``end``)."""
    data = frame(line)
    if data is None:
        return False
    fd = open_terminal(os.environ.get("CLANKER_ATTENTION_COMMAND"))
    if fd is None:
        return False
    try:
        view = memoryview(data)
        while view:
            remaining = end - time.monotonic()
            if remaining <= 0:
                return False
            _, ready, _ = select.select([], [fd], [], remaining)
            if ready:
                try:
                    view = view[os.write(fd, view):]
                except BlockingIOError:
                    continue
        return True
    except (OSError, ValueError):
        return False
    finally:
        os.close(fd)


def _remaining(end: float) -> float:
    remaining = end - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    return remaining


def _accepted_boundary(batch: list[Envelope], decisions: list[object]) -> bool:
    """Whether the grid accepted a turn boundary of ``batch`` (decisions align with it)."""
    if len(decisions) != len(batch):
        return False
    return any(envelope["event"] in BOUNDARIES and decision == "accepted"
               for envelope, decision in zip(batch, decisions, strict=True))


def _only_locations(batch: list[Envelope]) -> bool:
    return all(envelope["event"] == LOCATION for envelope in batch)


# -- the transaction ------------------------------------------------------------------------


class Transaction:
    """One hook run's bookkeeping: whether it failed closed, and whether the grid heard.

    :meth:`fail` poisons and counts the transaction (once); every delivery
    carries the count; :meth:`finish` reports it alone when no delivery did.
    """

    __slots__ = ("env", "failed", "unreachable", "unreported")

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.failed = False
        self.unreported = False  # a count the grid has not been sent since it grew
        self.unreachable = False  # a delivery failed: do not spend the deadline on another

    def fail(self) -> None:
        """This transaction fails closed: (re)create the poison marker, count it once."""
        mark_poison(self.env.state)
        if not self.failed:
            self.failed = True
            self.count()

    def count(self) -> None:
        """Count one failed-closed transaction (this one, or a dead holder's)."""
        count_failure(self.env.state)
        self.unreported = True

    def deliver(self, batch: list[Envelope], deadline: float) -> list[object] | None:
        decisions = deliver(self.env, batch, deadline)
        if decisions is None:
            self.unreachable = True
        else:
            self.unreported = False
        return decisions

    def finish(self, deadline: float) -> None:
        """Report a count no delivery carried, alone (not when the grid just failed us)."""
        if self.unreported and not self.unreachable:
            self.deliver([], deadline)


def lock_deadline(deadline: float) -> float:
    """Until when to wait for the lock: the last moment from which the transaction still
    finishes within its bounds (two interpretations, its own and the rerun on empty state
    when it fails closed, and one delivery). With the default bounds, 1.5 s after start."""
    return deadline - (2 * INTERPRET_SECONDS + DELIVERY_SECONDS)


def transact(env: Environment, module: ModuleType, raw: bytes, deadline: float,
             tx: Transaction | None = None) -> Transaction:
    """One read, interpret, write, deliver transaction, failing closed (see the module doc).

    Returns its bookkeeping; the caller reports a count nothing carried
    (:meth:`Transaction.finish`) after the lock is let go.
    """
    tx = Transaction(env) if tx is None else tx
    lock = acquire_lock(env.state, lock_deadline(deadline))
    if lock is None:
        _unlocked(tx, module, raw, deadline)
        return tx
    try:
        _locked(tx, module, raw, deadline)
    finally:
        os.close(lock)
    return tx


def _unlocked(tx: Transaction, module: ModuleType, raw: bytes, deadline: float) -> None:
    """The lock could not be taken: report from empty state, store nothing, poison."""
    tx.fail()
    if _from_empty_state(tx, module, raw, deadline, store=False):
        # Renewed after delivery: a holder whose boundary the grid saw before these
        # events cannot clear it.
        mark_poison(tx.env.state)


def _from_empty_state(tx: Transaction, module: ModuleType, raw: bytes, deadline: float, *,
                      store: bool) -> bool:
    """The failed-closed run: interpret on empty state, deliver all but resolutions.

    ``store`` replaces the stored state with the new one (the stored state is
    unusable); otherwise it stays. Says whether anything was delivered.
    """
    result = run_interpreter(module, raw, {}, deadline)
    if result is None:
        return False
    envelopes, new_state = result
    if store:
        data = encode_state(new_state)
        if data is not None:
            write_state(tx.env.state, data)
    batch = [e for e in sanitize(envelopes) if e["event"] != RESOLUTION][:MAX_ENVELOPES]
    if not batch:
        return False
    tx.deliver(batch, deadline)
    return True


def _locked(tx: Transaction, module: ModuleType, raw: bytes, deadline: float) -> None:
    directory = tx.env.state
    inflight = os.path.join(directory, INFLIGHT_FILE)
    nonce = poison_nonce(directory)
    if os.path.lexists(inflight):
        # The last holder died inside its transaction: its event is lost, and the
        # state may hold events the grid never saw. This one counts it.
        nonce = mark_poison(directory)
        tx.count()
    try:
        _create(inflight, b"")
    except OSError:
        # Without the marker a death in here would go unseen: store nothing.
        tx.fail()
        _from_empty_state(tx, module, raw, deadline, store=False)
        return
    try:
        _interpret_and_deliver(tx, module, raw, deadline, nonce)
    finally:
        _unlink(inflight)


def _interpret_and_deliver(tx: Transaction, module: ModuleType, raw: bytes, deadline: float,
                           nonce: bytes | None) -> None:
    directory = tx.env.state
    stored = read_state(directory)
    if stored is None:
        tx.fail()
        _from_empty_state(tx, module, raw, deadline, store=True)
        return
    state, stored_bytes = stored
    result = run_interpreter(module, raw, state, deadline)
    if result is None:
        # Past its bound, raised or malformed: this event's effect on the state is
        # lost, but the stored state is still what the grid has seen, so it stays.
        tx.fail()
        _from_empty_state(tx, module, raw, deadline, store=False)
        return
    envelopes, new_state = result
    batch = sanitize(envelopes)
    if len(batch) != len(envelopes) or len(batch) > MAX_ENVELOPES:
        tx.fail()  # an envelope the grid would refuse, or past the bound: events are lost
    if tx.failed:
        batch = [e for e in batch if e["event"] != RESOLUTION]
    elif nonce is not None:
        batch = without_early_resolutions(batch)
    batch = batch[:MAX_ENVELOPES]
    data = encode_state(new_state)
    if data is None or not (data == stored_bytes or write_state(directory, data)):
        tx.fail()
        _from_empty_state(tx, module, raw, deadline, store=True)
        return
    if not batch:
        return
    decisions = tx.deliver(batch, deadline)
    if decisions is None:
        if not _only_locations(batch):
            tx.fail()
    elif not tx.failed and nonce is not None and _accepted_boundary(batch, decisions):
        clear_poison(directory, nonce)


# -- entry point ----------------------------------------------------------------------------


def _write_stdout(module: ModuleType | None) -> None:
    text = getattr(module, "HOOK_STDOUT", None)
    if not isinstance(text, str) or not text:
        return
    try:
        data = memoryview(text.encode("utf-8"))
        while data:
            data = data[os.write(1, data):]
    except (OSError, UnicodeError):
        pass


def main() -> None:
    """Run the hook once. Never raises for anything the harness or the files may hold."""
    started = time.monotonic()
    deadline = started + TOTAL_SECONDS
    # Nothing the interpreter (or Python) might print reaches the harness.
    sink = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the hook
    sys.stdout = sys.stderr = sink
    raw = read_stdin(started + STDIN_SECONDS)
    env = read_environment(os.environ)
    if env is None:
        return  # not a clanker launch (or not this user's): nothing to report to
    module = load_interpreter(env.interpreter, deadline)
    tx = Transaction(env)
    try:
        if raw is None or module is None or not parse_json(raw)[0]:
            tx.fail()  # the event cannot be known: nothing to interpret, but it is counted
        else:
            transact(env, module, raw, deadline, tx)
        tx.finish(deadline)
    finally:
        _write_stdout(module)


if __name__ == "__main__":
    with contextlib.suppress(BaseException):  # the hook always exits 0, silently
        main()
    os._exit(0)
