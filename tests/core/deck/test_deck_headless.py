"""The deck driven headless (prompt_toolkit pipe input, DummyOutput) against a real
in-process grid on the socket the library finds, with scripted lifecycle events."""

from __future__ import annotations

import os
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

from clanker.attention.envelope import parse_envelope
from clanker.grid.server import Grid
from tests.core.deck.conftest import Running
from tests.core.grid.conftest import LiveGrid, eventually, register_as, root


def _register(live: LiveGrid, harness: str) -> str:
    return live.on_loop(lambda g: g.register(harness=harness, cwd="/tmp",
                                             launcher_pid=os.getpid())).terminal


def _event(live: LiveGrid, terminal: str, event: str, **fields: object) -> None:
    def apply(grid: Grid) -> None:
        grid.broker.apply(terminal, parse_envelope(root(event, **fields)))

    live.on_loop(apply)


def test_rows_appear_reorder_by_attention_update_per_revision_and_leave_on_tombstones(
        live: LiveGrid, tmp_path: Path) -> None:
    notified: list[str] = []
    first = _register(live, "fake-a")
    _event(live, first, "session_started")
    with Running(tmp_path / "seen.json", notified) as running:
        eventually(lambda: running.states() == [(first, "idle")])
        second = _register(live, "fake-b")
        _event(live, second, "session_started")
        _event(live, second, "turn_started", turnId="u1")
        eventually(lambda: running.states() == [(second, "working"), (first, "idle")])
        drawn = running.deck.revisions_drawn
        _event(live, first, "turn_started", turnId="u1")
        _event(live, first, "input_requested", turnId="u1", inputId="i1")
        eventually(lambda: running.states() == [(first, "needs-input"), (second, "working")])
        assert running.deck.revisions_drawn >= drawn + 2  # one redraw per accepted revision
        _event(live, second, "turn_completed", turnId="u1")
        eventually(lambda: running.states() == [(first, "needs-input"), (second, "done")])
        lines = running.deck.screen_lines()
        assert "needs input: 1  done: 1" in lines[0]
        assert notified == ["fake-a needs input in /tmp", "fake-b is done in /tmp"]
        live.on_loop(lambda g: g.retire(first))
        eventually(lambda: running.states() == [(second, "done")])


def test_the_seen_watermark_survives_a_restart_and_never_changes_lifecycle(
        live: LiveGrid, tmp_path: Path) -> None:
    terminal = _register(live, "fake-a")
    for event, fields in (("session_started", {}), ("turn_started", {"turnId": "u1"}),
                          ("turn_completed", {"turnId": "u1"})):
        _event(live, terminal, event, **fields)
    seen = tmp_path / "seen.json"
    with Running(seen, []) as running:
        eventually(lambda: running.states() == [(terminal, "done")])
        running.keys("s")
        eventually(lambda: running.states() == [(terminal, "idle")])
    assert live.on_loop(lambda g: g.entry(terminal)).attention == "done"  # the grid's own
    with Running(seen, []) as again, Running(tmp_path / "other.json", []) as other:
        eventually(lambda: again.states() == [(terminal, "idle")])
        eventually(lambda: other.states() == [(terminal, "done")])  # its own marks
        _event(live, terminal, "turn_started", turnId="u2")
        _event(live, terminal, "turn_completed", turnId="u2")
        eventually(lambda: again.states() == [(terminal, "done")])  # a new completion


def _done(live: LiveGrid, harness: str, turn: str = "u1") -> str:
    terminal = _register(live, harness)
    _event(live, terminal, "session_started")
    _finish(live, terminal, turn)
    return terminal


def _finish(live: LiveGrid, terminal: str, turn: str) -> None:
    _event(live, terminal, "turn_started", turnId=turn)
    _event(live, terminal, "turn_completed", turnId=turn)


def test_two_decks_over_one_seen_file_agree_and_never_lower_a_mark(
        live: LiveGrid, tmp_path: Path) -> None:
    import json

    seen = tmp_path / "deck-seen.json"
    first = _done(live, "fake-a")
    with Running(seen, []) as one, Running(seen, []) as two:
        eventually(lambda: one.states() == two.states() == [(first, "done")])
        drawn = two.deck.revisions_drawn
        one.keys("s")
        # No revision arrives: the other deck notices the file changed on its own.
        eventually(lambda: two.states() == [(first, "idle")])
        assert two.deck.revisions_drawn > drawn
        second = _done(live, "fake-b")
        eventually(lambda: one.states() == two.states() == [(second, "done"), (first, "idle")])
        assert two.deck.selected == first
        two.keys("\x1b[As")  # up to the new agent, and mark it here
        eventually(lambda: dict(one.states()) == {second: "idle", first: "idle"})
        _finish(live, first, "u2")  # a newer completion: both show it unseen again
        eventually(lambda: one.states() == two.states() == [(first, "done"), (second, "idle")])
        newest = live.on_loop(lambda g: g.entry(first)).revision["revision"]
        one.keys("s")
        eventually(lambda: dict(two.states()) == {second: "idle", first: "idle"})
        revisions = {r.terminal: r.revision for r in two.deck.rows}
    assert json.loads(seen.read_text()) == {first: newest, second: revisions[second]}


