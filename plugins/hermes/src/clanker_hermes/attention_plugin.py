"""clanker's attention observer, a Hermes Agent plugin (standard library only).

clanker copies this file into a launch-owned plugin directory as
``clanker-attention/__init__.py``; Hermes imports it and calls ``register(ctx)``.
It never imports clanker and is never imported by clanker.

It reads its route when Hermes loads it, and with no valid route registers
nothing (inert). A local launch gives ``CLANKER_ATTENTION_SOCKET``,
``..._TERMINAL`` and ``..._TOKEN``: each batch goes to the grid's socket
(``deliver``, one request per connection, 1 s timeout). A launch on an SSH host
gives ``CLANKER_ATTENTION_TRANSPORT=tty`` and ``CLANKER_ATTENTION_CREDENTIAL``,
the launch's credential file (``{"v": 1, "terminal", "token"}``, a regular file
of this user, mode 0600, at most 4 KiB; the token is never in the environment
there): each batch is written to Hermes's own terminal as one OSC frame, the
frame clanker's hook bridge and JavaScript extensions write (``ESC ] 7717 ;
clanker-attention ; <base64 of the JSON request> BEL``, at most 32 KiB), which
the launcher on the person's machine takes out of the terminal stream. Nothing
comes back on that route: a frame written whole counts as delivered; a
terminal that cannot be found or does not take a frame within 1 s stops
delivery for good.

Its hook callbacks only copy a few ids into a bounded queue and return
``None`` (observer only: no context is injected, nothing is vetoed). One
daemon thread turns them into lifecycle envelopes and delivers them, in
order. Every error is swallowed; a full queue or a revoked credential stops
delivery for the rest of the process. Prompts, responses, commands,
descriptions and tool arguments are never read into the queue.

Native events (hermes-agent 0.19.0; the spec's newer ``parent_session_id`` on
``pre_llm_call`` is honoured when present):

- ``subagent_start``: remembers ``child_session_id`` as a child session.
- ``pre_llm_call`` (``session_id``, ``turn_id``, ``task_id``): a root turn when
  it names no parent and is not a child session; the first root turn binds the
  root session. Its scope is remembered per ``turn_id``. Root: ``turn_started``.
- ``post_llm_call`` of a remembered root turn: ``turn_completed``. Hermes fires
  it only for a turn with a final response that was not interrupted.
- ``on_session_end`` (end of every turn, ``completed`` / ``interrupted``) of a
  root turn that is still open: ``turn_interrupted``, ``turn_failed`` or, for a
  completed turn without a response, ``turn_completed``.
- ``pre_approval_request`` / ``post_approval_response`` tied to an open root
  turn by ``turn_id`` (``surface`` ``"smart"`` is an auxiliary model, never a
  human, and is ignored): ``input_requested`` / ``input_resolved``, the request
  identity being ``tool_call_id``, else a fingerprint of ``pattern_key``.
- ``on_session_finalize`` naming the root session, or ``on_session_reset`` (a
  new, resumed or branched conversation in this process) while a root is
  bound: ``session_ended`` for the root. The next root turn binds again.

Hermes may rotate its session id on context compression. A rotation is
reported as ``session_continued`` only when it is proven: a root turn's
``turn_id`` is ``<session at turn start>:<task>:<id>`` and a later event of that
turn names another session, or Hermes's own ``state.db`` records the new
session as a child of the root that ended with ``end_reason='compression'``.
An unproven new session is not trusted (its turns are dropped).
"""

from __future__ import annotations

import base64
import collections
import contextlib
import hashlib
import importlib
import json
import os
import queue
import re
import select
import socket
import sqlite3
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any, Final

__all__ = [
    "MAX_QUEUED",
    "Observer",
    "compression_successor",
    "host_credential",
    "loaded_observer",
    "register",
]

MAX_QUEUED: Final = 256
"""Events waiting for delivery; past this the observer stops for good."""
TIMEOUT_SECONDS: Final = 1.0
MAX_REPLY_BYTES: Final = 65_536
MAX_TURNS: Final = 128
MAX_CHILD_SESSIONS: Final = 256
MAX_LINEAGE_HOPS: Final = 8
MAX_ID_LENGTH: Final = 256
MAX_CWD_BYTES: Final = 1024

_ENV_SOCKET: Final = "CLANKER_ATTENTION_SOCKET"
_ENV_TERMINAL: Final = "CLANKER_ATTENTION_TERMINAL"
_ENV_CREDENTIAL: Final = "CLANKER_ATTENTION_" + "TOKEN"
_ENV_TRANSPORT: Final = "CLANKER_ATTENTION_TRANSPORT"
_ENV_CREDENTIAL_FILE: Final = "CLANKER_ATTENTION_CREDENTIAL"

