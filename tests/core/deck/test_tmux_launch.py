"""``--tmux`` launches: the hand-off file, a missing tmux, and a real tmux server."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from clanker.launch.request import LaunchOperation, LaunchRequest, SessionTarget
from clanker.launch.service import LaunchOptions
from clanker.tmux.control import Tmux, TmuxUnavailableError
from clanker.tmux.handoff import TmuxTerminal, _write_private, read_handoff


def test_a_hand_off_round_trips_and_is_deleted_when_read(tmp_path: Path) -> None:
    from clanker.tmux.handoff import _record

    request = LaunchRequest(operation=LaunchOperation.RESUME, model="m",
                            session=SessionTarget(native_id="abc"), user_flags=("--x", "y z"),
                            cwd=str(tmp_path))
    options = LaunchOptions(attention=False, trusted_session_id="abc", bridge=True,
                            grants=("clanker_context",), account="work")
    import json

    path = _write_private(tmp_path / "private",
                          json.dumps(_record("fake", request, options, {"K": "v"})).encode())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert read_handoff(path) == ("fake", request, options, {"K": "v"})
    assert not path.exists()


def test_a_malformed_hand_off_is_refused_and_deleted(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"format": 1, "harness": "x"}')
    with pytest.raises(ValueError, match="malformed"):
        read_handoff(path)
    assert not path.exists()


def test_session_names_tmux_would_misread_are_refused() -> None:
    for bad in ("", "a:b", "a.b", " a", "x" * 65):
        with pytest.raises(ValueError):
            TmuxTerminal(session=bad)


def test_without_tmux_the_launch_fails_with_exit_45_and_writes_nothing(
        home: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": str(bin_dir)}
    with pytest.raises(TmuxUnavailableError):
        Tmux(env).command("list-sessions")
    done = subprocess.run([sys.executable, "-m", "clanker.cli", "launch", "--tmux", "claude"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 45, done.stderr
    assert "tmux is not on PATH" in done.stderr
    assert not (home / "state" / "tmux").exists() or not any((home / "state" / "tmux").iterdir())
