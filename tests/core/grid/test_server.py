"""A real in-process grid on a real Unix socket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from clanker.grid.client import GridClient
from clanker.grid.errors import (
    GridAlreadyRunningError,
    GridPathError,
    GridRequestError,
    GridUnavailableError,
)
from clanker.grid.protocol import MAX_LINE, StreamEvent, StreamKind
from clanker.grid.server import Grid
from tests.core.grid.conftest import end, register_as, root

FORGED = "0" * 64


def serve(
    socket_path: Path, body: Callable[[Grid, GridClient], Awaitable[None]], **options: Any
) -> None:
    """Run ``body`` against a started grid; blocking client calls go through threads."""

    async def main() -> None:
        async with Grid(socket_path, **options) as grid:
            await body(grid, GridClient(socket_path, timeout=10))
        assert not socket_path.exists()

    asyncio.run(main())


async def call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return await asyncio.to_thread(function, *args, **kwargs)


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(30):
        while not condition():
            await asyncio.sleep(0.02)


def raw_exchange(
    socket_path: Path, payload: bytes, *, replies: int = 1, half_close: bool = False
) -> list[bytes]:
    """Send raw bytes; return the reply lines (fewer if the grid closes first)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(socket_path))
        sock.sendall(payload)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        data = b""
        # A grid that closes with our surplus unread resets the connection after its reply.
        with contextlib.suppress(ConnectionResetError):
            while data.count(b"\n") < replies:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
    return data.splitlines()


def register(client: GridClient, pid: int, cwd: str = "/tmp") -> Any:
    return client.register(harness="fake-agent", workspace=cwd, cwd=cwd, launcher_pid=pid)


def test_hello_register_list_explain_retire(short_dir: Path) -> None:
    sock = short_dir / "g.sock"

    async def body(grid: Grid, client: GridClient) -> None:
        hello = await call(client.hello)
        assert (hello.server, hello.pid, hello.terminals) == ("clanker-grid", os.getpid(), 0)
        assert sock.stat().st_mode & 0o777 == 0o600
        reg = await call(register, client, os.getpid(), "/work/here")
        assert reg.terminal.startswith("t-")
        [entry] = await call(client.list_terminals)
        assert (entry.terminal, entry.harness, entry.cwd, entry.location) == (
            reg.terminal, "fake-agent", "/work/here", "/work/here")
        assert entry.launcher_pid == os.getpid()
        assert entry.attention == "unknown"
        assert entry.revision["snapshot"] is not None
        explained = await call(client.explain, reg.terminal)
        assert explained.explanation["live"] is True
        assert reg.token not in json.dumps(explained.explanation)
        await call(client.retire, reg.terminal, reg.token)
        assert await call(client.list_terminals) == []
        with pytest.raises(GridRequestError) as caught:
            await call(client.explain, reg.terminal)
        assert caught.value.word == "unknown-terminal"

    serve(sock, body)


def test_delivered_envelopes_change_the_derived_state_and_location(short_dir: Path) -> None:
    async def body(grid: Grid, client: GridClient) -> None:
        reg = await call(register, client, os.getpid())
        decisions = await call(client.deliver, reg.terminal, reg.token, [
            root("session_started"),
            root("turn_started", turnId="u1", cwd="/srv/project/"),
            {"event": "turn_started", "scope": "child", "sessionId": "s2", "turnId": "c1"},
        ])
        assert decisions == ["accepted", "accepted", "ignored-child"]
        [entry] = await call(client.list_terminals)
        assert (entry.attention, entry.location) == ("working", "/srv/project")
        await call(client.deliver, reg.terminal, reg.token,
                   [root("input_requested", turnId="u1", inputId="i1")])
        [entry] = await call(client.list_terminals)
        assert entry.attention == "needs-input"
        await call(client.deliver, reg.terminal, reg.token, [
            root("input_resolved", turnId="u1", inputId="i1"),
            root("turn_completed", turnId="u1"),
        ])
        [entry] = await call(client.list_terminals)
        assert entry.attention == "done"

    serve(short_dir / "g.sock", body)


