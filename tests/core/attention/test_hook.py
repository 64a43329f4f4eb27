"""The hook bridge, run the way a harness runs it: ``python -I -S hook.py`` in a real process.

Every test spawns the real bridge with a real interpreter file and a real Unix
socket grid double, and looks at what the double received and what the bridge
left in its private state directory.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import shutil
import signal
import socketserver
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clanker.attention import hook, wire
from clanker.attention.envelope import parse_envelope
from clanker.grid.protocol import DeliverRequest, ProtocolError, parse_request

HOOK = Path(hook.__file__)
TOKEN = "ab" * 32
TERMINAL = "term-1"
NEUTRAL = '{"continue":true}\n'
SESSION = "s-1"

INTERPRETER = textwrap.dedent(f'''
    """A test interpreter: the payload says what to report (standard library only)."""
    import json
    import sys
    import time

    HOOK_STDOUT = {NEUTRAL!r}


    def interpret(payload, state):
        if not isinstance(payload, dict):
            return [], state
        if payload.get("raise"):
            raise RuntimeError("interpreter failure")
        if "entered" in payload:
            with open(payload["entered"], "w") as file:
                file.write("entered")
            while True:  # hangs, ignoring even the bridge's own time limit
                try:
                    time.sleep(60)
                except BaseException:
                    pass
        if payload.get("slow") and state:
            time.sleep(60)  # far past the bridge's bound, on stored state only
        if "modules" in payload:
            with open(payload["modules"], "w") as file:
                json.dump(sorted(sys.modules), file)
        seen = state.get("seen", 0)
        emit = []
        for item in payload.get("emit", []):
            if isinstance(item, dict) and "nativeEvent" not in item:
                item = dict(item, nativeEvent="seen=%d" % seen)
            emit.append(item)
        new_state = {{"seen": seen + 1}}
        if payload.get("big_state") and state:
            new_state["blob"] = "x" * 70000
        if payload.get("set_state") and state:
            new_state["bad"] = {{1, 2}}
        return emit, new_state
''')

ECHO_INTERPRETER = textwrap.dedent(f'''
    """Reports whatever the payload is, as envelopes (to exercise the sanitizer)."""
    HOOK_STDOUT = {NEUTRAL!r}


    def interpret(payload, state):
        return (payload if isinstance(payload, list) else [payload]), state
''')


def envelope(event: str, turn: str | None = "t-1", **extra: object) -> dict[str, object]:
    return {"event": event, "scope": "root", "sessionId": SESSION, "turnId": turn, **extra}


def events(envelopes: list[dict[str, Any]]) -> list[str]:
    return [e["event"] for e in envelopes]


# -- the grid double --------------------------------------------------------------------------


class GridDouble:
    """A grid stand-in speaking the ``deliver`` request of the attention brief (section 3).

    One JSON line in (at most 65,536 bytes, ``"v": 1``, ``"op": "deliver"``, the
    terminal and its raw token, at most 16 envelopes), one JSON line back:
    ``{"v":1,"ok":true,"decisions":[...]}`` or ``{"v":1,"ok":false,"error":word}``.
    It records every authorized request, and in ``log`` when each was received
    and answered; each line also goes through the real grid's request parser,
    and what that parser would refuse is kept in ``invalid`` (the fixture
    checks it stays empty). ``refuse`` makes it answer ``ok:false``;
    ``decide`` chooses each envelope's decision; clearing ``release`` makes it
    hold its reply until the event is set again.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.requests: list[dict[str, Any]] = []
        self.invalid: list[str] = []
        self.log: list[str] = []
        self.refuse: str | None = None
        self.decide: Callable[[dict[str, Any]], str] = lambda _: "accepted"
        self.received = threading.Event()
        self.release = threading.Event()
        self.release.set()
        grid = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline(65_537)
                if not line.endswith(b"\n") or len(line) > 65_537:
                    return
                reply = grid.answer(line)
                grid.received.set()
                grid.release.wait(10)
                grid.log.append("replying")
                with contextlib.suppress(OSError):
                    self.wfile.write(json.dumps(reply).encode() + b"\n")

        class Server(socketserver.ThreadingUnixStreamServer):
            daemon_threads = True
            block_on_close = False

        self.server = Server(path, Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, line: bytes) -> dict[str, object]:
        try:
            if not isinstance(parse_request(line.rstrip(b"\n")), DeliverRequest):
                self.invalid.append("not a deliver request")
        except ProtocolError as error:
            self.invalid.append(error.reason)
        try:
            request = json.loads(line)
        except ValueError:
            return {"v": 1, "ok": False, "error": "bad-request"}
        if not isinstance(request, dict) or request.get("v") != 1:
            return {"v": 1, "ok": False, "error": "unsupported-version"}
        if request.get("op") != "deliver" or not isinstance(request.get("envelopes"), list):
            return {"v": 1, "ok": False, "error": "bad-request"}
        if request.get("terminal") != TERMINAL or request.get("token") != TOKEN:
            return {"v": 1, "ok": False, "error": "unauthorized"}
        if len(request["envelopes"]) > 16:
            return {"v": 1, "ok": False, "error": "too-large"}
        self.requests.append(request)
        self.log.append("received")
        if self.refuse is not None:
            return {"v": 1, "ok": False, "error": self.refuse}
        return {"v": 1, "ok": True,
                "decisions": [self.decide(item) for item in request["envelopes"]]}

    @property
    def delivered(self) -> list[dict[str, Any]]:
        return [item for request in self.requests for item in request["envelopes"]]

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


