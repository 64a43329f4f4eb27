"""After-turn pending moves: a create from a harness that moves only once its turn has
ended creates the checkout at once and schedules one move per terminal, which the
attention broker's own settlement of the root turn triggers or cancels.

Real git in a temporary repository, the real :class:`~clanker.attention.broker.Broker`
fed wire envelopes (what a harness's attention adapter delivers), the real
:class:`~clanker.grid.isolation.Isolation`; the launcher is a double that records
the instruction it is sent and answers it as a relayed launch does
(:class:`~clanker.grid.protocol.MoveOutcome`)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from clanker.attention.broker import Broker, Revision
from clanker.attention.envelope import parse_envelope
from clanker.bridge.credentials import Binding
from clanker.bridge.declaration import CapabilityRefused
from clanker.grid.completion import Completion
from clanker.grid.isolation import Isolation
from clanker.grid.protocol import MoveOutcome
from tests.core.grid.conftest import root
from tests.helpers import committed_repository

TERMINAL = "t-after"
SESSION = "019b0c1e-0000-7000-8000-00000000a11e"


def git(cwd: Path | str, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                          check=True, timeout=60).stdout


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / ".local" / "share").mkdir(parents=True)
    for name, value in (("HOME", str(home)), ("XDG_DATA_HOME", str(home / ".local/share")),
                        ("GIT_CONFIG_GLOBAL", str(home / ".gitconfig")),
                        ("GIT_CONFIG_NOSYSTEM", "1"), ("GIT_AUTHOR_NAME", "Test"),
                        ("GIT_AUTHOR_EMAIL", "test@example.invalid"),
                        ("GIT_COMMITTER_NAME", "Test"),
                        ("GIT_COMMITTER_EMAIL", "test@example.invalid")):
        monkeypatch.setenv(name, value)
    return committed_repository(tmp_path / "repo")


class Launcher:
    """The terminal's launcher: records each move it is asked for, answers ``answer``."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str]] = []
        self.answer = MoveOutcome(moved=True)
        self.listening = True

    async def move(self, terminal: str, target: str, session: str) -> MoveOutcome:
        self.asked.append((terminal, target, session))
        return self.answer


class BrokerIsolation:
    """What an isolation asks of the broker that feeds it: each published revision is
    observed, and a terminal's root session and revision are read from the broker."""

    broker: Broker
    isolation: Isolation | None

    def _published(self, revision: Revision) -> None:
        if self.isolation is not None:
            self.isolation.observe(revision)

    def _session_of(self, terminal: str) -> str | None:
        revision = self.broker.snapshot(terminal)
        return None if revision is None or revision.snapshot is None \
            else revision.snapshot.root_session_id

    def _revision_of(self, terminal: str) -> int:
        revision = self.broker.snapshot(terminal)
        return 0 if revision is None else revision.revision


class World(BrokerIsolation):
    """A broker, the isolation it feeds, and what the person was told."""

    def __init__(self, state: Path, launcher: Launcher, *, after_turn: bool = True) -> None:
        self.notices: list[str] = []
        self.isolation: Isolation | None = None
        self.broker = Broker(listener=self._published)
        self.broker.register(TERMINAL)
        self.launcher = launcher
        self.isolation_state = state
        self.isolation = Isolation(
            state_dir=state, move=launcher.move, session_of=self._session_of,
            listening=lambda terminal: launcher.listening,
            after_turn=lambda binding: after_turn, revision_of=self._revision_of,
            notify=lambda binding, message: self.notices.append(message))

    @property
    def outcomes(self) -> list[str]:
        """What the person was told, past the notice that a move is scheduled."""
        return [notice for notice in self.notices if " scheduled: " not in notice]

    def deliver(self, event: str, **fields: object) -> None:
        self.broker.apply(TERMINAL, parse_envelope(root(event, SESSION, **fields)))

    async def create(self, caller: Binding, branch: str) -> dict[str, object]:
        """Ask for a checkout as the bridge does: the call is a task of its own (the
        transactions track it, and :meth:`settled` waits for what they track)."""
        assert self.isolation is not None
        return await asyncio.ensure_future(self.isolation.create(caller, branch))

    async def settled(self) -> None:
        """Let the triggered move's task run to its end."""
        assert self.isolation is not None
        await self.isolation.transactions.settle(30)


def binding(repo: Path) -> Binding:
    return Binding(terminal=TERMINAL, harness="codex", workspace=None, launch_dir=str(repo),
                   environment="local", launcher_pid=os.getpid())


