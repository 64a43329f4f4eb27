"""The deck's pure rendering: fixtures and ordering invariants (hypothesis)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from clanker.deck.rows import MIN_COLUMNS, MIN_LINES, build_rows, duration, render
from clanker.grid.protocol import TerminalEntry

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _snapshot(state: str) -> dict[str, object]:
    """A broker snapshot (``Revision.to_json`` shape) showing ``state`` at revision 5."""
    turn = {"state": "running", "turnId": "u1", "startedAt": "2026-12-02T11:00:00+00:00"}
    completion = {"turnId": "u1", "at": "2026-12-02T11:30:00+00:00", "revision": 5}
    outcome = {"kind": "completed", "turnId": "u1", "at": "2026-12-02T11:30:00+00:00",
               "revision": 5}
    snapshot: dict[str, object] = {"runtime": {"state": "idle"}}
    if state in ("working", "needs-input"):
        snapshot["runtime"] = turn
    if state == "needs-input":
        snapshot["pendingRequest"] = {"inputId": "i1", "turnId": "u1",
                                      "requestedAt": "2026-12-02T11:10:00+00:00"}
    if state == "failed":
        snapshot["runtime"] = {**turn, "state": "failed"}
    if state == "done":
        snapshot["lastCompletion"], snapshot["lastOutcome"] = completion, outcome
    return snapshot


def entry(terminal: str, state: str, *, minutes: int = 1, harness: str = "codex",
          revision: int = 5) -> TerminalEntry:
    return TerminalEntry(
        terminal=terminal, harness=harness, workspace="/home/u/src/repo", cwd="/home/u/src/repo",
        launcher_pid=1, registered_at=NOW - timedelta(hours=1), location="/home/u/src/repo",
        attention=state, since=NOW - timedelta(minutes=minutes),
        revision={"terminal": terminal, "revision": revision, "snapshot": _snapshot(state)},
        tmux_pane="%3")


def test_a_fixture_renders_needs_input_first_with_counts_and_columns() -> None:
    rows = build_rows([entry("t-1", "done"), entry("t-2", "working", minutes=3),
                       entry("t-3", "needs-input", harness="claude")], {},
                      checkouts={"/home/u/src/repo": "main"})
    screen = render(rows, NOW, (100, 10), selected=1)
    assert [r.terminal for r in rows] == ["t-3", "t-2", "t-1"]
    assert screen.lines[0] == "clanker deck  3 agents  needs input: 1  done: 1"
    assert screen.lines[2].split()[:6] == ["NEEDS", "INPUT", "claude", "default", "repo",
                                           "main"]
    assert screen.lines[3].split()[:2] == ["working", "codex"] and " 3m " in screen.lines[3]
    assert screen.selected_line == 3
    assert len(screen.lines) == 10 and all(len(line) <= 100 for line in screen.lines)


def test_a_seen_completion_no_longer_reads_done_and_a_newer_one_does() -> None:
    [seen] = build_rows([entry("t-1", "done")], {"t-1": 5})
    [fresh] = build_rows([entry("t-1", "done")], {"t-1": 4})
    assert (seen.attention, fresh.attention) == ("idle", "done")


def test_a_terminal_too_small_gets_a_message_not_a_crash() -> None:
    rows = build_rows([entry("t-1", "working")], {})
    screen = render(rows, NOW, (MIN_COLUMNS - 1, 30))
    assert screen.lines == (f"terminal too small: the deck needs {MIN_COLUMNS}x{MIN_LINES}, "
                            f"this one is {MIN_COLUMNS - 1}x30",)
    assert render(rows, NOW, (1, 1)).lines == ("…",)


def test_durations_are_compact() -> None:
    assert [duration(NOW - timedelta(seconds=s), NOW) for s in (-5, 12, 300, 7200, 90000)] \
        == ["0s", "12s", "5m", "2h", "1d"]


STATES = st.sampled_from(["needs-input", "working", "failed", "done", "idle"])
AGENTS = st.lists(st.tuples(STATES, st.integers(0, 10_000), st.integers(1, 9)),
                  max_size=30)


@given(AGENTS, st.integers(1, 300), st.integers(1, 80), st.integers(-5, 40),
       st.dictionaries(st.sampled_from([f"t-{i}" for i in range(30)]), st.integers(0, 12)))
def test_ordering_and_layout_invariants(agents: list[tuple[str, int, int]], columns: int,
                                        height: int, selected: int,
                                        seen: dict[str, int]) -> None:
    entries = [entry(f"t-{i}", state, minutes=minutes, revision=revision)
               for i, (state, minutes, revision) in enumerate(agents)]
    rows = build_rows(entries, seen)
    ranks = [r.rank for r in rows]
    assert ranks == sorted(ranks)  # needs input, working, failed, unseen done, the rest
    for a, b in itertools.pairwise(rows):
        assert a.rank < b.rank or a.since <= b.since  # longest in its state first
    assert sorted(r.terminal for r in rows) == sorted(e.terminal for e in entries)
    assert all(r.attention != "done" or seen.get(r.terminal, 0) < 5 for r in rows)
    screen = render(rows, NOW, (columns, height), selected=selected)
    assert all(len(line) <= max(columns, 1) for line in screen.lines)
    if columns >= MIN_COLUMNS and height >= MIN_LINES:
        assert len(screen.lines) == height
        if rows:  # the selected row is always on screen
            index = min(max(selected, 0), len(rows) - 1)
            assert screen.selected_line is not None and 2 <= screen.selected_line < height - 1
            assert screen.lines[screen.selected_line].startswith(
                {"needs-input": "NEEDS INPUT", "working": "working", "failed": "failed",
                 "done": "done", "idle": "idle"}[rows[index].attention])
