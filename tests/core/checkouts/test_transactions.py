"""Concurrency and cancellation: one request wins, and nothing half-done is reported done.

Cancellation is injected at each git command of a transaction, just before it
runs and just after it returned (git itself is real), and the state that is
left must be one the next request completes correctly.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from clanker.checkouts.provenance import Phase, ProvenanceStore
from clanker.checkouts.service import CheckoutService, send_to_trash
from clanker.checkouts.types import CheckoutError, CompletionStatus, Refusal
from clanker.descriptor import Transport
from clanker.environment.local import LocalEnvironment
from clanker.execution import CommandRequest, CommandResult
from tests.core.checkouts.conftest import git


class _Cancelling:
    """The local executor, cancelling the caller at its ``at``-th command."""

    def __init__(self, at: int, after: bool) -> None:
        self.inner = LocalEnvironment().executor
        self.at, self.after, self.count = at, after, 0

    async def run(self, request: CommandRequest) -> CommandResult:
        self.count += 1
        if self.count == self.at and not self.after:
            raise asyncio.CancelledError
        result = await self.inner.run(request)
        if self.count == self.at and self.after:
            raise asyncio.CancelledError
        return result


class _Environment:
    name = "local"
    transport = Transport.LOCAL

    def __init__(self, executor: Any) -> None:
        self.executor = executor


def _service(tmp_path: Path, executor: Any = None) -> CheckoutService:
    environment: Any = LocalEnvironment() if executor is None else _Environment(executor)
    return CheckoutService(environment=environment, state_dir=tmp_path / "state")


def _count(tmp_path: Path, work: Any) -> int:
    counter = _Cancelling(at=0, after=False)
    asyncio.run(work(_service(tmp_path, counter)))
    return counter.count


def _listed(repo: Path) -> dict[str, str]:
    out = git(repo, "worktree", "list", "--porcelain")
    found: dict[str, str] = {}
    path = ""
    for line in out.splitlines():
        if line.startswith("worktree "):
            path = line.removeprefix("worktree ")
            found[path] = ""
        elif line.startswith("branch "):
            found[path] = line.removeprefix("branch refs/heads/")
    return found


def _records_agree_with_git(tmp_path: Path, repo: Path) -> None:
    store = ProvenanceStore(tmp_path / "state", environment="local", main_checkout=str(repo))
    listed = _listed(repo)
    for record in store.records():
        if record.phase is Phase.ACTIVE:
            assert listed.get(record.path) == record.branch, record
            assert os.path.isdir(record.path)
        if record.phase is Phase.REMOVED:
            assert record.path not in listed and not os.path.lexists(record.path), record


STEPS_CREATE = 9  # the git commands of a create with a .worktreeinclude; checked below


def test_the_step_count_covers_every_command(tmp_path: Path, repo: Path) -> None:
    (repo / ".worktreeinclude").write_text(".env\n")
    (repo / ".env").write_text("A=1\n")
    steps = _count(tmp_path, lambda s: s.create(str(repo), "counted"))
    assert steps == STEPS_CREATE  # a changed count must change the matrix too


@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
@pytest.mark.parametrize("at", range(1, STEPS_CREATE + 1))
def test_a_cancelled_create_is_finished_by_the_next(tmp_path: Path, repo: Path, trash: Path,
                                                     at: int, after: bool) -> None:
    (repo / ".worktreeinclude").write_text(".env\n")
    (repo / ".env").write_text("A=1\n")
    cancelling = _service(tmp_path, _Cancelling(at, after))
    try:
        result = asyncio.run(cancelling.create(str(repo), "topic"))
    except asyncio.CancelledError:
        result = None
    if result is not None:  # fewer commands than ``at``: it simply finished
        assert _listed(repo)[result.path] == "topic"
    _records_agree_with_git(tmp_path, repo)

    again = asyncio.run(_service(tmp_path).create(str(repo), "topic"))
    assert _listed(repo)[again.path] == "topic"
    assert Path(again.path, ".env").read_text() == "A=1\n"
    _records_agree_with_git(tmp_path, repo)
    # The copied .env is an ignored file: only discard_ignored completes the checkout.
    done = asyncio.run(_service(tmp_path).complete(str(repo), path=again.path,
                                                   delete_branch=True, discard_ignored=True))
    assert done.status is CompletionStatus.REMOVED and done.branch_deleted
    _records_agree_with_git(tmp_path, repo)


STEPS_COMPLETE = 11


@pytest.mark.parametrize("discard", [False, True], ids=["clean", "discard-ignored"])
@pytest.mark.parametrize("after", [False, True], ids=["before", "after"])
@pytest.mark.parametrize("at", range(1, STEPS_COMPLETE + 1))
def test_a_cancelled_complete_is_never_reported_and_the_next_finishes_it(
        tmp_path: Path, repo: Path, trash: Path, at: int, after: bool, discard: bool) -> None:
    created = asyncio.run(_service(tmp_path).create(str(repo), "topic"))
    if discard:
        Path(created.path, "debug.log").write_text("x\n")
    cancelling = _service(tmp_path, _Cancelling(at, after))
    try:
        asyncio.run(cancelling.complete(str(repo), path=created.path, delete_branch=True,
                                        discard_ignored=discard))
        finished = True
    except asyncio.CancelledError:
        finished = False
    _records_agree_with_git(tmp_path, repo)
    if not finished:
        # Whatever the cancelled request got to, a present checkout is still listed.
        assert os.path.isdir(created.path) <= (created.path in _listed(repo))
    done = asyncio.run(_service(tmp_path).complete(str(repo), path=created.path,
                                                   delete_branch=True, discard_ignored=discard))
    assert done.done
    assert created.path not in _listed(repo) and not os.path.lexists(created.path)
    assert "topic" not in git(repo, "branch", "--format=%(refname:short)").split()
    _records_agree_with_git(tmp_path, repo)


def test_the_step_counts_cover_a_complete(tmp_path: Path, repo: Path, trash: Path) -> None:
    created = asyncio.run(_service(tmp_path).create(str(repo), "counted"))
    Path(created.path, "debug.log").write_text("x\n")
    steps = _count(tmp_path, lambda s: s.complete(str(repo), path=created.path,
                                                  delete_branch=True, discard_ignored=True))
    assert steps == STEPS_COMPLETE


def test_a_cancel_while_the_trash_moves_the_checkout_waits_for_the_move(
        tmp_path: Path, repo: Path, trash: Path) -> None:
    created = asyncio.run(_service(tmp_path).create(str(repo), "topic"))
    Path(created.path, "debug.log").write_text("x\n")

    async def scenario() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()

        def trash_then_cancel(path: str) -> None:
            loop.call_soon_threadsafe(task.cancel)
            send_to_trash(path)

        service = CheckoutService(environment=LocalEnvironment(),
                                  state_dir=tmp_path / "state", trash=trash_then_cancel)
        await service.complete(str(repo), path=created.path, discard_ignored=True)

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(scenario())
    assert not os.path.lexists(created.path) and (trash / Path(created.path).name).is_dir()
    done = asyncio.run(_service(tmp_path).complete(str(repo), path=created.path))
    assert done.status is CompletionStatus.ALREADY_GONE
    assert created.path not in _listed(repo)


async def _both(*coroutines: Any) -> list[Any]:
    return await asyncio.gather(*coroutines, return_exceptions=True)


def test_concurrent_creates_of_one_checkout_one_wins(tmp_path: Path, repo: Path) -> None:
    a, b = _service(tmp_path), _service(tmp_path)
    results = asyncio.run(_both(a.create(str(repo), "race"), b.create(str(repo), "race")))
    made = [r for r in results if not isinstance(r, BaseException) and r.created]
    others = [r for r in results if r not in made]
    assert len(made) == 1 and len(others) == 1
    other = others[0]
    if isinstance(other, CheckoutError):
        assert other.reason is Refusal.BUSY
    else:
        assert not other.created and other.path == made[0].path
    assert _listed(repo)[made[0].path] == "race"


def test_concurrent_completes_of_one_checkout_one_wins(tmp_path: Path, repo: Path) -> None:
    created = asyncio.run(_service(tmp_path).create(str(repo), "race"))
    a, b = _service(tmp_path), _service(tmp_path)
    results = asyncio.run(_both(a.complete(str(repo), path=created.path),
                                b.complete(str(repo), path=created.path)))
    removed = [r for r in results if not isinstance(r, BaseException)
               and r.status is CompletionStatus.REMOVED]
    assert len(removed) == 1
    (other,) = [r for r in results if r is not removed[0]]
    if isinstance(other, CheckoutError):
        assert other.reason is Refusal.BUSY
    else:
        assert other.status is CompletionStatus.ALREADY_GONE
    assert created.path not in _listed(repo)


def test_a_create_while_its_complete_runs_is_told_busy(tmp_path: Path, repo: Path) -> None:
    created = asyncio.run(_service(tmp_path).create(str(repo), "race"))
    store = ProvenanceStore(tmp_path / "state", environment="local", main_checkout=str(repo))
    with store.checkout_lock(Path(created.path).name, "held"):
        for attempt in (_service(tmp_path).create(str(repo), "race"),
                        _service(tmp_path).complete(str(repo), path=created.path)):
            with pytest.raises(CheckoutError) as refused:
                asyncio.run(attempt)
            assert refused.value.reason is Refusal.BUSY
    assert _listed(repo)[created.path] == "race"
