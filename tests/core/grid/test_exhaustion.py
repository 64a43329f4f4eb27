"""A same-user client cannot exhaust the grid: hostile clients beside real deliveries.

Every test runs a real :class:`~clanker.grid.server.Grid` on a real socket. A
legitimate delivery here behaves like the hook bridge: it sends its request as
soon as it is connected and reads one reply. The grid may close a connection
that has not sent its request to make room, so the tests never let a hostile
connection be opened between a delivery's connect and its send (``quiet``):
that instant is the only one in which a delivery looks like an idle holder.
Nothing waits on a clock: conditions are polled with generous bounds, the
grid's loop is held still with an event, and no assertion is about time.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clanker.grid.client import GridClient
from clanker.grid.errors import GridRequestError
from clanker.grid.protocol import MAX_LINE, Registration
from clanker.grid.server import MAX_TERMINALS_PER_LAUNCHER, Grid
from tests.core.grid.conftest import LiveGrid, eventually, register_as

TABLE = 64
"""``max_connections`` for the property test: small, so few descriptors prove the rules."""
SOCKET_TIMEOUT = 60.0


def _somaxconn() -> int:
    try:
        return int(Path("/proc/sys/net/core/somaxconn").read_text())
    except (OSError, ValueError):
        return 128


BURST = max(0, min(300, _somaxconn() - 16))
"""Connections opened while the grid's loop is held: more than asyncio's default
backlog (100), within what the kernel allows a listener."""


@pytest.fixture(autouse=True, scope="module")
def descriptors() -> Iterator[None]:
    """Room for both ends of every connection in this one process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 4096 if hard == resource.RLIM_INFINITY else min(4096, hard)
    if wanted < 2048:
        pytest.skip("the open-file limit is too low for this many connections")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(SOCKET_TIMEOUT)
    try:
        sock.connect(str(path))
    except BaseException:
        sock.close()
        raise
    return sock


def replies(sock: socket.socket, *, most: int = 1000) -> list[dict[str, Any]]:
    """Every reply line until the grid closes the connection."""
    data = b""
    with contextlib.suppress(ConnectionResetError), sock:
        while data.count(b"\n") < most:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return [json.loads(line) for line in data.splitlines()]


def line(request: dict[str, Any]) -> bytes:
    return json.dumps(request).encode() + b"\n"


HELLO = line({"v": 1, "op": "hello"})
SUBSCRIBE = line({"v": 1, "op": "subscribe"})


class Deliveries:
    """Legitimate deliveries, each one accepted change (a new location) of a live terminal."""

    def __init__(self, path: Path, terminals: list[Registration], quiet: threading.Lock) -> None:
        self.path = path
        self.terminals = terminals
        self.quiet = quiet
        self.answers: list[object] = []
        self._count = 0
        self._lock = threading.Lock()

    def start(self) -> socket.socket | Exception:
        """Connect and send at once (the grid reads it later); a failure is an answer."""
        with self._lock:
            self._count += 1
            number = self._count
        terminal = self.terminals[number % len(self.terminals)]
        request = line({"v": 1, "op": "deliver", "terminal": terminal.terminal,
                        "token": terminal.token, "envelopes": [
                            {"event": "location_changed", "scope": "root", "sessionId": "s1",
                             "cwd": f"/srv/legit/{number}"}]})
        with self.quiet:
            try:
                sock = connect(self.path)
                sock.sendall(request)
            except OSError as exc:
                return exc
        return sock

    def finish(self, sent: socket.socket | Exception) -> None:
        if isinstance(sent, Exception):
            answer: object = f"{type(sent).__name__}: {sent}"
        else:
            try:
                answer = replies(sent, most=1)
            except OSError as exc:
                answer = f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.answers.append(answer)

    def one(self) -> None:
        self.finish(self.start())

    def check(self) -> None:
        accepted = [[{"v": 1, "ok": True, "decisions": ["accepted"]}]]
        refused = [answer for answer in self.answers if answer not in accepted]
        assert refused == [], f"{len(refused)} of {len(self.answers)} deliveries failed"


