"""The real daemon process: private directory, single instance, start and stop."""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from clanker.grid import daemon
from clanker.grid.client import GridClient
from clanker.grid.errors import GridError, GridPathError, GridUnavailableError
from clanker.paths import clanker_paths
from tests.core.grid.conftest import end, eventually, register_as, root

NOBODY = 65534


def test_start_finds_a_running_daemon_and_stop_ends_it(home: Path) -> None:
    assert not daemon.status().running
    first = daemon.start()
    assert first.running
    assert first.pid not in (None, os.getpid())
    location = first.location
    assert location.socket == home / "run" / "grid" / "grid.sock"
    assert location.directory.stat().st_mode & 0o777 == 0o700
    assert location.socket.stat().st_mode & 0o777 == 0o600
    assert location.log == home / "state" / "grid.log"
    # A second start finds it; so does ensure_running.
    assert daemon.start().pid == first.pid
    assert daemon.ensure_running() == location.socket
    assert daemon.status().pid == first.pid
    assert daemon.stop()
    assert not daemon.status().running
    assert not location.socket.exists()
    assert not daemon.stop()
    with pytest.raises(GridUnavailableError):
        GridClient(location.socket).hello()


def test_a_second_daemon_leaves_when_the_lock_is_held(home: Path) -> None:
    running = daemon.start()
    paths = clanker_paths()
    second = subprocess.run(
        [sys.executable, "-m", "clanker.grid.daemon", "--foreground",
         "--runtime", str(paths.runtime), "--state", str(paths.state)],
        capture_output=True, timeout=60, check=False,
    )
    assert second.returncode == 0
    assert b"another grid holds" in second.stderr
    assert daemon.status().pid == running.pid  # untouched: same process, same socket


def test_the_daemon_retires_a_terminal_whose_launcher_dies(
    home: Path, launcher: subprocess.Popen[bytes]
) -> None:
    client = GridClient(daemon.ensure_running())
    reg = register_as(launcher, client.socket_path)
    assert client.deliver(reg.terminal, reg.token, [root("session_started")]) == ["accepted"]
    assert [e.terminal for e in client.list_terminals()] == [reg.terminal]
    end(launcher)
    eventually(lambda: client.list_terminals() == [])
    with pytest.raises(Exception, match="unauthorized"):
        client.deliver(reg.terminal, reg.token, [root("session_started")])


def test_the_daemon_log_holds_no_token(home: Path) -> None:
    client = GridClient(daemon.ensure_running())
    reg = client.register(harness="fake-agent", workspace="/tmp", cwd="/tmp",
                          launcher_pid=os.getpid())
    client.retire(reg.terminal, reg.token)
    daemon.stop()
    text = daemon.grid_location().log.read_text()
    assert "registered" in text
    assert reg.token not in text


def test_a_directory_with_a_wrong_mode_is_refused(home: Path) -> None:
    directory = daemon.grid_location().directory
    directory.mkdir(parents=True, mode=0o700)
    directory.chmod(0o755)
    with pytest.raises(GridPathError, match="mode 0755"):
        daemon.ensure_running()
    with pytest.raises(GridPathError):
        daemon.status()
    assert directory.stat().st_mode & 0o777 == 0o755  # never "fixed" behind the user's back


def test_a_symlinked_directory_is_refused(home: Path, short_dir: Path) -> None:
    target = short_dir / "elsewhere"
    target.mkdir(mode=0o700)
    directory = daemon.grid_location().directory
    directory.parent.mkdir(parents=True)
    directory.symlink_to(target)
    with pytest.raises(GridPathError, match="not a directory"):
        daemon.ensure_running()


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_a_foreign_directory_or_socket_is_refused(home: Path) -> None:
    location = daemon.grid_location()
    location.directory.mkdir(parents=True, mode=0o700)
    os.chown(location.directory, NOBODY, NOBODY)
    with pytest.raises(GridPathError, match="another user"):
        daemon.ensure_running()
    os.chown(location.directory, 0, 0)
    foreign = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    foreign.bind(str(location.socket))
    foreign.listen(1)
    try:
        os.chmod(location.socket, 0o600)
        os.chown(location.socket, NOBODY, NOBODY)
        with pytest.raises(GridPathError, match="another user"):
            daemon.ensure_running()
    finally:
        foreign.close()


def test_a_socket_open_to_others_is_refused(home: Path) -> None:
    location = daemon.grid_location()
    location.directory.mkdir(parents=True, mode=0o700)
    loose = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    loose.bind(str(location.socket))
    try:
        os.chmod(location.socket, 0o666)
        with pytest.raises(GridPathError, match="open to other users"):
            daemon.ensure_running()
    finally:
        loose.close()


def test_a_socket_path_that_is_too_long_is_a_typed_error(
    monkeypatch: pytest.MonkeyPatch, short_dir: Path
) -> None:
    monkeypatch.setenv("CLANKER_HOME", str(short_dir / ("h" * 100)))
    with pytest.raises(GridPathError, match="Unix sockets allow at most"):
        daemon.ensure_running()
    with pytest.raises(GridPathError):
        daemon.status()
    assert not (short_dir / ("h" * 100)).exists()


def test_stop_says_so_when_a_lock_holder_does_not_answer(home: Path) -> None:
    location = daemon.grid_location()
    daemon.secure_directory(location.directory)
    fd = os.open(location.lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(GridError, match="does not answer"):
            daemon.stop()
    finally:
        os.close(fd)
