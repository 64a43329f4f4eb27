"""Where clanker puts the worktree of a branch: one deterministic directory per branch.

``<repo>-worktrees/<slug>-<hash>`` beside the main checkout. The slug makes the
name readable; the hash (of the full branch name, so ``feature/foo`` and
``feature-foo`` never share a directory) makes it injective. The same branch
always gives the same directory, which is what lets a removed worktree be
attributed, and later recreated, from its path alone.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Final

__all__ = [
    "CONTAINER_SUFFIX",
    "HASH_LENGTH",
    "MAX_BRANCH_LENGTH",
    "SLUG_LENGTH",
    "container_of",
    "worktree_directory_name",
    "worktree_path",
]

CONTAINER_SUFFIX: Final = "-worktrees"
MAX_BRANCH_LENGTH: Final = 200
SLUG_LENGTH: Final = 48
HASH_LENGTH: Final = 12
# Portable file-name characters only: no separator, no shell or glob
# metacharacter, nothing a case-folding or Unicode-normalizing file system
# could merge (the hash tells apart what folding would).
_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")


def worktree_directory_name(branch: str) -> str:
    """Return the directory name for ``branch``: ``<slug>-<12 hex digits>``.

    The slug is the branch with every run of other characters turned into
    ``-``, starting and ending with a letter or digit (never a hidden or
    option-like name), at most 48 characters; the digits are the start of the SHA-256 of
    the full branch name in UTF-8.
    """
    digest = hashlib.sha256(branch.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_LENGTH]
    slug = _UNSAFE.sub("-", branch).strip("._-")[:SLUG_LENGTH].rstrip("._-")
    return f"{slug}-{digest}" if slug else digest


def container_of(main_checkout: str) -> str:
    """Return ``<repo>-worktrees``, the sibling directory of the main checkout."""
    main = os.path.normpath(main_checkout)
    return os.path.join(os.path.dirname(main), os.path.basename(main) + CONTAINER_SUFFIX)


def worktree_path(main_checkout: str, branch: str) -> str:
    """Return the absolute path clanker uses for ``branch``'s worktree."""
    return os.path.join(container_of(main_checkout), worktree_directory_name(branch))
