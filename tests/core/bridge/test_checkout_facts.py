"""``clanker_context``'s checkout facts are kept between calls, and are always what git
says now: every change git (or a person) makes to where the branch or the repository
is shows in the next answer."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from clanker.bridge import shipped
from clanker.bridge.declaration import Caller, PeerAgent
from clanker.environment import HostFiles
from clanker.environment.local import LocalEnvironment
from clanker.execution import CommandRequest, CommandResult

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid",
       "-c", "init.defaultBranch=main", "-c", "advice.detachedHead=false"]


class Host:
    """This machine's files and commands, counting the commands."""

    def __init__(self) -> None:
        self._environment = LocalEnvironment()
        self.commands = 0

    def peers(self) -> tuple[PeerAgent, ...]:
        return ()

    def notify(self, message: str) -> int:
        return 0

    async def run_command(self, request: CommandRequest) -> CommandResult:
        self.commands += 1
        return await self._environment.executor.run(request)

    @property
    def files(self) -> HostFiles:
        return self._environment.files


def caller(launch_dir: Path, host: Host) -> Caller:
    return Caller(terminal="t-1", harness="fake-agent", workspace=str(launch_dir),
                  launch_dir=str(launch_dir), environment="local", granted=("clanker_context",),
                  host=host)


def git(*args: str, cwd: Path, check: bool = True) -> None:
    subprocess.run([*GIT, *args], cwd=cwd, check=check, capture_output=True, timeout=60)


def fresh(who: Caller) -> tuple[Any, ...]:
    """What git says, asked now (nothing kept, and not counted)."""
    from attrs import evolve

    kind, branch, top, _ = asyncio.run(shipped._ask_git(evolve(who, host=Host())))
    return kind, branch, top


def kept(facts: shipped._Checkouts, who: Caller) -> tuple[Any, ...]:
    return asyncio.run(facts.facts(who))[:3]


def test_the_answer_is_kept_until_git_changes_something(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "sub" / "dir").mkdir(parents=True)
    git("init", "-q", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", "one", cwd=repo)
    host = Host()
    me = caller(repo / "sub" / "dir", host)
    facts = shipped._Checkouts(8)

    def check(expected: tuple[Any, ...], *, asks_git: bool) -> None:
        before = host.commands
        assert kept(facts, me) == expected
        assert (host.commands > before) is asks_git
        assert fresh(me) == expected

    real = os.path.realpath(repo)
    check(("repository", "main", real), asks_git=True)
    check(("repository", "main", real), asks_git=False)
    git("switch", "-q", "-c", "feature", cwd=repo)
    check(("repository", "feature", real), asks_git=True)
    git("checkout", "-q", "--detach", cwd=repo)
    check(("repository", None, real), asks_git=True)
    check(("repository", None, real), asks_git=False)
    git("switch", "-q", "main", cwd=repo)
    check(("repository", "main", real), asks_git=True)
    # HEAD rewritten in place, same size and inode: its content is compared, not a time.
    head = repo / ".git" / "HEAD"
    identity = head.stat().st_ino
    head.write_text("ref: refs/heads/nain\n")
    assert head.stat().st_ino == identity
    check(("repository", "nain", real), asks_git=True)
    git("switch", "-q", "main", cwd=repo)
    # A repository inside, between the launch directory and the checkout root.
    git("init", "-q", "-b", "inner", cwd=repo / "sub")
    check(("repository", "inner", os.path.realpath(repo / "sub")), asks_git=True)
    shutil.rmtree(repo / "sub" / ".git")
    check(("repository", "main", real), asks_git=True)
    # A linked worktree, and its own branch changes.
    git("worktree", "add", "-q", "-b", "side", str(tmp_path / "wt"), cwd=repo)
    (tmp_path / "wt" / "sub" / "dir").mkdir(parents=True)
    other = caller(tmp_path / "wt" / "sub" / "dir", host)
    wt = os.path.realpath(tmp_path / "wt")
    assert kept(facts, other) == ("worktree", "side", wt) == fresh(other)
    git("switch", "-q", "-c", "side2", cwd=tmp_path / "wt")
    assert kept(facts, other) == ("worktree", "side2", wt) == fresh(other)
    git("worktree", "remove", "--force", str(tmp_path / "wt"), cwd=repo)
    # No repository any more, then a new one without commits.
    shutil.rmtree(repo / ".git")
    check(("none", None, None), asks_git=True)
    check(("none", None, None), asks_git=False)
    git("init", "-q", "-b", "trunk", cwd=repo)
    check(("repository", "trunk", real), asks_git=True)
    check(("repository", "trunk", real), asks_git=False)


def test_what_is_kept_is_bounded_and_per_launch_directory(tmp_path: Path) -> None:
    host = Host()
    facts = shipped._Checkouts(2)
    callers = [caller(tmp_path / str(n), host) for n in range(4)]
    for who in callers:
        Path(who.launch_dir).mkdir()
        assert kept(facts, who) == ("none", None, None)
    assert len(facts._kept) == 2
    before = host.commands
    assert kept(facts, callers[-1]) == ("none", None, None)
    assert host.commands == before


def test_git_missing_is_never_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    host = Host()
    facts = shipped._Checkouts(8)
    who = caller(tmp_path, host)
    assert kept(facts, who) == ("unknown", None, None)
    assert facts._kept == {}


class CheckoutChanges(RuleBasedStateMachine):
    """Random changes to a repository and its worktree; the kept answer is git's."""

    @initialize()
    def start(self) -> None:
        import tempfile

        self.root = Path(tempfile.mkdtemp(prefix="ck-facts-"))
        self.repo = self.root / "repo"
        (self.repo / "a" / "b").mkdir(parents=True)
        git("init", "-q", cwd=self.repo)
        git("commit", "-q", "--allow-empty", "-m", "one", cwd=self.repo)
        self.host = Host()
        self.facts = shipped._Checkouts(8)
        self.callers = [caller(self.repo / "a" / "b", self.host),
                        caller(self.repo / "a", self.host)]

    def teardown(self) -> None:
        shutil.rmtree(getattr(self, "root", "/nonexistent"), ignore_errors=True)

    @rule(branch=st.sampled_from(["main", "x", "y"]))
    def switch(self, branch: str) -> None:
        if (self.repo / ".git").is_dir():
            git("switch", "-q", "-C", branch, cwd=self.repo, check=False)

    @rule()
    def detach(self) -> None:
        if (self.repo / ".git").is_dir():
            git("checkout", "-q", "--detach", cwd=self.repo, check=False)

    @rule(where=st.sampled_from(["a", "a/b"]))
    def nest(self, where: str) -> None:
        if not (self.repo / where / ".git").exists():
            git("init", "-q", "-b", "nested", cwd=self.repo / where)

    @rule(where=st.sampled_from(["a", "a/b", "."]))
    def unnest(self, where: str) -> None:
        shutil.rmtree(self.repo / where / ".git", ignore_errors=True)

    @rule()
    def reinit(self) -> None:
        if not (self.repo / ".git").exists():
            git("init", "-q", "-b", "again", cwd=self.repo)

    @invariant()
    def kept_is_what_git_says(self) -> None:
        for who in self.callers:
            assert kept(self.facts, who) == fresh(who)


TestCheckoutChanges = CheckoutChanges.TestCase
TestCheckoutChanges.settings = settings(
    max_examples=5, stateful_step_count=8, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
