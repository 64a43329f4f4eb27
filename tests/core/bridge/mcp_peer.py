"""What the MCP endpoint's tests share: a real grid with a granted terminal, raw HTTP
exchanges (for what no well-behaved client sends) and the official MCP client."""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from attrs import frozen

from clanker.bridge.shipped import SHIPPED_NAMES
from clanker.grid.client import GridClient
from clanker.grid.protocol import Registration
from tests.core.grid.conftest import LiveGrid

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {}}


@frozen
class Agent:
    """A registered terminal with its bridge credential, and where the endpoint is."""

    registration: Registration
    token: str
    url: str

    @property
    def port(self) -> int:
        port = urlsplit(self.url).port
        assert port is not None
        return port


def grant(live: LiveGrid, *, cwd: str = "/tmp", workspace: str | None = None,
          harness: str = "fake-agent", names: tuple[str, ...] = SHIPPED_NAMES) -> Agent:
    client = GridClient(live.path)
    registration = client.register(harness=harness, workspace=workspace or cwd, cwd=cwd,
                                   launcher_pid=os.getpid())
    reply = client.grant_bridge_endpoint(registration.terminal, registration.token, names)
    assert reply.mcp_url is not None
    return Agent(registration=registration, token=reply.bridge_token, url=reply.mcp_url)


@frozen
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def exchange(port: int, data: bytes, *, timeout: float = 30.0,
             half_close: bool = False) -> Answer | None:
    """Send ``data`` as it is on one connection (then, with ``half_close``, the end of
    the stream), read one response; ``None`` when the endpoint closed the connection
    without one."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        with contextlib.suppress(OSError):
            sock.sendall(data)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        return read_response(sock)


def read_response(sock: socket.socket) -> Answer | None:
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65_536)
            if not chunk:
                break
            received += chunk
    if b"\r\n\r\n" not in received:
        return None
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    with contextlib.suppress(ConnectionResetError):
        while len(body) < length:
            chunk = sock.recv(65_536)
            if not chunk:
                break
            body += chunk
    return Answer(status=status, headers=headers, body=body[:length])


def request(port: int, body: bytes | str | dict[str, Any] | list[Any], *, token: str | None,
            method: str = "POST", target: str = "/mcp", host: str | None = None,
            headers: dict[str, str] | None = None) -> bytes:
    """The bytes of one HTTP request, as a harness's MCP client would send it (unless
    told otherwise)."""
    if isinstance(body, dict | list):
        body = json.dumps(body)
    raw = body.encode() if isinstance(body, str) else body
    fields = {"Host": host if host is not None else f"127.0.0.1:{port}",
              "Content-Type": "application/json",
              "Accept": "application/json, text/event-stream",
              "Content-Length": str(len(raw))}
    if token is not None:
        fields["Authorization"] = f"Bearer {token}"
    fields.update(headers or {})
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in fields.items() if value is not None)
    return head.encode("latin-1") + b"\r\n" + raw


def post(agent: Agent, message: dict[str, Any] | list[Any], *, version: str | None = None,
         token: str | None = None, headers: dict[str, str] | None = None) -> Answer:
    fields = dict(headers or {})
    if version is not None:
        fields["MCP-Protocol-Version"] = version
    if version == MODERN and isinstance(message, dict):
        fields.setdefault("Mcp-Method", str(message.get("method")))
        name = (message.get("params") or {}).get("name")
        if isinstance(name, str):
            fields.setdefault("Mcp-Name", name)
    answer = exchange(agent.port, request(agent.port, message,
                                          token=agent.token if token is None else token,
                                          headers=fields))
    assert answer is not None
    return answer


def modern(method: str, params: dict[str, Any] | None = None, id_: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method,
            "params": {**(params or {}), "_meta": META}}


@contextlib.contextmanager
def live_grid(short_dir: Path, **options: Any) -> Iterator[LiveGrid]:
    with LiveGrid(short_dir / "g.sock", **options) as grid:
        yield grid
