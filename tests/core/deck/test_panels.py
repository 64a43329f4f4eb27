"""The deck's panels as data: the filterable picker and the usage meters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from attrs import evolve

from clanker.deck.panels import Choice, Picker, usage_lines
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.usage.service import UsageEntry, UsageStatus
from tests.helpers import percent_snapshot

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def test_the_picker_filters_moves_and_chooses() -> None:
    picker = Picker("resume?", (Choice("claude:1  fix the parser", "claude:1"),
                                Choice("codex:2  write docs", "codex:2"),
                                Choice("claude:3  docs pass", "claude:3")))
    assert picker.moved(-1).chosen == Choice("claude:3  docs pass", "claude:3")  # wraps
    narrowed = picker.typed("D").typed("oc")
    assert [c.value for c in narrowed.shown] == ["codex:2", "claude:3"]
    assert narrowed.moved(1).chosen is not None and narrowed.moved(1).chosen.value == "claude:3"
    assert narrowed.typed("zz").chosen is None
    assert narrowed.typed("zz").lines(10)[-1] == "  (nothing matches)"
    assert narrowed.erased().erased().erased().shown == picker.shown
    assert narrowed.lines(3) == ["resume?", "filter: Doc", "> codex:2  write docs"]


def test_usage_shows_a_meter_of_what_remains_with_its_reset_and_failures_as_said() -> None:
    snapshot = percent_snapshot(75.0, NOW)
    reset = evolve(snapshot.measurements[0], resets_at=NOW + timedelta(hours=2))
    entries = [
        UsageEntry(harness="claude", status=UsageStatus.OK,
                   snapshot=evolve(snapshot, measurements=(reset,)), account="work"),
        UsageEntry(harness="codex", status=UsageStatus.FAILED, failure=HarnessCapabilityError(
            ErrorKind.UNAUTHENTICATED, "signed out", harness="codex")),
    ]
    lines = usage_lines(entries, NOW)
    assert lines[1] == "claude (work)"
    assert lines[2] == ("  Fake · 5 hour            [#####---------------]  25% left"
                        "  resets in 2h 0m")
    assert lines[3].startswith("codex: ") and "signed out" in lines[3]
    assert usage_lines([], NOW)[-1] == "no harness reports usage"