# The terminal frame (clanker.attention.wire; repeated here: this file imports no clanker).
FRAME_START: Final = b"\x1b]7717;clanker-attention;"
FRAME_END: Final = b"\x07"
MAX_FRAME_BYTES: Final = 32_768
MAX_CREDENTIAL_BYTES: Final = 4096
_CREDENTIAL_TEXT: Final = re.compile(r"[\x21-\x7e]{1,256}")
_TERMINAL_FLAGS: Final = os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC

_ROOT: Final = "root"
_CHILD: Final = "child"
_OTHER: Final = "other"  # an unproven session: neither root nor a known child


def _text_id(value: object) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= MAX_ID_LENGTH and value.isprintable():
        return value
    return None


def _cwd(value: object) -> str | None:
    if not isinstance(value, str) or not value.startswith("/") or not value.isprintable():
        return None
    try:
        if len(value.encode("utf-8")) > MAX_CWD_BYTES:
            return None
    except UnicodeEncodeError:
        return None
    return value


def _fingerprint(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _terminal_cwd(task_id: object) -> str | None:
    """The working directory of the task's local terminal, when one is active.

    Read without taking Hermes's lock (a dictionary lookup and an attribute);
    a container or remote backend reports nothing.
    """
    if not isinstance(task_id, str):
        return None
    try:
        module = sys.modules.get("tools.terminal_tool")
        environments = getattr(module, "_active_environments", None)
        if not isinstance(environments, dict):
            return None
        environment = environments.get(task_id)
        if environment is None or type(environment).__name__ != "LocalEnvironment":
            return None
        return _cwd(getattr(environment, "cwd", None))
    except Exception:
        return None


def _state_db() -> Path | None:
    """Hermes's ``state.db``, where Hermes's own ``get_hermes_home()`` puts it."""
    with contextlib.suppress(Exception):
        constants = importlib.import_module("hermes_constants")  # Hermes's own module
        return Path(constants.get_hermes_home()) / "state.db"
    home = os.environ.get("HERMES_HOME", "").strip()
    return Path(home) / "state.db" if home else Path.home() / ".hermes" / "state.db"


def compression_successor(database: Path | None, old: str, new: str) -> bool:
    """Whether Hermes's state records ``new`` as a compression continuation of ``old``.

    Follows ``parent_session_id`` from ``new`` (a few hops) while each parent
    ended with ``end_reason='compression'``; a delegation child does not qualify.
    Any failure to read is a ``False`` (fail closed).
    """
    if database is None:
        return False
    try:
        connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=0.5)
    except Exception:
        return False
    try:
        return _lineage_reaches(connection, old, new)
    except Exception:
        return False
    finally:
        connection.close()


def _lineage_reaches(connection: sqlite3.Connection, old: str, new: str) -> bool:
    current = new
    for _ in range(MAX_LINEAGE_HOPS):
        row = connection.execute(
            "SELECT parent_session_id FROM sessions WHERE id = ?", (current,)
        ).fetchone()
        parent = row[0] if row is not None else None
        ended = connection.execute(
            "SELECT end_reason FROM sessions WHERE id = ?", (parent,)
        ).fetchone() if isinstance(parent, str) and parent else None
        if ended is None or ended[0] != "compression":
            return False  # no parent, or a parent that did not end by compression
        if parent == old:
            return True
        current = str(parent)
    return False


def host_credential(path: str) -> tuple[str, str] | None:
    """The launch's ``(terminal, token)`` from its credential file on an SSH host, or ``None``.

    Only a regular file (not a link) of this user, closed to everyone else, at
    most :data:`MAX_CREDENTIAL_BYTES`, holding ``{"v": 1, "terminal", "token"}``.
    """
    value = _read_private_json(path)
    if not isinstance(value, dict) or value.get("v") != 1:
        return None
    terminal, token = value.get("terminal"), value.get("token")
    if not all(isinstance(text, str) and _CREDENTIAL_TEXT.fullmatch(text)
               for text in (terminal, token)):
        return None
    return str(terminal), str(token)