def test_jump_without_tmux_is_disabled_with_a_reason(live: LiveGrid, tmp_path: Path) -> None:
    terminal = _register(live, "fake-a")
    _event(live, terminal, "session_started")
    with Running(tmp_path / "seen.json", []) as running:
        eventually(lambda: running.states() == [(terminal, "idle")])
        running.keys("\r")
        eventually(lambda: running.deck.status == "jump is disabled: tmux is not on PATH")
        assert running.deck.screen_lines()[-1] == "jump is disabled: tmux is not on PATH"


def test_a_grid_that_goes_away_is_said_and_the_deck_reconnects(
        home: Path, tmp_path: Path) -> None:
    from clanker.grid.daemon import grid_location
    from clanker.paths import clanker_paths

    location = grid_location(clanker_paths())
    location.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    first = LiveGrid(location.socket).__enter__()
    old = _register(first, "fake-a")
    _event(first, old, "session_started")
    with Running(tmp_path / "seen.json", []) as running:
        eventually(lambda: running.states() == [(old, "idle")])
        first.__exit__()
        eventually(lambda: running.deck.feed.problem is not None)
        said = running.deck.screen_lines()[-1]
        assert said.endswith(("reconnecting", "retrying")), said
        assert running.states() == [(old, "idle")]  # the last picture stays meanwhile
        with LiveGrid(location.socket) as second:
            new = _register(second, "fake-b")
            _event(second, new, "session_started")
            eventually(lambda: running.states() == [(new, "idle")])  # the new grid's table
            assert running.deck.feed.problem is None


def test_the_deck_command_needs_an_interactive_terminal() -> None:
    from click.testing import CliRunner

    from clanker.cli import cli

    result = CliRunner().invoke(cli, ["deck"])
    assert result.exit_code == 47
    assert "the deck needs an interactive terminal" in result.output


def test_x_stops_the_selected_agent_after_asking_and_help_and_launch_say_why(
        live: LiveGrid, tmp_path: Path,
        launcher: subprocess.Popen[bytes]) -> None:
    assert live.grid is not None
    terminal = register_as(launcher, live.path).terminal
    _event(live, terminal, "session_started")
    with Running(tmp_path / "seen.json", []) as running:
        eventually(lambda: running.states() == [(terminal, "idle")])
        running.keys("?")
        eventually(lambda: running.deck.screen_lines()[0] == "clanker deck keys (esc to close)")
        running.keys("\x1b")
        eventually(lambda: running.deck.panel is None)
        running.keys("n")
        eventually(lambda: running.deck.status
                   == "launching from the deck needs tmux (tmux is not on PATH)")
        running.keys("x")
        eventually(lambda: running.deck.panel is not None)
        assert running.deck.panel == ["stop fake-agent in /tmp? (y: stop, any other key: keep)"]
        running.keys("k")  # kept
        eventually(lambda: running.deck.panel is None)
        assert launcher.poll() is None
        running.keys("x")
        eventually(lambda: running.deck.panel is not None)
        running.keys("y")
        assert launcher.wait(60) == -signal.SIGTERM
        eventually(lambda: running.states() == [])  # the grid retired it; the deck followed


def test_a_branch_switched_since_shows_once_the_answer_has_aged(
        live: LiveGrid, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "start"], check=True)
    now = [datetime(2026, 12, 2, 12, 0, tzinfo=UTC)]
    terminal = live.on_loop(lambda g: g.register(harness="fake-a", cwd=str(repo),
                                                 launcher_pid=os.getpid())).terminal
    _event(live, terminal, "session_started")
    with Running(tmp_path / "seen.json", [], clock=lambda: now[0]) as running:
        eventually(lambda: [r.checkout for r in running.deck.rows] == ["main"])
        subprocess.run([*git, "switch", "-q", "-c", "feature"], check=True)
        _event(live, terminal, "turn_started", turnId="u1")
        eventually(lambda: running.states() == [(terminal, "working")])
        assert [r.checkout for r in running.deck.rows] == ["main"]  # still fresh enough
        now[0] += timedelta(seconds=11)
        _event(live, terminal, "turn_completed", turnId="u1")
        eventually(lambda: [r.checkout for r in running.deck.rows] == ["feature"])


def test_a_failing_background_task_shows_on_the_status_line_and_the_deck_keeps_running(
        live: LiveGrid, tmp_path: Path) -> None:
    async def broken() -> None:
        raise RuntimeError("a task broke\nsecond line")

    with Running(tmp_path / "seen.json", []) as running:
        loop = running.deck.app.loop
        assert loop is not None
        loop.call_soon_threadsafe(running.deck.app.create_background_task, broken())
        eventually(lambda: running.deck.status == "internal error: RuntimeError: a task broke")
        assert running.deck.app.is_running
        assert "internal error: RuntimeError: a task broke" in "\n".join(
            running.deck.screen_lines())
