"""Removed-worktree recreation, with the real Pi (which continues a session only in its
own directory): refused while the worktree is gone, accepted once clanker recreated it.

Pi's only provider is a refused loopback port, so a run that got past its directory
check ends in a connection error, never a model call.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from clanker.api import Clanker
from clanker.sessions.selection import DirectoryGoneError
from tests.core.checkouts.conftest import make_repository

LOOPBACK = Path(__file__).parents[2] / "fixtures" / "pi" / "loopback-models.json"
GONE = "Stored session working directory does not exist"


def _pi(cwd: str | Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["pi", "--offline", "--model", "loopback/probe-model", *args],
                          cwd=cwd, text=True, stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=90, check=False)


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("pi") is None, reason="pi is not installed")
def test_real_pi_continues_in_the_recreated_worktree(
        tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = tmp_path / "pi-agent"
    agent.mkdir()
    shutil.copy(LOOPBACK, agent / "models.json")
    (agent / "settings.json").write_text('{"retry": {"enabled": false}}')
    for name in [k for k in os.environ if k.startswith("PI_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("PI_OFFLINE", "1")
    repo = make_repository(tmp_path / "mes dépôts" / "app")
    clanker = Clanker()
    made = asyncio.run(clanker.create_worktree(repo, "feature/pi"))
    _pi(made.path, "-p", "first prompt")
    [session] = asyncio.run(clanker.sessions(harnesses=["pi"], workspace=made.path)).sessions
    shutil.rmtree(made.path)
    key = f"pi:{session.native_id}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    with pytest.raises(DirectoryGoneError):
        asyncio.run(clanker.find_session(key, workspace=elsewhere))
    assert GONE in _pi(elsewhere, "--session", session.store_path or "", "-p", "x").stderr

    found = asyncio.run(clanker.find_session(key, workspace=elsewhere, recreate_worktree=True))
    assert found.launch_cwd == made.path and found.session.store_path is not None
    before = Path(found.session.store_path).read_text()
    again = _pi(found.launch_cwd, "--session", found.session.store_path, "-p", "second prompt")
    assert GONE not in again.stderr
    # Pi took the session up in the recreated directory: the new prompt is in its file.
    added = Path(found.session.store_path).read_text().removeprefix(before)
    assert "second prompt" in added
