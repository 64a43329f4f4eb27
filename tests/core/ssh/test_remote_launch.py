"""``launch --host``: a harness run on the host in this terminal, through the one launch path."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from clanker.api import Clanker
from tests.sshd import Sshd

# Prints what it was started with, from the host's side, then exits 7.
_DOUBLE = """#!/bin/sh
echo "argv:$*"
echo "pwd:$(pwd)"
echo "home:$HOME"
echo "local:${CLANKER_LOCAL_ONLY:-unset}"
[ -t 0 ] && echo "tty:yes" || echo "tty:no"
exit 7
"""

# The CLI, its library reading the test sshd's OpenSSH configuration (ssh -F) the
# way a person's ~/.ssh/config is read (ssh takes that from the password database).
_LAUNCH = """
import sys
from clanker.api import Clanker
import clanker.cli.common, clanker.cli.launch
from clanker.cli import cli
config = sys.argv[1]
clanker.cli.common.library = clanker.cli.launch.library = (
    lambda: Clanker(ssh_config_file=config))
sys.argv = ["clanker", *sys.argv[2:]]
cli()
"""


def _under_pty(config: Path, args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``python -c _LAUNCH args`` with a terminal as its stdio; its status and output."""
    leader, follower = pty.openpty()
    child = subprocess.Popen([sys.executable, "-c", _LAUNCH, str(config), *args], stdin=follower,
                             stdout=follower, stderr=follower, env=env, close_fds=True,
                             start_new_session=True)
    os.close(follower)
    out = bytearray()
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            child.kill()
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: every end of the terminal is closed
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    return child.wait(timeout=60), out.decode("utf-8", "replace").replace("\r", "")


@pytest.fixture
def ssh_config(sshd: Sshd) -> Path:
    return sshd.config_file


def test_a_harness_runs_on_the_host_in_this_terminal(
    sshd: Sshd, remote_bin: Path, ssh_config: Path
) -> None:
    double = remote_bin / "opencode"
    double.write_text(_DOUBLE)
    double.chmod(0o755)
    Clanker().add_host("box", sshd.alias)
    env = {**os.environ, "TERM": "xterm",
           "CLANKER_LOCAL_ONLY": "from-this-machine"}
    status, out = _under_pty(ssh_config, ["launch", "--host", "box", "opencode", "--cwd", "/tmp",
                              "--", "--flag", "two words"], env)
    assert status == 7, out
    assert "argv:--flag two words" in out
    assert "pwd:/tmp" in out
    assert f"home:{sshd.home}" in out
    assert "local:unset" in out, "nothing of this machine's environment reaches the host"
    assert "tty:yes" in out
    assert "attention: not available for SSH hosts yet" in out

    # The host's home is the default directory.
    status, out = _under_pty(ssh_config, ["launch", "--host", "box", "opencode"], env)
    assert status == 7, out
    assert f"pwd:{sshd.home}" in out


def test_a_launch_on_a_host_fails_typed_before_the_harness_starts(
    sshd: Sshd, remote_bin: Path, ssh_config: Path
) -> None:
    Clanker().add_host("box", sshd.alias)
    env = {**os.environ, "TERM": "xterm"}
    missing, out = _under_pty(ssh_config, ["launch", "--host", "box", "opencode"], env)
    assert missing == 4, out  # binary-unavailable: not installed on the host
    double = remote_bin / "opencode"
    double.write_text(_DOUBLE)
    double.chmod(0o755)
    gone, out = _under_pty(
        ssh_config, ["launch", "--host", "box", "opencode", "--cwd", "/nowhere/x"], env)
    assert gone == 7 and "does not exist on the host" in out, out  # command-failed
    bridge, out = _under_pty(
        ssh_config, ["launch", "--host", "box", "opencode", "--bridge"], env)
    assert bridge == 3, out
    assert "the agent bridge is not available for SSH hosts" in out
    account, out = _under_pty(
        ssh_config, ["launch", "--host", "box", "opencode", "--account", "x"], env)
    assert account != 0 and "argv:" not in out, out