def worktrees(repo: Path) -> dict[str, str]:
    found, path = {}, ""
    for line in git(repo, "worktree", "list", "--porcelain").splitlines():
        if line.startswith("worktree "):
            path = line.removeprefix("worktree ")
        elif line.startswith("branch "):
            found[path] = line.removeprefix("branch refs/heads/")
    return found


def _started(world: World) -> None:
    world.deliver("session_started")
    world.deliver("turn_started", turnId="turn-1")


def test_one_pending_move_per_terminal_and_the_checkout_at_once(
        tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        world = World(tmp_path / "state", Launcher())
        _started(world)
        assert world.isolation is not None
        first = await world.create(binding(repo), "feature/x")
        assert first["status"] == "scheduled"
        assert worktrees(repo)[str(first["path"])] == "feature/x"  # created at once
        again = await world.create(binding(repo), "feature/y")
        assert again["status"] == "already-scheduled" and again["path"] == first["path"]
        assert "feature/y" not in git(repo, "branch", "--format=%(refname:short)").split()
        assert list(world.isolation.pending.all()) == [TERMINAL]
        assert world.launcher.asked == []  # the move waits for the turn
        assert world.notices == [f"isolated checkout move scheduled: {first['path']} "
                                 f"(branch feature/x) is created; the agent moves there "
                                 f"once its turn ends"]

    asyncio.run(scenario())


def test_the_completed_root_turn_triggers_the_move(tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        world = World(tmp_path / "state", Launcher())
        _started(world)
        assert world.isolation is not None
        created = await world.create(binding(repo), "feature/x")
        world.deliver("input_requested", turnId="turn-1", inputId="i1")  # not a boundary
        await asyncio.sleep(0)
        assert world.launcher.asked == []
        world.deliver("turn_completed", turnId="turn-1")
        await world.settled()
        assert world.launcher.asked == [(TERMINAL, str(created["path"]), SESSION)]
        assert world.isolation.pending.all() == {}
        assert world.outcomes == [f"isolated checkout ready: the agent continues in "
                                 f"{created['path']} (branch feature/x)"]

    asyncio.run(scenario())


def test_a_turn_completed_before_the_request_does_not_trigger(
        tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        world = World(tmp_path / "state", Launcher())
        _started(world)
        world.deliver("turn_completed", turnId="turn-1")
        assert world.isolation is not None
        await world.create(binding(repo), "feature/x")  # asked while idle
        world.deliver("location_changed", cwd=str(repo))  # a newer revision, no outcome
        await world.settled()
        assert world.launcher.asked == [] and TERMINAL in world.isolation.pending.all()
        world.deliver("turn_started", turnId="turn-2")
        world.deliver("turn_completed", turnId="turn-2")
        await world.settled()
        assert len(world.launcher.asked) == 1

    asyncio.run(scenario())


@pytest.mark.parametrize(("event", "why"), [
    ("turn_interrupted", "the turn was interrupted"),
    ("turn_failed", "the turn failed"),
    ("session_ended", "the session ended"),
])
def test_an_interrupt_a_failure_or_the_end_cancels_and_keeps_the_checkout(
        tmp_path: Path, repo: Path, event: str, why: str) -> None:
    async def scenario() -> None:
        world = World(tmp_path / "state", Launcher())
        _started(world)
        assert world.isolation is not None
        created = await world.create(binding(repo), "feature/x")
        fields = {} if event == "session_ended" else {"turnId": "turn-1"}
        world.deliver(event, **fields)
        await world.settled()
        assert world.launcher.asked == []
        assert world.isolation.pending.all() == {}
        assert worktrees(repo)[str(created["path"])] == "feature/x"  # kept
        [notice] = world.outcomes
        assert notice.startswith(f"isolated checkout move cancelled ({why})")
        assert str(created["path"]) in notice
        # A later completed turn moves nothing: the move was cancelled.
        world.deliver("session_started")
        world.deliver("turn_started", turnId="turn-3")
        world.deliver("turn_completed", turnId="turn-3")
        await world.settled()
        assert world.launcher.asked == []

    asyncio.run(scenario())


def test_an_exited_agent_cancels(tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        world = World(tmp_path / "state", Launcher())
        _started(world)
        assert world.isolation is not None
        await world.create(binding(repo), "feature/x")
        world.broker.retire(TERMINAL)
        assert world.isolation.pending.all() == {}
        assert world.outcomes[0].startswith("isolated checkout move cancelled (the agent exited)")

    asyncio.run(scenario())


def test_the_trigger_revalidates_the_checkout(tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        world = World(tmp_path / "state", Launcher())
        _started(world)
        assert world.isolation is not None
        created = await world.create(binding(repo), "feature/x")
        # Behind clanker's back the worktree is switched to another branch.
        git(created["path"], "switch", "-q", "-c", "other")
        world.deliver("turn_completed", turnId="turn-1")
        await world.settled()
        assert world.launcher.asked == []
        [notice] = world.outcomes
        assert "no longer on branch feature/x" in notice and "kept" in notice

    asyncio.run(scenario())


def test_the_trigger_revalidates_the_checkout_exists(tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        world = World(tmp_path / "state", Launcher())
        _started(world)
        assert world.isolation is not None
        created = await world.create(binding(repo), "feature/x")
        git(repo, "worktree", "remove", str(created["path"]))
        world.deliver("turn_completed", turnId="turn-1")
        await world.settled()
        assert world.launcher.asked == []
        assert "is gone" in world.outcomes[0]

    asyncio.run(scenario())


def test_the_trigger_revalidates_the_terminal(tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        launcher = Launcher()
        world = World(tmp_path / "state", launcher)
        _started(world)
        assert world.isolation is not None
        await world.create(binding(repo), "feature/x")
        launcher.listening = False  # the launcher no longer listens for moves
        world.deliver("turn_completed", turnId="turn-1")
        await world.settled()
        assert launcher.asked == []
        assert "no longer attached" in world.outcomes[0]

    asyncio.run(scenario())


@pytest.mark.parametrize(("why", "expected"), [
    ("exited", "isolated checkout move not made (exited): the agent continues where it was"),
    ("unrecovered", "resume the conversation from history"),
])
def test_a_refused_move_is_told_and_removes_nothing(
        tmp_path: Path, repo: Path, why: str, expected: str) -> None:
    async def scenario() -> None:
        launcher = Launcher()
        launcher.answer = MoveOutcome(moved=False, why=why)
        world = World(tmp_path / "state", launcher)
        _started(world)
        assert world.isolation is not None
        created = await world.create(binding(repo), "feature/x")
        world.deliver("turn_completed", turnId="turn-1")
        await world.settled()
        assert len(launcher.asked) == 1
        [notice] = world.outcomes
        assert expected in notice
        assert worktrees(repo)[str(created["path"])] == "feature/x"

    asyncio.run(scenario())


def test_a_hot_replaced_harness_still_moves_at_once(tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        world = World(tmp_path / "state", Launcher(), after_turn=False)
        _started(world)
        assert world.isolation is not None
        created = await world.create(binding(repo), "feature/x")
        assert created["status"] == "created"
        assert world.launcher.asked == [(TERMINAL, str(created["path"]), SESSION)]
        assert world.isolation.pending.all() == {}
        assert world.notices == [f"isolated checkout ready: the agent continues in "
                                 f"{created['path']} (branch feature/x)"]

    asyncio.run(scenario())


def test_the_move_is_scheduled_then_moving_then_settled(tmp_path: Path, repo: Path) -> None:
    """What ``status`` shows of a terminal's move (:meth:`Isolation.move_of`)."""

    class Holding(Launcher):
        """A launcher that holds the move until the test lets it answer."""

        def __init__(self) -> None:
            super().__init__()
            self.asked_event = asyncio.Event()
            self.release = asyncio.Event()

        async def move(self, terminal: str, target: str, session: str) -> MoveOutcome:
            self.asked_event.set()
            await self.release.wait()
            return await super().move(terminal, target, session)

    async def scenario() -> None:
        launcher = Holding()
        world = World(tmp_path / "state", launcher)
        _started(world)
        assert world.isolation is not None
        assert world.isolation.move_of(TERMINAL) is None
        created = await world.create(binding(repo), "feature/x")
        state, move = world.isolation.move_of(TERMINAL) or ("none", None)
        assert state == "scheduled" and move is not None and move.path == created["path"]
        world.deliver("turn_completed", turnId="turn-1")
        await launcher.asked_event.wait()
        found = world.isolation.move_of(TERMINAL)
        assert found is not None and found[0] == "moving"
        launcher.release.set()
        await world.settled()
        assert world.isolation.move_of(TERMINAL) is None

    asyncio.run(scenario())


# -- completion after the turn ---------------------------------------------------------


def completion(world: World) -> Completion:
    """The grid's completion, sharing the world's pending moves (no other agents)."""
    assert world.isolation is not None
    return Completion(state_dir=world.isolation_state, move=world.launcher.move,
                      session_of=world._session_of,
                      listening=lambda terminal: world.launcher.listening,
                      transactions=world.isolation.transactions, locations=lambda: [],
                      notify=lambda binding, message: world.notices.append(message),
                      isolation=world.isolation)


async def _isolated(world: World, repo: Path) -> tuple[Completion, Binding, str]:
    """The agent moved into feature/x (its launcher answered), mid-turn again."""
    _started(world)
    created = await world.create(binding(repo), "feature/x")
    world.deliver("turn_completed", turnId="turn-1")
    await world.settled()
    world.notices.clear()
    world.launcher.asked.clear()
    path = str(created["path"])
    inside = Binding(terminal=TERMINAL, harness="codex", workspace=None, launch_dir=path,
                     environment="local", launcher_pid=os.getpid())
    world.deliver("turn_started", turnId="turn-2")
    return completion(world), inside, path


def test_a_completion_is_scheduled_and_made_once_the_turn_has_completed(
        tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        world = World(tmp_path / "state", Launcher())
        completer, inside, path = await _isolated(world, repo)
        answer = await asyncio.ensure_future(
            completer.complete(inside, delete_branch=True, discard_ignored=False))
        assert answer["status"] == "scheduled" and answer["path"] == path
        assert world.launcher.asked == [] and os.path.isdir(path)  # nothing moved yet
        again = await asyncio.ensure_future(
            completer.complete(inside, delete_branch=True, discard_ignored=False))
        assert again["status"] == "already-scheduled"
        assert world.isolation is not None
        with pytest.raises(CapabilityRefused, match="busy"):  # another kind is refused
            await asyncio.ensure_future(world.isolation.create(inside, "feature/y"))
        world.deliver("turn_completed", turnId="turn-2")
        await world.settled()
        assert world.launcher.asked == [(TERMINAL, str(repo), SESSION)]
        assert not os.path.exists(path) and path not in worktrees(repo)
        assert "feature/x" not in git(repo, "branch", "--list")  # merged: deleted
        [notice] = world.outcomes
        assert notice.startswith(f"isolated checkout completed: {path} removed")

    asyncio.run(scenario())


def test_an_interrupt_cancels_a_scheduled_completion(tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        world = World(tmp_path / "state", Launcher())
        completer, inside, path = await _isolated(world, repo)
        await asyncio.ensure_future(
            completer.complete(inside, delete_branch=False, discard_ignored=False))
        world.deliver("turn_interrupted", turnId="turn-2")
        await world.settled()
        assert world.launcher.asked == []
        assert worktrees(repo)[path] == "feature/x"
        assert "cancelled (the turn was interrupted)" in world.outcomes[0]

    asyncio.run(scenario())


def test_a_change_made_during_the_turn_cancels_the_completion_before_anything_moves(
        tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        world = World(tmp_path / "state", Launcher())
        completer, inside, path = await _isolated(world, repo)
        await asyncio.ensure_future(
            completer.complete(inside, delete_branch=False, discard_ignored=False))
        (Path(path) / "README").write_text("changed during the turn\n")
        world.deliver("turn_completed", turnId="turn-2")
        await world.settled()
        assert world.launcher.asked == []  # re-validated: the source was never touched
        assert worktrees(repo)[path] == "feature/x"
        [notice] = world.outcomes
        assert "completion cancelled (dirty" in notice and "nothing was moved or removed" \
            in notice

    asyncio.run(scenario())


@pytest.mark.parametrize(("why", "expected"), [
    ("exited", "completion not made (exited): the agent continues where it was"),
    ("unrecovered", "resume the conversation from history"),
])
def test_a_refused_move_back_removes_nothing(
        tmp_path: Path, repo: Path, why: str, expected: str) -> None:
    async def scenario() -> None:
        world = World(tmp_path / "state", Launcher())
        completer, inside, path = await _isolated(world, repo)
        await asyncio.ensure_future(
            completer.complete(inside, delete_branch=True, discard_ignored=False))
        world.launcher.answer = MoveOutcome(moved=False, why=why)
        world.deliver("turn_completed", turnId="turn-2")
        await world.settled()
        assert len(world.launcher.asked) == 1
        assert worktrees(repo)[path] == "feature/x"  # a failed move is never cleaned up
        assert expected in world.outcomes[0]

    asyncio.run(scenario())


def test_a_grid_that_stops_cancels_its_pending_moves_and_says_so(
        tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        world = World(tmp_path / "state", Launcher())
        _started(world)
        assert world.isolation is not None
        created = await world.create(binding(repo), "feature/x")
        assert world.isolation.cancel_all("the grid is stopping") == 1
        assert world.isolation.move_of(TERMINAL) is None
        [notice] = world.outcomes
        assert notice.startswith("isolated checkout move cancelled (the grid is stopping)")
        assert f"kept at {created['path']}" in notice
        world.deliver("turn_completed", turnId="turn-1")  # nothing left to trigger
        await world.settled()
        assert world.launcher.asked == []

    asyncio.run(scenario())
