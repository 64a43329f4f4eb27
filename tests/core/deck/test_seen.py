"""The shared seen-mark file: decks over one file merge their marks under its lock,
the newest revision per terminal wins, and a stale deck never lowers a mark."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from clanker.deck.seen import SeenMarks

TERMINALS = st.sampled_from(["t-1", "t-2", "t-3"])


class SharedFile(RuleBasedStateMachine):
    """Three decks over one file, each marking and refreshing in any order."""

    def __init__(self) -> None:
        super().__init__()
        self.newest: dict[str, int] = {}

    @initialize()
    def start(self) -> None:
        self.directory = tempfile.TemporaryDirectory()
        self.path = Path(self.directory.name) / "deck-seen.json"
        self.decks = [SeenMarks(self.path) for _ in range(3)]

    @rule(deck=st.integers(0, 2), terminal=TERMINALS, revision=st.integers(1, 20))
    def mark(self, deck: int, terminal: str, revision: int) -> None:
        self.decks[deck].mark(terminal, revision)
        self.newest[terminal] = max(revision, self.newest.get(terminal, 0))

    @rule(deck=st.integers(0, 2))
    def refresh(self, deck: int) -> None:
        self.decks[deck].refresh()
        assert self.decks[deck].marks == self.newest  # it now knows every deck's marks

    @invariant()
    def the_file_holds_the_newest_mark_of_each_terminal(self) -> None:
        if self.newest:
            assert json.loads(self.path.read_text()) == self.newest

    @invariant()
    def no_deck_knows_more_than_was_marked(self) -> None:
        for deck in getattr(self, "decks", []):
            assert all(v <= self.newest[k] for k, v in deck.marks.items())

    def teardown(self) -> None:
        if hasattr(self, "directory"):
            self.directory.cleanup()


TestSharedFile = SharedFile.TestCase
TestSharedFile.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


def test_a_stale_deck_never_lowers_a_newer_mark(tmp_path: Path) -> None:
    path = tmp_path / "deck-seen.json"
    stale, fresh = SeenMarks(path), SeenMarks(path)
    fresh.mark("t-1", 7)
    assert stale.mark("t-1", 3)  # higher than it knew, lower than the file's
    assert json.loads(path.read_text()) == {"t-1": 7}
    assert stale.marks == {"t-1": 7}
    assert not stale.refresh()  # its own write is already taken up


def test_a_mark_for_an_agent_this_deck_has_not_shown_yet_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "deck-seen.json"
    SeenMarks(path).mark("gone", 2)  # an agent that retired while no deck was open
    mine, other = SeenMarks(path), SeenMarks(path)
    other.mark("new", 4, live=["new", "mine"])  # this deck has not got "new" yet
    mine.mark("mine", 1, live=["mine"])
    assert json.loads(path.read_text()) == {"new": 4, "mine": 1}  # "gone" forgotten
    other.mark("new", 5, live=["new"])  # "mine" retired, as this deck saw it
    assert json.loads(path.read_text()) == {"new": 5}


WRITER = """
import sys
from pathlib import Path
from clanker.deck.seen import SeenMarks
marks = SeenMarks(Path(sys.argv[1]))  # read once: every later write merges under the lock
for number in range(int(sys.argv[3])):
    marks.mark(f"{sys.argv[2]}-{number}", number + 1)
"""


def test_decks_in_separate_processes_marking_at_once_keep_every_mark(tmp_path: Path) -> None:
    path = tmp_path / "deck-seen.json"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"d{n}", "100"])
               for n in range(4)]
    assert [w.wait(120) for w in writers] == [0, 0, 0, 0]
    assert json.loads(path.read_text()) == {f"d{n}-{i}": i + 1 for n in range(4)
                                            for i in range(100)}