def test_forged_and_revoked_tokens_change_nothing(short_dir: Path) -> None:
    async def body(grid: Grid, client: GridClient) -> None:
        reg = await call(register, client, os.getpid())
        other = await call(register, client, os.getpid())
        before = await call(client.list_terminals)
        for terminal, token in ((reg.terminal, FORGED), (reg.terminal, other.token),
                                ("t-nothere", reg.token), (reg.terminal, "short")):
            with pytest.raises(GridRequestError) as caught:
                await call(client.deliver, terminal, token, [root("session_started")])
            assert caught.value.word == "unauthorized"
            with pytest.raises(GridRequestError):
                await call(client.retire, terminal, token)
        assert await call(client.list_terminals) == before
        await call(client.retire, reg.terminal, reg.token)
        with pytest.raises(GridRequestError) as caught:
            await call(client.deliver, reg.terminal, reg.token, [root("session_started")])
        assert caught.value.word == "unauthorized"
        with pytest.raises(GridRequestError) as caught:
            await call(client.retire, reg.terminal, reg.token)
        assert caught.value.word == "unauthorized"
        assert [e.terminal for e in await call(client.list_terminals)] == [other.terminal]

    serve(short_dir / "g.sock", body)


def test_a_malformed_envelope_applies_none_of_the_batch(short_dir: Path) -> None:
    async def body(grid: Grid, client: GridClient) -> None:
        reg = await call(register, client, os.getpid())
        before = await call(client.list_terminals)
        with pytest.raises(GridRequestError) as caught:
            await call(client.deliver, reg.terminal, reg.token,
                       [root("session_started"), {"event": "turn_started", "prompt": "x"}])
        assert caught.value.word == "bad-request"
        assert await call(client.list_terminals) == before

    serve(short_dir / "g.sock", body)


