"""How dirty a checkout is, submodules included, from ``git status`` alone.

One ``status --porcelain=v1 -z --ignored=matching`` per repository: untracked
and ignored directories stay collapsed (a ``node_modules`` is one entry, not
a hundred thousand), submodule changes are never hidden by configuration
(``--ignore-submodules=none``). Initialized submodules are inspected in turn,
breadth first, at most :data:`MAX_REPOSITORIES` repositories in all.
"""

from __future__ import annotations

import os
from typing import Final

from clanker.checkouts.git import Git
from clanker.checkouts.types import MAX_EXAMPLES, ChangeCategory, Changes, CheckoutError, Refusal
from clanker.errors import ErrorKind, HarnessCapabilityError

__all__ = ["MAX_REPOSITORIES", "inspect_checkout"]

MAX_REPOSITORIES: Final = 128


class _Tally:
    def __init__(self) -> None:
        self.count = 0
        self.examples: list[str] = []

    def add(self, path: str) -> None:
        self.count += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(path)

    def freeze(self) -> ChangeCategory:
        return ChangeCategory(self.count, tuple(self.examples))


async def _status(git: Git, repository: str) -> list[str]:
    try:
        result = await git.run(repository, "status", "--porcelain=v1", "-z", "--no-renames",
                               "--untracked-files=normal", "--ignored=matching",
                               "--ignore-submodules=none")
    except HarnessCapabilityError as exc:
        if exc.kind is ErrorKind.OUTPUT_LIMIT:
            raise CheckoutError(Refusal.GIT_FAILED, f"{repository} has more changes than "
                                "clanker inspects (over 1 MiB of status)") from exc
        raise
    if result.exit_code != 0:
        raise CheckoutError(Refusal.GIT_FAILED, f"git could not inspect {repository}")
    return [entry for entry in result.stdout.split("\0") if entry]


async def _submodules(git: Git, repository: str) -> list[str]:
    """The relative paths of the submodules ``.gitmodules`` declares (none without one)."""
    if not os.path.isfile(os.path.join(repository, ".gitmodules")):
        return []
    result = await git.run(repository, "config", "--file", ".gitmodules", "--null",
                           "--get-regexp", r"^submodule\..*\.path$")
    if result.exit_code == 1:  # no match
        return []
    if result.exit_code != 0:
        raise CheckoutError(Refusal.GIT_FAILED, f"git could not read {repository}/.gitmodules")
    paths = []
    for record in result.stdout.split("\0"):
        _, _, path = record.partition("\n")
        if path and not os.path.isabs(path) and ".." not in path.split("/"):
            paths.append(path)
    return paths


async def inspect_checkout(git: Git, checkout: str) -> Changes:
    """Return every change in ``checkout`` and its initialized submodules.

    Raises :class:`CheckoutError` (``too-many-submodules``) past
    :data:`MAX_REPOSITORIES` repositories: an inspection that stopped short
    would call something clean that it never looked at.
    """
    tallies = {name: _Tally() for name in ("staged", "tracked", "untracked", "ignored")}
    queue: list[tuple[str, str]] = [(checkout, "")]
    seen = 0
    submodules = False
    while queue:
        repository, prefix = queue.pop(0)
        seen += 1
        if seen > MAX_REPOSITORIES:
            raise CheckoutError(Refusal.TOO_MANY_SUBMODULES,
                                f"{checkout} holds more than {MAX_REPOSITORIES} repositories; "
                                "clanker does not inspect, so never removes, it")
        for entry in await _status(git, repository):
            code, path = entry[:2], prefix + entry[3:]
            if code == "??":
                tallies["untracked"].add(path)
            elif code == "!!":
                tallies["ignored"].add(path)
            else:
                if code[0] != " ":
                    tallies["staged"].add(path)
                if code[1] != " ":
                    tallies["tracked"].add(path)
        for relative in await _submodules(git, repository):
            inner = os.path.join(repository, relative)
            # Only a checked-out submodule has files to lose; an uninitialized one is a
            # gitlink in the index, which the parent's status already covers.
            if await git.toplevel(inner) == os.path.realpath(inner):
                submodules = True
                queue.append((inner, f"{prefix}{relative}/"))
    return Changes(staged=tallies["staged"].freeze(), tracked=tallies["tracked"].freeze(),
                   untracked=tallies["untracked"].freeze(), ignored=tallies["ignored"].freeze(),
                   repositories=seen, submodules=submodules)
