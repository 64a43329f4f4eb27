"""``clanker coder`` in a real terminal: a pane of a private tmux server (``tmux -L``),
the fake agent behind it, keys sent with ``send-keys``, the screen read with
``capture-pane``: type a prompt, approve, interrupt with Esc Esc, exit."""

from __future__ import annotations

import secrets
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import FAKE_AGENT, Coder

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Pane:
    def __init__(self, server: str, coder: Coder, exit_file: Path, **extra: str) -> None:
        self.server = server
        self.exit_file = exit_file
        run = shlex.join([sys.executable, "-m", "clanker", "coder", "--no-attention",
                          "--agent-command", f"python3 {FAKE_AGENT}"])
        script = f"cd {shlex.quote(str(coder.workspace))} && {run}; echo $? > {exit_file}"
        environ = {k: v for k, v in {**coder.environ, **extra}.items()
                   if not k.startswith("TMUX")}
        # tmux moves a screen cleared whole into its history (scroll-on-clear): the
        # footer, erased from the top row, would be kept there as no terminal keeps it.
        subprocess.run(["tmux", "-L", server, "-f", "/dev/null", "start-server", ";",
                        "set-option", "-w", "-g", "scroll-on-clear", "off", ";",
                        "new-session", "-d", "-x", "100", "-y", "40", "sh", "-c",
                        script + "; sleep 120"], env=environ, check=True, timeout=30)

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-L", self.server, "send-keys", *keys], check=True, timeout=30)

    def text(self) -> str:
        return subprocess.run(["tmux", "-L", self.server, "capture-pane", "-p", "-S", "-500"],
                              capture_output=True, text=True, check=True, timeout=30).stdout

    def until(self, mark: str) -> str:
        deadline = time.monotonic() + 90  # a bound on waiting, not a measurement
        while time.monotonic() < deadline:
            shown = self.text()
            if mark in shown:
                return shown
            time.sleep(0.1)
        raise AssertionError(f"never shown: {mark!r}\n{self.text()}")

    def exit_code(self) -> int:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.exit_file.exists() and self.exit_file.read_text().strip():
                return int(self.exit_file.read_text())
            time.sleep(0.1)
        raise AssertionError(f"did not exit\n{self.text()}")


@pytest.fixture
def pane(coder: Coder, tmp_path: Path) -> Iterator[Pane]:
    name = "clanker-coder-" + secrets.token_hex(4)
    try:
        yield Pane(name, coder, tmp_path / "exit", FAKE_AGENT_STORE=str(tmp_path / "sessions"),
                   FAKE_AGENT_PIDFILE=str(tmp_path / "agent.pid"))
    finally:
        socket = subprocess.run(["tmux", "-L", name, "display-message", "-p",
                                 "#{socket_path}"], capture_output=True, text=True,
                                check=False).stdout.strip()
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True, check=False)
        if socket:  # tmux leaves its socket file behind
            Path(socket).unlink(missing_ok=True)


def test_type_approve_interrupt_and_exit_in_a_real_terminal(pane: Pane) -> None:
    pane.until("Enter sends")
    pane.keys("hello", "Enter")
    pane.until("Hello world")
    pane.keys("permission edit standard", "Enter")
    shown = pane.until("[a] approve edit this session")
    assert "approve edit" in shown
    pane.keys("y")
    pane.until("outcome:allow-once")
    pane.keys("wait-cancel", "Enter")
    pane.until("approve execute")
    pane.keys("Escape")
    pane.until("Esc again to interrupt")
    pane.keys("Escape")
    pane.until("[cancelled] session fake-1")
    pane.keys("C-d")
    assert pane.exit_code() == 0
    final = pane.text()
    # The transcript stays in the terminal's scrollback; the footer is gone.
    lines = [line.rstrip() for line in final.splitlines() if line.strip()]
    assert lines[:2] == [lines[0], "you  hello"] and "Hello world" in lines
    assert "✓ allowed edit something [edit]  approved once by the person" in lines
    assert "✗ cancelled execute something [execute]  the turn was cancelled" in lines
    assert "Enter sends" not in final


def test_ctrl_c_at_rest_exits_130(pane: Pane) -> None:
    pane.until("Enter sends")
    pane.keys("hello", "Enter")
    pane.until("[end_turn] session fake-1")
    pane.keys("C-c")
    assert pane.exit_code() == 130


def test_a_dead_agent_is_restarted_on_the_same_session_from_the_pane(pane: Pane) -> None:
    pane.until("Enter sends")
    pane.keys("die", "Enter")
    pane.until("start the agent again and continue session fake-1?")
    pane.keys("y")
    pane.until("resumed with session/resume")
    pane.keys("hello", "Enter")
    shown = pane.until("Hello world")
    assert "clanker: the agent exited during the turn" in shown
    pane.keys("C-d")
    assert pane.exit_code() == 0


def test_sigterm_exits_130_and_stops_the_agent(pane: Pane, tmp_path: Path) -> None:
    import os
    import signal

    pane.until("Enter sends")
    pane.keys("silent", "Enter")
    pane.until("working")
    shell = subprocess.run(["tmux", "-L", pane.server, "display-message", "-p",
                            "#{pane_pid}"], capture_output=True, text=True, check=True,
                           timeout=30).stdout.strip()
    children = subprocess.run(["pgrep", "-P", shell], capture_output=True, text=True,
                              check=True, timeout=30).stdout.split()
    assert len(children) == 1
    os.kill(int(children[0]), signal.SIGTERM)
    assert pane.exit_code() == 130
    agent = int((tmp_path / "agent.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(agent, 0)


def test_queue_a_prompt_expand_a_cut_block_and_split_a_diff(pane: Pane, tmp_path: Path) -> None:
    release = tmp_path / "release"
    pane.until("Enter sends")
    pane.keys(f"hold {release}", "Enter")
    pane.until("Enter queues")
    pane.keys("hello", "Enter")
    pane.until("queued: hello")
    release.touch()
    pane.until("Hello world")
    pane.keys("output 250", "Enter")
    pane.until("… truncated: 200 of 250 lines shown")
    pane.keys("C-o")
    pane.until("▾ expanded")
    pane.keys("PageDown", "PageDown", "PageDown", "PageDown", "PageDown", "PageDown",
              "PageDown", "PageDown", "PageDown", "PageDown")
    pane.until("line 250")
    pane.keys("C-o")
    pane.keys("C-r", "edit", "Enter")
    shown = pane.until("edited")
    assert any(line.split() == ["6", "x", "=", "5", "6", "x", "=", "50"]
               for line in shown.splitlines())
    pane.keys("C-d")
    assert pane.exit_code() == 0
    final = pane.text()
    assert final.index("released") < final.index("you  hello") < final.index("Hello world")
    assert "▾ expanded" not in final and "line 250" not in final
