"""End to end under a real tmux server (``tmux -L`` on a private socket name):
``clanker launch --tmux claude`` of a double that fires the real hook bridge with
hook payloads of claude 2.1.197 (``tests/fixtures/claude/attention``) through the
``--settings`` file clanker hands it, as Claude Code does; the deck shows it working,
then done; Enter selects its window; closing the window retires it."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clanker.tmux.control import Tmux
from tests.core.deck.conftest import Running
from tests.core.grid.conftest import eventually
from tests.helpers import write_script

FIXTURES = Path(__file__).parents[2] / "fixtures" / "claude" / "attention"

# Fires SessionStart and UserPromptSubmit, waits for $DOUBLE_GO, fires Stop, then
# runs until the window is closed (tmux hangs its pane up; the launcher forwards it).
DOUBLE = """
import json, os, subprocess, sys, time
settings = sys.argv[sys.argv.index("--settings") + 1]
with open(settings) as f:
    hooks = {event: groups[0]["hooks"][0]["command"]
             for event, groups in json.load(f)["hooks"].items()}
def fire(name):
    payload = json.load(open(os.path.join(os.environ["DOUBLE_FIXTURES"], name + ".json")))
    subprocess.run(["/bin/sh", "-c", hooks[payload["hook_event_name"]]],
                   input=json.dumps(payload).encode(), capture_output=True, timeout=30)
fire("session-start.startup")
fire("user-prompt-submit")
deadline = time.monotonic() + 120
while not os.path.exists(os.environ["DOUBLE_GO"]) and time.monotonic() < deadline:
    time.sleep(0.05)
fire("stop")
while time.monotonic() < deadline + 120:
    time.sleep(0.5)
"""

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytest.fixture
def server() -> Iterator[str]:
    name = "clanker-test-" + secrets.token_hex(4)
    try:
        yield name
    finally:
        socket = subprocess.run(["tmux", "-L", name, "display-message", "-p",
                                 "#{socket_path}"], capture_output=True, text=True,
                                check=False).stdout.strip()
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True, check=False)
        if socket:  # tmux leaves its socket file behind
            Path(socket).unlink(missing_ok=True)


def test_a_tmux_launch_shows_working_then_done_and_enter_selects_its_window(
        home: Path, tmp_path: Path, server: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "claude", DOUBLE)
    project = tmp_path / "project"
    project.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-config"),
           "DOUBLE_FIXTURES": str(FIXTURES), "DOUBLE_GO": str(tmp_path / "go")}
    env.pop("TMUX", None)
    env.pop("TMUX_PANE", None)
    launched = subprocess.run(
        [sys.executable, "-m", "clanker.cli", "launch", "--tmux", "--tmux-socket", server,
         "claude"], cwd=project, env=env, capture_output=True, text=True, timeout=120,
        check=False)
    assert launched.returncode == 0, launched.stderr
    pane = launched.stderr.split("(pane ")[1].split(";")[0]
    eventually(lambda: not any((home / "state" / "tmux").iterdir()))  # read and deleted

    def tmux(*args: str) -> str:
        return subprocess.run(["tmux", "-L", server, *args], capture_output=True, text=True,
                              check=True, timeout=30).stdout.strip()

    attached: list[list[str]] = []
    with Running(tmp_path / "seen.json", [], tmux=Tmux(env, socket_name=server),
                 attach=attached.append) as running:
        eventually(lambda: [(r.attention, r.tmux_pane) for r in running.deck.rows]
                   == [("working", pane)], within=120)
        (tmp_path / "go").write_text("")
        eventually(lambda: [r.attention for r in running.deck.rows] == ["done"], within=120)
        tmux("new-window", "-t", "=clanker:")  # another window is now the current one
        assert tmux("display-message", "-p", "-t", "=clanker:", "#{pane_id}") != pane
        running.keys("\r")
        eventually(lambda: bool(attached))
        assert tmux("display-message", "-p", "-t", "=clanker:", "#{pane_id}") == pane
        assert attached == [[*Tmux(env, socket_name=server).command(
            "attach-session", "-t", pane)]]
        assert [r.attention for r in running.deck.rows] == ["idle"]  # seen by jumping
        tmux("kill-pane", "-t", pane)
        eventually(lambda: running.deck.rows == [], within=120)
    status = subprocess.run([sys.executable, "-m", "clanker.cli", "status", "--json"],
                            env=env, capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(status.stdout) == []
