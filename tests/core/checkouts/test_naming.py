"""A branch's worktree directory: deterministic, injective through the hash, safe to use."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clanker.checkouts.naming import (
    HASH_LENGTH,
    SLUG_LENGTH,
    container_of,
    worktree_directory_name,
    worktree_path,
)
from clanker.checkouts.service import CheckoutService
from clanker.checkouts.types import CheckoutError, Refusal
from clanker.environment.local import LocalEnvironment

branch_names = st.text(min_size=1, max_size=200)
# No deadline: a loaded machine must never turn a slow example into a failure.
QUICK = settings(deadline=None, max_examples=200)
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@QUICK
@given(branch_names)
def test_the_name_is_deterministic_and_safe(branch: str) -> None:
    name = worktree_directory_name(branch)
    assert name == worktree_directory_name(branch)
    assert _SAFE.fullmatch(name), name
    assert len(name) <= SLUG_LENGTH + 1 + HASH_LENGTH
    digest = hashlib.sha256(branch.encode("utf-8", "surrogatepass")).hexdigest()
    assert name.endswith(digest[:HASH_LENGTH])


@QUICK
@given(branch_names, branch_names)
def test_different_branches_never_share_a_directory(a: str, b: str) -> None:
    assert (worktree_directory_name(a) == worktree_directory_name(b)) == (a == b)


def test_names_that_fold_together_stay_apart() -> None:
    names = {worktree_directory_name(b) for b in
             ("feature/foo", "feature-foo", "feature_foo", "Feature/Foo", "feature//foo")}
    assert len(names) == 5
    assert worktree_directory_name("feature/foo").startswith("feature-foo-")


@QUICK
@given(branch_names)
def test_the_path_is_one_component_inside_the_container(branch: str) -> None:
    main = "/home/me/my project"
    path = worktree_path(main, branch)
    assert os.path.dirname(path) == container_of(main) == "/home/me/my project-worktrees"
    assert os.path.basename(path) not in ("", ".", "..")


def test_the_branch_check_agrees_with_git(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Whatever the text, the service accepts exactly the names git accepts unchanged,
    and refuses the rest with ``invalid-branch``, never with anything else."""
    repo = tmp_path_factory.mktemp("names")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    service = CheckoutService(environment=LocalEnvironment(),
                              state_dir=tmp_path_factory.mktemp("state"))

    @settings(max_examples=60, deadline=None)
    @given(st.one_of(st.text(min_size=1, max_size=30),
                     st.from_regex(r"[a-z]{1,8}(/[a-z0-9._-]{1,8}){0,3}", fullmatch=True)))
    def check(name: str) -> None:
        if "\0" in name:
            git_says = False
        else:
            done = subprocess.run(["git", "check-ref-format", "--branch", name],
                                  capture_output=True, text=True, check=False)
            git_says = done.returncode == 0 and done.stdout.rstrip("\n") == name
        try:
            asyncio.run(service.validate_branch(str(repo), name))
            accepted = True
        except CheckoutError as refused:
            assert refused.reason is Refusal.INVALID_BRANCH
            accepted = False
        assert accepted == (git_says and not name.startswith("-")), name

    check()
