"""Resuming a conversation whose worktree was removed, in real repositories.

The harness is the fake agent (a script that records where it was started);
whether it continues without its directory is the one provider fact under test.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from clanker.api import Clanker
from clanker.checkouts.naming import worktree_path
from clanker.checkouts.types import CheckoutError, Refusal
from clanker.cli import cli
from clanker.registry import Registry, override_registry
from clanker.sessions.selection import DirectoryGoneError
from clanker.testing.doubles import prepend_to_path
from tests.core.checkouts.conftest import git, make_repository
from tests.core.test_cli import FAKE_AGENT
from tests.helpers import FakeSessions, make_sessions_plugin, write_fake_session, write_script

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def agent_home(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "fake-agent", FAKE_AGENT)
    prepend_to_path(monkeypatch, bin_dir)
    monkeypatch.setenv("FAKE_AGENT_HOME", str(tmp_path / "agent-home"))
    monkeypatch.setenv("FAKE_RECORD", str(tmp_path / "record.json"))
    return tmp_path / "agent-home"


def _registry(*, resumes_elsewhere: bool) -> Iterator[None]:
    plugin = make_sessions_plugin(FakeSessions(resumes_elsewhere=resumes_elsewhere))
    with override_registry(Registry.from_plugins({"fake-agent": plugin}, environ={})):
        yield


@pytest.fixture
def continues_elsewhere() -> Iterator[None]:
    yield from _registry(resumes_elsewhere=True)


@pytest.fixture
def only_in_its_directory() -> Iterator[None]:
    yield from _registry(resumes_elsewhere=False)


@pytest.fixture
def project(tmp_path: Path, home: Path) -> Path:
    """A repository whose path has a space and non-ASCII letters."""
    return make_repository(tmp_path / "mes projets" / "café app")


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """A directory of no repository, where the person runs ``clanker resume``."""
    path = tmp_path / "elsewhere"
    path.mkdir()
    return path


def _removed_worktree(project: Path, agent_home: Path, branch: str = "feature/x") -> str:
    made = CliRunner().invoke(cli, ["worktree", "new", branch, "-C", str(project), "--json"])
    assert made.exit_code == 0, made.output
    path = json.loads(made.stdout)["path"]
    write_fake_session(agent_home, "abc", path, T0)
    # Removed behind clanker's back: git still lists it (prunable), clanker remembers it.
    shutil.rmtree(path)
    return str(path)


def _resume(*args: str, cwd: Path | None = None) -> Result:
    return CliRunner().invoke(cli, ["resume", "fake-agent:abc", *args,
                                    *(["--workspace", str(cwd)] if cwd else [])])


def _launched_in(tmp_path: Path) -> str:
    return str(json.loads((tmp_path / "record.json").read_text())["cwd"])


@pytest.mark.usefixtures("continues_elsewhere")
def test_a_harness_that_continues_elsewhere_runs_in_the_main_checkout(
        project: Path, agent_home: Path, tmp_path: Path, elsewhere: Path) -> None:
    gone = _removed_worktree(project, agent_home)
    result = _resume(cwd=elsewhere)
    assert result.exit_code == 0, result.output
    assert _launched_in(tmp_path) == str(project)
    assert f"{gone} (a worktree of {project}) was removed; continuing the session in " \
        f"{project}" in result.output


@pytest.mark.usefixtures("continues_elsewhere")
def test_after_git_forgot_it_clankers_record_still_attributes_it(
        project: Path, agent_home: Path, tmp_path: Path, elsewhere: Path) -> None:
    _removed_worktree(project, agent_home)
    git(project, "worktree", "prune")
    assert _resume(cwd=elsewhere).exit_code == 0
    assert _launched_in(tmp_path) == str(project)


@pytest.mark.usefixtures("continues_elsewhere")
def test_a_look_alike_directory_continues_where_the_caller_is(
        project: Path, agent_home: Path, tmp_path: Path, elsewhere: Path) -> None:
    # Under the container, but neither git nor clanker ever knew it.
    stranger = worktree_path(str(project), "never-made")
    write_fake_session(agent_home, "abc", stranger, T0)
    result = _resume(cwd=elsewhere)
    assert result.exit_code == 0, result.output
    assert _launched_in(tmp_path) == str(elsewhere)
    assert f"{stranger} no longer exists; continuing the session in {elsewhere}" \
        in result.output


@pytest.mark.usefixtures("only_in_its_directory")
def test_otherwise_recreation_is_offered_and_then_done(
        project: Path, agent_home: Path, tmp_path: Path) -> None:
    gone = _removed_worktree(project, agent_home)
    refused = _resume()
    assert refused.exit_code == 3
    assert "--recreate-worktree" in refused.output and "'feature/x'" in refused.output
    assert not Path(gone).exists()

    result = _resume("--recreate-worktree")
    assert result.exit_code == 0, result.output
    assert _launched_in(tmp_path) == gone
    assert git(gone, "branch", "--show-current").strip() == "feature/x"
    assert f"recreated the worktree {gone}" in result.output
    listed = json.loads(CliRunner().invoke(
        cli, ["worktree", "list", "-C", str(project), "--json"]).stdout)
    assert any(w["path"] == gone and w["listed"] for w in listed["worktrees"])


@pytest.mark.usefixtures("only_in_its_directory")
def test_fork_recreates_too(project: Path, agent_home: Path, tmp_path: Path) -> None:
    gone = _removed_worktree(project, agent_home)
    result = CliRunner().invoke(cli, ["fork", "fake-agent:abc", "--recreate-worktree"])
    assert result.exit_code == 0, result.output
    assert _launched_in(tmp_path) == gone


@pytest.mark.usefixtures("only_in_its_directory")
def test_a_deleted_branch_is_not_recreated_and_says_why(
        project: Path, agent_home: Path) -> None:
    gone = _removed_worktree(project, agent_home)
    git(project, "worktree", "prune")
    git(project, "branch", "-D", "feature/x")
    offered = _resume()
    assert offered.exit_code == 3
    assert "it cannot be recreated: its branch 'feature/x' no longer exists" in offered.output
    result = _resume("--recreate-worktree")
    assert result.exit_code == 23
    assert result.output.count("\n") == 1
    assert "not recreated: its branch 'feature/x' no longer exists" in result.output
    assert not Path(gone).exists()


@pytest.mark.usefixtures("only_in_its_directory")
def test_a_branch_checked_out_elsewhere_is_not_taken_over(
        project: Path, agent_home: Path, tmp_path: Path) -> None:
    gone = _removed_worktree(project, agent_home)
    git(project, "worktree", "prune")
    git(project, "worktree", "add", "-q", str(tmp_path / "other"), "feature/x")
    result = _resume("--recreate-worktree")
    assert result.exit_code == 23
    assert "is checked out in" in result.output
    assert not Path(gone).exists()


@pytest.mark.usefixtures("only_in_its_directory")
def test_a_worktree_clanker_did_not_create_is_never_recreated(
        project: Path, agent_home: Path, tmp_path: Path) -> None:
    # Made by plain git at clanker's own deterministic path: git knows it, clanker does not.
    path = worktree_path(str(project), "feature/y")
    git(project, "worktree", "add", "-q", "-b", "feature/y", path)
    write_fake_session(agent_home, "abc", path, T0)
    shutil.rmtree(path)
    offered = _resume()
    assert offered.exit_code == 3
    assert "is not a worktree path clanker created" in offered.output
    assert _resume("--recreate-worktree").exit_code == 23
    assert not Path(path).exists()


@pytest.mark.usefixtures("only_in_its_directory")
def test_the_library_says_what_it_found(project: Path, agent_home: Path) -> None:
    gone = _removed_worktree(project, agent_home)
    clanker = Clanker()
    with pytest.raises(DirectoryGoneError) as caught:
        asyncio.run(clanker.find_session("fake-agent:abc", workspace=project))
    removed = caught.value.removed
    assert removed is not None and removed.recreatable and removed.branch == "feature/x"
    assert removed.main_checkout == str(project) and removed.path == gone
    found = asyncio.run(clanker.find_session("fake-agent:abc", workspace=project,
                                             recreate_worktree=True))
    assert found.launch_cwd == gone and found.notice is not None
    # A second recreation of the same worktree is refused: it exists again.
    shutil.rmtree(gone)
    Path(gone).write_text("not a directory")
    with pytest.raises(CheckoutError) as refused:
        asyncio.run(clanker.find_session("fake-agent:abc", workspace=project,
                                         recreate_worktree=True))
    assert refused.value.reason is Refusal.PATH_OCCUPIED


@pytest.mark.usefixtures("only_in_its_directory")
def test_a_session_outside_any_repository_cannot_be_recreated(
        agent_home: Path, tmp_path: Path, home: Path) -> None:
    write_fake_session(agent_home, "abc", str(tmp_path / "gone"), T0)
    refused = _resume()
    assert refused.exit_code == 3
    assert "cannot prove it was a worktree" in refused.output
    assert _resume("--recreate-worktree").exit_code == 23


@pytest.mark.usefixtures("only_in_its_directory")
def test_a_session_in_a_directory_inside_the_worktree(
        project: Path, agent_home: Path, tmp_path: Path) -> None:
    made = json.loads(CliRunner().invoke(
        cli, ["worktree", "new", "feature/sub", "-C", str(project), "--json"]).stdout)
    inside = Path(made["path"], "src", "pkg")
    inside.mkdir(parents=True)
    (inside / "mod.py").write_text("x = 1\n")
    git(made["path"], "add", "-A")
    git(made["path"], "commit", "-qm", "A package")
    write_fake_session(agent_home, "abc", str(inside), T0)
    shutil.rmtree(made["path"])
    offered = _resume()
    assert offered.exit_code == 3 and "'feature/sub'" in offered.output
    result = _resume("--recreate-worktree")
    assert result.exit_code == 0, result.output
    assert _launched_in(tmp_path) == str(inside)
    assert f"recreated the worktree {made['path']}" in result.output


@pytest.mark.usefixtures("continues_elsewhere")
def test_a_directory_gone_from_a_worktree_that_is_still_there(
        project: Path, agent_home: Path, tmp_path: Path, elsewhere: Path) -> None:
    made = json.loads(CliRunner().invoke(
        cli, ["worktree", "new", "feature/kept", "-C", str(project), "--json"]).stdout)
    write_fake_session(agent_home, "abc", str(Path(made["path"], "scratch")), T0)
    result = _resume(cwd=elsewhere)
    assert result.exit_code == 0, result.output
    assert _launched_in(tmp_path) == str(elsewhere)
    assert "was removed" not in result.output
