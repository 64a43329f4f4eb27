"""Hostile traffic against the MCP endpoint of a real grid: at least 10,000 malformed,
oversized, wrong-Host, Origin-bearing, forged, revoked and cross-terminal requests.
Every one gets the refusal its rule says (or, for bytes that are not HTTP, at most a
closed connection); none crashes anything, leaks a credential, advertises OAuth, or
changes the grid's state, and the endpoint serves its agents as before afterwards."""

from __future__ import annotations

import json
import logging
import random
import string
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from clanker.grid.client import GridClient
from tests.core.bridge.mcp_peer import (
    META,
    MODERN,
    Agent,
    Answer,
    exchange,
    grant,
    live_grid,
    post,
    request,
)
from tests.core.grid.conftest import LiveGrid, eventually

REQUESTS = 10_000
SEED = 20261202
TOKEN = string.ascii_letters + string.digits + "-./_"
"""What a well-formed header value here is made of."""
Case = tuple[str, bytes, Callable[[Answer | None], bool]]
"""What kind of request, its bytes, and what answer it must get."""


@pytest.fixture
def live(short_dir: Path) -> Iterator[LiveGrid]:
    with live_grid(short_dir) as grid:
        yield grid


def status(*codes: int) -> Callable[[Answer | None], bool]:
    return lambda answer: answer is not None and answer.status in codes


def closed_or(*codes: int) -> Callable[[Answer | None], bool]:
    return lambda answer: answer is None or answer.status in codes


def _rpc_error(answer: Answer | None) -> bool:
    """A JSON-RPC refusal, a tool error, or an accepted notification: never internal."""
    if answer is None or answer.status not in (200, 202, 400, 404):
        return False
    if answer.status == 202:
        return answer.body == b""
    try:
        body = answer.json()
    except ValueError:
        return False
    # A batch (of at most 16) is answered message by message, as an array.
    answers = body if type(body) is list and 1 <= len(body) <= 16 else [body]
    return all(type(one) is dict and _rpc_answer(one) for one in answers)


def _rpc_answer(body: dict[str, Any]) -> bool:
    if "error" in body:
        return body["error"]["code"] in (-32700, -32600, -32601, -32602, -32020, -32022)
    return body["result"].get("isError") in (True, None, False)


