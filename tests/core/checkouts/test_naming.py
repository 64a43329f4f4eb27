"""A branch's worktree directory: deterministic, injective through the hash, safe to use."""

from __future__ import annotations

import hashlib
import os
import re

from hypothesis import given
from hypothesis import strategies as st

from clanker.checkouts.naming import (
    HASH_LENGTH,
    SLUG_LENGTH,
    container_of,
    worktree_directory_name,
    worktree_path,
)

branch_names = st.text(min_size=1, max_size=200)
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@given(branch_names)
def test_the_name_is_deterministic_and_safe(branch: str) -> None:
    name = worktree_directory_name(branch)
    assert name == worktree_directory_name(branch)
    assert _SAFE.fullmatch(name), name
    assert len(name) <= SLUG_LENGTH + 1 + HASH_LENGTH
    digest = hashlib.sha256(branch.encode("utf-8", "surrogatepass")).hexdigest()
    assert name.endswith(digest[:HASH_LENGTH])


@given(branch_names, branch_names)
def test_different_branches_never_share_a_directory(a: str, b: str) -> None:
    assert (worktree_directory_name(a) == worktree_directory_name(b)) == (a == b)


def test_names_that_fold_together_stay_apart() -> None:
    names = {worktree_directory_name(b) for b in
             ("feature/foo", "feature-foo", "feature_foo", "Feature/Foo", "feature//foo")}
    assert len(names) == 5
    assert worktree_directory_name("feature/foo").startswith("feature-foo-")


@given(branch_names)
def test_the_path_is_one_component_inside_the_container(branch: str) -> None:
    main = "/home/me/my project"
    path = worktree_path(main, branch)
    assert os.path.dirname(path) == container_of(main) == "/home/me/my project-worktrees"
    assert os.path.basename(path) not in ("", ".", "..")
