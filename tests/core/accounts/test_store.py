"""The account registry: any sequence of changes keeps every selection on a kept
account and survives the file; concurrent writers in separate processes lose nothing."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from clanker.accounts.homes import new_account_id
from clanker.accounts.store import AccountRecord, AccountState, AccountStatus, AccountStore
from clanker.ids import HarnessId

HARNESSES = st.sampled_from([HarnessId("aa-agent"), HarnessId("bb-agent")])
PRINTABLE = st.characters(codec="utf-8", categories=("L", "N"), include_characters=" ")
LABELS = st.none() | st.text(PRINTABLE, min_size=1, max_size=64).filter(
    lambda text: text.strip() != "" and text.isprintable())


class Registry(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state = AccountState()
        self.model: dict[str, AccountRecord] = {}

    @rule(harness=HARNESSES, label=LABELS)
    def add(self, harness: HarnessId, label: str | None) -> None:
        record = AccountRecord(id=new_account_id(), harness=harness, label=label,
                               created_at=datetime(2026, 12, 2, tzinfo=UTC),
                               status=AccountStatus.CONNECTED)
        self.state = self.state.with_account(record)
        self.model[record.id] = record

    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        if self.model:
            # An index, not an id: ids are random, and hypothesis must replay the draw.
            chosen = list(self.model)[data.draw(st.integers(0, len(self.model) - 1))]
            self.state = self.state.without_account(chosen)
            del self.model[chosen]

    @rule(data=st.data(), harness=HARNESSES)
    def select(self, data: st.DataObject, harness: HarnessId) -> None:
        ids = [i for i, r in self.model.items() if r.harness == harness]
        index = data.draw(st.none() | st.integers(0, len(ids) - 1)) if ids else None
        chosen = None if index is None else ids[index]
        self.state = self.state.with_selection("local", harness, chosen)

    @rule(data=st.data(), label=LABELS)
    def rename(self, data: st.DataObject, label: str | None) -> None:
        if self.model:
            chosen = list(self.model)[data.draw(st.integers(0, len(self.model) - 1))]
            self.state = self.state.relabelled(chosen, label)
            renamed = self.state.get(chosen)
            assert renamed is not None and renamed.label == label
            assert renamed.created_at == self.model[chosen].created_at
            self.model[chosen] = renamed

    @invariant()
    def selections_name_kept_accounts(self) -> None:
        for harness in ("aa-agent", "bb-agent"):
            selected = self.state.selected("local", harness)
            assert selected is None or selected.harness == harness
        assert set(self.state.selections.values()) <= set(self.model)
        assert {r.id for r in self.state.accounts} == set(self.model)

    @invariant()
    def survives_the_file(self) -> None:
        again = AccountState.from_json(self.state.to_json(), environment="local")
        assert again == self.state


TestRegistry = Registry.TestCase
TestRegistry.settings = settings(max_examples=60, stateful_step_count=20, deadline=None)

WRITER = """
import sys
from datetime import UTC, datetime
from pathlib import Path
from clanker.accounts.homes import new_account_id
from clanker.accounts.store import AccountRecord, AccountStore
from clanker.ids import HarnessId
store = AccountStore(Path(sys.argv[1]))
for n in range(int(sys.argv[2])):
    record = AccountRecord(id=new_account_id(), harness=HarnessId("aa-agent"),
                           label=f"{sys.argv[3]}-{n}", created_at=datetime.now(UTC))
    store.change(lambda state: state.with_account(record))
"""


def test_concurrent_writers_in_separate_processes_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "accounts.json"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), "25", name])
               for name in ("a", "b", "c")]
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0, 0]
    state = AccountStore(path).load()
    assert sorted(r.label or "" for r in state.accounts) == sorted(
        f"{name}-{n}" for name in "abc" for n in range(25))
    assert state.generation == 75
