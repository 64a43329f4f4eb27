"""The MCP endpoint's HTTP rules in a real grid: loopback only, started by the first
grant, every request checked on its head (Host, Origin, path, method, credential,
type, size) before its body is read, bounded, and cancelled when its client leaves."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clanker.bridge import wire
from clanker.bridge.declaration import Caller, Signal, define_capability
from clanker.bridge.input import Arguments, Input
from clanker.bridge.mcp_server import Limits
from clanker.bridge.shipped import SHIPPED, SHIPPED_NAMES
from clanker.grid.client import GridClient
from tests.core.bridge.mcp_peer import (
    MODERN,
    Agent,
    exchange,
    grant,
    live_grid,
    modern,
    post,
    read_response,
    request,
)
from tests.core.bridge.test_grid import _holds
from tests.core.grid.conftest import LiveGrid, end, eventually, launcher, register_as

__all__ = ["launcher"]  # a fixture, used by name

LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
held: list[str | None] = []
running = threading.Event()


async def _hold(arguments: Arguments, caller: Caller, signal: Signal) -> dict[str, Any]:
    running.set()
    try:
        await asyncio.sleep(3600)
    finally:
        held.append(signal.reason)
    return {}


async def _never(arguments: Arguments, caller: Caller, signal: Signal) -> dict[str, Any]:
    await asyncio.sleep(3600)
    return {}


HOLD = define_capability(name="test_hold", description="Waits until it is cut off.",
                         input=Input(), run=_hold, timeout=60)
SLOW = define_capability(name="test_slow", description="Never finishes in time.",
                         input=Input(), run=_never, timeout=0.2)


@pytest.fixture
def live(short_dir: Path) -> Iterator[LiveGrid]:
    with live_grid(short_dir, capabilities=[*SHIPPED, HOLD, SLOW]) as grid:
        yield grid


@pytest.fixture
def agent(live: LiveGrid) -> Agent:
    return grant(live)


def counts(live: LiveGrid) -> tuple[int, int]:
    def read(grid: Any) -> tuple[int, int]:
        listener = grid.mcp
        return listener.counts.connections, listener.counts.requests
    return live.on_loop(read)


def test_the_first_grant_starts_it_on_loopback_and_nothing_loads_before(
    short_dir: Path,
) -> None:
    code = """
import asyncio, json, os, sys
from clanker.grid.client import GridClient
from clanker.grid.server import Grid
def loaded():
    return sorted(m for m in sys.modules
                  if m in ("h11", "mcp") or m.startswith("clanker.bridge.mcp"))
async def main(path):
    async with Grid(path) as grid:
        before = (loaded(), grid.mcp_url)
        client = GridClient(path)
        registration = await asyncio.to_thread(client.register, harness="fake-agent",
            workspace=None, cwd="/tmp", launcher_pid=os.getpid())
        reply = await asyncio.to_thread(client.grant_bridge_endpoint, registration.terminal,
            registration.token, ["clanker_context"])
        again = await asyncio.to_thread(client.grant_bridge_endpoint, registration.terminal,
            registration.token, ["clanker_context"])
        print(json.dumps({"before": before, "after": loaded(), "url": reply.mcp_url,
                          "again": again.mcp_url, "address": list(grid.mcp.address)}))
