"""Jumping from inside tmux: a real tmux server on a private socket (``tmux -L``), a
real client attached to it from a pseudo-terminal, and :meth:`Tmux.jump` run in a
pane of that client's session, with the ``TMUX`` environment tmux gave the pane
(as the deck runs when started inside tmux). ``display-message`` then says what
the client shows."""

from __future__ import annotations

import fcntl
import os
import pty
import secrets
import shutil
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.core.grid.conftest import eventually

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

# Run in a tmux pane: what the deck does on Enter inside tmux (no socket name: the
# server is the one $TMUX names), then a word for the test.
JUMPER = """
import sys
from pathlib import Path
from clanker.tmux.control import Tmux, TmuxError
try:
    said = repr(Tmux().jump(sys.argv[1]))
except TmuxError as exc:
    said = "failed: " + exc.message
Path(sys.argv[2] + ".part").write_text(said)
Path(sys.argv[2] + ".part").rename(sys.argv[2])
"""


class Server:
    """A tmux server of its own (no configuration file read) and one client attached
    to it from a pseudo-terminal, its output drained so it never blocks."""

    def __init__(self, tmp_path: Path) -> None:
        self.name = "clanker-test-" + secrets.token_hex(4)
        self.tmp_path = tmp_path
        self.env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
        self.env["TERM"] = "xterm"
        self.client: subprocess.Popen[bytes] | None = None
        self._master = -1
        self._drain: threading.Thread | None = None

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.name, "-f", os.devnull, *args],
                              env=self.env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, check=True, timeout=60).stdout.strip()

    def attach(self, session: str) -> str:
        """Attach a client to ``session``; return its tty (tmux's name for it)."""
        self._master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.client = subprocess.Popen(
            ["tmux", "-L", self.name, "attach-session", "-t", f"={session}"],
            stdin=slave, stdout=slave, stderr=slave, env=self.env, start_new_session=True)
        tty = os.ttyname(slave)
        os.close(slave)
        self._drain = threading.Thread(target=self._read_all, daemon=True)
        self._drain.start()
        eventually(lambda: tty in self.tmux("list-clients", "-F", "#{client_tty}").split(),
                   within=120)
        return tty

    def _read_all(self) -> None:
        while True:
            try:
                if not os.read(self._master, 65536):
                    return
            except OSError:  # the client is gone
                return

    def shows(self, tty: str) -> str:
        """The session, window and pane the client ``tty`` shows."""
        return self.tmux("display-message", "-p", "-c", tty, "-t", tty,
                         "#{session_name} #{window_index} #{pane_id}")

    def close(self) -> None:
        socket = subprocess.run(["tmux", "-L", self.name, "display-message", "-p",
                                 "#{socket_path}"], env=self.env, capture_output=True,
                                text=True, check=False).stdout.strip()
        subprocess.run(["tmux", "-L", self.name, "kill-server"], env=self.env,
                       capture_output=True, check=False)
        if self.client is not None:
            if self.client.poll() is None:
                self.client.kill()
            self.client.wait(60)
        if self._master >= 0:
            os.close(self._master)
        if self._drain is not None:
            self._drain.join(60)
        if socket:  # tmux leaves its socket file behind
            Path(socket).unlink(missing_ok=True)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = Server(tmp_path)
    try:
        yield running
    finally:
        running.close()


def _jump_from(server: Server, session: str, pane: str) -> str:
    """Run the jump in a new background window of ``session``; return what it said."""
    said = server.tmp_path / secrets.token_hex(4)
    server.tmux("new-window", "-d", "-t", f"={session}:", "--",
                sys.executable, "-c", JUMPER, pane, str(said))
    eventually(said.exists, within=120)
    return said.read_text()


def test_a_jump_inside_tmux_switches_the_client_to_another_sessions_pane(
        server: Server) -> None:
    home = server.tmux("new-session", "-d", "-s", "work", "-x", "80", "-y", "24",
                       "-P", "-F", "#{pane_id}", "--", "cat")
    server.tmux("new-session", "-d", "-s", "clanker", "-x", "80", "-y", "24", "--", "cat")
    target = server.tmux("new-window", "-d", "-t", "=clanker:", "-P", "-F", "#{pane_id}",
                         "--", "cat")
    server.tmux("split-window", "-t", target, "--", "cat")  # the new pane is the active one
    tty = server.attach("work")
    assert server.shows(tty) == f"work 0 {home}"
    assert _jump_from(server, "work", target) == "None"  # done: nothing to attach
    assert server.shows(tty) == f"clanker 1 {target}"


def test_a_jump_inside_tmux_selects_another_window_of_the_clients_session(
        server: Server) -> None:
    home = server.tmux("new-session", "-d", "-s", "clanker", "-x", "80", "-y", "24",
                       "-P", "-F", "#{pane_id}", "--", "cat")
    target = server.tmux("new-window", "-d", "-t", "=clanker:", "-P", "-F", "#{pane_id}",
                         "--", "cat")
    tty = server.attach("clanker")
    assert server.shows(tty) == f"clanker 0 {home}"
    assert _jump_from(server, "clanker", target) == "None"
    assert server.shows(tty) == f"clanker 1 {target}"
