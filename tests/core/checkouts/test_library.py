"""The library's worktree methods: the grid's agents are part of the answer."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clanker.api import Clanker
from clanker.checkouts.provenance import MAX_RECORDS, Phase, ProvenanceStore, Record
from clanker.checkouts.types import CheckoutError, Refusal
from clanker.grid.protocol import TerminalEntry
from clanker.paths import ClankerPaths


class _WithAgents(Clanker):
    """The real library, with the grid's answer given: an agent at each location."""

    def __init__(self, tmp_path: Path, *locations: str) -> None:
        root = tmp_path / "clanker"
        super().__init__(paths=ClankerPaths(config=root / "config", cache=root / "cache",
                                            state=root / "state", runtime=root / "run"))
        now = datetime.now(UTC)
        self._fixed = [TerminalEntry(
            terminal=f"t{index}", harness="fake-agent", workspace=None, cwd=where,
            launcher_pid=1, registered_at=now, location=where, attention="working",
            since=now, revision={}) for index, where in enumerate(locations)]

    def agents(self) -> list[TerminalEntry]:
        return list(self._fixed)


def test_agents_are_listed_where_they_work_and_protect_their_worktree(
        tmp_path: Path, repo: Path) -> None:
    made = asyncio.run(_WithAgents(tmp_path).create_worktree(repo, "busy"))
    clanker = _WithAgents(tmp_path, os.path.join(made.path, "src"), str(repo))
    listing = asyncio.run(clanker.worktrees(repo))
    agents = {w.path: [a.terminal for a in w.agents] for w in listing.worktrees}
    assert agents == {str(repo): ["t1"], made.path: ["t0"]}

    for attempt in (clanker.complete_worktree(repo, path=made.path),
                    clanker.complete_worktree(repo, branch="busy"),
                    clanker.create_worktree(repo, "busy")):
        with pytest.raises(CheckoutError) as refused:
            asyncio.run(attempt)
        assert refused.value.reason is Refusal.IN_USE
    plan = asyncio.run(clanker.prune_worktrees(repo, apply=True))
    assert [(c.eligible, c.reason) for c in plan.candidates] == [
        (False, "an agent works there")]
    assert Path(made.path).is_dir()
    done = asyncio.run(_WithAgents(tmp_path, str(repo)).complete_worktree(repo, branch="busy"))
    assert done.done


def test_the_record_file_is_private_and_bounded(tmp_path: Path) -> None:
    store = ProvenanceStore(tmp_path, environment="local", main_checkout="/r")
    now = datetime.now(UTC)
    live = Record(branch="live", path="/r-worktrees/live", base="0" * 40, phase=Phase.ACTIVE,
                  created_at=now)
    store.put(live)
    for index in range(MAX_RECORDS + 5):
        store.put(Record(branch=f"b{index}", path=f"/r-worktrees/b{index}", base="0" * 40,
                         phase=Phase.REMOVED, created_at=now, removed_at=now))
    records = store.records()
    assert len(records) == MAX_RECORDS and live in records
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert json.loads(store.path.read_text())["main_checkout"] == "/r"


@settings(deadline=None, max_examples=40)  # each example writes a file: never timed
@given(branch=st.text(min_size=1, max_size=40), phase=st.sampled_from(Phase),
       removed=st.booleans())
def test_records_read_back_as_written(tmp_path_factory: pytest.TempPathFactory, branch: str,
                                      phase: Phase, removed: bool) -> None:
    store = ProvenanceStore(tmp_path_factory.mktemp("state"), environment="local",
                            main_checkout="/r")
    now = datetime.now(UTC)
    record = Record(branch=branch, path="/r-worktrees/x", base="a" * 40, phase=phase,
                    created_at=now, removed_at=now if removed else None)
    store.put(record)
    (read,) = store.records()
    assert read == record and read.phase is phase


def test_importing_the_command_loads_no_plugin_and_no_git_code() -> None:
    code = ("import sys, clanker.cli.worktree; "
            "bad = sorted(m for m in sys.modules if m.startswith(('clanker_', 'clanker.checkouts',"
            " 'send2trash')) or m in ('pluggy', 'clanker.registry')); print(','.join(bad))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == ""