class Traffic:
    """Generates the hostile requests (deterministically, from one seed)."""

    def __init__(self, rng: random.Random, port: int, agents: dict[str, Agent],
                 revoked: Agent) -> None:
        self.rng = rng
        self.port = port
        self.mine = agents["mine"]
        self.theirs = agents["theirs"]
        self.ended = revoked

    def text(self, size: int, alphabet: str = string.printable) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(size))

    def json_value(self, depth: int = 0) -> Any:
        pick = self.rng.randrange(9 if depth < 4 else 5)
        if pick == 0:
            return None
        if pick == 1:
            return self.rng.choice([True, False])
        if pick == 2:
            return self.rng.choice([0, -1, 2**53, 2**64, 1.5, -0.0, 10**300])
        if pick == 3:
            return self.text(self.rng.randrange(0, 40))
        if pick == 4:
            return self.rng.choice(["tools/call", "tools/list", "initialize", "ping",
                                    "server/discover", "__proto__", "constructor",
                                    "clanker_context", "clanker_agents", "clanker_notify"])
        if pick in (5, 6):
            return {self.rng.choice(["jsonrpc", "id", "method", "params", "name",
                                     "arguments", "_meta", "cursor", "__proto__",
                                     "constructor", self.text(5)]): self.json_value(depth + 1)
                    for _ in range(self.rng.randrange(0, 6))}
        return [self.json_value(depth + 1) for _ in range(self.rng.randrange(0, 5))]

    def message(self) -> Any:
        """A JSON-RPC-looking message, mutated."""
        method = self.rng.choice(["tools/call", "tools/list", "initialize", "ping",
                                  "server/discover", "notifications/initialized",
                                  "resources/list", self.text(8)])
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.rng.randrange(1000),
                                   "method": method}
        if method == "tools/call":
            message["params"] = {"name": self.rng.choice(
                ["clanker_context", "clanker_agents", "clanker_notify", "clanker_nothing",
                 "", "x" * 300]), "arguments": self.json_value(1)}
        for _ in range(self.rng.randrange(0, 3)):
            key = self.rng.choice(["jsonrpc", "id", "method", "params", "extra"])
            if self.rng.random() < 0.3:
                message.pop(key, None)
            else:
                message[key] = self.json_value(1)
        if self.rng.random() < 0.15:
            return [message] * self.rng.randrange(1, 40)  # batches, of any size
        if self.rng.random() < 0.1:
            return self.json_value()
        return message

    def body(self) -> bytes:
        return json.dumps(self.message()).encode()

    def valid(self, agent: Agent, **options: Any) -> bytes:
        options.setdefault("token", agent.token)
        return request(self.port, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                       **options)

    # ---------------------------------------------------------------- the kinds

    def garbage(self) -> Case:
        pick = self.rng.randrange(5)
        if pick == 0:
            data = bytes(self.rng.randrange(256) for _ in range(self.rng.randrange(1, 600)))
        elif pick == 1:
            data = (self.text(self.rng.randrange(1, 200)) + "\r\n\r\n").encode()
        elif pick == 2:
            version = self.rng.choice(["HTTP/9.9", "HTTP/1", "HTTP/1.1x", "HTTP/0.9", "http/1.1"])
            data = f"POST /mcp {version}\r\nHost: 127.0.0.1:{self.port}\r\n\r\n".encode()
        elif pick == 3:
            valid = self.valid(self.mine)
            cut = self.rng.randrange(1, len(valid))
            data = valid[:cut] + bytes([self.rng.randrange(256)]) + valid[cut + 1:]
        else:
            data = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
                    f"{self.text(10, string.ascii_letters + ' :()')}\r\n"
                    "Transfer-Encoding: chunked\r\n\r\nzz\r\n").encode()
        # Bytes that are not quite HTTP may still be a request: then it is refused by rule,
        # or answered (a flipped byte in a header value the endpoint does not read).
        return "malformed HTTP", data, closed_or(200, 400, 401, 403, 404, 405, 406, 408, 413,
                                                415, 421, 431, 501, 505)

    def oversized(self) -> Case:
        pick = self.rng.randrange(4)
        if pick == 0:
            length = self.rng.choice([65_537, 10**6, 10**12, 10**30])
            data = request(self.port, b"", token=self.mine.token,
                           headers={"Content-Length": str(length)})
            # A length no 64-bit size holds is malformed to h11 (400), the rest too large.
            return "oversized (declared)", data, status(413) if length < 10**18 else status(400)
        if pick == 1:
            body = b" " * self.rng.randrange(65_537, 200_000)
            return "oversized (sent)", request(self.port, body, token=self.mine.token), \
                status(413)
        if pick == 2:
            chunk = b" " * 30_000
            data = request(self.port, b"", token=self.mine.token, headers={
                "Content-Length": None, "Transfer-Encoding": "chunked"})
            data += b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(3))
            return "oversized (chunked)", data + b"0\r\n\r\n", status(413)
        pad = {f"X-{n}": "y" * self.rng.randrange(100, 4000) for n in range(8)}
        if sum(len(v) for v in pad.values()) < 8_300:
            pad["X-More"] = "z" * 8_300
        return "oversized (head)", self.valid(self.mine, headers=pad), status(431)

    def wrong_host(self) -> Case:
        host = self.rng.choice([
            "127.0.0.1", "localhost", f"127.0.0.1:{self.port + 1}", f"evil.example:{self.port}",
            f"127.0.0.1.nip.io:{self.port}", f"[::1]:{self.port}", f"0.0.0.0:{self.port}",
            f"127.0.0.2:{self.port}", f" 127.0.0.1:{self.port}x", self.text(12),
            f"localhost.:{self.port}", f"127.0.0.1:{self.port}@evil", ""])
        return "wrong Host", self.valid(self.mine, host=host), closed_or(400, 421)

    def origin(self) -> Case:
        origin = self.rng.choice(["null", "", f"http://127.0.0.1:{self.port}",
                                  f"http://localhost:{self.port}", "https://evil.example",
                                  "file://", self.text(20, string.ascii_letters)])
        return "Origin", self.valid(self.mine, headers={"Origin": origin}), status(403)

    def forged(self) -> Case:
        token = self.mine.token
        forged = self.rng.choice([
            "ckb_" + "".join(self.rng.choice("0123456789abcdef") for _ in range(64)),
            token[:-1] + ("0" if token[-1] != "0" else "1"), token[:-1], token + "0",
            token.upper(), "ckb_" + token[4:].upper(), self.mine.registration.token,
            self.text(64, string.ascii_letters), "", "null"])
        scheme = self.rng.choice(["Bearer ", "Bearer ", "Basic ", "Token ", ""])
        return "forged credential", self.valid(self.mine, token=None, headers={
            "Authorization": scheme + forged}), status(401)

    def revoked(self) -> Case:
        return "revoked credential", request(self.port, self.body(),
                                             token=self.ended.token), status(401)

    def cross_terminal(self) -> Case:
        name = self.rng.choice(["clanker_context", "clanker_agents", "clanker_notify"])
        arguments = {self.rng.choice(["terminal", "workspace", "token", "harness", "cwd"]):
                     self.rng.choice([self.theirs.registration.terminal, "/", self.theirs.token,
                                      "other-agent"])}
        message = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}}

        def refused(answer: Answer | None) -> bool:
            if answer is None or answer.status != 200:
                return False
            body = answer.json()
            if name == "clanker_notify":  # not granted to this one: as unknown
                return body.get("error") == {"code": -32602, "message": "Unknown tool"}
            return body["result"]["isError"] is True and "is not an argument" in \
                body["result"]["content"][0]["text"]

        return "cross-terminal", request(self.port, message, token=self.mine.token), refused

    def malformed_rpc(self) -> Case:
        headers: dict[str, str] = {}
        if self.rng.random() < 0.4:
            headers["MCP-Protocol-Version"] = self.rng.choice(
                [MODERN, "2025-06-18", "2024-11-05", "1999-01-01", self.text(10, TOKEN)])
        if self.rng.random() < 0.3:
            headers["Mcp-Method"] = self.rng.choice(["tools/list", "tools/call",
                                                     self.text(5, TOKEN)])
        body = self.body()
        if self.rng.random() < 0.2:
            cut = self.rng.randrange(0, max(1, len(body)))
            body = body[:cut]
        return "malformed JSON-RPC", request(self.port, body, token=self.mine.token,
                                             headers=headers), _rpc_error

    def wrong_shape(self) -> Case:
        pick = self.rng.randrange(4)
        if pick == 0:
            kind = self.rng.choice(["text/plain", "application/x-www-form-urlencoded",
                                    "multipart/form-data", "application/jsonx", ""])
            return "wrong content type", self.valid(self.mine, headers={
                "Content-Type": kind}), status(415)
        if pick == 1:
            method = self.rng.choice(["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"])
            return "wrong method", self.valid(self.mine, method=method), status(405)
        if pick == 2:
            target = self.rng.choice(["/", "/mcp/", "/MCP", "/mcp?", "/api/mcp",
                                      "/.well-known/oauth-protected-resource",
                                      "/.well-known/oauth-authorization-server",
                                      "/" + self.text(8, string.ascii_letters)])
            return "unknown path", self.valid(self.mine, target=target), status(404)
        message = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                   "params": {"name": "clanker_context", "_meta": self.rng.choice(
                       [META, {}, None, {"io.modelcontextprotocol/protocolVersion": "x"}])}}
        headers = {"MCP-Protocol-Version": MODERN,
                   "Mcp-Method": self.rng.choice(["tools/call", "tools/list"]),
                   "Mcp-Name": self.rng.choice(["clanker_context", "clanker_agents",
                                                "=?base64?Y2xhbmtlcl9jb250ZXh0?=", "=?base64?!?="])}
        return "modern envelope", request(self.port, message, token=self.mine.token,
                                          headers=headers), _rpc_error

    def case(self) -> Case:
        kinds = [self.garbage, self.oversized, self.wrong_host, self.origin, self.forged,
                 self.revoked, self.cross_terminal, self.malformed_rpc, self.wrong_shape]
        weights = [10, 6, 10, 8, 12, 8, 10, 26, 10]
        return self.rng.choices(kinds, weights)[0]()


