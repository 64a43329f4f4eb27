"""Which host each host-launched terminal runs on, and which launch directories there
are still in use (no sshd needed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clanker.grid.errors import GridPathError
from clanker.grid.remote import HostIndex, machine_identity


def test_terminals_are_listed_per_host_and_dead_ones_forgotten(tmp_path: Path) -> None:
    index = HostIndex(tmp_path / "hosts")
    index.record("t-a", "box", "1" * 16)
    index.record("t-b", "box", "2" * 16)
    index.record("t-c", "other", "3" * 16)
    assert index.terminals("box", ["t-a", "t-b", "t-c"]) == {"t-a", "t-b"}
    assert index.terminals("other", ["t-a", "t-b", "t-c"]) == {"t-c"}
    # The grid no longer lists t-b: its record goes.
    assert index.terminals("box", ["t-a", "t-c"]) == {"t-a"}
    assert sorted(p.name for p in (tmp_path / "hosts").iterdir()) == ["t-a.host", "t-c.host"]
    assert os.stat(tmp_path / "hosts").st_mode & 0o777 == 0o700
    assert os.stat(tmp_path / "hosts" / "t-a.host").st_mode & 0o777 == 0o600


def test_running_launches_are_those_whose_launcher_lives(tmp_path: Path) -> None:
    index = HostIndex(tmp_path / "hosts")
    index.record("t-live", "box", "a" * 16)  # this process: alive
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(gone.stdout)
    path = tmp_path / "hosts" / "t-dead.host"
    path.write_text(f'{{"host": "box", "launch": "{"b" * 16}", "pid": {dead}}}')
    path.chmod(0o600)
    (tmp_path / "hosts" / "t-junk.host").write_text("not json")
    assert index.running_launches("box") == {"a" * 16}
    assert index.running_launches("other") == set()


def test_a_directory_that_is_not_private_is_not_believed(tmp_path: Path) -> None:
    directory = tmp_path / "hosts"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    (directory / "t-a.host").write_text('{"host": "box", "launch": "x", "pid": 1}')
    assert HostIndex(directory).terminals("box", ["t-a"]) == set()
    with pytest.raises(GridPathError):
        HostIndex(directory).record("t-b", "box", "y")


def test_the_machine_identity_is_made_once_and_kept(tmp_path: Path) -> None:
    first = machine_identity(tmp_path / "state")
    assert first == machine_identity(tmp_path / "state")
    assert len(first) == 32 and int(first, 16) >= 0
    assert os.stat(tmp_path / "state" / "launcher-id").st_mode & 0o777 == 0o600
