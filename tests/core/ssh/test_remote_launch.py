"""``launch --host``: a harness run on the host in this terminal, through the one launch path."""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from clanker.api import Clanker
from tests.helpers import cli_on_terminal
from tests.sshd import Sshd

_FIXTURES = Path(__file__).parents[2] / "fixtures"

# Prints what it was started with, from the host's side, then exits 7.
_DOUBLE = """#!/bin/sh
echo "argv:$*"
echo "pwd:$(pwd)"
echo "home:$HOME"
echo "local:${CLANKER_LOCAL_ONLY:-unset}"
[ -t 0 ] && echo "tty:yes" || echo "tty:no"
exit 7
"""

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
    status, out = cli_on_terminal(ssh_config, ["launch", "--host", "box", "opencode", "--cwd",
                                               "/tmp", "--", "--flag", "two words"], env=env)
    assert status == 7, out
    assert "argv:--flag two words" in out
    assert "pwd:/tmp" in out
    assert f"home:{sshd.home}" in out
    assert "local:unset" in out, "nothing of this machine's environment reaches the host"
    assert "tty:yes" in out
    assert "attention:" not in out, "OpenCode's attention is wired on the host, with no notice"

    # The host's home is the default directory.
    status, out = cli_on_terminal(ssh_config, ["launch", "--host", "box", "opencode"], env=env)
    assert status == 7, out
    assert f"pwd:{sshd.home}" in out


def test_a_launch_on_a_host_fails_typed_before_the_harness_starts(
    sshd: Sshd, remote_bin: Path, ssh_config: Path
) -> None:
    Clanker().add_host("box", sshd.alias)
    env = {**os.environ, "TERM": "xterm"}
    missing, out = cli_on_terminal(ssh_config, ["launch", "--host", "box", "opencode"], env=env)
    assert missing == 4, out  # binary-unavailable: not installed on the host
    double = remote_bin / "opencode"
    double.write_text(_DOUBLE)
    double.chmod(0o755)
    gone, out = cli_on_terminal(
        ssh_config, ["launch", "--host", "box", "opencode", "--cwd", "/nowhere/x"], env=env)
    assert gone == 7 and "does not exist on the host" in out, out  # command-failed
    bridge, out = cli_on_terminal(
        ssh_config, ["launch", "--host", "box", "opencode", "--bridge"], env=env)
    assert bridge == 3, out
    assert "the agent bridge is not available for SSH hosts" in out
    account, out = cli_on_terminal(
        ssh_config, ["launch", "--host", "box", "opencode", "--account", "x"], env=env)
    assert account != 0 and "argv:" not in out, out


def test_a_bridge_configured_for_the_harness_is_said_to_stay_local(
    sshd: Sshd, remote_bin: Path, ssh_config: Path
) -> None:
    double = remote_bin / "opencode"
    double.write_text(_DOUBLE)
    double.chmod(0o755)
    clanker = Clanker()
    clanker.add_host("box", sshd.alias)
    clanker.paths.config.mkdir(parents=True, exist_ok=True)
    (clanker.paths.config / "config.toml").write_text('[bridge]\nharnesses = ["opencode"]\n')
    status, out = cli_on_terminal(ssh_config, ["launch", "--host", "box", "opencode"])
    assert status == 7, out
    assert "bridge: not attached: the agent bridge is not available for SSH hosts" in out


@pytest.fixture
def remote_codex_store(sshd: Sshd) -> Iterator[Path]:
    """The Codex fixture store in the test user's home; removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("placing stores in the remote home needs the dedicated test user (root)")
    entry = pwd.getpwnam(sshd.user)
    target = sshd.home / ".codex"
    shutil.copytree(_FIXTURES / "codex" / "sessions" / "codex-home", target, symlinks=True)
    for directory, dirs, files in os.walk(target):
        for name in (directory, *(os.path.join(directory, n) for n in (*dirs, *files))):
            os.chown(name, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
    try:
        yield target
    finally:
        shutil.rmtree(target, ignore_errors=True)


def test_a_host_session_is_resumed_and_forked_on_the_host(
    sshd: Sshd, remote_bin: Path, remote_codex_store: Path, ssh_config: Path
) -> None:
    clanker = Clanker(ssh_config_file=ssh_config)
    clanker.add_host("box", sshd.alias)

    async def first_codex_session() -> str:
        async with await clanker.on_host("box") as remote:
            listing = await remote.sessions(workspace=None, harnesses=["codex"])
            return listing.sessions[0].native_id

    native_id = asyncio.run(first_codex_session())
    double = remote_bin / "codex"
    double.write_text(_DOUBLE)
    double.chmod(0o755)
    env = {**os.environ, "TERM": "xterm"}
    for operation in ("resume", "fork"):
        status, out = cli_on_terminal(ssh_config, [operation, "--host", "box",
                                                   f"codex:{native_id}"], env=env)
        assert status == 7, out
        assert f"{operation} {native_id}" in out
    # Unknown there: re-found on the host or not at all.
    status, out = cli_on_terminal(
        ssh_config, ["resume", "--host", "box", "codex:01a22b86-c7d0-79e0-b3c0-03c56f3ce14a"],
        env=env)
    assert status == 14, out
    # Hermes resumes only on this machine, as its descriptor says.
    status, out = cli_on_terminal(ssh_config, ["launch", "--host", "box", "hermes", "--resume",
                                               "20260101_000000_abcdef"], env=env)
    assert status == 3 and "over ssh" in out, out


def test_sessions_of_all_hosts_show_each_place_beside_a_dead_host(
    sshd: Sshd, remote_codex_store: Path, ssh_config: Path
) -> None:
    clanker = Clanker()
    clanker.add_host("box", sshd.alias)
    clanker.add_host("dead", "ssh://nobody@127.0.0.1:9")
    env = {**os.environ, "TERM": "xterm"}
    status, out = cli_on_terminal(
        ssh_config, ["sessions", "--all-hosts", "--harness", "codex"], env=env)
    assert "[local]" in out and "[box]" in out and "[dead]" in out, out
    assert "codex:" in out.split("[box]")[1].split("[dead]")[0]
    assert "connection was refused" in out.split("[dead]")[1]
    assert status == 13  # the first failure's kind: transport-failure