# -- running the bridge -----------------------------------------------------------------------


class Bridge:
    """One terminal's bridge: its private state directory, interpreter and environment."""

    def __init__(self, tmp_path: Path, socket_path: str, interpreter: str = INTERPRETER) -> None:
        self.state = tmp_path / "state"
        self.state.mkdir(mode=0o700)
        self.interpreter = tmp_path / "interpreter.py"
        self.interpreter.write_text(interpreter)
        self.socket = socket_path
        self.tmp_path = tmp_path

    @property
    def env(self) -> dict[str, str]:
        return {
            "CLANKER_ATTENTION_COMMAND": str(self.tmp_path / "hook"),
            "CLANKER_ATTENTION_INTERPRETER": str(self.interpreter),
            "CLANKER_ATTENTION_SOCKET": self.socket,
            "CLANKER_ATTENTION_TERMINAL": TERMINAL,
            "CLANKER_ATTENTION_TOKEN": TOKEN,
            "CLANKER_ATTENTION_STATE": str(self.state),
        }

    def argv(self) -> list[str]:
        return [sys.executable, "-I", "-S", str(HOOK)]

    def run(self, payload: object = None, *, stdin: bytes | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
        data = stdin if stdin is not None else json.dumps(payload).encode()
        return subprocess.run(self.argv(), input=data, capture_output=True,
                              env=self.env if env is None else env, timeout=30, check=False)

    def emit(self, *items: object, **options: object) -> subprocess.CompletedProcess[bytes]:
        done = self.run({"emit": list(items), **options})
        assert done.returncode == 0
        assert done.stdout == NEUTRAL.encode()
        assert done.stderr == b""
        return done

    def start(self, payload: object, *, close: bool = True) -> subprocess.Popen[bytes]:
        """Start the bridge with ``payload`` on stdin (left open unless ``close``)."""
        process = subprocess.Popen(self.argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=self.env)
        assert process.stdin is not None
        process.stdin.write(json.dumps(payload).encode())
        process.stdin.flush()
        if close:
            process.stdin.close()
        return process

    @property
    def poisoned(self) -> bool:
        return (self.state / "poison").exists()

    @property
    def failed(self) -> int:
        """How many transactions failed closed, by the bridge's own count."""
        path = self.state / "failed"
        return path.stat().st_size if path.exists() else 0

    def stored(self) -> object:
        return json.loads((self.state / "state.json").read_text())

    def names(self) -> set[str]:
        return {entry.name for entry in self.state.iterdir()}


@pytest.fixture
def short_dir() -> Iterator[str]:
    """A directory with a short path: AF_UNIX socket paths hold at most 107 bytes."""
    path = tempfile.mkdtemp(dir="/tmp", prefix="hk-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def grid(short_dir: str) -> Iterator[GridDouble]:
    double = GridDouble(os.path.join(short_dir, "grid.sock"))
    yield double
    double.close()
    assert double.invalid == []  # the real grid would have accepted every request


@pytest.fixture
def bridge(tmp_path: Path, grid: GridDouble) -> Bridge:
    return Bridge(tmp_path, grid.path)


@contextlib.contextmanager
def lock_holder(bridge: Bridge) -> Iterator[subprocess.Popen[str]]:
    """A live child process holding the terminal's lock until it is killed."""
    code = textwrap.dedent("""
        import fcntl, os, sys, time
        fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(120)
    """)
    child = subprocess.Popen([sys.executable, "-c", code, str(bridge.state / "lock")],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "locked\n"
        yield child
    finally:
        child.kill()
        child.wait()
        assert child.stdout is not None
        child.stdout.close()


def finish(process: subprocess.Popen[bytes]) -> tuple[int, bytes, bytes]:
    """Wait for a started bridge and collect its (small) output."""
    returncode = process.wait(30)
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    stdout, stderr = process.stdout.read(), process.stderr.read()
    for pipe in (process.stdin, process.stdout, process.stderr):
        pipe.close()
    return returncode, stdout, stderr


def wait_for(condition: Callable[[], bool]) -> None:
    """Poll until ``condition`` holds (a synchronization aid, never an assertion on time)."""
    for _ in range(3000):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("condition never held")


# -- the healthy path -------------------------------------------------------------------------


def test_delivers_in_order_and_keeps_state(bridge: Bridge, grid: GridDouble) -> None:
    bridge.emit(envelope("turn_started"), envelope("input_requested", inputId="i"))
    bridge.emit(envelope("input_resolved", inputId="i"), envelope("turn_completed"))

    assert len(grid.requests) == 2
    assert events(grid.delivered) == [
        "turn_started", "input_requested", "input_resolved", "turn_completed"]
    assert [e["nativeEvent"] for e in grid.delivered] == ["seen=0", "seen=0", "seen=1", "seen=1"]
    assert bridge.stored() == {"seen": 2}
    assert not bridge.poisoned
    assert bridge.failed == 0
    assert all("failedClosed" not in request for request in grid.requests)


def test_private_files_only(bridge: Bridge) -> None:
    bridge.emit(envelope("turn_started"))

    assert bridge.names() <= set(hook.STATE_FILES)
    for entry in bridge.state.iterdir():
        assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert not (bridge.interpreter.parent / "__pycache__").exists()


def test_no_envelopes_no_connection(bridge: Bridge, grid: GridDouble) -> None:
    bridge.emit()

    assert grid.requests == []
    assert bridge.stored() == {"seen": 1}


def test_unchanged_state_is_not_rewritten(tmp_path: Path, grid: GridDouble) -> None:
    bridge = Bridge(tmp_path, grid.path, ECHO_INTERPRETER)
    bridge.run([envelope("turn_started")])
    before = (bridge.state / "state.json").stat().st_ino
    bridge.run([envelope("turn_completed")])

    assert (bridge.state / "state.json").stat().st_ino == before
    assert bridge.stored() == {}
    assert events(grid.delivered) == ["turn_started", "turn_completed"]


def test_imports_only_the_standard_library(bridge: Bridge, tmp_path: Path) -> None:
    modules_file = tmp_path / "modules.json"
    bridge.emit(envelope("turn_started"), modules=str(modules_file))

    modules = json.loads(modules_file.read_text())
    foreign = [name for name in modules
               if name.split(".")[0] not in sys.stdlib_module_names
               and name not in sys.builtin_module_names
               and name not in {"__main__", hook.INTERPRETER_MODULE, hook.WIRE_MODULE}]
    assert foreign == []
    assert "socket" in modules  # the list is the bridge's own, taken mid-transaction
    assert hook.WIRE_MODULE in modules  # the schema, loaded by path
    assert not any(name.startswith("clanker") for name in modules)


def test_the_wire_schema_imports_nothing() -> None:
    # The bridge loads it by path, so whatever it imported would be imported there too.
    tree = ast.parse(Path(wire.__file__).read_text())
    assert [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)] \
        == []


def test_interpreter_failure_fails_closed(bridge: Bridge, grid: GridDouble) -> None:
    bridge.emit(envelope("turn_started"))
    bridge.emit(envelope("turn_completed"), **{"raise": True})

    assert events(grid.delivered) == ["turn_started"]
    assert bridge.stored() == {"seen": 1}  # the stored state is still what the grid saw
    assert bridge.poisoned
    assert bridge.failed == 1
    assert grid.requests[-1]["envelopes"] == []  # the count, reported alone
    assert grid.requests[-1]["failedClosed"] == 1


def test_interpreter_past_its_bound_fails_closed_and_still_reports_a_wait(
    bridge: Bridge, grid: GridDouble,
) -> None:
    bridge.emit(envelope("turn_started"))
    # On the stored state it runs far past INTERPRET_SECONDS; the rerun on empty state
    # answers at once, and its evidence of a wait goes (its resolution does not).
    bridge.emit(envelope("input_requested", inputId="i"), envelope("input_resolved", inputId="j"),
                slow=True)

    assert events(grid.delivered) == ["turn_started", "input_requested"]
    assert grid.delivered[1]["nativeEvent"] == "seen=0"  # interpreted on {}
    assert grid.requests[-1]["failedClosed"] == 1  # the count went with it
    assert bridge.stored() == {"seen": 1}  # left as the last healthy transaction stored it
    assert bridge.poisoned
    assert bridge.failed == 1
    assert "inflight" not in bridge.names()


def test_an_envelope_the_grid_would_refuse_fails_closed(bridge: Bridge,
                                                       grid: GridDouble) -> None:
    bridge.emit(envelope("turn_started"))
    bridge.emit(envelope("input_requested", inputId="i"),
                envelope("turn_completed", sessionId="s" * 257),
                envelope("input_resolved", inputId="i"))

    assert events(grid.delivered) == ["turn_started", "input_requested"]
    assert bridge.stored() == {"seen": 2}  # the interpretation itself was sound
    assert bridge.poisoned
    assert bridge.failed == 1


# -- sanitizing -------------------------------------------------------------------------------


def test_sanitizes_envelopes(bridge: Bridge, grid: GridDouble) -> None:
    bridge.emit(
        "not an object",
        ["nor", "this"],
        {"scope": "root", "sessionId": SESSION},  # no event
        {"event": 7, "sessionId": SESSION},
        envelope("no_such_event"),
        envelope("agent_exited"),  # only clanker's launcher reports an exit
        envelope("turn_started", turnId=5),  # a wire key holding a number
        envelope("turn_started", sessionId="bad\x00id"),
        envelope("turn_started", sessionId=""),
        envelope("turn_started", sessionId="s" * 257),
        envelope("turn_started", sessionId=None),
        envelope("turn_started", scope="parent"),
        envelope("turn_started", continuesSessionId="s-0"),  # only on session_continued
        envelope("turn_started", prompt="secret text", tool_input={"a": 1}),
        envelope("turn_completed", scope=None, inputId=None, nativeEvent="n" * 65),
        envelope("session_continued", turn=None, sessionId="s-2", continuesSessionId=SESSION),
    )

    assert grid.delivered == [
        {"event": "turn_started", "scope": "root", "sessionId": SESSION, "turnId": "t-1",
         "nativeEvent": "seen=0"},
        {"event": "turn_completed", "sessionId": SESSION, "turnId": "t-1"},
        {"event": "session_continued", "scope": "root", "sessionId": "s-2",
         "continuesSessionId": SESSION, "nativeEvent": "seen=0"},
    ]


@pytest.mark.parametrize("cwd", [
    "relative/path",
    "/tab\there",
    "/new\nline",
    "/" + "a" * 1024,
    "/" + "é" * 512,
    7,
    None,
    ["/list"],
])
def test_bad_cwd_is_dropped_but_the_event_delivered(
    bridge: Bridge, grid: GridDouble, cwd: object,
) -> None:
    bridge.emit(envelope("location_changed", turn=None, cwd=cwd))

    assert events(grid.delivered) == ["location_changed"]
    assert "cwd" not in grid.delivered[0]


@pytest.mark.parametrize("cwd", ["/", "/work/tree", "/" + "a" * 1023, "/" + "é" * 511 + "a"])
def test_good_cwd_is_kept(bridge: Bridge, grid: GridDouble, cwd: str) -> None:
    bridge.emit(envelope("turn_started", cwd=cwd))

    assert grid.delivered[0]["cwd"] == cwd


def test_more_than_sixteen_envelopes_fail_closed(bridge: Bridge, grid: GridDouble) -> None:
    bridge.emit(*[envelope("turn_started", turn=f"t-{i}") for i in range(20)])

    assert len(grid.delivered) == 16
    assert bridge.poisoned
    assert bridge.failed == 1
    assert grid.requests[0]["failedClosed"] == 1


# -- input and environment --------------------------------------------------------------------


@pytest.mark.parametrize("stdin", [
    b"",
    b"{",
    b"\xff\xfe{}",
    b"NaN",
    b'{"emit": [], "x": Infinity}',
    b"[" * 100_000 + b"]" * 100_000,
])
def test_malformed_payload_fails_closed(bridge: Bridge, grid: GridDouble,
                                        stdin: bytes) -> None:
    done = bridge.run(stdin=stdin)

    assert (done.returncode, done.stdout, done.stderr) == (0, NEUTRAL.encode(), b"")
    assert grid.delivered == []
    assert [request["failedClosed"] for request in grid.requests] == [1]
    assert bridge.names() == {"poison", "failed"}


def _fails_closed_unread(bridge: Bridge, grid: GridDouble) -> None:
    """The event could not be read: nothing is interpreted, the transaction is counted."""
    assert grid.delivered == []
    assert [request["failedClosed"] for request in grid.requests] == [1]
    assert bridge.poisoned
    assert bridge.failed == 1
    assert "state.json" not in bridge.names()


def test_oversized_stdin_fails_closed(bridge: Bridge, grid: GridDouble) -> None:
    payload = {"emit": [envelope("turn_started")], "pad": "x" * (1 << 20)}
    done = bridge.run(payload)

    assert (done.returncode, done.stdout) == (0, NEUTRAL.encode())
    _fails_closed_unread(bridge, grid)


def test_stdin_left_open_past_its_bound_fails_closed(bridge: Bridge, grid: GridDouble) -> None:
    process = bridge.start({"emit": [envelope("turn_started")]}, close=False)

    assert finish(process) == (0, NEUTRAL.encode(), b"")
    _fails_closed_unread(bridge, grid)


def test_interpreter_loading_past_its_bound_fails_closed(bridge: Bridge,
                                                         grid: GridDouble) -> None:
    bridge.interpreter.write_text("import time\ntime.sleep(60)\n" + INTERPRETER)
    done = bridge.run({"emit": [envelope("turn_started")]})

    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    _fails_closed_unread(bridge, grid)


@pytest.mark.parametrize("variable", [
    "CLANKER_ATTENTION_INTERPRETER",
    "CLANKER_ATTENTION_SOCKET",
    "CLANKER_ATTENTION_TERMINAL",
    "CLANKER_ATTENTION_TOKEN",
    "CLANKER_ATTENTION_STATE",
])
def test_missing_environment_does_nothing(bridge: Bridge, grid: GridDouble,
                                          variable: str) -> None:
    env = bridge.env
    del env[variable]
    done = bridge.run({"emit": [envelope("turn_started")]}, env=env)

    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert grid.requests == []
    assert bridge.names() == set()


@pytest.mark.parametrize(("variable", "value"), [
    ("CLANKER_ATTENTION_INTERPRETER", "relative/interpreter.py"),
    ("CLANKER_ATTENTION_INTERPRETER", "/no/such/interpreter.py"),
    ("CLANKER_ATTENTION_SOCKET", "relative.sock"),
    ("CLANKER_ATTENTION_TERMINAL", ""),
    ("CLANKER_ATTENTION_TERMINAL", "bad\nterminal"),
    ("CLANKER_ATTENTION_TOKEN", "short"),
    ("CLANKER_ATTENTION_TOKEN", "has space " * 8),
    ("CLANKER_ATTENTION_STATE", "relative/state"),
    ("CLANKER_ATTENTION_STATE", "/no/such/state"),
])
def test_invalid_environment_does_nothing(bridge: Bridge, grid: GridDouble,
                                          variable: str, value: str) -> None:
    done = bridge.run({"emit": [envelope("turn_started")]}, env={**bridge.env, variable: value})

    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert grid.requests == []
    assert bridge.names() == set()


def test_state_directory_must_be_private(bridge: Bridge, grid: GridDouble,
                                         tmp_path: Path) -> None:
    bridge.state.chmod(0o755)
    done = bridge.run({"emit": [envelope("turn_started")]})
    link = tmp_path / "link"
    link.symlink_to(bridge.state)
    bridge.state.chmod(0o700)
    linked = bridge.run({"emit": [envelope("turn_started")]},
                        env={**bridge.env, "CLANKER_ATTENTION_STATE": str(link)})

    assert (done.returncode, done.stdout, linked.returncode, linked.stdout) == (0, b"", 0, b"")
    assert grid.requests == []
    assert bridge.names() == set()


def test_broken_interpreter_fails_closed(bridge: Bridge, grid: GridDouble) -> None:
    bridge.interpreter.write_text("raise SystemExit(3)\n")
    done = bridge.run({"emit": [envelope("turn_started")]})
    bridge.interpreter.write_text("HOOK_STDOUT = 'x'\n")  # no interpret()
    missing = bridge.run({"emit": [envelope("turn_started")]})

    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert (missing.returncode, missing.stdout) == (0, b"")
    assert grid.delivered == []
    assert [request["failedClosed"] for request in grid.requests] == [1, 2]
    assert bridge.poisoned


# -- state faults -----------------------------------------------------------------------------


def _garbage(state: Path) -> None:
    (state / "state.json").write_bytes(b"\x00garbage{")


def _oversized(state: Path) -> None:
    (state / "state.json").write_text(json.dumps({"seen": 5, "pad": "x" * 65_536}))


def _not_an_object(state: Path) -> None:
    (state / "state.json").write_text("[1, 2, 3]")


def _not_a_file(state: Path) -> None:
    (state / "state.json").mkdir()


def _a_link(state: Path) -> None:
    (state / "elsewhere.json").write_text('{"seen": 5}')
    (state / "state.json").symlink_to(state / "elsewhere.json")


@pytest.mark.parametrize("damage", [_garbage, _oversized, _not_an_object, _not_a_file, _a_link])
def test_unusable_state_fails_closed(bridge: Bridge, grid: GridDouble,
                                     damage: Callable[[Path], None]) -> None:
    damage(bridge.state)
    bridge.emit(envelope("input_requested", inputId="i"), envelope("input_resolved", inputId="i"),
                envelope("turn_completed"))

    assert events(grid.delivered) == ["input_requested", "turn_completed"]
    assert {e["nativeEvent"] for e in grid.delivered} == {"seen=0"}  # interpreted on {}
    assert grid.requests[0]["failedClosed"] == 1
    assert bridge.poisoned
    assert bridge.failed == 1


def test_corrupt_state_is_replaced_from_empty_state(bridge: Bridge, grid: GridDouble) -> None:
    _garbage(bridge.state)
    bridge.emit(envelope("input_resolved", inputId="i"))
    bridge.emit(envelope("input_resolved", inputId="i"))

    assert grid.delivered == []
    assert [request["failedClosed"] for request in grid.requests] == [1]  # the first run's
    assert bridge.stored() == {"seen": 2}  # the second run was a healthy transaction
    assert bridge.poisoned
    assert bridge.failed == 1


@pytest.mark.parametrize("option", ["big_state", "set_state"])
def test_unwritable_new_state_fails_closed(bridge: Bridge, grid: GridDouble,
                                           option: str) -> None:
    bridge.emit(envelope("turn_started"))
    bridge.emit(envelope("input_resolved", inputId="i"), envelope("turn_completed"),
                **{option: True})

    assert events(grid.delivered) == ["turn_started", "turn_completed"]
    assert grid.delivered[1]["nativeEvent"] == "seen=0"  # the rerun on empty state
    assert bridge.stored() == {"seen": 1}
    assert bridge.poisoned
    assert bridge.failed == 1


# -- the lock ---------------------------------------------------------------------------------


def test_live_lock_holder_is_never_broken(bridge: Bridge, grid: GridDouble) -> None:
    bridge.emit(envelope("turn_started"))
    with lock_holder(bridge):
        bridge.emit(envelope("input_requested", inputId="i"),
                    envelope("input_resolved", inputId="i"), envelope("turn_completed"))
        assert bridge.poisoned

    assert events(grid.delivered) == ["turn_started", "input_requested", "turn_completed"]
    assert [e["nativeEvent"] for e in grid.delivered[1:]] == ["seen=0", "seen=0"]
    assert bridge.stored() == {"seen": 1}  # nothing stored without the lock
    assert bridge.failed == 1
    assert grid.requests[-1]["failedClosed"] == 1


def test_dead_lock_holder_is_released_by_the_kernel(bridge: Bridge, grid: GridDouble) -> None:
    bridge.emit(envelope("turn_started"))
    with lock_holder(bridge):
        pass  # killed on exit while holding the lock
    bridge.emit(envelope("input_resolved", inputId="i"))

    assert events(grid.delivered) == ["turn_started", "input_resolved"]
    assert grid.delivered[1]["nativeEvent"] == "seen=1"
    assert not bridge.poisoned
    assert bridge.failed == 0


def test_hook_killed_mid_transaction(bridge: Bridge, grid: GridDouble, tmp_path: Path) -> None:
    bridge.emit(envelope("turn_started"))
    entered = tmp_path / "entered"
    hung = bridge.start({"emit": [envelope("turn_completed")], "entered": str(entered)})
    wait_for(entered.exists)  # the hung hook holds the lock, inside its interpreter
    hung.kill()
    returncode = finish(hung)[0]
    bridge.emit(envelope("input_resolved", inputId="i"))
    bridge.emit(envelope("turn_completed"), envelope("input_resolved", inputId="j"))

    assert returncode == -signal.SIGKILL
    # Its turn_completed was lost: the next holder counts it and withholds resolutions
    # until a boundary is accepted.
    assert events(grid.delivered) == ["turn_started", "turn_completed", "input_resolved"]
    assert grid.delivered[1]["nativeEvent"] == "seen=2"  # nothing was stored by the dead one
    assert [request.get("failedClosed") for request in grid.requests] == [None, 1, 1]
    assert not bridge.poisoned  # the accepted boundary cleared it
    assert bridge.failed == 1
    assert "inflight" not in bridge.names()


def test_hook_killed_before_its_delivery_was_confirmed(bridge: Bridge,
                                                      grid: GridDouble) -> None:
    bridge.emit(envelope("turn_started"))
    grid.release.clear()
    grid.received.clear()
    dying = bridge.start({"emit": [envelope("input_requested", inputId="i")]})
    wait_for(grid.received.is_set)  # state is stored, the reply is held back
    dying.kill()
    finish(dying)
    grid.release.set()
    bridge.emit(envelope("input_resolved", inputId="i"))

    assert bridge.poisoned
    assert events(grid.delivered) == ["turn_started", "input_requested"]
    assert bridge.stored() == {"seen": 3}
    assert bridge.failed == 1  # counted by the next holder
    assert "inflight" not in bridge.names()


def test_delivery_happens_inside_the_lock(bridge: Bridge, grid: GridDouble) -> None:
    grid.release.clear()
    first = bridge.start({"emit": [envelope("turn_started")]})
    wait_for(grid.received.is_set)
    second = bridge.start({"emit": [envelope("turn_completed")]})
    time.sleep(0.1)  # let the second hook reach the lock (either way the order holds)
    grid.release.set()
    assert finish(first)[0] == 0
    assert finish(second)[0] == 0

    assert events(grid.delivered) == ["turn_started", "turn_completed"]
    assert grid.delivered[1]["nativeEvent"] == "seen=1"  # it saw the first hook's state
    assert grid.log == ["received", "replying", "received", "replying"]


# -- delivery faults and the poison marker ----------------------------------------------------


def test_grid_down_poisons(tmp_path: Path, short_dir: str) -> None:
    bridge = Bridge(tmp_path, os.path.join(short_dir, "nobody.sock"))
    bridge.emit(envelope("turn_started"))

    assert bridge.poisoned
    assert bridge.stored() == {"seen": 1}  # the state already holds what the grid never saw
    assert bridge.failed == 1
    assert "inflight" not in bridge.names()


def test_refusal_poisons(bridge: Bridge, grid: GridDouble) -> None:
    grid.refuse = "unauthorized"
    bridge.emit(envelope("turn_started"))
    grid.refuse = None
    bridge.emit(envelope("input_resolved", inputId="i"), envelope("input_requested", inputId="j"))

    assert events(grid.delivered) == ["turn_started", "input_requested"]
    assert bridge.poisoned
    assert grid.requests[-1]["failedClosed"] == 1  # the refused one, heard with the next


def test_failed_location_delivery_is_not_a_failed_transaction(tmp_path: Path,
                                                             short_dir: str) -> None:
    bridge = Bridge(tmp_path, os.path.join(short_dir, "nobody.sock"))
    bridge.emit(envelope("location_changed", turn=None, cwd="/a"))

    assert not bridge.poisoned
    assert bridge.failed == 0
    bridge.emit(envelope("location_changed", turn=None, cwd="/b"), envelope("turn_started"))
    assert bridge.poisoned
    assert bridge.failed == 1


def test_poison_cleared_only_by_an_accepted_boundary(bridge: Bridge, grid: GridDouble) -> None:
    grid.refuse = "unauthorized"
    bridge.emit(envelope("turn_started"))
    assert bridge.poisoned
    grid.refuse = None

    bridge.emit(envelope("input_resolved", inputId="i"))  # dropped: nothing to send
    assert grid.requests[1:] == []

    grid.decide = lambda item: "ignored-stale"
    bridge.emit(envelope("turn_completed", turn="t-0"), envelope("input_resolved", inputId="i"))
    assert bridge.poisoned  # delivered, but the grid did not accept the boundary

    grid.decide = lambda item: "accepted"
    bridge.emit(envelope("input_resolved", inputId="i"), envelope("turn_completed"),
                envelope("input_resolved", inputId="j"))
    assert not bridge.poisoned
    assert events(grid.requests[-1]["envelopes"]) == ["turn_completed", "input_resolved"]

    bridge.emit(envelope("input_resolved", inputId="k"))
    assert events(grid.requests[-1]["envelopes"]) == ["input_resolved"]
    assert "poison.clearing" not in bridge.names()


def test_boundary_in_a_failed_transaction_does_not_clear(tmp_path: Path, short_dir: str) -> None:
    bridge = Bridge(tmp_path, os.path.join(short_dir, "nobody.sock"))
    bridge.emit(envelope("turn_started"))
    bridge.emit(envelope("turn_completed"))

    assert bridge.poisoned


def test_boundary_without_the_lock_does_not_clear(bridge: Bridge, grid: GridDouble) -> None:
    with lock_holder(bridge):
        bridge.emit(envelope("turn_started"))
    assert bridge.poisoned
    bridge.emit(envelope("input_resolved", inputId="i"), envelope("turn_started", turn="t-2"))

    assert events(grid.delivered) == ["turn_started", "turn_started"]
    assert not bridge.poisoned


def test_poison_renewed_while_clearing_survives(tmp_path: Path) -> None:
    state = str(tmp_path)
    first = hook.mark_poison(state)
    assert hook.poison_nonce(state) == first
    hook.mark_poison(state)  # an unlocked, poisoned transaction renews it meanwhile
    hook.clear_poison(state, first)
    assert (tmp_path / "poison").exists()

    current = hook.poison_nonce(state)
    assert current is not None
    hook.clear_poison(state, current)
    assert hook.poison_nonce(state) is None
    assert list(tmp_path.iterdir()) == []


def test_empty_poison_marker_is_renewed(tmp_path: Path) -> None:
    (tmp_path / "poison").write_bytes(b"")
    nonce = hook.poison_nonce(str(tmp_path))

    assert nonce
    assert (tmp_path / "poison").read_bytes() == nonce


# -- properties -------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.sampled_from([*hook.ENVELOPE_KEYS, "prompt", "x"]) | st.text(max_size=8),
                      children, max_size=8),
    max_leaves=30,
)
envelope_like = st.fixed_dictionaries(
    {"event": st.sampled_from([*hook.EVENTS, "agent_exited", "other"]),
     "sessionId": st.none() | st.text(max_size=300)},
    optional={
        "scope": st.sampled_from([None, "root", "child", "other", 1]),
        "turnId": st.none() | st.text(max_size=30) | st.integers(),
        "inputId": st.none() | st.text(max_size=30),
        "continuesSessionId": st.none() | st.text(max_size=30),
        "cwd": st.none() | st.integers() | st.text(max_size=30)
        | st.text(max_size=600).map(lambda text: "/" + text),
        "nativeEvent": st.none() | st.text(max_size=70),
        "prompt": st.text(max_size=10),
    },
)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(stdin=st.one_of(
    json_values.map(lambda value: json.dumps(value).encode()),
    st.lists(envelope_like | json_values, max_size=20).map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
))
def test_any_stdin_exits_zero_printing_only_hook_stdout(tmp_path_factory: pytest.TempPathFactory,
                                                        grid: GridDouble, stdin: bytes) -> None:
    bridge = Bridge(tmp_path_factory.mktemp("any"), grid.path, ECHO_INTERPRETER)
    before = len(grid.requests)
    done = bridge.run(stdin=stdin)

    assert (done.returncode, done.stdout, done.stderr) == (0, NEUTRAL.encode(), b"")
    for item in [e for request in grid.requests[before:] for e in request["envelopes"]]:
        assert set(item) <= set(hook.ENVELOPE_KEYS)
        assert item["event"] in hook.EVENTS


@given(st.lists(envelope_like | json_values, max_size=20))
def test_sanitize_keeps_only_wire_envelopes(items: list[object]) -> None:
    clean = hook.sanitize(items)

    assert len(clean) <= len(items)
    for item in clean:
        assert list(item) == [key for key in hook.ENVELOPE_KEYS if key in item]
        assert item["event"] in hook.EVENTS
        assert all(isinstance(value, str) for value in item.values())
        parse_envelope(item)  # the grid accepts every one (raises EnvelopeError otherwise)
    assert hook.sanitize([dict(item) for item in clean]) == clean


@given(st.lists(st.sampled_from(sorted(hook.EVENTS)), max_size=12))
def test_early_resolutions_dropped_until_the_first_boundary(names: list[str]) -> None:
    batch: list[dict[str, object]] = [{"event": name} for name in names]
    kept = [item["event"] for item in hook.without_early_resolutions(batch)]
    first = next((i for i, name in enumerate(names) if name in hook.BOUNDARIES), len(names))

    assert kept == [n for n in names[:first] if n != "input_resolved"] + names[first:]
