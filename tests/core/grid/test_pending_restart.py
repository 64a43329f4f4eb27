"""Pending moves that outlive their grid: the store's files (0600, atomic, strict),
reloading them in a new grid, re-arming one on a terminal that comes back with the
same conversation from the same place, and cancelling it (saying so) otherwise.

Real git in a temporary repository, the real
:class:`~clanker.attention.broker.Broker` fed wire envelopes (what a harness's
attention adapter delivers) and the real :class:`~clanker.grid.isolation.Isolation`
on a real directory; a "restart" is a second broker and isolation over the same
directory, as a new grid process has. The launcher is the double of
``test_pending_moves`` (it records the instruction and answers as a relayed launch
does)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clanker.attention.broker import Broker
from clanker.attention.envelope import parse_envelope
from clanker.bridge.credentials import Binding
from clanker.grid.isolation import Isolation
from clanker.grid.pending import (
    REARM_WITHIN,
    STALE_AFTER,
    PendingMove,
    PendingStateError,
    PendingStore,
    StoredMove,
)
from tests.core.grid.conftest import root
from tests.core.grid.test_pending_moves import BrokerIsolation, Launcher, git, worktrees
from tests.core.grid.test_pending_moves import repo as repo  # the fixture

SESSION = "019b0c1e-0000-7000-8000-00000000a11e"
T0 = datetime.now(UTC)  # when the tests' second grid starts (moves are asked for now)


class Grid(BrokerIsolation):
    """One grid's worth of pending-move state: a broker, its isolation over ``store``,
    the live terminals' records and what the person was told."""

    def __init__(self, state: Path, launcher: Launcher) -> None:
        self.notices: list[str] = []
        self.bindings: dict[str, Binding] = {}
        self.isolation: Isolation | None = None
        self.broker = Broker(listener=self._published)
        self.launcher = launcher
        self.isolation = Isolation(
            state_dir=state, move=launcher.move, session_of=self._session_of,
            listening=lambda terminal: launcher.listening,
            after_turn=lambda binding: True, revision_of=self._revision_of,
            notify=lambda binding, message: self.notices.append(message),
            pending_dir=state / "pending-moves", binding_of=self.bindings.get)

    @property
    def iso(self) -> Isolation:
        assert self.isolation is not None
        return self.isolation

    def register(self, terminal: str, launch_dir: Path | str, *, harness: str = "codex",
                 trusted: str | None = SESSION) -> Binding:
        """A launch registers (the grid's record of it first, as the grid keeps it)."""
        binding = Binding(terminal=terminal, harness=harness, workspace=None,
                          launch_dir=str(launch_dir), environment="local",
                          launcher_pid=os.getpid())
        self.bindings[terminal] = binding
        self.broker.register(terminal, trusted_root_session_id=trusted)
        return binding

    def deliver(self, terminal: str, event: str, **fields: object) -> None:
        self.broker.apply(terminal, parse_envelope(root(event, SESSION, **fields)))

    async def create(self, caller: Binding, branch: str) -> dict[str, object]:
        return await asyncio.ensure_future(self.iso.create(caller, branch))

    async def settled(self) -> None:
        await self.iso.transactions.settle(30)


def stored(state: Path) -> list[str]:
    directory = state / "pending-moves"
    return sorted(os.listdir(directory)) if directory.exists() else []


async def _scheduled(state: Path, repo: Path) -> tuple[Grid, dict[str, object]]:
    """A first grid, whose terminal asked mid-turn for a checkout."""
    first = Grid(state, Launcher())
    caller = first.register("t-first", repo)
    first.deliver("t-first", "session_started")
    first.deliver("t-first", "turn_started", turnId="turn-1")
    created = await first.create(caller, "feature/x")
    assert created["status"] == "scheduled"
    return first, created


