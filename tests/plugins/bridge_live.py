"""Run a real harness CLI against a real grid's MCP endpoint and record what its MCP
client sends (the live check behind docs/harnesses/<id>.md, "Agent bridge").

Run it inside ``cli-sandbox`` (its network namespace has loopback only, so the
grid runs in there too), with the repository's interpreter::

    cli-sandbox HOME .venv/bin/python -m tests.plugins.bridge_live \
        --harness opencode --out DIR [--user-config-content JSON] [--guidance TEXT] \
        -- opencode mcp list

It starts a grid, grants a terminal the shipped capabilities, puts a recording
proxy in front of the endpoint, asks the plugin's own ``agent_bridge`` (and,
with ``--guidance``, ``guidance``) capability for the launch's additions,
runs the command with them and writes ``DIR/exchanges.json`` (every request
and answer; the credential replaced by ``<token>``), ``DIR/plan.json`` (the
additions) and ``DIR/output.txt``. It fails if the raw credential appears in
the additions or in a file the capabilities wrote.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from clanker.bridge.capability import BridgeEndpoint
from clanker.ids import HarnessId
from clanker.registry import get_provider
from clanker.testing.doubles import attachment_context
from tests.core.bridge.mcp_peer import exchange, grant, live_grid

_TOKEN = "<token>"


def _read_request(conn: socket.socket, pending: bytes) -> tuple[bytes, bytes, bytes] | None:
    """One HTTP request from ``conn``: (head, body, what is left), or ``None`` at the end."""
    data = pending
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65_536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    headers = _headers(head)
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            while b"\r\n" not in rest:
                rest += conn.recv(65_536)
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            while len(rest) < size + 2:
                rest += conn.recv(65_536)
            body, rest = body + rest[:size], rest[size + 2:]
            if size == 0:
                return head, body, rest
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = conn.recv(65_536)
        if not chunk:
            break
        rest += chunk
    return head, rest[:length], rest[length:]


def _headers(head: bytes) -> dict[str, str]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    return {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}


def _redact(text: str, token: str) -> str:
    return text.replace(token, _TOKEN)


def _body(raw: bytes, token: str) -> Any:
    text = _redact(raw.decode("utf-8", "replace"), token)
    try:
        return json.loads(text)
    except ValueError:
        return text


class Recorder:
    """A loopback HTTP proxy in front of the endpoint that keeps every exchange."""

    def __init__(self, upstream_port: int, token: str) -> None:
        self.upstream = upstream_port
        self.token = token
        self.exchanges: list[dict[str, Any]] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            conn, _ = self.server.accept()
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        pending = b""
        with conn:
            while True:
                try:
                    got = _read_request(conn, pending)
                except OSError:
                    return
                if got is None:
                    return
                head, body, pending = got
                request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
                headers = _headers(head)
                # The endpoint's DNS-rebinding guard wants its own port in Host.
                lines = [request_line] + [
                    f"{k}: {v}" for k, v in headers.items()
                    if k not in {"host", "content-length", "transfer-encoding", "connection"}]
                lines += [f"Host: 127.0.0.1:{self.upstream}", f"Content-Length: {len(body)}"]
                raw = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
                answer = exchange(self.upstream, raw)
                self.exchanges.append({
                    "request": {
                        "line": request_line,
                        "headers": {k: _redact(v, self.token) for k, v in headers.items()},
                        "body": _body(body, self.token),
                    },
                    "answer": None if answer is None else {
                        "status": answer.status,
                        "headers": answer.headers,
                        "body": _body(answer.body, self.token),
                    },
                })
                if answer is None:
                    return
                out = [f"HTTP/1.1 {answer.status} X"] + [
                    f"{k}: {v}" for k, v in answer.headers.items()
                    if k not in {"content-length", "connection", "transfer-encoding"}]
                out.append(f"Content-Length: {len(answer.body)}")
                try:
                    conn.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + answer.body)
                except OSError:
                    return


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--harness", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--cwd", default=os.getcwd())
    parser.add_argument("--user-config-content", default=None,
                        help="an OPENCODE_CONFIG_CONTENT of the user's, inherited")
    parser.add_argument("--attention-like", action="store_true",
                        help="an OPENCODE_CONFIG_CONTENT as attention's step leaves it")
    parser.add_argument("--guidance", default=None)
    parser.add_argument("--no-bridge", action="store_true")
    parser.add_argument("--timeout", type=float, default=90)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    options.out.mkdir(parents=True, exist_ok=True)
    provider = get_provider(HarnessId(options.harness))
    short = Path(tempfile.mkdtemp(prefix="ck-", dir="/tmp"))
    private = Path(tempfile.mkdtemp(prefix="launch-", dir="/tmp"))
    os.chmod(private, 0o700)
    with live_grid(short) as live:
        agent = grant(live, cwd=options.cwd, harness=options.harness)
        recorder = Recorder(agent.port, agent.token)
        url = f"http://127.0.0.1:{recorder.port}/mcp"
        env = dict(os.environ)
        env.pop("OPENCODE_CONFIG_CONTENT", None)
        if options.user_config_content is not None:
            env["OPENCODE_CONFIG_CONTENT"] = options.user_config_content
        if options.attention_like:
            env["OPENCODE_CONFIG_CONTENT"] = json.dumps({"plugin": []})
        env["CLANKER_BRIDGE_TOKEN"] = agent.token
        env["CLANKER_BRIDGE_URL"] = url
        argv = tuple(command)
        additions: dict[str, str] = {}
        plans: dict[str, Any] = {}
        if not options.no_bridge:
            endpoint = BridgeEndpoint(url=url, server_name="clanker",
                                      token_variable="CLANKER_BRIDGE_TOKEN")
            plan = provider.agent_bridge.prepare(attachment_context(
                argv=argv, env=env, cwd=options.cwd, private_dir=private), endpoint)
            plans["agent_bridge"] = None if plan is None else {
                "argv": plan.argv, "env": dict(plan.env)}
            if plan is not None:
                argv = plan.argv or argv
                env.update(plan.env)
                additions.update(plan.env)
        if options.guidance is not None:
            plan = provider.guidance.prepare(attachment_context(
                argv=argv, env=env, cwd=options.cwd, private_dir=private), options.guidance)
            plans["guidance"] = None if plan is None else {
                "argv": plan.argv, "env": dict(plan.env)}
            if plan is not None:
                argv = plan.argv or argv
                env.update(plan.env)
                additions.update(plan.env)
        leaked = [name for name, value in additions.items() if agent.token in value]
        leaked += [str(p) for p in private.rglob("*") if p.is_file()
                   and agent.token.encode() in p.read_bytes()]
        leaked += ["argv"] if any(agent.token in word for word in argv) else []
        (options.out / "plan.json").write_text(json.dumps(
            {"argv": argv, "plans": plans, "files": sorted(
                str(p.relative_to(private)) for p in private.rglob("*"))}, indent=2) + "\n")
        try:
            result = subprocess.run(argv, env=env, cwd=options.cwd, capture_output=True,
                                    timeout=options.timeout, stdin=subprocess.DEVNULL,
                                    check=False)
            output = (f"exit {result.returncode}\n--- stdout\n"
                      f"{result.stdout.decode(errors='replace')}\n--- stderr\n"
                      f"{result.stderr.decode(errors='replace')}")
        except subprocess.TimeoutExpired as exc:
            output = f"timeout\n{(exc.stdout or b'').decode(errors='replace')}"
        (options.out / "output.txt").write_text(_redact(output, agent.token))
        (options.out / "exchanges.json").write_text(
            json.dumps(recorder.exchanges, indent=2) + "\n")
        print(_redact(output, agent.token))
        print(f"{len(recorder.exchanges)} exchanges recorded; leaked: {leaked or 'nothing'}")
    return 1 if leaked else 0


if __name__ == "__main__":
    sys.exit(main())