def _read_private_json(path: str) -> object:
    """The JSON in ``path`` when it is a small private regular file of this user, else ``None``."""
    if not path.startswith("/"):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except (OSError, ValueError):
        return None
    try:
        info = os.fstat(fd)
        if (not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid()
                or info.st_mode & 0o077 or info.st_size > MAX_CREDENTIAL_BYTES):
            return None
        return json.loads(os.read(fd, MAX_CREDENTIAL_BYTES + 1).decode("utf-8"))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def open_terminal() -> int | None:
    """This process's terminal, open for writing: its controlling terminal, else the
    first of its standard descriptors that is a pseudo-terminal of this user."""
    try:
        return os.open("/dev/tty", _TERMINAL_FLAGS)
    except OSError:
        pass
    for number in (1, 2, 0):
        try:
            target = os.readlink(f"/proc/self/fd/{number}")
        except OSError:
            continue
        if not target.startswith("/dev/pts/"):
            continue
        try:
            fd = os.open(target, _TERMINAL_FLAGS | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if os.isatty(fd) and os.fstat(fd).st_uid == os.geteuid():
                return fd
        except OSError:
            pass
        os.close(fd)
    return None


def frame(line: bytes) -> bytes | None:
    """``line`` (a ``deliver`` request) as one terminal frame, or ``None`` past its bound."""
    data = FRAME_START + base64.b64encode(line) + FRAME_END
    return data if len(data) <= MAX_FRAME_BYTES else None


def _write_all(fd: int, data: bytes, timeout: float) -> bool:
    """Write all of ``data`` to ``fd`` within ``timeout``; a terminal that stops
    reading is not waited on past it."""
    end = time.monotonic() + timeout
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


def _request_id(facts: dict[str, Any]) -> str | None:
    """The approval's identity: the tool call id, else a fingerprint of the pattern key."""
    request = _text_id(facts.get("tool_call_id"))
    if request is not None:
        return request
    pattern = facts.get("pattern_key")
    if isinstance(pattern, str) and pattern:
        return "pattern-" + _fingerprint(pattern)
    return None


class Observer:
    """Maps Hermes hook calls to envelopes and delivers them off Hermes's threads."""

    def __init__(
        self, socket_path: str | None, terminal: str, token: str, *,
        state_db: Path | None = None,
    ) -> None:
        """``socket_path`` ``None``: deliver as frames on this process's terminal."""
        self._socket_path = socket_path
        self._terminal_fd: int | None = None
        self._terminal = terminal
        self._token = token
        self._state_db = state_db
        self._queue: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue(maxsize=MAX_QUEUED)
        self._stopped = False
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        # Worker-thread state.
        self._root: str | None = None
        self._turns: collections.OrderedDict[str, tuple[str, str, bool]] = (
            collections.OrderedDict()
        )  # turn_id -> (scope, session at turn start, open)
        self._children: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._waits: dict[str, set[str]] = {}  # open root turn -> outstanding input ids

    # -- Hermes's side: never blocks, never raises ------------------------------------------

    def submit(self, event: str, facts: dict[str, Any]) -> None:
        if self._stopped:
            return
        try:
            self._queue.put_nowait((event, facts))
        except queue.Full:
            self._stopped = True  # drop, and stop: an ordering gap would mislead
            return
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    thread = threading.Thread(
                        target=self._run, name="clanker-attention", daemon=True
                    )
                    thread.start()
                    self._thread = thread

    def drain(self, timeout: float) -> bool:
        """Wait until every submitted event is handled (for tests); ``False`` on timeout."""
        done = threading.Event()

        def wait() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=wait, daemon=True).start()
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            event, facts = self._queue.get()
            try:
                with contextlib.suppress(Exception):
                    envelopes = [] if self._stopped else self.handle(event, facts)
                    if envelopes:
                        self._deliver(envelopes)
            finally:
                self._queue.task_done()

    # -- the mapping (worker thread) --------------------------------------------------------

    def handle(self, event: str, facts: dict[str, Any]) -> list[dict[str, Any]]:
        if event == "pre_llm_call":
            return self._turn_start(facts)
        if event in ("post_llm_call", "on_session_end"):
            return self._turn_end(event, facts)
        if event in ("pre_approval_request", "post_approval_response"):
            return self._approval(event, facts)
        if event in ("on_session_finalize", "on_session_reset"):
            return self._boundary(event, facts)
        if event == "subagent_start":
            child = _text_id(facts.get("child_session_id"))
            if child is not None:
                self._children[child] = None
                while len(self._children) > MAX_CHILD_SESSIONS:
                    self._children.popitem(last=False)
        return []

    def _boundary(self, event: str, facts: dict[str, Any]) -> list[dict[str, Any]]:
        session = _text_id(facts.get("session_id"))
        root = self._root
        # Finalize closes the named session: only the root's ends it here.
        # Reset announces the session a new/resumed/branched conversation now
        # runs as (the TUI names the new one, the classic CLI the one reset):
        # either way the bound root's conversation is over.
        if session is None or root is None or (
            event == "on_session_finalize" and session != root
        ):
            return []
        self._root = None
        self._turns.clear()
        self._waits.clear()
        return [self._envelope("session_ended", root, None, event)]

    def _turn_start(self, facts: dict[str, Any]) -> list[dict[str, Any]]:
        session = _text_id(facts.get("session_id"))
        turn = _text_id(facts.get("turn_id"))
        if session is None or turn is None or turn in self._turns:
            return []
        parent = facts.get("parent_session_id")
        if (facts.get("has_parent_field") and parent) or session in self._children:
            self._remember(turn, _CHILD, session)
            return []
        envelopes: list[dict[str, Any]] = []
        if self._root is None:
            self._root = session
        elif session != self._root:
            if not compression_successor(self._state_db, self._root, session):
                self._remember(turn, _OTHER, session)
                return []
            envelopes.append(self._continued(session))
        self._remember(turn, _ROOT, session)
        self._waits[turn] = set()
        envelopes.append(self._envelope(
            "turn_started", session, turn, "pre_llm_call", cwd=facts.get("cwd")
        ))
        return envelopes

    def _turn_end(self, event: str, facts: dict[str, Any]) -> list[dict[str, Any]]:
        turn = _text_id(facts.get("turn_id"))
        remembered = self._turns.get(turn) if turn is not None else None
        if turn is None or remembered is None:
            return []  # a turn never seen start: fail closed
        scope, started_under, open_ = remembered
        if scope != _ROOT or not open_ or self._root is None:
            return []
        envelopes = self._follow_rotation(turn, started_under, _text_id(facts.get("session_id")))
        if event == "post_llm_call":
            semantic = "turn_completed"
        elif facts.get("interrupted") is True:
            semantic = "turn_interrupted"
        elif facts.get("completed") is True:
            semantic = "turn_completed"
        else:
            semantic = "turn_failed"
        self._turns[turn] = (scope, started_under, False)
        self._waits.pop(turn, None)
        cwd = facts.get("cwd") if semantic == "turn_completed" else None
        envelopes.append(self._envelope(semantic, self._root, turn, event, cwd=cwd))
        return envelopes

    def _approval(self, event: str, facts: dict[str, Any]) -> list[dict[str, Any]]:
        turn = _text_id(facts.get("turn_id"))
        remembered = self._turns.get(turn) if turn is not None else None
        request = _request_id(facts)
        if (
            facts.get("surface") == "smart"  # the auxiliary model decides; no human is asked
            or turn is None
            or remembered is None
            or self._root is None
            or request is None
        ):
            return []
        scope, started_under, open_ = remembered
        waits = self._waits.setdefault(turn, set())
        requested = event == "pre_approval_request"
        if scope != _ROOT or not open_ or (request in waits) == requested:
            return []  # not an open root turn, a repeated request or an unknown resolution
        if requested:
            waits.add(request)
        else:
            waits.discard(request)
        semantic = "input_requested" if requested else "input_resolved"
        envelopes = self._follow_rotation(turn, started_under, None)
        envelopes.append(self._envelope(semantic, self._root, turn, event, input_id=request))
        return envelopes

    def _follow_rotation(
        self, turn: str, started_under: str, session: str | None
    ) -> list[dict[str, Any]]:
        """``session_continued`` when a root turn's later event names a new session.

        Proven by the turn itself: it began under the bound root (its id starts
        with that session) and Hermes's session changed while it ran.
        """
        if (
            session is None
            or self._root is None
            or session == self._root
            or started_under != self._root
            or not turn.startswith(self._root + ":")
        ):
            return []
        return [self._continued(session)]

    def _continued(self, session: str) -> dict[str, Any]:
        old = self._root
        self._root = session
        envelope = self._envelope("session_continued", session, None, "compression")
        envelope["continuesSessionId"] = old
        return envelope

    def _remember(self, turn: str, scope: str, session: str) -> None:
        self._turns[turn] = (scope, session, True)
        while len(self._turns) > MAX_TURNS:
            stale, _ = self._turns.popitem(last=False)
            self._waits.pop(stale, None)

    @staticmethod
    def _envelope(
        event: str,
        session: str,
        turn: str | None,
        native: str,
        *,
        input_id: str | None = None,
        cwd: object = None,
    ) -> dict[str, Any]:
        envelope: dict[str, Any] = {
            "event": event,
            "scope": _ROOT,
            "sessionId": session,
            "turnId": turn,
            "nativeEvent": native,
        }
        if input_id is not None:
            envelope["inputId"] = input_id
        location = _cwd(cwd)
        if location is not None:
            envelope["cwd"] = location
        return envelope

    # -- delivery (worker thread) -----------------------------------------------------------

    def _deliver(self, envelopes: list[dict[str, Any]]) -> None:
        request = {
            "v": 1,
            "op": "deliver",
            "terminal": self._terminal,
            "token": self._token,
            "envelopes": envelopes[:16],
        }
        if self._socket_path is None:
            self._write_frame(json.dumps(request, separators=(",", ":")).encode("utf-8"))
            return
        line = (json.dumps(request, separators=(",", ":")) + "\n").encode("utf-8")
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                connection.settimeout(TIMEOUT_SECONDS)
                connection.connect(self._socket_path)
                connection.sendall(line)
                reply = b""
                while b"\n" not in reply and len(reply) < MAX_REPLY_BYTES:
                    chunk = connection.recv(4096)
                    if not chunk:
                        break
                    reply += chunk
        except (OSError, ValueError):
            return  # the grid is down or slow: this event is lost, later ones may land
        try:
            answer = json.loads(reply.partition(b"\n")[0])
        except ValueError:
            return
        if isinstance(answer, dict) and answer.get("error") == "unauthorized":
            self._stopped = True  # the credential was revoked: nothing will be accepted


    def _write_frame(self, line: bytes) -> None:
        """One frame on the terminal; no terminal, or one that did not take it in time,
        stops delivery for good (a half-written frame would corrupt the next one)."""
        data = frame(line)
        if data is None:
            return  # a batch past the frame's bound is lost; later ones may fit
        if self._terminal_fd is None:
            self._terminal_fd = open_terminal()
            if self._terminal_fd is None:
                self._stopped = True
                return
        try:
            written = _write_all(self._terminal_fd, data, TIMEOUT_SECONDS)
        except (OSError, ValueError):
            written = False
        if not written:
            self._stopped = True