def test_a_scheduled_move_is_kept_in_a_private_file_until_it_is_triggered(
        tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        state = tmp_path / "state"
        grid, created = await _scheduled(state, repo)
        [name] = stored(state)
        directory = state / "pending-moves"
        assert stat.S_IMODE(os.lstat(directory).st_mode) == 0o700
        assert stat.S_IMODE(os.lstat(directory / name).st_mode) == 0o600
        record = json.loads((directory / name).read_text())
        assert record["move"]["path"] == created["path"]
        assert record["caller"]["launch_dir"] == str(repo)
        assert "t-first" not in name  # a digest names the file, never the terminal id
        grid.deliver("t-first", "turn_completed", turnId="turn-1")
        await grid.settled()
        assert grid.launcher.asked == [("t-first", str(created["path"]), SESSION)]
        assert stored(state) == []  # triggered: nothing left to reload

    asyncio.run(scenario())


def test_a_cancelled_move_leaves_no_file(tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        state = tmp_path / "state"
        grid, _ = await _scheduled(state, repo)
        grid.deliver("t-first", "turn_interrupted", turnId="turn-1")
        assert stored(state) == []

    asyncio.run(scenario())


def test_a_grid_that_stops_suspends_its_moves_and_the_next_one_rearms_them(
        tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        state = tmp_path / "state"
        first, created = await _scheduled(state, repo)
        assert first.iso.cancel_all("the grid is stopping") == 1
        [suspended] = [n for n in first.notices if "suspended" in n]
        assert suspended.startswith("isolated checkout move suspended (the grid is stopping)")
        assert f"resumed from {repo} within 10 minutes" in suspended
        assert len(stored(state)) == 1  # kept for the next grid

        launcher = Launcher()
        second = Grid(state, launcher)
        assert second.iso.reload(T0) == 1
        assert second.iso.move_of("t-again") is None
        # The same conversation comes back from the same place (`clanker resume`).
        second.register("t-again", repo)
        [rearmed] = second.notices
        assert rearmed.startswith("isolated checkout move re-armed after the grid restarted")
        state_of, move = second.iso.move_of("t-again") or ("none", None)
        assert state_of == "scheduled" and move is not None and move.path == created["path"]
        assert len(stored(state)) == 1  # now the new terminal's file
        # Its next completed root turn triggers it, re-validated as any move is.
        second.deliver("t-again", "turn_started", turnId="turn-7")
        assert launcher.asked == []
        second.deliver("t-again", "turn_completed", turnId="turn-7")
        await second.settled()
        assert launcher.asked == [("t-again", str(created["path"]), SESSION)]
        assert stored(state) == []
        assert second.notices[-1].startswith("isolated checkout ready")

    asyncio.run(scenario())


def test_a_killed_grid_leaves_its_moves_and_an_interrupt_after_rearming_cancels(
        tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        state = tmp_path / "state"
        await _scheduled(state, repo)  # the first grid is dropped, as a killed one is
        launcher = Launcher()
        second = Grid(state, launcher)
        assert second.iso.reload(T0) == 1
        second.register("t-again", repo, trusted=None)  # its session not yet known
        assert second.notices == []
        second.deliver("t-again", "session_started")  # now it is: re-armed
        assert second.notices[0].startswith("isolated checkout move re-armed")
        second.deliver("t-again", "turn_started", turnId="turn-1")
        second.deliver("t-again", "turn_interrupted", turnId="turn-1")  # cancels
        await second.settled()
        assert launcher.asked == [] and stored(state) == []
        assert "cancelled (the turn was interrupted)" in second.notices[-1]

    asyncio.run(scenario())


def test_the_conversation_back_in_another_place_cancels_the_move_and_keeps_the_checkout(
        tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        state = tmp_path / "state"
        _, created = await _scheduled(state, repo)
        launcher = Launcher()
        second = Grid(state, launcher)
        second.iso.reload(T0)
        elsewhere = repo / "sub"
        elsewhere.mkdir()
        second.register("t-again", elsewhere)
        [notice] = second.notices
        assert notice.startswith("isolated checkout move cancelled (the grid restarted and "
                                 f"the conversation came back in {elsewhere}")
        assert f"kept at {created['path']}" in notice
        assert second.iso.move_of("t-again") is None and stored(state) == []
        second.deliver("t-again", "turn_started", turnId="turn-2")
        second.deliver("t-again", "turn_completed", turnId="turn-2")
        await second.settled()
        assert launcher.asked == []
        assert worktrees(repo)[str(created["path"])] == "feature/x"

    asyncio.run(scenario())


def test_another_harness_with_the_same_session_id_does_not_take_the_move(
        tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        state = tmp_path / "state"
        await _scheduled(state, repo)
        second = Grid(state, Launcher())
        second.iso.reload(T0)
        second.register("t-other", repo, harness="opencode")
        assert "another harness or workspace" in second.notices[0]
        assert second.iso.move_of("t-other") is None

    asyncio.run(scenario())


def test_a_move_nobody_comes_back_for_is_cancelled_in_time_and_said(
        tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        state = tmp_path / "state"
        _, created = await _scheduled(state, repo)
        second = Grid(state, Launcher())
        second.iso.reload(T0)
        assert second.iso.expire(T0 + REARM_WITHIN - timedelta(seconds=1)) == 0
        assert second.iso.expire(T0 + REARM_WITHIN) == 1
        [notice] = second.notices
        assert notice.startswith("isolated checkout move cancelled (the grid restarted and "
                                 f"the conversation was not resumed from {repo}")
        assert f"kept at {created['path']}" in notice and stored(state) == []
        second.register("t-late", repo)  # too late: nothing is re-armed
        assert second.iso.move_of("t-late") is None and len(second.notices) == 1

    asyncio.run(scenario())


def test_a_move_asked_for_too_long_ago_is_cancelled_by_the_grid_that_reloads_it(
        tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        state = tmp_path / "state"
        _, created = await _scheduled(state, repo)
        second = Grid(state, Launcher())
        later = datetime.now(UTC) + STALE_AFTER
        assert second.iso.reload(later) == 0
        [notice] = second.notices
        assert notice.startswith("isolated checkout move cancelled (it was asked for ")
        assert "too long ago" in notice and f"kept at {created['path']}" in notice
        assert stored(state) == []

    asyncio.run(scenario())


def test_a_rearmed_move_is_revalidated_at_its_trigger(tmp_path: Path, repo: Path) -> None:
    async def scenario() -> None:
        state = tmp_path / "state"
        _, created = await _scheduled(state, repo)
        git(repo, "worktree", "remove", str(created["path"]))  # while no grid ran
        launcher = Launcher()
        second = Grid(state, launcher)
        second.iso.reload(T0)
        second.register("t-again", repo)
        second.deliver("t-again", "turn_started", turnId="turn-2")
        second.deliver("t-again", "turn_completed", turnId="turn-2")
        await second.settled()
        assert launcher.asked == []
        assert "is gone" in second.notices[-1]

    asyncio.run(scenario())


def test_a_bad_file_is_refused_logged_and_set_aside_and_loses_no_other_move(
        tmp_path: Path, repo: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        state = tmp_path / "state"
        _, created = await _scheduled(state, repo)
        directory = state / "pending-moves"
        [good] = stored(state)
        text = (directory / good).read_text()
        bad = {
            "0torn.json": text[: len(text) // 2],
            "1extra.json": json.dumps({**json.loads(text), "unexpected": 1}),
            "2version.json": json.dumps({**json.loads(text), "version": 2}),
            "3renamed.json": text,  # a record under another terminal's name
            "4relative.json": text.replace(str(created["path"]), "relative/path"),
        }
        for name, body in bad.items():
            (directory / name).write_text(body)
        os.symlink(directory / good, directory / "5link.json")
        os.mkfifo(directory / "6fifo.json")
        second = Grid(state, Launcher())
        with caplog.at_level("WARNING"):
            assert second.iso.reload(T0) == 1
        refusals = [r for r in caplog.records if "is refused" in r.getMessage()]
        assert len(refusals) == len(bad) + 2
        assert any("torn or corrupt" in r.getMessage() for r in refusals)
        assert any("symbolic link" in r.getMessage() for r in refusals)
        assert stored(state) == sorted([good] + [f"{n}.refused" for n in
                                                 [*bad, "5link.json", "6fifo.json"]])
        second.register("t-again", repo)
        assert second.notices[0].startswith("isolated checkout move re-armed")
        third = Grid(state, Launcher())  # refused once: a later grid is not told again
        caplog.clear()
        with caplog.at_level("WARNING"):
            third.iso.reload(T0)
        assert not [r for r in caplog.records if "is refused" in r.getMessage()]

    asyncio.run(scenario())


def test_a_store_directory_that_is_not_ours_privately_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "pending-moves"
    directory.mkdir(mode=0o755)
    os.chmod(directory, 0o755)
    with pytest.raises(PendingStateError, match="not a private directory"):
        PendingStore(directory).load()


# -- the file round-trip ----------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40)
_path = _text.map(lambda text: "/" + text.replace("\x00", ""))


@st.composite
def stored_moves(draw: st.DrawFn) -> StoredMove:
    terminal = draw(_text)
    move = PendingMove(
        terminal=terminal, session=draw(_text), target=draw(_path), path=draw(_path),
        branch=draw(_text), after_revision=draw(st.integers(0, 2**53)),
        requested_at=draw(st.datetimes(timezones=st.just(UTC))),
        kind=draw(st.sampled_from(["create", "complete"])),
        main=draw(st.one_of(st.just(""), _path)), delete_branch=draw(st.booleans()),
        discard_ignored=draw(st.booleans()))
    caller = Binding(terminal=terminal, harness=draw(_text),
                     workspace=draw(st.one_of(st.none(), _text)), launch_dir=draw(_path),
                     environment=draw(_text), launcher_pid=draw(st.integers(1, 2**31)))
    return StoredMove(version=1, move=move, caller=caller)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(record=stored_moves())
def test_a_stored_move_reads_back_as_it_was_written(tmp_path: Path, record: StoredMove) -> None:
    store = PendingStore(tmp_path / f"s-{os.urandom(4).hex()}")
    store.save(record.move, record.caller)
    loaded, refused = store.load()
    assert (loaded, refused) == ([record], [])
    store.remove(record.move.terminal)
    assert store.load() == ([], [])


def test_a_move_the_store_cannot_write_stays_scheduled_and_is_cancelled_at_the_stop(
        tmp_path: Path, repo: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        state = tmp_path / "state"
        state.mkdir()
        (state / "pending-moves").write_text("not a directory\n")  # the store cannot write
        grid = Grid(state, Launcher())
        caller = grid.register("t-first", repo)
        grid.deliver("t-first", "session_started")
        grid.deliver("t-first", "turn_started", turnId="turn-1")
        with caplog.at_level("WARNING"):
            created = await grid.create(caller, "feature/x")
        assert created["status"] == "scheduled"
        assert any("cannot be kept across a grid restart" in r.getMessage()
                   for r in caplog.records)
        assert grid.iso.move_of("t-first") is not None  # still made at this turn's end
        assert grid.iso.cancel_all("the grid is stopping") == 1
        assert grid.notices[-1].startswith("isolated checkout move cancelled (the grid is "
                                           "stopping; it could not be kept")

    asyncio.run(scenario())
