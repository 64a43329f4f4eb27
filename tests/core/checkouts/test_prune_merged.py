"""``prune`` and branches merged by squash or rebase, in real repositories."""

from __future__ import annotations

import asyncio
from pathlib import Path

from clanker.checkouts.service import CheckoutService
from tests.core.checkouts.conftest import git, make_repository

SQUASHED = "merged (its changes are in HEAD: squashed or rebased) and clean"


def _branch_with_work(service: CheckoutService, repo: Path, branch: str, name: str) -> str:
    path = asyncio.run(service.create(str(repo), branch)).path
    Path(path, name).write_text(f"{branch}\n")
    git(path, "add", name)
    git(path, "commit", "-qm", f"{branch}: one")
    Path(path, name).write_text(f"{branch}\nmore\n")
    git(path, "commit", "-qam", f"{branch}: two")
    return path


def _verdicts(service: CheckoutService, repo: Path) -> dict[str | None, tuple[bool, str]]:
    plan = asyncio.run(service.prune(str(repo)))
    return {c.worktree.branch: (c.eligible, c.reason) for c in plan.candidates}


def test_squashed_and_rebased_branches_are_merged_and_the_rest_kept_with_why(
        service: CheckoutService, tmp_path: Path, home: Path) -> None:
    repo = make_repository(tmp_path / "dépôt avec espaces")
    squashed = _branch_with_work(service, repo, "feature/squashed", "s.txt")
    rebased = _branch_with_work(service, repo, "feature/rebased", "r.txt")
    _branch_with_work(service, repo, "feature/after", "a.txt")
    partial = _branch_with_work(service, repo, "feature/partial", "p.txt")
    _branch_with_work(service, repo, "feature/changed-since", "c.txt")
    dirty = _branch_with_work(service, repo, "feature/dirty", "d.txt")

    git(repo, "merge", "-q", "--squash", "feature/squashed")
    git(repo, "commit", "-qm", "Squash feature/squashed")
    # A rebase merge: the branch's commits replayed on HEAD, with new ids.
    for commit in git(repo, "rev-list", "--reverse", "main..feature/rebased").split():
        git(repo, "cherry-pick", commit)
    git(repo, "merge", "-q", "--squash", "feature/after")
    git(repo, "commit", "-qm", "Squash feature/after")
    git(repo, "merge", "-q", "--squash", "feature/changed-since")
    git(repo, "commit", "-qm", "Squash feature/changed-since")
    git(repo, "merge", "-q", "--squash", "feature/dirty")
    git(repo, "commit", "-qm", "Squash feature/dirty")
    # Only the first of the branch's two commits made it in.
    first = git(repo, "rev-list", "--reverse", "main..feature/partial").split()[0]
    git(repo, "cherry-pick", first)
    # HEAD changed a squashed file again afterwards: merging the branch would undo nothing,
    # but it no longer gives HEAD's tree, so nothing proves it merged.
    Path(repo, "c.txt").write_text("rewritten on main\n")
    git(repo, "commit", "-qam", "main changes c.txt")
    Path(dirty, "d.txt").write_text("unsaved\n")
    after = asyncio.run(service.create(str(repo), "feature/after")).path
    Path(after, "a.txt").write_text("feature/after\nmore\nlater\n")
    git(after, "commit", "-qam", "feature/after: after the squash")

    verdicts = _verdicts(service, repo)
    assert verdicts["feature/squashed"] == (True, SQUASHED)
    assert verdicts["feature/rebased"] == (True, SQUASHED)
    assert verdicts["feature/after"] == (False, "not merged into the main checkout's HEAD")
    assert verdicts["feature/partial"] == (False, "not merged into the main checkout's HEAD")
    assert verdicts["feature/changed-since"] == (
        False, "not merged into the main checkout's HEAD")
    assert verdicts["feature/dirty"] == (False, "dirty")

    plan = asyncio.run(service.prune(str(repo), apply=True))
    assert {r.path for r in plan.results} == {squashed, rebased}
    # git branch -d does not see a squash as merged: the worktree goes, the branch stays.
    assert all(not r.branch_deleted and r.branch_note for r in plan.results)
    assert not Path(squashed).exists() and not Path(rebased).exists()
    assert Path(partial).is_dir() and Path(dirty).is_dir() and Path(after).is_dir()
    branches = git(repo, "branch", "--format=%(refname:short)").split()
    assert {"feature/squashed", "feature/rebased"} <= set(branches)