def test_hostile_traffic_changes_nothing_and_crashes_nothing(
    live: LiveGrid, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mine = grant(live, cwd=str(tmp_path), names=("clanker_context", "clanker_agents"))
    theirs = grant(live, harness="other-agent")
    revoked = grant(live, harness="gone-agent")
    grid = GridClient(live.path)
    grid.revoke_bridge(revoked.registration.terminal, revoked.registration.token)
    before = [(e.terminal, e.bridge, e.revision) for e in grid.list_terminals()]
    context = post(mine, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "clanker_context"}}).json()
    rng = random.Random(SEED)
    traffic = Traffic(rng, mine.port, {"mine": mine, "theirs": theirs}, revoked)
    cases = [traffic.case() for _ in range(REQUESTS)]
    secrets = [a.token[4:] for a in (mine, theirs, revoked)] + [
        a.registration.token for a in (mine, theirs, revoked)]

    def run(case: Case) -> tuple[str, str | None]:
        kind, data, expected = case
        # Bytes that are not HTTP end with the stream: a half-sent request is then
        # refused at once rather than after the 15 s it may take to arrive.
        answer = exchange(mine.port, data, timeout=60, half_close=kind == "malformed HTTP")
        if not expected(answer):
            return kind, f"{kind}: unexpected {answer!r:.300} for {data[:300]!r}"
        if answer is not None and (
            (answer.status >= 500 and answer.status not in (501, 503, 505))
            or "www-authenticate" in answer.headers
            or b"oauth" in answer.body.lower()
            or any(secret.encode() in answer.body for secret in secrets)
            or b"-32603" in answer.body
        ):
            return kind, f"{kind}: leaked or crashed: {answer!r:.300}"
        return kind, None

    with caplog.at_level(logging.INFO), ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(run, cases))
    problems = [problem for _, problem in outcomes if problem is not None]
    assert problems == []
    tally = Counter(kind for kind, _ in outcomes)
    assert sum(tally.values()) >= 10_000
    print("\nhostile MCP requests:", sum(tally.values()), dict(sorted(tally.items())))
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert failures == []
    # Nothing changed, and everything is still served as before.
    eventually(lambda: live.on_loop(lambda g: (g.mcp.counts.connections,
                                               g.mcp.counts.requests)) == (0, 0))
    assert live.on_loop(lambda g: g.bridge.running) == 0
    assert [(e.terminal, e.bridge, e.revision) for e in grid.list_terminals()] == before
    assert post(mine, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "clanker_context"}}).json() == context
    assert post(revoked, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).status == 401
