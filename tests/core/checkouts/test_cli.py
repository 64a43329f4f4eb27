"""``clanker worktree`` end to end in real repositories: output, --json, exit codes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from clanker.checkouts.naming import worktree_path
from clanker.cli import cli
from clanker.registry import Registry, override_registry
from clanker.testing.doubles import prepend_to_path
from tests.core.checkouts.conftest import git
from tests.helpers import make_plugin, write_script


@pytest.fixture(autouse=True)
def fake_registry() -> Iterator[Registry]:
    registry = Registry.from_plugins({"fake-agent": make_plugin()}, environ={})
    with override_registry(registry):
        yield registry


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["worktree", *args], catch_exceptions=False)


def test_new_list_complete(repo: Path, home: Path) -> None:
    made = invoke("new", "feature/a", "-C", str(repo), "--json")
    assert made.exit_code == 0, made.output
    record = json.loads(made.stdout)
    assert record["path"] == worktree_path(str(repo), "feature/a") and record["created"]

    listed = invoke("list", "-C", str(repo), "--json")
    assert listed.exit_code == 0
    rows = {w["path"]: w for w in json.loads(listed.stdout)["worktrees"]}
    assert rows[str(repo)]["main"] and not rows[str(repo)]["created_by_clanker"]
    ours = rows[record["path"]]
    assert ours["created_by_clanker"] and ours["dirtiness"] == "clean"
    assert ours["branch"] == "feature/a" and ours["agents"] == []
    table = invoke("list", "-C", str(repo)).stdout
    assert "feature/a" in table and "clanker" in table

    Path(record["path"], "draft.txt").write_text("x\n")
    blocked = invoke("complete", record["path"], "--json")
    assert blocked.exit_code == 24
    answer = json.loads(blocked.stdout)
    assert answer["status"] == "dirty" and answer["changes"]["untracked"]["examples"] == [
        "draft.txt"]
    assert "has changes (1 untracked (draft.txt))" in blocked.stderr
    Path(record["path"], "draft.txt").unlink()

    done = invoke("complete", "feature/a", "-C", str(repo), "--delete-branch")
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines() == [f"Removed {record['path']}",
                                        "Deleted the branch feature/a"]


def test_ignored_only_exits_25_until_discarded(repo: Path, trash: Path) -> None:
    made = json.loads(invoke("new", "logs", "-C", str(repo), "--json").stdout)
    Path(made["path"], "run.log").write_text("x\n")
    blocked = invoke("complete", made["path"])
    assert blocked.exit_code == 25
    assert "--discard-ignored moves it to the Trash" in blocked.stderr
    done = invoke("complete", made["path"], "--discard-ignored", "--json")
    assert done.exit_code == 0
    assert json.loads(done.stdout)["trashed"] is True
    assert (trash / Path(made["path"]).name / "run.log").exists()


@pytest.mark.parametrize(("args", "code", "kind"), [
    (["new", "a..b"], 2, "invalid-branch"),
    (["new", "main"], 23, "branch-exists"),
    (["new", "x", "--base", "nope"], 2, "invalid-base"),
    (["complete", "nobody"], 23, "not-found"),
    (["complete"], 23, "main-checkout"),
])
def test_refusals_have_documented_codes(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                        args: list[str], code: int, kind: str) -> None:
    monkeypatch.chdir(repo)
    result = invoke(*args, "--json")
    assert result.exit_code == code, result.output
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == kind and error["exit_code"] == code
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("clanker: ")


def test_outside_a_repository_exits_15(tmp_path: Path, home: Path) -> None:
    result = invoke("list", "-C", str(tmp_path))
    assert result.exit_code == 15
    assert "not inside a git work tree" in result.stderr


def test_prune_is_a_dry_run_until_applied(repo: Path) -> None:
    merged = json.loads(invoke("new", "merged", "-C", str(repo), "--json").stdout)
    ahead = json.loads(invoke("new", "ahead", "-C", str(repo), "--json").stdout)
    Path(ahead["path"], "app.py").write_text("print('ahead')\n")
    git(ahead["path"], "commit", "-qam", "ahead")
    theirs = repo.parent / "theirs"
    git(repo, "worktree", "add", "-q", "-b", "manual", str(theirs))

    plan = json.loads(invoke("prune", "-C", str(repo), "--json").stdout)
    verdicts = {c["branch"]: (c["eligible"], c["reason"]) for c in plan["candidates"]}
    assert verdicts == {"merged": (True, "merged and clean"),
                        "ahead": (False, "not merged into the main checkout's HEAD"),
                        "manual": (False, "not created by clanker")}
    assert not plan["applied"] and Path(merged["path"]).is_dir()

    applied = invoke("prune", "-C", str(repo), "--apply")
    assert applied.exit_code == 0
    assert f"Removed {merged['path']} and its branch" in applied.stdout
    assert not Path(merged["path"]).exists()
    assert Path(ahead["path"]).is_dir() and theirs.is_dir()
    assert "merged" not in git(repo, "branch", "--format=%(refname:short)").split()


def test_new_with_a_harness_launches_it_in_the_worktree(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "fake-agent", """
        import json, os, sys
        with open(os.environ["FAKE_RECORD"], "w") as handle:
            json.dump({"argv": sys.argv[1:], "cwd": os.getcwd()}, handle)
    """)
    prepend_to_path(monkeypatch, bin_dir)
    monkeypatch.setenv("FAKE_RECORD", str(tmp_path / "record.json"))
    result = CliRunner().invoke(cli, ["worktree", "new", "agent-work", "-C", str(repo),
                                      "--harness", "fake-agent", "--no-attention", "--",
                                      "--yolo"])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "record.json").read_text())
    assert record == {"argv": ["--yolo"], "cwd": worktree_path(str(repo), "agent-work")}


def test_flags_without_a_harness_are_refused_before_anything_is_made(repo: Path) -> None:
    result = invoke("new", "x", "-C", str(repo), "--", "--yolo")
    assert result.exit_code == 2
    assert "x" not in git(repo, "branch", "--format=%(refname:short)").split()


def test_a_bare_word_that_is_also_a_directory_is_tried_as_a_branch(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / "docs").mkdir()
    made = json.loads(invoke("new", "docs", "-C", str(repo), "--json").stdout)
    monkeypatch.chdir(repo)
    done = invoke("complete", "docs")
    assert done.exit_code == 0, done.output
    assert not Path(made["path"]).exists() and (repo / "docs").is_dir()


def test_without_git_on_path_exits_4(repo: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    result = invoke("list", "-C", str(repo), "--json")
    assert result.exit_code == 4
    assert json.loads(result.stdout)["error"]["kind"] == "binary-unavailable"
