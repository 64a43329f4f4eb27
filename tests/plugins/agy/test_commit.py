"""Antigravity has no commit capability, on purpose (docs/harnesses/agy.md, "Commit messages").

agy's headless mode keeps its tools and records a conversation for every run, so it is not
the structured, tool-free, non-persisting mode a commit message is asked through. The
capability is absent rather than approximated; these tests keep it so.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

import clanker_agy
from clanker.cli import cli
from clanker.descriptor import Capability
from clanker.ids import HarnessId
from clanker.registry import Registry, override_registry
from tests.helpers import write_script

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agy" / "commit"


def test_agy_declares_and_implements_no_commit_capability() -> None:
    registry = Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": "agy"})
    assert registry.problems == ()
    provider = registry.get_provider(HarnessId("agy"))
    assert provider.commit is None
    assert Capability.COMMIT not in provider.descriptor.capabilities
    assert not hasattr(clanker_agy, "clanker_commit")


def test_the_synthetic_commit_fixtures_say_they_back_no_capability() -> None:
    readme = (FIXTURES / "README.md").read_text()
    assert "Not used by a capability" in readme


def test_commit_message_with_agy_is_unsupported_and_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.com",
           "-c", "commit.gpgsign=false", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.txt").write_text("one\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "One"], check=True)
    (repo / "a.txt").write_text("two\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ran = tmp_path / "agy-ran"
    # An agy double that only records that it was started: it never should be.
    write_script(bin_dir, "agy", f"open({str(ran)!r}, 'w').close()\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(repo)
    with override_registry(Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": "agy"})):
        result = CliRunner().invoke(cli, ["commit-message", "--harness", "agy"])
    assert result.exit_code == 3, result.output
    assert "does not support" in result.output
    assert not ran.exists()