# -- the Hermes plugin entry point --------------------------------------------------------------

_LOADED: dict[str, Observer] = {}


def loaded_observer() -> Observer | None:
    """The observer ``register`` started in this process, if any."""
    return _LOADED.get("observer")


def _hook(observer: Observer, event: str, keys: tuple[str, ...]) -> Any:
    def callback(**kwargs: Any) -> None:
        with contextlib.suppress(Exception):
            facts: dict[str, Any] = {key: kwargs.get(key) for key in keys}
            if event == "pre_llm_call":
                facts["has_parent_field"] = "parent_session_id" in kwargs
                facts["parent_session_id"] = kwargs.get("parent_session_id")
            if event in ("pre_llm_call", "post_llm_call"):
                facts["cwd"] = _terminal_cwd(kwargs.get("task_id"))
            observer.submit(event, facts)

    callback.__name__ = f"clanker_attention_{event}"
    return callback


_HOOKS: Final = {
    "subagent_start": ("child_session_id",),
    "pre_llm_call": ("session_id", "turn_id", "task_id"),
    "post_llm_call": ("session_id", "turn_id", "task_id"),
    "on_session_end": ("session_id", "turn_id", "completed", "interrupted"),
    "pre_approval_request": ("turn_id", "tool_call_id", "pattern_key", "surface"),
    "post_approval_response": ("turn_id", "tool_call_id", "pattern_key", "surface"),
    "on_session_finalize": ("session_id",),
    "on_session_reset": ("session_id",),
}


def register(ctx: Any) -> None:
    """Hermes's plugin entry point: inert unless this process belongs to a clanker launch."""
    socket_path: str | None
    if os.environ.get(_ENV_TRANSPORT) == "tty":
        credential = host_credential(os.environ.get(_ENV_CREDENTIAL_FILE, ""))
        if credential is None:
            return
        socket_path, (terminal, token) = None, credential
    else:
        socket_path = os.environ.get(_ENV_SOCKET, "")
        terminal = os.environ.get(_ENV_TERMINAL, "")
        token = os.environ.get(_ENV_CREDENTIAL, "")
        if not socket_path or not terminal or not token:
            return
    observer = Observer(socket_path, terminal, token, state_db=_state_db())
    _LOADED["observer"] = observer
    for event, keys in _HOOKS.items():
        ctx.register_hook(event, _hook(observer, event, keys))