asyncio.run(main(sys.argv[1]))
"""
    done = subprocess.run([sys.executable, "-c", code, str(short_dir / "g.sock")],
                          capture_output=True, text=True, timeout=60, check=True)
    seen = json.loads(done.stdout)
    assert seen["before"] == [[], None]
    assert seen["after"] == ["clanker.bridge.mcp_protocol", "clanker.bridge.mcp_server", "h11"]
    host, port = seen["address"]
    assert host == "127.0.0.1" and port > 0
    assert seen["url"] == seen["again"] == f"http://127.0.0.1:{port}/mcp"


def test_the_command_line_never_loads_it() -> None:
    code = ("import sys, clanker.cli, clanker.bridge.cmd, clanker.grid.server, "
            "clanker.launch.bridge; "
            "print(sorted(m for m in sys.modules if m == 'h11' or m == 'mcp' "
            "or m.startswith('clanker.bridge.mcp')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_a_grant_refused_starts_nothing(live: LiveGrid) -> None:
    client = GridClient(live.path)
    registration = client.register(harness="fake-agent", workspace="/tmp", cwd="/tmp",
                                   launcher_pid=__import__("os").getpid())
    with pytest.raises(Exception, match="unauthorized"):
        client.grant_bridge_endpoint(registration.terminal, "wrong" * 8, ["clanker_context"])
    assert live.on_loop(lambda grid: grid.mcp_url) is None


@pytest.mark.parametrize(("host", "status"), [
    ("{here}", 200), ("localhost:{port}", 200), ("LOCALHOST:{port}", 200),
    ("127.0.0.1", 421), ("localhost", 421), ("127.0.0.1:1", 421), ("evil.example:{port}", 421),
    ("127.0.0.1.evil.example:{port}", 421), ("[::1]:{port}", 421), ("", 421),
])
def test_only_this_endpoints_own_host_is_answered(agent: Agent, host: str, status: int) -> None:
    value = host.format(here=f"127.0.0.1:{agent.port}", port=agent.port)
    answer = exchange(agent.port, request(agent.port, LIST, token=agent.token, host=value))
    assert answer is not None and answer.status == status


@pytest.mark.parametrize("origin", ["null", "http://127.0.0.1:{port}", "https://evil.example",
                                    ""])
def test_any_origin_is_refused(agent: Agent, origin: str) -> None:
    answer = post(agent, LIST, headers={"Origin": origin.format(port=agent.port)})
    assert answer.status == 403


@pytest.mark.parametrize("target", ["/", "/mcp/", "/MCP", "/mcp?x=1", "/mcp#x", "//mcp",
                                    "/.well-known/oauth-protected-resource",
                                    "/.well-known/oauth-authorization-server",
                                    "/.well-known/oauth-protected-resource/mcp", "*"])
def test_nothing_but_the_endpoint_is_there(agent: Agent, target: str) -> None:
    answer = exchange(agent.port, request(agent.port, LIST, token=agent.token, target=target))
    assert answer is not None and answer.status == 404
    assert b"oauth" not in answer.body.lower() and "www-authenticate" not in answer.headers


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH", "OPTIONS"])
def test_only_post_is_answered(agent: Agent, method: str) -> None:
    answer = exchange(agent.port, request(agent.port, b"", token=agent.token, method=method,
                                          headers={"MCP-Protocol-Version": MODERN}))
    assert answer is not None and answer.status == 405
    assert answer.headers["allow"] == "POST"


@pytest.mark.parametrize("authorization", [
    None, "Basic Zm9vOmJhcg==", "Bearer", "Bearer ", "Token {token}", "Bearer {token}x",
    "Bearer ckb_" + "0" * 64, "Bearer {attention}", "Bearer  ckb_" + "g" * 64,
])
def test_a_request_without_a_live_credential_is_a_plain_401(
    agent: Agent, authorization: str | None
) -> None:
    headers = {"Authorization": None if authorization is None else authorization.format(
        token=agent.token, attention=agent.registration.token)}
    answer = exchange(agent.port, request(agent.port, LIST, token=None, headers=headers))
    assert answer is not None and answer.status == 401
    assert "www-authenticate" not in answer.headers
    assert answer.body == b"no live bridge credential\n"


def test_the_credential_is_checked_before_the_body_is_sent(agent: Agent) -> None:
    body = json.dumps(LIST).encode()
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{agent.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Expect: 100-continue\r\n")
    for token, status in (("ckb_" + "1" * 64, 401), (agent.token, 100)):
        with socket.create_connection(("127.0.0.1", agent.port), timeout=30) as sock:
            sock.sendall(f"{head}Authorization: Bearer {token}\r\n\r\n".encode())
            answer = read_response(sock)
            assert answer is not None and answer.status == status
            if status == 100:
                sock.sendall(body)
                final = read_response(sock)
                assert final is not None and final.status == 200


def test_a_lowercase_scheme_is_still_bearer(agent: Agent) -> None:
    answer = post(agent, LIST, headers={"Authorization": f"bearer {agent.token}"})
    assert answer.status == 200


@pytest.mark.parametrize(("headers", "status"), [
    ({"Content-Type": "text/plain"}, 415), ({"Content-Type": None}, 415),
    ({"Content-Type": "application/jsonx"}, 415),
    ({"Content-Type": "application/json; charset=utf-8"}, 200),
    ({"Accept": "text/html"}, 406), ({"Accept": "text/event-stream"}, 406),
    ({"Accept": None}, 200), ({"Accept": "*/*"}, 200),
])
def test_the_body_must_be_json_and_the_answer_acceptable(
    agent: Agent, headers: dict[str, str], status: int
) -> None:
    assert post(agent, LIST, headers=headers).status == status


def test_bodies_and_heads_are_bounded(agent: Agent) -> None:
    padded = json.dumps(LIST).encode()
    padded += b" " * (65_536 - len(padded))
    assert post(agent, padded).status == 200  # type: ignore[arg-type]
    too_big = padded + b" "
    assert exchange(agent.port, request(agent.port, too_big, token=agent.token)).status == 413  # type: ignore[union-attr]
    # Refused on its Content-Length, before a byte of the body.
    head_only = request(agent.port, b"", token=agent.token,
                        headers={"Content-Length": "10000000"})
    assert exchange(agent.port, head_only).status == 413  # type: ignore[union-attr]
    # Counted while reading, when no length is declared.
    chunk = b"{" + b" " * 40_000
    chunked = request(agent.port, b"", token=agent.token, headers={
        "Content-Length": None, "Transfer-Encoding": "chunked"})
    chunked += b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(2)) + b"0\r\n\r\n"
    assert exchange(agent.port, chunked).status == 413  # type: ignore[union-attr]
    large_head = request(agent.port, LIST, token=agent.token, headers={"X-Pad": "x" * 8200})
    assert exchange(agent.port, large_head).status == 431  # type: ignore[union-attr]
    for twice in ("Authorization", "Content-Type", "MCP-Protocol-Version"):
        doubled = request(agent.port, LIST, token=agent.token).replace(
            b"\r\n\r\n", f"\r\n{twice}: x\r\n\r\n".encode(), 1)
        assert exchange(agent.port, doubled).status == 400  # type: ignore[union-attr]


def test_a_batch_is_answered_message_by_message_where_the_revision_has_them(
    agent: Agent
) -> None:
    ping = {"jsonrpc": "2.0", "id": "p", "method": "ping"}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    for version in (None, "2024-11-05", "2025-03-26"):
        answer = post(agent, [LIST, note, ping, [LIST]], version=version)
        assert answer.status == 200
        listed, pinged, nested = answer.json()
        assert [tool["name"] for tool in listed["result"]["tools"]] == sorted(SHIPPED_NAMES)
        assert pinged == {"jsonrpc": "2.0", "id": "p", "result": {}}
        assert nested["error"]["code"] == -32600
        assert post(agent, [note, note], version=version).status == 202
        assert post(agent, [LIST] * 16, version=version).status == 200


@pytest.mark.parametrize(("size", "version"), [
    (17, None), (500, "2025-03-26"), (0, None), (1, "2025-06-18"), (16, "2025-11-25"),
])
def test_a_batch_beyond_the_bound_or_the_revision_is_refused(
    agent: Agent, size: int, version: str | None
) -> None:
    answer = post(agent, [LIST] * size, version=version)
    assert answer.status == 400
    assert answer.json()["error"]["code"] == -32600


@pytest.mark.parametrize(("body", "code"), [
    (b"{", -32700), (b"", -32700), (b"\xff\xfe", -32700), (b'{"a":1,"a":2}', -32700),
    (b"NaN", -32700), (b"[" * 5000 + b"]" * 5000, -32700), (b"1", -32600), (b'"x"', -32600),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}', -32600),
    (b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}', -32600),
    (b'{"jsonrpc":"2.0","id":null,"method":"tools/list"}', -32600),
    (b'{"jsonrpc":"1.0","id":1,"method":"tools/list"}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":"tools/list","extra":1}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[]}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"result":{}}', -32600),
    (b'{"jsonrpc":"2.0","method":7}', -32600),
])
def test_malformed_json_rpc_is_refused_generically(agent: Agent, body: bytes, code: int) -> None:
    answer = exchange(agent.port, request(agent.port, body, token=agent.token))
    assert answer is not None and answer.status == 400
    error = answer.json()["error"]
    assert error["code"] == code and error["message"] in (
        "Parse error", "Invalid request")


def test_unknown_methods_and_tools_are_refused_generically(agent: Agent) -> None:
    for method in ("resources/list", "prompts/list", "logging/setLevel", "tools/lisT"):
        answer = post(agent, {"jsonrpc": "2.0", "id": "x", "method": method})
        assert (answer.status, answer.json()["error"]) == (200, {
            "code": -32601, "message": "Method not found"})
    for params in ({"name": 7}, {}, {"name": "clanker_secret_things"}, {"name": "__proto__"}):
        answer = post(agent, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                              "params": params})
        assert answer.json()["error"]["code"] == -32602
        assert answer.json()["error"]["message"] in ("Invalid params", "Unknown tool")
    arrays = post(agent, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                          "params": {"name": "clanker_context", "arguments": [1]}})
    assert arrays.json()["result"]["isError"] is True


def test_keep_alive_and_pipelined_requests_are_answered_in_order(agent: Agent) -> None:
    one = request(agent.port, {**LIST, "id": 1}, token=agent.token)
    two = request(agent.port, {**LIST, "id": 2}, token=agent.token)
    with socket.create_connection(("127.0.0.1", agent.port), timeout=30) as sock:
        for _ in range(3):
            sock.sendall(one)
            answer = read_response(sock)
            assert answer is not None and answer.json()["id"] == 1
        sock.sendall(one + two)
        first, second = read_response(sock), read_response(sock)
        assert first is not None and second is not None
        assert (first.json()["id"], second.json()["id"]) == (1, 2)


def test_at_most_32_requests_are_in_flight(live: LiveGrid, agent: Agent) -> None:
    # A request is in flight from its head on: these send a head and no body.
    waiting = request(agent.port, b"", token=agent.token, headers={"Content-Length": "20"})
    holders = [socket.create_connection(("127.0.0.1", agent.port), timeout=30)
               for _ in range(32)]
    try:
        for sock in holders:
            sock.sendall(waiting)
        eventually(lambda: counts(live)[1] == 32)
        refused = post(agent, LIST)
        assert refused.status == 503 and refused.headers["retry-after"] == "1"
    finally:
        for sock in holders:
            sock.close()
    eventually(lambda: counts(live) == (0, 0))
    assert post(agent, LIST).status == 200


def test_idle_connections_never_lock_an_agent_out(live: LiveGrid, agent: Agent) -> None:
    idle = [socket.create_connection(("127.0.0.1", agent.port), timeout=30) for _ in range(80)]
    try:
        eventually(lambda: counts(live)[0] == 64)
        assert post(agent, LIST).status == 200
        assert idle[0].recv(1) == b""  # the longest idle made room
    finally:
        for sock in idle:
            sock.close()
    eventually(lambda: counts(live) == (0, 0))


def test_a_request_that_takes_too_long_to_arrive_is_cut_off(short_dir: Path) -> None:
    with live_grid(short_dir, mcp_limits=Limits(receive_timeout=0.5)) as live:
        agent = grant(live)
        partial = request(agent.port, b"", token=agent.token, headers={"Content-Length": "20"})
        slow = exchange(agent.port, partial + b"{")
        assert slow is not None and slow.status == 408
        with socket.create_connection(("127.0.0.1", agent.port), timeout=30) as sock:
            assert sock.recv(1) == b""  # an idle connection is closed without a word
        assert post(agent, LIST).status == 200


def test_a_call_is_cut_off_at_its_time_and_when_its_client_leaves(
    live: LiveGrid,
) -> None:
    agent = grant(live, names=("test_hold", "test_slow"))
    slow = post(agent, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                        "params": {"name": "test_slow"}})
    result = slow.json()["result"]
    assert result == {"isError": True, "content": [{"type": "text", "text":
                      "the capability did not finish in time "
                      "(test_slow did not finish within 0.2 s)"}]}
    held.clear()
    running.clear()
    call = request(agent.port, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                "params": {"name": "test_hold"}}, token=agent.token)
    with socket.create_connection(("127.0.0.1", agent.port), timeout=30) as sock:
        sock.sendall(call)
        assert running.wait(30)
    eventually(lambda: held == ["cancelled"])
    eventually(lambda: live.on_loop(lambda grid: grid.bridge.running) == 0)


def test_revoked_exited_and_cross_terminal_credentials(
    live: LiveGrid, launcher: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    mine, theirs = grant(live, cwd=str(tmp_path)), grant(live, names=("clanker_context",))
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "clanker_context", "arguments": {}}}
    for agent, names in ((mine, 3), (theirs, 1)):
        context = json.loads(post(agent, call).json()["result"]["content"][0]["text"])
        assert len(context["capabilities"]) == names
    # Arguments never name whom the call is for.
    borrowed = post(mine, {**call, "params": {"name": "clanker_context", "arguments": {
        "terminal": theirs.registration.terminal}}})
    assert borrowed.json()["result"]["isError"] is True
    GridClient(live.path).revoke_bridge(mine.registration.terminal, mine.registration.token)
    assert post(mine, call).status == 401
    assert post(theirs, call).status == 200
    registration = register_as(launcher, live.path)
    reply = GridClient(live.path).grant_bridge_endpoint(
        registration.terminal, registration.token, ["clanker_context"])
    gone = Agent(registration=registration, token=reply.bridge_token, url=theirs.url)
    assert post(gone, call).status == 200
    with live.paused():  # the grid cannot notice the exit before the next request
        end(launcher)
    assert post(gone, call).status == 401


def test_the_raw_credential_is_not_retained_after_mcp_traffic(live: LiveGrid) -> None:
    agent = grant(live)
    with socket.create_connection(("127.0.0.1", agent.port), timeout=30) as sock:
        for message in (LIST, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                               "params": {"name": "clanker_context"}}):
            sock.sendall(request(agent.port, message, token=agent.token))
            answer = read_response(sock)
            assert answer is not None and answer.status == 200
        # The connection stays open (kept alive) while the grid is searched.
        gc.collect()
        needle = agent.token[len(wire.TOKEN_PREFIX):]
        assert live.on_loop(lambda grid: _holds(grid, needle)) == []


def test_stopping_the_grid_closes_the_endpoint(short_dir: Path) -> None:
    with live_grid(short_dir) as live:
        agent = grant(live)
        assert post(agent, LIST).status == 200
    with contextlib.closing(socket.socket()) as sock:
        sock.settimeout(5)
        with pytest.raises(OSError):
            sock.connect(("127.0.0.1", agent.port))


def test_modern_requests_are_answered_too(agent: Agent) -> None:
    answer = post(agent, modern("tools/call", {"name": "clanker_agents"}), version=MODERN)
    assert answer.status == 200
    assert json.loads(answer.json()["result"]["content"][0]["text"]) == {
        "agents": [], "omitted": 0}
