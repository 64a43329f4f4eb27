"""The grid's own paths: an odd file never hangs a command, never leads the grid
elsewhere, and is exit 18 with a message naming it; the log stays bounded."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from clanker.errors import EXIT_GRID_UNAVAILABLE
from clanker.grid import daemon
from clanker.grid.logfile import GridLogHandler
from clanker.testing.doubles import write_script

COMMAND_TIMEOUT = 120
"""A hang fails the test after this long instead of blocking the suite."""


def _fifo(path: Path) -> None:
    os.mkfifo(path, 0o600)


def _socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))


def _loop(path: Path) -> None:
    path.symlink_to(path)


def _elsewhere(path: Path) -> None:
    target = path.parent.parent / f"elsewhere-{path.name}"
    target.write_text("")
    path.symlink_to(target)


def _directory(path: Path) -> None:
    path.mkdir(mode=0o700)


def _file(path: Path) -> None:
    path.write_text("")


ODD: dict[str, Callable[[Path], None]] = {
    "fifo": _fifo, "socket": _socket, "symlink-to-itself": _loop,
    "symlink-elsewhere": _elsewhere, "directory": _directory, "file": _file,
}
WHAT = {"fifo": "a FIFO", "socket": "a socket", "symlink-to-itself": "a symbolic link",
        "symlink-elsewhere": "a symbolic link", "directory": "a directory",
        "file": "a regular file"}


def clanker(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "clanker.cli", *args], capture_output=True,
                          text=True, timeout=COMMAND_TIMEOUT, check=False,
                          env=env or dict(os.environ), cwd="/")


def _place(home: Path, which: str) -> Path:
    """Where ``which`` lives under ``home``, its directory made as the grid makes it."""
    if which == "state":
        return home / "state"
    if which == "log":
        (home / "state").mkdir(mode=0o700)
        return home / "state" / "grid.log"
    location = daemon.grid_location()
    daemon.secure_directory(location.directory)
    return location.lock


CASES = [
    *[("log", kind, command) for kind in ("fifo", "socket", "symlink-to-itself",
                                          "symlink-elsewhere", "directory")
      for command in (("grid", "start"),)],
    *[("lock", kind, command) for kind in ("fifo", "socket", "symlink-to-itself",
                                           "symlink-elsewhere", "directory")
      for command in (("grid", "start"), ("grid", "stop"))],
    # The state directory may be a link to a directory, like any directory a user moved.
    *[("state", kind, ("grid", "start")) for kind in ("fifo", "socket", "symlink-to-itself",
                                                      "symlink-elsewhere", "file")],
]


@pytest.mark.parametrize(("which", "kind", "command"), CASES,
                         ids=[f"{w}-{k}-{'-'.join(c)}" for w, k, c in CASES])
def test_an_odd_grid_path_is_exit_18_naming_it(
    home: Path, which: str, kind: str, command: tuple[str, ...]
) -> None:
    path = _place(home, which)
    ODD[kind](path)
    result = clanker(*command)
    assert result.returncode == EXIT_GRID_UNAVAILABLE, result.stderr
    assert f"{path} is {WHAT[kind]}" in result.stderr
    assert "internal error" not in result.stderr
    assert "Traceback" not in result.stderr
    if kind == "symlink-elsewhere":
        assert (path.parent.parent / f"elsewhere-{path.name}").read_text() == ""  # untouched
    assert not daemon.grid_location().socket.exists()  # nothing started


def test_a_launch_is_never_held_up_by_an_odd_grid_log(home: Path, short_dir: Path) -> None:
    # Any harness with attention will do: the grid fails before the harness is asked.
    bin_dir = short_dir / "bin"
    bin_dir.mkdir()
    ran = short_dir / "ran"
    write_script(bin_dir, "claude", f"open({str(ran)!r}, 'w').write('ran')")
    (home / "state").mkdir(mode=0o700)
    _fifo(home / "state" / "grid.log")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    result = clanker("launch", "claude", env=env)
    assert result.returncode == 0, result.stderr
    assert ran.read_text() == "ran"
    assert "attention is unavailable for this launch" in result.stderr


# ------------------------------------------------------------------- the log itself


def _record(message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("clanker.grid.server", logging.WARNING, __file__, 1, message,
                             args, None)


def test_the_log_rotates_by_size_keeping_one_previous_file(short_dir: Path) -> None:
    path = short_dir / "grid.log"
    handler = GridLogHandler(path, max_bytes=4096)
    try:
        for index in range(2000):
            handler.handle(_record("refused a request: %d", index))
    finally:
        handler.close()
    assert sorted(p.name for p in short_dir.iterdir()) == ["grid.log", "grid.log.1"]
    assert all((short_dir / name).stat().st_size <= 4096 for name in ("grid.log", "grid.log.1"))
    assert "refused a request: 1999" in path.read_text()
    assert path.stat().st_mode & 0o777 == 0o600


def test_repeated_lines_are_counted_not_written(short_dir: Path) -> None:
    path = short_dir / "grid.log"
    handler = GridLogHandler(path)
    try:
        for _ in range(5000):
            handler.handle(_record("refused a request: bad-request"))
        handler.handle(_record("grid stopped"))
    finally:
        handler.close()
    lines = path.read_text().splitlines()
    assert lines == ["refused a request: bad-request", "last message repeated 4999 times",
                     "grid stopped"]


def test_a_log_that_cannot_be_reopened_safely_is_not_written_and_never_hangs(
    short_dir: Path,
) -> None:
    path = short_dir / "grid.log"
    handler = GridLogHandler(path, max_bytes=1024)
    aside = short_dir / "grid.log.1"
    path.unlink()
    _fifo(path)  # swapped while the grid runs: the next rollover must not wait on it

    def flood() -> None:
        for index in range(200):
            handler.handle(_record("line %d", index))

    worker = threading.Thread(target=flood, daemon=True)
    worker.start()
    worker.join(COMMAND_TIMEOUT)
    assert not worker.is_alive(), "writing the log hung"
    handler.close()
    assert not aside.exists()  # what is not our file is neither moved nor written
    assert os.path.exists(path) and not path.is_file()


def test_an_oversized_log_from_before_is_moved_aside(short_dir: Path) -> None:
    path = short_dir / "grid.log"
    path.write_text("x" * 5000)
    handler = GridLogHandler(path, max_bytes=4096)
    try:
        handler.handle(_record("grid listening"))
    finally:
        handler.close()
    assert path.read_text() == "grid listening\n"
    assert (short_dir / "grid.log.1").stat().st_size == 5000


def test_the_daemon_log_stays_small_under_a_flood_of_refusals(home: Path) -> None:
    location = daemon.grid_location()
    daemon.start()
    for _ in range(2000):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(60)
            sock.connect(str(location.socket))
            sock.sendall(b"garbage\n")
            assert sock.recv(4096).startswith(b'{"v":1,"ok":false')
    assert daemon.stop()
    text = location.log.read_text()
    assert text.count("refused a request: bad-request") == 1
    assert "last message repeated 1999 times" in text
    assert len(text.splitlines()) < 20
