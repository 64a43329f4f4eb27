"""``clanker watch --notify`` shows what an agent sends the person (``clanker_notify``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clanker.bridge import wire
from clanker.bridge.cmd import BridgeClient
from clanker.bridge.shipped import SHIPPED_NAMES
from clanker.envvars import is_credential_variable, strip_credentials
from clanker.grid import daemon
from clanker.grid.client import GridClient
from clanker.paths import clanker_paths
from clanker.testing.doubles import write_script
from tests.core.grid.conftest import eventually


def test_watch_notify_shows_an_agents_message(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLANKER_HOME", str(short_dir))
    socket_path = daemon.ensure_running(clanker_paths())
    try:
        grid = GridClient(socket_path)
        registration = grid.register(harness="fake-agent", workspace="/tmp", cwd="/tmp",
                                     launcher_pid=os.getpid())
        token = grid.grant_bridge(registration.terminal, registration.token, SHIPPED_NAMES)
        bin_dir = short_dir / "bin"
        bin_dir.mkdir()
        record = short_dir / "notified"
        write_script(bin_dir, "notify-send", f"""
            import sys
            with open({str(record)!r}, "a") as handle:
                handle.write(sys.argv[-1] + "\\n")
        """)
        env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
        watching = subprocess.Popen(
            [sys.executable, "-m", "clanker.cli", "watch", "--json", "--notify"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        plain = subprocess.Popen(  # without --notify: never sent notifications
            [sys.executable, "-m", "clanker.cli", "watch", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert watching.stdout is not None and plain.stdout is not None
            assert json.loads(watching.stdout.readline())["kind"] == "snapshot"
            assert json.loads(plain.stdout.readline())["kind"] == "snapshot"
            agent = BridgeClient(socket_path, token)
            assert agent.run("clanker_notify", {"message": "please review"}) == {"delivered": 1}
            line = json.loads(watching.stdout.readline())
            assert {k: line[k] for k in ("kind", "terminal", "harness", "location", "message")} \
                == {"kind": "notification", "terminal": registration.terminal,
                    "harness": "fake-agent", "location": "/tmp", "message": "please review"}
            eventually(lambda: record.exists() and record.read_text() != "")
            assert record.read_text() == "fake-agent in /tmp: please review\n"
            grid.retire(registration.terminal, registration.token)
            assert json.loads(plain.stdout.readline())["snapshot"] is None  # nothing before
        finally:
            for process in (watching, plain):
                process.kill()
                process.communicate()
    finally:
        daemon.stop(clanker_paths())


@pytest.mark.parametrize("name", [wire.TOKEN_VARIABLE, wire.SOCKET_VARIABLE,
                                  "clanker_bridge_token", "Clanker_Bridge_Socket"])
def test_the_bridge_variables_are_credentials_in_any_spelling(name: str) -> None:
    assert is_credential_variable(name)
    assert strip_credentials({name: "stale", "PATH": "/bin"}) == {"PATH": "/bin"}
