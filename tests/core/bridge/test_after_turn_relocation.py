"""An after-turn harness with its own relocation: once the root turn has completed,
the relayed launch retires the source, relocates the conversation through a
transient server, then resumes it, which runs in the directory the conversation
records. Real grid daemon, real git, real PTYs, and a double of ``opencode`` that
speaks what docs/harnesses/opencode.md records of 1.18.33: ``opencode --session <id>``
runs in the conversation's recorded directory whatever its own, and ``opencode serve
--hostname H --port P`` answers ``GET /session`` once ready and ``POST
/experimental/control-plane/move-session`` with 204 (the record now names the
destination) or 400 for a directory of another project (nothing changed), behind
HTTP Basic with the password from ``OPENCODE_SERVER_PASSWORD``
(tests/fixtures/opencode/move-session/exchanges.json).

The launch is registered as ``opencode`` so the grid daemon finds the bundled
OpenCode plugin's ``after-turn`` strategy; this process's provider declares the
same rehome (:class:`~clanker_opencode.rehome.OpenCodeRehome`) with a launch that
builds ``opencode --session <id>``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clanker import hookimpl
from clanker.api import Clanker
from clanker.launch.planning import LaunchPlan
from clanker.launch.request import LaunchRequest
from clanker.registry import Registry
from clanker_opencode.rehome import OpenCodeRehome
from tests.core.bridge import test_after_turn_launch as after_turn
from tests.core.bridge.test_after_turn_launch import Agent, notices, schedule, wait_for
from tests.core.bridge.test_relayed_launch import Binding
from tests.helpers import FakeLaunch, committed_repository, install_double, make_plugin

SESSION = after_turn.SESSION

OPENCODE = r"""
    import base64, http.server, json, os, sys
    args = sys.argv[1:]
    store = os.environ["FAKE_STORE"]
    records = json.load(open(store))
    if args[:1] == ["serve"]:
        host, port = args[args.index("--hostname") + 1], int(args[args.index("--port") + 1])
        with open(store + ".serve", "a") as f:
            f.write(json.dumps({"cwd": os.getcwd(), "env": sorted(os.environ)}) + "\n")
        expected = "Basic " + base64.b64encode(
            ("opencode:" + os.environ["OPENCODE_SERVER_PASSWORD"]).encode()).decode()
        project = os.environ["FAKE_PROJECT"]
        refuse = os.environ.get("FAKE_REFUSE", "")

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass
            def answer(self, status, body=None):
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            def do_GET(self):
                if self.headers.get("Authorization") != expected:
                    return self.answer(401, {"name": "Unauthorized"})
                self.answer(200, [])
            def do_POST(self):
                if self.headers.get("Authorization") != expected:
                    return self.answer(401, {"name": "Unauthorized"})
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                directory = body["destination"]["directory"]
                if not directory.startswith(project) or (refuse and refuse in directory):
                    return self.answer(400, {"name": "MoveSessionError", "data": {
                        "message": "Destination directory belongs to another project"}})
                records[body["sessionID"]] = directory
                json.dump(records, open(store, "w"))
                self.answer(204)

        http.server.HTTPServer((host, port), Handler).serve_forever()
    session = args[args.index("--session") + 1]
    where = records[session]
    print(f"opencode {session} in {where}", flush=True)
    for line in sys.stdin:
        if line.strip() == "/exit":
            break
        print(f"echo {line.strip()} in {where}", flush=True)
"""


class SessionLaunch(FakeLaunch):
    """``opencode --session <id>``, as OpenCode's own launch builds a resume."""

    def build(self, request: LaunchRequest) -> LaunchPlan:
        argv = [self.executable]
        if request.session is not None:
            argv += ["--session", request.session.native_id]
        return LaunchPlan(argv=(*argv, *request.user_flags),
                          env={"FAKE_PLAN_ONLY": "from the launch plan"})


def library() -> Clanker:
    made = make_plugin("opencode", executable="opencode")
    type(made).clanker_launch = hookimpl(  # type: ignore[attr-defined]
        lambda self: SessionLaunch("opencode"))
    type(made).clanker_attention = hookimpl(lambda self: Binding())  # type: ignore[attr-defined]
    type(made).clanker_checkout_rehome = hookimpl(  # type: ignore[attr-defined]
        lambda self: OpenCodeRehome())
    return Clanker(registry=Registry.from_plugins({"opencode": made}, environ={}))


@pytest.fixture
def repository(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    install_double(tmp_path, monkeypatch, "opencode", OPENCODE)
    repo = committed_repository(tmp_path / "repo")
    store = tmp_path / "store.json"
    store.write_text(json.dumps({SESSION: str(repo)}))
    monkeypatch.setenv("FAKE_STORE", str(store))
    monkeypatch.setenv("FAKE_PROJECT", str(tmp_path))  # the repository and its worktrees
    return repo


def recorded(tmp_path: Path) -> str:
    return str(json.loads((tmp_path / "store.json").read_text())[SESSION])


def servers(tmp_path: Path) -> list[dict[str, object]]:
    lines = (tmp_path / "store.json.serve").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_the_conversation_is_relocated_then_resumed_in_the_checkout(
    repository: Path, tmp_path: Path,
) -> None:
    running = Agent(library(), repository, harness="opencode", drawn=f"opencode {SESSION}")
    with notices(running) as heard:
        path = schedule(running)
        running.report(("turn_completed", {"turnId": "turn-1"}))
        wait_for(heard, f"isolated checkout ready: the agent continues in {path}")
    running.user.read_until(f"opencode {SESSION} in {path}")
    assert recorded(tmp_path) == path  # the harness's own record names the checkout
    [server] = servers(tmp_path)
    env = set(server["env"])  # type: ignore[arg-type]
    assert "FAKE_PLAN_ONLY" in env  # the launch plan's environment, not this process's
    assert not {name for name in env if name.startswith("CLANKER_")}
    [after] = running.clanker.agents()
    assert after.cwd == path
    assert running.user.finish() == 0


def test_a_refused_relocation_resumes_where_it_was(
    repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAKE_REFUSE", "-worktrees")
    running = Agent(library(), repository, harness="opencode", drawn=f"opencode {SESSION}")
    with notices(running) as heard:
        path = schedule(running)
        running.user.seen = b""
        running.report(("turn_completed", {"turnId": "turn-1"}))
        notice = wait_for(heard, "isolated checkout move not made (not-relocated)")
    assert f"the worktree is kept at {path}" in notice
    running.user.read_until(f"opencode {SESSION} in {repository}")
    assert recorded(tmp_path) == str(repository)
    assert len(servers(tmp_path)) == 2  # there, refused; back, accepted
    assert os.path.isdir(path)
    assert running.user.finish() == 0