class Hostile:
    """A same-user client doing what it can to crowd the grid out."""

    def __init__(self, live: LiveGrid, deliveries: Deliveries) -> None:
        self.live = live
        self.path = live.path
        self.deliveries = deliveries
        self.held: list[socket.socket] = []

    def open(self, payload: bytes = b"") -> socket.socket | None:
        with self.deliveries.quiet:
            try:
                sock = connect(self.path)
            except OSError:
                return None  # refused: not the grid's to answer
        with contextlib.suppress(OSError):
            sock.sendall(payload)
        return sock

    def hold(self, payload: bytes, count: int) -> None:
        self.held += [s for s in (self.open(payload) for _ in range(count)) if s is not None]

    def ask(self, payload: bytes) -> list[dict[str, Any]]:
        sock = self.open(payload)
        return [] if sock is None else replies(sock)

    def act(self, kind: str, arg: Any) -> None:
        getattr(self, kind)(arg)

    def idle(self, count: int) -> None:
        self.hold(b"", count)

    def slow(self, count: int) -> None:
        self.hold(b'{"v":1,"op":', count)  # a line begun, never finished

    def subscribers(self, count: int) -> None:
        self.hold(SUBSCRIBE, count)  # streams nobody reads

    def pipeline(self, count: int) -> None:
        assert len(self.ask(HELLO * count)) <= 1  # one request per connection

    def pid1(self, count: int) -> None:
        for _ in range(count):
            answer = self.ask(line({"v": 1, "op": "register", "harness": "fake-agent",
                                    "cwd": "/", "launcherPid": 1}))
            assert answer in ([], [{"v": 1, "ok": False, "error": "unauthorized"}]), answer

    def ancestor(self, count: int) -> None:
        for _ in range(count):
            answer = self.ask(line({"v": 1, "op": "register", "harness": "fake-agent",
                                    "cwd": "/", "launcherPid": os.getppid()}))
            assert len(answer) <= 1

    def junk(self, lines: list[bytes]) -> None:
        for raw in lines:
            assert len(self.ask(raw.replace(b"\n", b" ") + b"\n")) <= 1

    def burst(self, count: int) -> None:
        """``count`` connections at once (the loop held still), every third a delivery."""
        deliveries: list[socket.socket | Exception] = []
        hellos: list[socket.socket] = []
        with self.live.paused():
            for index in range(count):
                if index % 3 == 0:
                    deliveries.append(self.deliveries.start())
                else:
                    sock = self.open(HELLO if index % 3 == 1 else b"")
                    if sock is not None:
                        hellos.append(sock)
        for sent in deliveries:
            self.deliveries.finish(sent)
        for sock in hellos:
            assert len(replies(sock)) <= 1

    def close(self) -> None:
        for sock in self.held:
            sock.close()
        self.held.clear()


hostile_actions = st.lists(
    st.one_of(
        st.tuples(st.just("idle"), st.integers(1, 3 * TABLE)),
        st.tuples(st.just("slow"), st.integers(1, TABLE)),
        st.tuples(st.just("subscribers"), st.integers(1, TABLE)),
        st.tuples(st.just("pipeline"), st.integers(2, 300)),
        st.tuples(st.just("pid1"), st.integers(1, 40)),
        st.tuples(st.just("ancestor"), st.integers(1, 40)),
        st.tuples(st.just("junk"), st.lists(st.binary(max_size=200), min_size=1, max_size=10)),
        st.tuples(st.just("burst"), st.integers(min(100, BURST), BURST)),
    ),
    min_size=1, max_size=6,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=hostile_actions, beside=st.integers(1, 40))
