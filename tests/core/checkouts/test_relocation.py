"""The transient relocation server, with a double that answers as OpenCode 1.18.33's
``opencode serve`` did (tests/fixtures/opencode/move-session/exchanges.json): Basic auth
with the password from its environment, ``GET /session`` once ready, ``POST`` of the
move answered 204, a directory outside the project answered 400 with the harness's
reason, a relative one 500. Every outcome leaves no server process behind."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from clanker.checkouts.capability import RelocationRequest
from clanker.checkouts.relocation import (
    RelocationFailed,
    RelocationRefused,
    ServerUnavailable,
    relocate,
)

FIXTURE = (Path(__file__).parents[2] / "fixtures" / "opencode" / "move-session"
           / "exchanges.json")
SESSION = "ses_0fa1c0de0ffeFakeSession01"

SERVER = r'''
import base64, http.server, json, os, signal, sys
args = sys.argv[1:]
host, port = args[args.index("--hostname") + 1], int(args[args.index("--port") + 1])
record = os.environ["FAKE_RECORD"]
project = os.environ["FAKE_PROJECT"]
behaviour = os.environ.get("FAKE_BEHAVIOUR", "")
with open(record + ".start", "a") as f:
    f.write(json.dumps({"pid": os.getpid(), "args": args, "cwd": os.getcwd(),
                        "password": os.environ.get("OPENCODE_SERVER_PASSWORD"),
                        "env": sorted(os.environ)}) + "\n")
if behaviour == "exit":
    print("Error: port in use", file=sys.stderr)
    raise SystemExit(1)
if behaviour == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
expected = "Basic " + base64.b64encode(
    ("opencode:" + os.environ["OPENCODE_SERVER_PASSWORD"]).encode()).decode()

class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def answer(self, status, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def authorized(self):
        if self.headers.get("Authorization") != expected:
            self.answer(401, {"name": "Unauthorized"})
            return False
        return True
    def do_GET(self):
        if behaviour == "never-ready":
            return self.answer(503)
        if self.authorized() and self.path == "/session":
            self.answer(200, [])
    def do_POST(self):
        if not self.authorized():
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with open(record, "a") as f:
            f.write(json.dumps({"path": self.path, "json": body}) + "\n")
        directory = body.get("destination", {}).get("directory", "")
        if behaviour == "hang":
            import time; time.sleep(30)
        if not directory.startswith("/"):
            return self.answer(500, {"name": "UnknownError", "data": {
                "message": "Unexpected server error. Check server logs for details."}})
        if not directory.startswith(project):
            return self.answer(400, {"name": "MoveSessionError", "data": {
                "message": "Destination directory belongs to another project"}})
        self.answer(204)

http.server.HTTPServer((host, port), Handler).serve_forever()
'''


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "serve.py"
    script.write_text(SERVER)
    monkeypatch.setenv("FAKE_RECORD", str(tmp_path / "record"))
    monkeypatch.setenv("FAKE_PROJECT", str(tmp_path / "proj"))
    return script


def request(script: Path, directory: str) -> RelocationRequest:
    return RelocationRequest(
        argv=(sys.executable, str(script)), host_flag="--hostname", port_flag="--port",
        password_variable="OPENCODE_SERVER_PASSWORD", username="opencode",
        ready_path="/session", path="/experimental/control-plane/move-session",
        body=json.dumps({"sessionID": SESSION, "destination": {"directory": directory}}),
        success=frozenset({204}))


def starts(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "record.start").read_text().splitlines()
    return [json.loads(line) for line in lines]


def moves(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "record"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_double_answers_as_the_captured_server_did() -> None:
    captured = json.loads(FIXTURE.read_text())["exchanges"]
    moved = [e for e in captured if e["request"]["path"].endswith("/move-session")]
    assert {e["response"]["status"] for e in moved} == {204, 400, 500}
    refused = [e["response"]["json"]["data"]["message"] for e in moved
               if e["response"]["status"] == 400]
    assert "Destination directory belongs to another project" in refused
    assert "Destination directory belongs to another project" in SERVER
    assert all(set(e["request"]["json"]) <= {"sessionID", "destination"} for e in moved)


def test_a_move_is_sent_once_on_loopback_with_a_fresh_password(
        server: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLANKER_ATTENTION_TOKEN", "secret-of-the-launch")
    target = "/etc"
    relocate(request(server, str(tmp_path / "proj" / "w")), cwd=str(tmp_path))
    with pytest.raises(RelocationRefused) as refused:
        relocate(request(server, target), cwd=str(tmp_path))
    assert refused.value.status == 400
    assert refused.value.message == "Destination directory belongs to another project"
    first, second = starts(tmp_path)
    for start in (first, second):
        args = start["args"]
        assert args[args.index("--hostname") + 1] == "127.0.0.1"
        assert "CLANKER_ATTENTION_TOKEN" not in start["env"]
        assert len(start["password"]) >= 32
        assert start["cwd"] == str(tmp_path)
        assert gone(start["pid"])
    assert first["password"] != second["password"]
    assert [m["json"]["destination"]["directory"] for m in moves(tmp_path)] == [
        str(tmp_path / "proj" / "w"), target]


def test_a_server_error_is_a_failure_not_a_refusal(server: Path, tmp_path: Path) -> None:
    with pytest.raises(RelocationFailed) as failed:
        relocate(request(server, "relative/dir"), cwd=str(tmp_path))
    assert failed.value.status == 500
    [start] = starts(tmp_path)
    assert gone(start["pid"])


def test_a_server_that_exits_at_once_is_unavailable(
        server: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_BEHAVIOUR", "exit")
    with pytest.raises(ServerUnavailable, match="port in use"):
        relocate(request(server, str(tmp_path / "proj")), cwd=str(tmp_path))
    assert moves(tmp_path) == []


def test_a_server_that_never_gets_ready_is_stopped(
        server: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_BEHAVIOUR", "never-ready")
    with pytest.raises(ServerUnavailable, match="did not answer"):
        relocate(request(server, str(tmp_path / "proj")), cwd=str(tmp_path),
                 ready_timeout=1.0)
    [start] = starts(tmp_path)
    assert gone(start["pid"]) and moves(tmp_path) == []


def test_a_server_that_ignores_sigterm_is_killed(
        server: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_BEHAVIOUR", "stubborn")
    relocate(request(server, str(tmp_path / "proj")), cwd=str(tmp_path), stop_timeout=2.0)
    [start] = starts(tmp_path)
    assert gone(start["pid"])


def test_a_move_that_gets_no_answer_in_time_fails(
        server: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_BEHAVIOUR", "hang")
    with pytest.raises(RelocationFailed, match="no answer"):
        relocate(request(server, str(tmp_path / "proj")), cwd=str(tmp_path),
                 request_timeout=0.5)
    [start] = starts(tmp_path)
    assert gone(start["pid"])


def test_an_unstartable_server_is_unavailable(tmp_path: Path) -> None:
    missing = RelocationRequest(
        argv=(str(tmp_path / "no-such-server"),), host_flag="--hostname", port_flag="--port",
        password_variable="P", username="u", ready_path="/", path="/move", body="{}")
    with pytest.raises(ServerUnavailable, match="could not start"):
        relocate(missing, cwd=str(tmp_path))


@pytest.mark.parametrize(("field", "value"), [
    ("argv", ()), ("ready_path", "session"), ("path", "/a b"), ("body", "{not json"),
    ("success", frozenset({400})),
])
def test_a_malformed_request_is_refused_naming_its_field(field: str, value: object) -> None:
    fields: dict[str, Any] = {
        "argv": ("opencode", "serve"), "host_flag": "--hostname", "port_flag": "--port",
        "password_variable": "P", "username": "u", "ready_path": "/session",
        "path": "/move", "body": "{}"}
    fields[field] = value
    with pytest.raises(ValueError, match=field):
        RelocationRequest(**fields)

