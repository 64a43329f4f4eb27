"""The checkout service against real git repositories: every case the lifecycle names."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from clanker.checkouts.naming import worktree_path
from clanker.checkouts.service import CheckoutService
from clanker.checkouts.types import (
    MAX_EXAMPLES,
    CheckoutError,
    CompletionStatus,
    Dirtiness,
    Refusal,
)
from clanker.environment.local import LocalEnvironment
from tests.core.checkouts.conftest import git, make_repository


def run(coroutine):  # type: ignore[no-untyped-def]
    return asyncio.run(coroutine)


def listed_paths(repo: Path) -> list[str]:
    out = git(repo, "worktree", "list", "--porcelain")
    return [line.removeprefix("worktree ") for line in out.splitlines()
            if line.startswith("worktree ")]


def branches(repo: Path) -> set[str]:
    return set(git(repo, "branch", "--format=%(refname:short)").split())


def test_create_then_complete(repo: Path, service: CheckoutService) -> None:
    created = run(service.create(str(repo), "feature/login"))
    expected = worktree_path(str(repo), "feature/login")
    assert created.path == expected and created.created
    assert created.base == git(repo, "rev-parse", "HEAD").strip()
    assert Path(expected).parent.name == "project-worktrees"
    assert git(expected, "branch", "--show-current").strip() == "feature/login"
    assert expected in listed_paths(repo)

    done = run(service.complete(str(repo), branch="feature/login"))
    assert done.status is CompletionStatus.REMOVED and done.done and not done.trashed
    assert expected not in listed_paths(repo) and not os.path.lexists(expected)
    assert "feature/login" in branches(repo)  # kept unless asked


def test_an_explicit_base_is_used_and_recorded(repo: Path, service: CheckoutService) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "app.py").write_text("print('v2')\n")
    git(repo, "commit", "-qam", "v2")
    created = run(service.create(str(repo), "old", base=first))
    assert created.base == first
    assert git(created.path, "rev-parse", "HEAD").strip() == first
    with pytest.raises(CheckoutError) as refused:
        run(service.create(str(repo), "other", base="no-such-ref"))
    assert refused.value.reason is Refusal.INVALID_BASE
    assert "other" not in branches(repo)


def test_a_retry_answers_with_the_same_checkout(repo: Path, service: CheckoutService) -> None:
    first = run(service.create(str(repo), "retry"))
    again = run(service.create(str(repo), "retry"))
    assert not again.created and again.path == first.path and again.base == first.base


def test_delete_branch_deletes_a_merged_branch_and_keeps_an_unmerged_one(
        repo: Path, service: CheckoutService) -> None:
    merged = run(service.create(str(repo), "merged"))
    done = run(service.complete(str(repo), path=merged.path, delete_branch=True))
    assert done.branch_deleted and "merged" not in branches(repo)

    work = run(service.create(str(repo), "work"))
    Path(work.path, "app.py").write_text("print('v3')\n")
    git(work.path, "commit", "-qam", "v3")
    done = run(service.complete(str(repo), path=work.path, delete_branch=True))
    assert done.status is CompletionStatus.REMOVED
    assert not done.branch_deleted and "not fully merged" in (done.branch_note or "")
    assert "work" in branches(repo)


@pytest.mark.parametrize("change", ["tracked", "staged", "untracked"])
def test_changes_block_completion_and_nothing_is_removed(
        repo: Path, service: CheckoutService, change: str) -> None:
    created = run(service.create(str(repo), f"dirty-{change}"))
    where = Path(created.path)
    if change == "tracked":
        (where / "app.py").write_text("print('edited')\n")
    elif change == "staged":
        (where / "new.py").write_text("x = 1\n")
        git(where, "add", "new.py")
    else:
        (where / "notes.txt").write_text("todo\n")
    for discard in (False, True):
        done = run(service.complete(str(repo), path=created.path, discard_ignored=discard,
                                    delete_branch=True))
        assert done.status is CompletionStatus.DIRTY and not done.done
        assert done.changes is not None
        category = getattr(done.changes, change)
        assert category.count == 1 and category.examples in (("app.py",), ("new.py",),
                                                             ("notes.txt",))
    assert where.is_dir() and created.path in listed_paths(repo)
    assert f"dirty-{change}" in branches(repo)


def test_ignored_only_needs_discard_and_then_goes_to_the_trash(
        repo: Path, service: CheckoutService, trash: Path) -> None:
    created = run(service.create(str(repo), "ignored"))
    where = Path(created.path)
    (where / "build").mkdir()
    for index in range(30):
        (where / f"run{index}.log").write_text("log\n")
    (where / "build" / "out.bin").write_bytes(b"\0")

    blocked = run(service.complete(str(repo), path=created.path))
    assert blocked.status is CompletionStatus.IGNORED_ONLY
    assert blocked.can_complete_with_discard_ignored
    assert blocked.changes is not None
    assert blocked.changes.ignored.count == 31  # build/ counts once
    assert len(blocked.changes.ignored.examples) == MAX_EXAMPLES
    assert all(not os.path.isabs(e) for e in blocked.changes.ignored.examples)
    assert where.is_dir()

    done = run(service.complete(str(repo), path=created.path, discard_ignored=True))
    assert done.status is CompletionStatus.REMOVED and done.trashed
    assert not where.exists() and created.path not in listed_paths(repo)
    kept = trash / where.name
    assert (kept / "build" / "out.bin").read_bytes() == b"\0"  # recoverable, not deleted


def test_a_dirty_submodule_blocks_and_a_clean_one_goes_to_the_trash(
        tmp_path: Path, repo: Path, service: CheckoutService, trash: Path) -> None:
    library = make_repository(tmp_path / "library")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib")
    git(repo, "commit", "-qm", "Add lib")
    created = run(service.create(str(repo), "with-sub"))
    where = Path(created.path)
    git(where, "-c", "protocol.file.allow=always", "submodule", "update", "--init", "-q")
    (where / "lib" / "app.py").write_text("print('inside')\n")
    (where / "lib" / "debug.log").write_text("x\n")

    done = run(service.complete(str(repo), path=created.path))
    assert done.status is CompletionStatus.DIRTY and done.changes is not None
    assert "lib/app.py" in done.changes.tracked.examples
    assert "lib/debug.log" in done.changes.ignored.examples
    assert done.changes.repositories == 2 and done.changes.submodules

    git(where / "lib", "checkout", "--", "app.py")
    (where / "lib" / "debug.log").unlink()
    done = run(service.complete(str(repo), path=created.path))
    assert done.status is CompletionStatus.REMOVED and done.trashed
    assert not where.exists() and created.path not in listed_paths(repo)
    assert (trash / where.name / "lib" / "app.py").exists()


def test_a_locked_worktree_is_refused(repo: Path, service: CheckoutService) -> None:
    created = run(service.create(str(repo), "locked"))
    git(repo, "worktree", "lock", created.path)
    with pytest.raises(CheckoutError) as refused:
        run(service.complete(str(repo), path=created.path))
    assert refused.value.reason is Refusal.LOCKED
    assert Path(created.path).is_dir() and created.path in listed_paths(repo)


def test_an_existing_branch_is_never_taken_over(repo: Path, service: CheckoutService) -> None:
    git(repo, "branch", "theirs")
    with pytest.raises(CheckoutError) as refused:
        run(service.create(str(repo), "theirs"))
    assert refused.value.reason is Refusal.BRANCH_EXISTS
    assert not os.path.lexists(worktree_path(str(repo), "theirs"))
    with pytest.raises(CheckoutError) as refused:
        run(service.create(str(repo), "main"))
    assert refused.value.reason is Refusal.BRANCH_EXISTS
    assert "checked out in" in refused.value.message


@pytest.mark.parametrize("name", ["", "a..b", "-x", "@{-1}", "HEAD", "x.lock", "a b", "x" * 201,
                                  "trailing/", "back\\slash", "ctl\x01"])
def test_an_invalid_branch_name_is_refused(repo: Path, service: CheckoutService,
                                           name: str) -> None:
    before = branches(repo)
    with pytest.raises(CheckoutError) as refused:
        run(service.create(str(repo), name))
    assert refused.value.reason is Refusal.INVALID_BRANCH
    assert branches(repo) == before and listed_paths(repo) == [str(repo)]


def test_a_worktree_removed_behind_clankers_back(repo: Path, service: CheckoutService) -> None:
    created = run(service.create(str(repo), "vanished"))
    subprocess.run(["rm", "-rf", created.path], check=True)
    listing = run(service.list(str(repo)))
    item = next(w for w in listing.worktrees if w.path == created.path)
    assert item.dirtiness is Dirtiness.MISSING and item.created_by_clanker

    done = run(service.complete(str(repo), branch="vanished", delete_branch=True))
    assert done.status is CompletionStatus.ALREADY_GONE and done.done and done.branch_deleted
    assert created.path not in listed_paths(repo)
    again = run(service.complete(str(repo), path=created.path))
    assert again.status is CompletionStatus.ALREADY_GONE
    # Still attributed to clanker after git forgot it.
    remembered = next(w for w in run(service.list(str(repo))).worktrees
                      if w.path == created.path)
    assert not remembered.listed and remembered.created_by_clanker
    assert remembered.removed_at is not None and remembered.branch == "vanished"


def test_a_path_with_spaces_and_non_ascii(tmp_path: Path, home: Path) -> None:
    repo = make_repository(tmp_path / "mes projets" / "dépôt ünï")
    service = CheckoutService(environment=LocalEnvironment(), state_dir=tmp_path / "state")
    created = run(service.create(str(repo), "fonctionnalité/é"))
    assert Path(created.path).is_dir()
    assert Path(created.path).parent.name == "dépôt ünï-worktrees"
    assert created.path in listed_paths(repo)
    (Path(created.path) / "notes é.txt").write_text("x\n")
    done = run(service.complete(str(repo), path=created.path))
    assert done.status is CompletionStatus.DIRTY and done.changes is not None
    assert done.changes.untracked.examples == ("notes é.txt",)
    (Path(created.path) / "notes é.txt").unlink()
    done = run(service.complete(str(repo), path=created.path, delete_branch=True))
    assert done.status is CompletionStatus.REMOVED and done.branch_deleted


def test_only_clankers_own_worktrees_are_completed(repo: Path, service: CheckoutService,
                                                    tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    git(repo, "worktree", "add", "-q", "-b", "manual", str(theirs))
    with pytest.raises(CheckoutError) as refused:
        run(service.complete(str(repo), path=str(theirs)))
    assert refused.value.reason is Refusal.NOT_OWNED
    with pytest.raises(CheckoutError) as refused:
        run(service.complete(str(repo), path=str(repo)))
    assert refused.value.reason is Refusal.MAIN_CHECKOUT
    with pytest.raises(CheckoutError) as refused:
        run(service.complete(str(repo), branch="nobody"))
    assert refused.value.reason is Refusal.NOT_FOUND
    assert theirs.is_dir()
    listing = run(service.list(str(repo)))
    manual = next(w for w in listing.worktrees if w.branch == "manual")
    assert not manual.created_by_clanker and manual.dirtiness is Dirtiness.CLEAN


def test_completing_from_inside_the_worktree(repo: Path, service: CheckoutService) -> None:
    created = run(service.create(str(repo), "inside"))
    (Path(created.path) / "sub").mkdir()
    # An empty directory is nothing git reports: the checkout is clean.
    done = run(service.complete(str(Path(created.path) / "sub")))
    assert done.status is CompletionStatus.REMOVED


def test_outside_a_repository(tmp_path: Path, service: CheckoutService) -> None:
    with pytest.raises(CheckoutError) as refused:
        run(service.create(str(tmp_path), "x"))
    assert refused.value.reason is Refusal.NOT_A_REPOSITORY


def test_worktreeinclude_copies_ignored_matched_files_only(
        repo: Path, service: CheckoutService) -> None:
    (repo / ".env").write_text("TOKEN=local\n")
    (repo / "build").mkdir()
    (repo / "build" / "cache.bin").write_text("c")
    (repo / "other.log").write_text("not included\n")
    (repo / ".worktreeinclude").write_text(".env\napp.py\nbuild/\n")
    git(repo, "add", ".worktreeinclude")
    git(repo, "commit", "-qm", "include")
    (repo / "app.py").write_text("print('uncommitted')\n")  # tracked: never copied
    created = run(service.create(str(repo), "with-env"))
    where = Path(created.path)
    assert (where / ".env").read_text() == "TOKEN=local\n"
    assert (where / "build" / "cache.bin").read_text() == "c"
    assert not (where / "other.log").exists()
    assert (where / "app.py").read_text() == "print('v1')\n"
    assert set(created.copies.copied) == {".env", "build"}
    assert git(where, "status", "--porcelain") == ""


def test_the_record_file_is_kept_when_corrupt(repo: Path, service: CheckoutService,
                                              tmp_path: Path) -> None:
    run(service.create(str(repo), "one"))
    (record,) = (tmp_path / "state" / "checkouts").glob("*.json")
    record.write_text('{"version": 1, "unexpected": true}')
    with pytest.raises(CheckoutError) as refused:
        run(service.create(str(repo), "two"))
    assert refused.value.reason is Refusal.STATE_UNUSABLE
    assert record.read_text() == '{"version": 1, "unexpected": true}'
    assert "two" not in branches(repo)


def test_a_worktree_recreated_at_clankers_old_path_is_not_clankers(
        repo: Path, service: CheckoutService) -> None:
    created = run(service.create(str(repo), "reused"))
    run(service.complete(str(repo), path=created.path))
    git(repo, "worktree", "add", "-q", created.path, "reused")  # by hand, outside clanker
    with pytest.raises(CheckoutError) as refused:
        run(service.complete(str(repo), path=created.path))
    assert refused.value.reason is Refusal.NOT_OWNED
    listing = run(service.list(str(repo)))
    item = next(w for w in listing.worktrees if w.path == created.path)
    assert item.listed and not item.created_by_clanker


def test_a_retry_with_another_base_is_not_the_same_request(
        repo: Path, service: CheckoutService) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    run(service.create(str(repo), "based"))
    (repo / "app.py").write_text("print('v2')\n")
    git(repo, "commit", "-qam", "v2")
    assert not run(service.create(str(repo), "based", base=first)).created
    with pytest.raises(CheckoutError) as refused:
        run(service.create(str(repo), "based", base="HEAD"))
    assert refused.value.reason is Refusal.BRANCH_EXISTS


def test_a_directory_inside_the_worktree_names_it(repo: Path, service: CheckoutService) -> None:
    created = run(service.create(str(repo), "deep"))
    inner = Path(created.path, "a", "b")
    inner.mkdir(parents=True)
    done = run(service.complete(str(repo), path=str(inner)))
    assert done.status is CompletionStatus.REMOVED and done.path == created.path


def test_a_retry_never_hands_out_a_half_checked_out_worktree(
        repo: Path, service: CheckoutService, tmp_path: Path) -> None:
    from attrs import evolve

    from clanker.checkouts.provenance import Phase, ProvenanceStore

    created = run(service.create(str(repo), "half"))
    store = ProvenanceStore(tmp_path / "state", environment="local", main_checkout=str(repo))
    record = store.find(path=created.path)
    assert record is not None
    store.put(evolve(record, phase=Phase.CREATING))  # as a create killed inside git would
    Path(created.path, "app.py").unlink()  # the checkout had not got this far
    with pytest.raises(CheckoutError) as refused:
        run(service.create(str(repo), "half"))
    assert refused.value.reason is Refusal.PATH_OCCUPIED
    assert "interrupted" in refused.value.message
    assert Path(created.path, ".gitignore").exists()  # left as it is


def test_worktreeinclude_intersects_directories_both_ways(
        repo: Path, service: CheckoutService) -> None:
    (repo / ".gitignore").write_text("build/\n*.local\n")
    (repo / "config").mkdir()
    (repo / "config" / "app.yml").write_text("tracked\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "config")
    (repo / "config" / "db.local").write_text("secret\n")
    (repo / "config" / "new.yml").write_text("untracked, not ignored\n")
    (repo / "build").mkdir()
    (repo / "build" / "keep.txt").write_text("k\n")
    (repo / "build" / "drop.txt").write_text("d\n")
    # gitignore rules: a file is re-included only when its directory is not excluded.
    (repo / ".worktreeinclude").write_text("config/*\n!config/other.local\nbuild/keep.txt\n")
    (repo / "config" / "other.local").write_text("negated\n")
    created = run(service.create(str(repo), "include-dirs"))
    where = Path(created.path)
    assert sorted(created.copies.copied) == ["build/keep.txt", "config/db.local"]
    assert not (where / "build" / "drop.txt").exists()
    assert not (where / "config" / "new.yml").exists()
    assert not (where / "config" / "other.local").exists()
    assert (where / "config" / "app.yml").read_text() == "tracked\n"


def test_an_unavailable_trash_keeps_the_checkout(repo: Path, tmp_path: Path, home: Path) -> None:
    def no_trash(path: str) -> None:
        raise OSError(5, "Input/output error")

    service = CheckoutService(environment=LocalEnvironment(), state_dir=tmp_path / "state",
                              trash=no_trash)
    created = run(service.create(str(repo), "stuck"))
    Path(created.path, "x.log").write_text("x\n")
    with pytest.raises(CheckoutError) as refused:
        run(service.complete(str(repo), path=created.path, discard_ignored=True,
                             delete_branch=True))
    assert refused.value.reason is Refusal.REMOVAL_FAILED
    assert "it is kept" in refused.value.message
    assert Path(created.path, "x.log").exists() and created.path in listed_paths(repo)
    assert "stuck" in branches(repo)
    item = next(w for w in run(service.list(str(repo))).worktrees if w.path == created.path)
    assert item.created_by_clanker and item.dirtiness is Dirtiness.IGNORED_ONLY