def test_hostile_clients_never_crowd_out_a_delivery(
    actions: list[tuple[str, Any]], beside: int
) -> None:
    with contextlib.ExitStack() as stack:
        directory = Path(stack.enter_context(_short_directory()))
        live = stack.enter_context(LiveGrid(directory / "g.sock", max_connections=TABLE))
        terminals = [live.on_loop(lambda grid: grid.register(
            harness="fake-agent", cwd="/srv", launcher_pid=os.getpid())) for _ in range(3)]
        deliveries = Deliveries(live.path, terminals, threading.Lock())
        hostile = Hostile(live, deliveries)
        stack.callback(hostile.close)
        # Deliveries from another thread all along, and after each hostile step while
        # what it opened is still held.
        alongside = threading.Thread(target=lambda: [deliveries.one() for _ in range(beside)])
        alongside.start()
        for kind, arg in actions:
            hostile.act(kind, arg)
            for _ in range(3):
                deliveries.one()
        alongside.join(600)
        assert not alongside.is_alive()
        deliveries.check()
        launchers = [e.launcher_pid for e in live.on_loop(Grid.entries)]
        assert 1 not in launchers
        assert all(launchers.count(pid) <= MAX_TERMINALS_PER_LAUNCHER for pid in launchers)
        hostile.close()
        # Every connection the hostile client opened leaves the table, and the grid serves on.
        eventually(lambda: live.on_loop(lambda grid: grid.connections.open) == 0)
        assert GridClient(live.path, timeout=SOCKET_TIMEOUT).hello().server == "clanker-grid"