def test_bad_lines_get_fixed_words_and_change_nothing(
    short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sock = short_dir / "g.sock"
    secret = "Tok_Secret-content"

    async def body(grid: Grid, client: GridClient) -> None:
        reg = await call(register, client, os.getpid())
        before = await call(client.list_terminals)
        requests = [b"garbage", json.dumps({"v": 1, "op": "dance"}).encode(),
                    json.dumps({"v": 9, "op": "hello"}).encode(),
                    json.dumps({"v": 1, "op": "deliver", "terminal": reg.terminal,
                                "token": reg.token, "envelopes": [
                                    {"event": "x", "secret": secret}]}).encode(),
                    json.dumps({"v": 1, "op": "hello"}).encode()]
        words = [json.loads(line).get("error") for request in requests
                 for line in await call(raw_exchange, sock, request + b"\n")]
        assert words == ["bad-request", "unknown-op", "unsupported-version", "bad-request",
                         None]
        # One request per connection: what follows the first line is never answered.
        lines = await call(raw_exchange, sock, b"\n".join(requests[::-1]) + b"\n", replies=5)
        assert [json.loads(line).get("error") for line in lines] == [None]
        # An oversized line is refused and ends the connection.
        lines = await call(raw_exchange, sock, b"x" * (MAX_LINE + 10) + b"\n", replies=2)
        assert [json.loads(x) for x in lines] == [{"v": 1, "ok": False, "error": "too-large"}]
        # A line of exactly the limit is read (and refused for what it is, not its size).
        padded = b'{"v":1,"op":"hello","pad":"' + b"p" * (MAX_LINE - 30) + b'"}'
        assert len(padded) <= MAX_LINE
        [reply] = await call(raw_exchange, sock, padded + b"\n")
        assert json.loads(reply)["error"] == "bad-request"
        # A last line without its newline still counts.
        [reply] = await call(raw_exchange, sock, b'{"v":1,"op":"hello"}', half_close=True)
        assert json.loads(reply)["ok"] is True
        assert await call(client.list_terminals) == before

    with caplog.at_level("DEBUG", logger="clanker"):
        serve(sock, body)
    logged = caplog.text
    assert "refused a request: bad-request" in logged
    assert "too-large" in logged
    assert secret not in logged


def test_no_token_reaches_the_log(short_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    tokens: list[str] = []

    async def body(grid: Grid, client: GridClient) -> None:
        reg = await call(register, client, os.getpid())
        tokens.append(reg.token)
        await call(client.deliver, reg.terminal, reg.token, [root("session_started")])
        with pytest.raises(GridRequestError):
            await call(client.deliver, reg.terminal, FORGED, [root("session_started")])
        await call(client.retire, reg.terminal, reg.token)

    with caplog.at_level("DEBUG", logger="clanker"):
        serve(short_dir / "g.sock", body)
    assert "registered" in caplog.text
    assert "retired" in caplog.text
    assert tokens[0] not in caplog.text
    assert FORGED not in caplog.text


def collect(client: GridClient, events: list[StreamEvent], ready: threading.Event) -> None:
    with contextlib.closing(client.subscribe(timeout=30)) as stream:
        for event in stream:
            events.append(event)
            if event.kind is StreamKind.SYNCED:
                ready.set()


def test_subscribe_hydrates_then_streams_strictly_increasing_revisions(short_dir: Path) -> None:
    events: list[StreamEvent] = []

    async def body(grid: Grid, client: GridClient) -> None:
        first = await call(register, client, os.getpid())
        await call(client.deliver, first.terminal, first.token, [root("session_started")])
        ready = threading.Event()
        reader = asyncio.ensure_future(call(collect, client, events, ready))
        await call(ready.wait, 30)
        second = await call(register, client, os.getpid())
        await call(client.deliver, second.terminal, second.token, [
            root("turn_started", turnId="u1"), root("turn_started", turnId="u1"),
            root("turn_completed", turnId="u1")])
        await call(client.deliver, first.terminal, first.token, [root("agent_exited")])
        await call(client.retire, second.terminal, second.token)
        await until(lambda: sum(1 for e in events if e.kind is StreamKind.REVISION) >= 5)
        await grid.stop()  # ends the stream: the reader's iterator finishes
        await reader

    serve(short_dir / "g.sock", body)
    kinds = [e.kind for e in events]
    assert kinds[:2] == [StreamKind.SNAPSHOT, StreamKind.SYNCED]
    assert set(kinds[2:]) == {StreamKind.REVISION}
    per_terminal: dict[str, list[int]] = {}
    for event in events:
        if event.entry is not None:
            per_terminal.setdefault(event.entry.terminal, []).append(
                event.entry.revision["revision"])
    for revisions in per_terminal.values():
        assert revisions == sorted(set(revisions)), revisions
    tombstones = [e.entry for e in events if e.entry and e.entry.revision["snapshot"] is None]
    assert len(tombstones) == 2
    assert {t.attention for t in tombstones} == {"unknown"}
    attentions = [e.entry.attention for e in events
                  if e.entry and e.entry.terminal not in {events[0].entry.terminal}]  # type: ignore[union-attr]
    assert attentions == ["unknown", "working", "done", "unknown"]


def test_agent_exited_retires_the_terminal_and_its_credential(short_dir: Path) -> None:
    async def body(grid: Grid, client: GridClient) -> None:
        reg = await call(register, client, os.getpid())
        assert await call(client.deliver, reg.terminal, reg.token,
                          [root("agent_exited")]) == ["accepted"]
        await until(lambda: grid.entries() == [])
        with pytest.raises(GridRequestError) as caught:
            await call(client.deliver, reg.terminal, reg.token, [root("session_started")])
        assert caught.value.word == "unauthorized"

    serve(short_dir / "g.sock", body)


@pytest.mark.parametrize("use_pidfd", [True, False], ids=["pidfd", "poll"])
def test_a_dead_launcher_retires_its_terminal(
    short_dir: Path, launcher: subprocess.Popen[bytes], use_pidfd: bool
) -> None:
    events: list[StreamEvent] = []

    async def body(grid: Grid, client: GridClient) -> None:
        reg = await call(register_as, launcher, grid.socket_path)
        keeper = await call(register, client, os.getpid())
        ready = threading.Event()
        reader = asyncio.ensure_future(call(collect, client, events, ready))
        await call(ready.wait, 30)
        await call(end, launcher)
        await until(lambda: [e.terminal for e in grid.entries()] == [keeper.terminal])
        with pytest.raises(GridRequestError) as caught:
            await call(client.deliver, reg.terminal, reg.token, [root("session_started")])
        assert caught.value.word == "unauthorized"
        await until(lambda: any(e.kind is StreamKind.REVISION for e in events))
        await grid.stop()
        await reader

    serve(short_dir / "g.sock", body, use_pidfd=use_pidfd, poll_interval=0.05)
    [tombstone] = [e.entry for e in events if e.kind is StreamKind.REVISION]
    assert tombstone is not None
    assert tombstone.revision["snapshot"] is None


def test_registering_a_dead_launcher_is_refused(
    short_dir: Path, launcher: subprocess.Popen[bytes]
) -> None:
    end(launcher)

    async def body(grid: Grid, client: GridClient) -> None:
        for use_pidfd in (True, False):
            grid._use_pidfd = use_pidfd  # both watchers refuse it
            with pytest.raises(GridRequestError) as caught:
                await call(register, client, launcher.pid)
            assert caught.value.word == "launcher-gone"
        assert grid.entries() == []

    serve(short_dir / "g.sock", body)


def test_a_subscriber_that_falls_behind_is_dropped_without_blocking(short_dir: Path) -> None:
    sock = short_dir / "g.sock"

    async def body(grid: Grid, client: GridClient) -> None:
        reg = grid.register(harness="fake-agent", cwd="/tmp", launcher_pid=os.getpid())
        stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(str(sock))
        stalled.sendall(b'{"v":1,"op":"subscribe"}\n')
        await asyncio.sleep(0.1)
        from clanker.attention.envelope import parse_envelope

        # Far more revisions than the socket buffers and the queue hold, never read.
        for index in range(4000):
            grid.broker.apply(reg.terminal, parse_envelope(
                root("location_changed", cwd=f"/tmp/{'ab'[index % 2]}/" + "d" * 200)))
            if index % 100 == 0:
                await asyncio.sleep(0)
        # The broker never waited; the stalled subscriber was cut off.
        assert grid.entries()[0].revision["revision"] > 4000
        stalled.settimeout(10)
        received = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := await call(stalled.recv, 65536):
                received += chunk
        stalled.close()
        assert received.startswith(b'{"v":1,"ok":true,"kind":"snapshot"')
        assert (await call(client.hello)).terminals == 1

    serve(sock, body, subscriber_queue=8)


def test_shutdown_stops_the_grid_and_removes_the_socket(short_dir: Path) -> None:
    sock = short_dir / "g.sock"

    async def main() -> None:
        grid = Grid(sock)
        await grid.start()
        client = GridClient(sock, timeout=10)
        await call(client.shutdown)
        await asyncio.wait_for(grid.wait_stopped(), 30)
        assert not sock.exists()
        with pytest.raises(GridUnavailableError):
            await call(client.hello)

    asyncio.run(main())


def test_socket_paths_that_are_too_long_or_taken_are_refused(short_dir: Path) -> None:
    with pytest.raises(GridPathError, match="at most"):
        Grid(short_dir / ("x" * 120))
    with pytest.raises(GridPathError):
        GridClient("/tmp/" + "y" * 200)
    occupied = short_dir / "file"
    occupied.write_text("not a socket")

    async def main() -> None:
        with pytest.raises(GridPathError, match="not a socket"):
            await Grid(occupied).start()
        live = short_dir / "live.sock"
        async with Grid(live):
            with pytest.raises(GridAlreadyRunningError):
                await Grid(live).start()
        # A stale socket (nobody listening) is replaced.
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(str(short_dir / "stale.sock"))
        stale.close()
        async with Grid(short_dir / "stale.sock") as grid:
            assert (await call(GridClient(grid.socket_path).hello)).terminals == 0

    asyncio.run(main())
    assert occupied.read_text() == "not a socket"


def test_the_client_says_when_no_grid_runs(short_dir: Path) -> None:
    with pytest.raises(GridUnavailableError, match="not running"):
        GridClient(short_dir / "none.sock").hello()


def test_a_terminal_carries_its_tmux_pane_and_a_malformed_one_is_refused(
        short_dir: Path) -> None:
    async def body(grid: Grid, client: GridClient) -> None:
        reg = await call(client.register, harness="fake-agent", workspace=None, cwd="/tmp",
                         launcher_pid=os.getpid(), tmux_pane="%12")
        [listed] = await call(client.list_terminals)
        assert (listed.terminal, listed.tmux_pane) == (reg.terminal, "%12")
        outside = grid.register(harness="fake-agent", cwd="/tmp", launcher_pid=os.getpid())
        assert grid.entry(outside.terminal).tmux_pane is None  # type: ignore[union-attr]
        for bad in ("12", "%", "%1;kill", "%" + "9" * 10):
            with pytest.raises(GridRequestError):
                grid.register(harness="fake-agent", cwd="/tmp", launcher_pid=os.getpid(),
                              tmux_pane=bad)

    serve(short_dir / "g.sock", body)
