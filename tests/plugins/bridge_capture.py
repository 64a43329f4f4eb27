"""Record what a real harness's own MCP client sends to clanker's endpoint.

Run it inside ``cli-sandbox`` (loopback only, a throwaway home), from the
directory the harness should start in; the grid runs in this process, in the
sandbox's network namespace::

    cli-sandbox NAME .venv/bin/python -m tests.plugins.bridge_capture MODE OUT.json [FLAGS...]

A real grid is started with one grant; the plugin's bridge provider builds the
argv; the real CLI is started with it and the token in its environment only,
and asked, without a user message, which MCP servers it has:

=================  ==================================================================
MODE               what runs
=================  ==================================================================
claude-control     ``claude`` on its stream-json control protocol: ``initialize``,
                   then ``mcp_status`` until no server is still connecting
codex-app-server   ``codex app-server``: ``initialize``, then ``mcpServerStatus/list``
codex-exec         ``codex exec hi`` whose model provider is a loopback stand-in that
                   refuses every request at once (400), so the turn fails locally
                   (a port where nothing listens made 0.171.0 retry past 90 s); MCP
                   servers start before the turn
claude-tui,        the interactive TUI in a pseudo-terminal, ``FLAGS`` being the user's
codex-tui          (``--resume ID``, ``-C DIR resume ID``, ...), until the endpoint has
                   answered ``tools/list`` (at most 45 s); nothing is typed, and the
                   TUI is then ended with SIGTERM (SIGKILL after 1 s)
=================  ==================================================================

Every request head the endpoint received is written with its body and the
status it was answered with, the token and port replaced by ``${TOKEN}`` and
``${PORT}``. Recording wraps two of the listener's internal methods: this is a
capture tool, not a test.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

from clanker.bridge import mcp_protocol, mcp_server
from clanker.bridge.capability import BridgeEndpoint
from clanker.testing.doubles import attachment_context
from tests.core.bridge.mcp_peer import grant, live_grid
from tests.plugins.bridge_replay import JsonLines


class _Refusing(BaseHTTPRequestHandler):
    """A model API that refuses every request: no model anywhere."""

    def _refuse(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = (b'{"error":{"message":"refused by a loopback stand-in",'
                b'"type":"invalid_request_error"}}')
        self.send_response(400)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET = _refuse

    def log_message(self, *_: object) -> None:
        pass


def _refusing_provider() -> tuple[str, ...]:
    server = HTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    return ("-c", 'model_provider="refusing"',
            "-c", f'model_providers.refusing={{name="refusing",base_url="http://127.0.0.1:{port}/v1",'
                  'env_key="REFUSING_KEY",wire_api="responses",request_max_retries=0,'
                  "stream_max_retries=0}")


def _record(records: list[dict[str, Any]]) -> None:
    check, answer = mcp_server.McpListener._check, mcp_protocol.McpEndpoint.answer
    # A client may send on several connections at once: the head and the body of
    # one request meet in its connection's context, not in arrival order.
    current: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("request")

    def checking(self: Any, request: Any) -> Any:
        record = {"method": request.method.decode(), "target": request.target.decode(),
                  "headers": [[n.decode("latin-1"), v.decode("latin-1")]
                              for n, v in request.headers]}
        records.append(record)
        current.set(record)
        try:
            return check(self, request)
        except Exception as refusal:
            record["status"] = getattr(refusal, "status", None)
            raise

    async def answering(self: Any, token: str, headers: Any, body: bytes) -> Any:
        reply = await answer(self, token, headers, body)
        current.get().update(body=body.decode(), status=reply.status,
                             reply=(reply.body or b"").decode())
        return reply

    mcp_server.McpListener._check = checking  # type: ignore[method-assign]
    mcp_protocol.McpEndpoint.answer = answering  # type: ignore[method-assign]


def _terminal(argv: tuple[str, ...], env: dict[str, str], records: list[dict[str, Any]]
              ) -> object:
    """Run a TUI in a pseudo-terminal until the endpoint answered ``tools/list``."""
    import pty
    import select
    import signal

    def listed() -> bool:
        return any('"tools/list"' in r.get("body", "") and "status" in r for r in records)

    pid, fd = pty.fork()
    if pid == 0:  # the child: become the TUI
        os.execvpe(argv[0], list(argv), env)
    deadline = time.monotonic() + 45
    try:
        while time.monotonic() < deadline and not listed():
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(fd, 65_536)
                except OSError:
                    break
                if b"\x1b[6n" in chunk:  # a cursor-position query: answer it
                    os.write(fd, b"\x1b[1;1R")
    finally:
        os.kill(pid, signal.SIGTERM)
        time.sleep(1)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
    return {"tools_listed": listed()}


def _servers(mode: str, argv: tuple[str, ...], env: dict[str, str],
             records: list[dict[str, Any]]) -> object:
    cwd = Path.cwd()
    if mode.endswith("-tui"):
        return _terminal(argv, env, records)
    if mode == "codex-exec":
        done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                              timeout=90, stdin=subprocess.DEVNULL, check=False)
        return {"exit": done.returncode}
    cli = JsonLines(argv, env=env, cwd=cwd)
    try:
        if mode == "claude-control":
            cli.send({"type": "control_request", "request_id": "init",
                      "request": {"subtype": "initialize"}})
            cli.until(lambda m: m.get("type") == "control_response")
            servers: list[dict[str, Any]] = []
            for attempt in range(60):
                cli.send({"type": "control_request", "request_id": f"s{attempt}",
                          "request": {"subtype": "mcp_status"}})
                reply = cli.until(lambda m, a=attempt: m.get("type") == "control_response"
                                  and m["response"].get("request_id") == f"s{a}")
                servers = reply["response"]["response"]["mcpServers"]
                if servers and all(s["status"] != "pending" for s in servers):
                    break
                time.sleep(0.5)
            return [{"name": s["name"], "status": s["status"], "scope": s.get("scope"),
                     "tools": sorted(t["name"] for t in s.get("tools", []))} for s in servers]
        cli.send({"id": 1, "method": "initialize",
                  "params": {"clientInfo": {"name": "clanker-capture", "version": "0"},
                             "capabilities": None}})
        cli.until(lambda m: m.get("id") == 1)
        cli.send({"method": "initialized"})
        cli.send({"id": 2, "method": "mcpServerStatus/list", "params": {}})
        data = cli.until(lambda m: m.get("id") == 2)["result"]["data"]
        return [{"name": s["name"], "tools": sorted(s.get("tools") or {}),
                 "error": (s.get("toolsError") or "")[:80]} for s in data]
    finally:
        cli.close()


def main(mode: str, out: Path, flags: tuple[str, ...] = ()) -> None:
    records: list[dict[str, Any]] = []
    _record(records)
    scratch = Path(tempfile.mkdtemp(prefix="ck-", dir="/tmp"))
    private = Path(tempfile.mkdtemp(prefix="ck-private-", dir="/tmp"))
    private.chmod(0o700)
    with live_grid(scratch) as live:
        agent = grant(live, harness=mode.partition("-")[0])
        endpoint = BridgeEndpoint(url=agent.url, server_name="clanker",
                                  token_variable="CLANKER_BRIDGE_TOKEN")
        env = dict(os.environ, CLANKER_BRIDGE_TOKEN=agent.token, REFUSING_KEY="dummy-not-a-key")
        base: tuple[str, ...]
        if mode == "claude-tui":
            from clanker_claude.bridge import ClaudeBridge
            base = ("claude", *flags)
            provider: Any = ClaudeBridge()
        elif mode == "codex-tui":
            from clanker_codex.bridge import CodexBridge
            base = ("codex", *flags)
            provider = CodexBridge()
        elif mode == "claude-control":
            from clanker_claude.bridge import ClaudeBridge
            base = ("claude", "--output-format", "stream-json", "--verbose", "--input-format",
                    "stream-json", "--no-session-persistence")
            provider = ClaudeBridge()
        else:
            from clanker_codex.bridge import CodexBridge
            base = ("codex", "app-server") if mode == "codex-app-server" else (
                "codex", "exec", "--skip-git-repo-check", *_refusing_provider(), "hi")
            provider = CodexBridge()
        plan = provider.prepare(attachment_context(argv=base, env=env, cwd=str(Path.cwd()),
                                                   private_dir=private, user_flags=flags),
                                endpoint)
        assert plan is not None and plan.argv is not None, "the provider attached nothing"
        files = {p.name: p.read_text() for p in private.iterdir()}
        assert agent.token not in json.dumps([plan.argv, files, dict(plan.env)])
        servers = _servers(mode, plan.argv, env, records)
        version = subprocess.run([base[0], "--version"], capture_output=True, text=True,
                                 timeout=30, check=False).stdout.strip()
    text = json.dumps({"version": version, "argv": plan.argv, "files": files,
                       "status": servers, "requests": records}, indent=1)
    text = (text.replace(agent.token, "${TOKEN}")
            .replace(f"127.0.0.1:{agent.port}", "127.0.0.1:${PORT}")
            .replace(str(private), "${PRIVATE_DIR}"))
    out.write_text(text + "\n")
    print(json.dumps({"status": servers, "requests": [
        (r["method"], json.loads(r["body"]).get("method") if r.get("body") else None,
         r.get("status")) for r in records]}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), tuple(sys.argv[3:]))