@contextlib.contextmanager
def _short_directory() -> Iterator[str]:
    """``short_dir`` for a hypothesis test (a function fixture would be shared by examples)."""
    path = tempfile.mkdtemp(prefix="cx-", dir="/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# ------------------------------------------------------------- one rule at a time


def _registrations(live: LiveGrid, count: int) -> list[Registration]:
    return [live.on_loop(lambda grid: grid.register(
        harness="fake-agent", cwd="/srv", launcher_pid=os.getpid())) for _ in range(count)]


def test_idle_holders_are_closed_to_make_room_for_deliveries(short_dir: Path) -> None:
    with LiveGrid(short_dir / "g.sock", max_connections=16, idle_timeout=600) as live:
        deliveries = Deliveries(live.path, _registrations(live, 1), threading.Lock())
        holders = [connect(live.path) for _ in range(16)]
        eventually(lambda: live.on_loop(lambda grid: grid.connections.waiting) == 16)
        for _ in range(20):
            deliveries.one()
        deliveries.check()
        # The longest-waiting holder made room and was told why.
        assert replies(holders[0]) == [{"v": 1, "ok": False, "error": "capacity"}]
        for holder in holders:
            holder.close()


def test_a_connection_that_sends_nothing_or_half_a_line_is_closed(short_dir: Path) -> None:
    with LiveGrid(short_dir / "g.sock", idle_timeout=0.05, request_timeout=0.1) as live:
        silent = connect(live.path)
        begun = connect(live.path)
        begun.sendall(b'{"v":1,')
        assert replies(silent) == []  # closed by the grid: the read ends
        assert replies(begun) == []
        eventually(lambda: live.on_loop(lambda grid: grid.connections.open) == 0)


def test_streams_and_slow_readers_never_take_the_slots_kept_for_short_answers(
    short_dir: Path,
) -> None:
    with LiveGrid(short_dir / "g.sock", max_connections=8) as live:
        deliveries = Deliveries(live.path, _registrations(live, 1), threading.Lock())
        held = 8 * 3 // 4
        streams = [connect(live.path) for _ in range(held)]
        for stream in streams:
            stream.sendall(SUBSCRIBE)
        eventually(lambda: live.on_loop(lambda grid: grid.connections.held) == held)
        client = GridClient(live.path, timeout=SOCKET_TIMEOUT)
        with pytest.raises(GridRequestError, match="capacity"):
            client.list_terminals()
        # What is answered at once never waits for a slot.
        for _ in range(10):
            deliveries.one()
        deliveries.check()
        registration = client.register(harness="fake-agent", workspace=None, cwd="/",
                                       launcher_pid=os.getpid())
        client.retire(registration.terminal, registration.token)
        assert client.hello().terminals == 1
        for stream in streams:
            stream.close()
        eventually(lambda: live.on_loop(lambda grid: grid.connections.held) == 0)
        assert GridClient(live.path, timeout=SOCKET_TIMEOUT).hello().terminals == 1


@pytest.mark.skipif(BURST < 200, reason="the kernel caps listen queues below the burst")
def test_a_burst_of_deliveries_fits_the_listen_queue(short_dir: Path) -> None:
    with LiveGrid(short_dir / "g.sock") as live:
        deliveries = Deliveries(live.path, _registrations(live, 4), threading.Lock())
        with live.paused():  # nothing is accepted until every client has connected
            sent = [deliveries.start() for _ in range(BURST)]
        for one in sent:
            deliveries.finish(one)
        assert len(deliveries.answers) == BURST
        deliveries.check()


def _register_request(pid: int) -> bytes:
    return line({"v": 1, "op": "register", "harness": "fake-agent", "cwd": "/",
                 "launcherPid": pid})


def test_register_believes_only_the_caller_or_its_ancestors(
    short_dir: Path, launcher: subprocess.Popen[bytes]
) -> None:
    with LiveGrid(short_dir / "g.sock") as live:
        client = GridClient(live.path, timeout=SOCKET_TIMEOUT)
        own = client.register(harness="fake-agent", workspace=None, cwd="/",
                              launcher_pid=os.getpid())
        for pid in (1, launcher.pid):  # init, and a child of ours: neither is our ancestor
            with pytest.raises(GridRequestError, match="unauthorized"):
                client.register(harness="fake-agent", workspace=None, cwd="/",
                                launcher_pid=pid)
        # A child may name itself, or us (its parent).
        child = register_as(launcher, live.path)
        helper = subprocess.run(
            [sys.executable, "-c", "import os, sys\n"
             "from clanker.grid.client import GridClient\n"
             "GridClient(sys.argv[1], timeout=60).register(harness='fake-agent', "
             "workspace=None, cwd='/', launcher_pid=os.getppid())", str(live.path)],
            capture_output=True, text=True, timeout=120, check=False)
        assert helper.returncode == 0, helper.stderr
        launchers = sorted(e.launcher_pid for e in live.on_loop(Grid.entries))
        assert launchers == sorted([os.getpid(), os.getpid(), launcher.pid])
        assert {own.terminal, child.terminal} <= {e.terminal for e in live.on_loop(Grid.entries)}


def test_one_launcher_has_a_bounded_number_of_terminals(short_dir: Path) -> None:
    with LiveGrid(short_dir / "g.sock", max_terminals_per_launcher=3) as live:
        client = GridClient(live.path, timeout=SOCKET_TIMEOUT)

        def register() -> Registration:
            return client.register(harness="fake-agent", workspace=None, cwd="/",
                                   launcher_pid=os.getpid())

        first, *_ = [register() for _ in range(3)]
        with pytest.raises(GridRequestError, match="capacity"):
            register()
        client.retire(first.terminal, first.token)
        register()


def test_an_oversized_line_after_the_first_byte_is_still_too_large(short_dir: Path) -> None:
    with LiveGrid(short_dir / "g.sock") as live:
        for size in (MAX_LINE + 1, MAX_LINE + 10):
            sock = connect(live.path)
            sock.sendall(b"x" * size + b"\n")
            assert replies(sock) == [{"v": 1, "ok": False, "error": "too-large"}]
        sock = connect(live.path)
        sock.sendall(b"\n")
        assert replies(sock) == [{"v": 1, "ok": False, "error": "bad-request"}]
