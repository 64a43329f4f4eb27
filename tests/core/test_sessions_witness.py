"""Proof that a store is unchanged (Witness) and the answers it lets the service reuse.

Everything runs on real files: the point is what the file system reports.
Pauses of ``PAUSE`` separate a change from a listing, longer than the
timestamp tick of the file systems tests run on (ext4, tmpfs, btrfs, xfs:
nanoseconds, at worst a 10 ms clock tick; FAT or HFS+ would need seconds), so
a listing can trust what it saw (with the settling time shortened to
``SETTLE_NS``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from clanker.environment import witness as witness_module
from clanker.environment.local import LocalEnvironment
from clanker.environment.witness import Witness
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.ids import HarnessId
from clanker.registry import Registry
from clanker.sessions.filestore import find_files
from clanker.sessions.service import SessionService
from clanker.sessions.types import SessionScan
from clanker.sessions.witness import ScanMemo
from tests.helpers import FakeSessions, make_sessions_plugin, write_fake_session

SETTLE_NS = 5_000_000
PAUSE = 0.015
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def witnessed(root: Path) -> Witness:
    witness = Witness(settle_ns=0)
    find_files(root, depth=1, accept_file=lambda name: name.endswith(".jsonl"), witness=witness)
    return witness


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    (root / "p").mkdir(parents=True)
    (root / "p" / "a.jsonl").write_text('{"n": 1}\n')
    (root / "p" / "notes.txt").write_text("not a session\n")
    (root / "q").mkdir()
    return root


def _append(path: Path) -> None:
    with path.open("a") as handle:
        handle.write('{"n": 2}\n')


def _rewrite_same_size(path: Path) -> None:
    with path.open("r+") as handle:
        handle.write('{"n": 9}\n')


def _replace(path: Path) -> None:
    fresh = path.with_name("new.tmp")
    fresh.write_text(path.read_text())
    os.replace(fresh, path)


def _link_instead(path: Path) -> None:
    path.unlink()
    path.symlink_to(path.parent.parent / "p" / "notes.txt")


CHANGES: dict[str, Callable[[Path], None]] = {
    "appended": lambda root: _append(root / "p" / "a.jsonl"),
    "rewritten in place, same size": lambda root: _rewrite_same_size(root / "p" / "a.jsonl"),
    "replaced by rename": lambda root: _replace(root / "p" / "a.jsonl"),
    "replaced by a link": lambda root: _link_instead(root / "p" / "a.jsonl"),
    "times reset": lambda root: os.utime(root / "p" / "a.jsonl", (0, 0)),
    "deleted": lambda root: (root / "p" / "a.jsonl").unlink(),
    "a new file": lambda root: (root / "q" / "b.jsonl").write_text("{}\n"),
    "a new project": lambda root: (root / "r").mkdir(),
    "a project removed": lambda root: (root / "q").rmdir(),
    "the store removed": shutil.rmtree,
}


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES.keys())
def test_a_witness_sees_every_change_that_can_alter_a_listing(
    store: Path, change: Callable[[Path], None]
) -> None:
    witness = witnessed(store)
    assert witness.holds()
    time.sleep(PAUSE)
    change(store)
    assert not witness.holds()


def test_changes_a_listing_cannot_see_leave_the_witness_standing(store: Path) -> None:
    witness = witnessed(store)
    time.sleep(PAUSE)
    _append(store / "p" / "notes.txt")  # not a session file: its directory does not change
    (store / "p" / "a.jsonl").read_bytes()  # reading moves no time a witness keeps
    assert witness.holds()


def test_a_missing_store_is_witnessed_as_missing(tmp_path: Path) -> None:
    witness = witnessed(tmp_path / "none")
    assert witness.holds()
    (tmp_path / "none").mkdir()
    assert not witness.holds()


def test_a_store_that_is_a_dangling_link_is_missing_until_its_target_appears(
    tmp_path: Path
) -> None:
    (tmp_path / "sessions").symlink_to(tmp_path / "elsewhere")
    witness = witnessed(tmp_path / "sessions")
    assert witness.holds()
    (tmp_path / "elsewhere").mkdir()
    assert not witness.holds()


def test_other_inputs_are_witnessed_present_or_absent(tmp_path: Path) -> None:
    witness = Witness(settle_ns=0)
    (tmp_path / "config").write_text("a = 1\n")
    witness.path(tmp_path / "config")
    witness.path(tmp_path / "index-wal")
    assert witness.holds()
    (tmp_path / "index-wal").write_bytes(b"")
    assert not witness.holds()


def test_a_directory_changed_too_recently_cannot_vouch(store: Path) -> None:
    # A change in the same timestamp tick as the listing could go unseen.
    fresh = Witness()
    fresh.path(store)
    assert not fresh.usable
    time.sleep(PAUSE)
    settled = Witness(settle_ns=SETTLE_NS)
    settled.path(store)
    assert settled.usable


def test_a_sealed_witness_checks_the_newest_file_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The file an agent is writing is the newest: a listing during its work
    # should find the change at the first stat, not after thousands.
    for index in range(20):
        path = tmp_path / "p" / f"{index:02d}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_text("{}\n")
        os.utime(path, (1_800_000_000 + index, 1_800_000_000 + index))
    witness = witnessed(tmp_path)
    witness.seal()
    time.sleep(PAUSE)
    _append(tmp_path / "p" / "19.jsonl")
    looked: list[str] = []
    real_lstat = os.lstat

    def counting(path: str) -> os.stat_result:
        looked.append(path)
        return real_lstat(path)

    monkeypatch.setattr(os, "lstat", counting)
    assert not witness.holds()
    assert looked == [str(tmp_path / "p" / "19.jsonl")]


def test_a_memo_answers_while_its_witness_holds_and_forgets_after(store: Path) -> None:
    memo = ScanMemo(settle_ns=0)
    witness = memo.witness()
    find_files(store, depth=1, accept_file=lambda name: True, witness=witness)
    scan = SessionScan(skipped=1)
    memo.keep("key", witness, scan)
    assert memo.recall("key") is scan
    assert memo.recall("other") is None
    time.sleep(PAUSE)
    _append(store / "p" / "a.jsonl")
    assert memo.recall("key") is None
    _rewrite_same_size(store / "p" / "a.jsonl")  # forgotten, not revived by anything
    assert memo.recall("key") is None


def test_a_memo_keeps_no_failed_scan_and_nothing_it_cannot_trust(store: Path) -> None:
    memo = ScanMemo(settle_ns=0)
    failed = SessionScan(error=HarnessCapabilityError(ErrorKind.PARSE_FAILURE, "broken"))
    memo.keep("failed", witnessed(store), failed)
    untrusted = Witness()  # the store was just written
    untrusted.path(store)
    memo.keep("untrusted", untrusted, SessionScan())
    assert memo.recall("failed") is None
    assert memo.recall("untrusted") is None


def test_a_memo_is_bounded_least_recently_used_first(store: Path) -> None:
    memo = ScanMemo(capacity=2, settle_ns=0)
    scans = {key: SessionScan(skipped=index) for index, key in enumerate("abc")}
    memo.keep("a", witnessed(store), scans["a"])
    memo.keep("b", witnessed(store), scans["b"])
    assert memo.recall("a") is scans["a"]  # now "b" is the oldest
    memo.keep("c", witnessed(store), scans["c"])
    assert memo.recall("b") is None
    assert memo.recall("a") is scans["a"] and memo.recall("c") is scans["c"]


# -- through the service -----------------------------------------------------------------


def _service(home: Path) -> SessionService:
    return SessionService(
        environment=LocalEnvironment({"FAKE_AGENT_HOME": str(home), "PATH": os.environ["PATH"]}),
        cache_dir=None,
    )


def _listed(service: SessionService, registry: Registry, **request: Any) -> list[tuple[Any, ...]]:
    provider = registry.get_provider(HarnessId("fake-agent"))
    listing = asyncio.run(service.discover([provider], workspace=None, **request))
    return [(s.native_id, s.updated_at, s.title, s.store_path, s.message_count, s.order)
            for s in listing.sessions]


def test_an_unchanged_store_is_listed_again_without_a_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(witness_module, "SETTLE_NS", SETTLE_NS)
    home = tmp_path / "home"
    write_fake_session(home, "abc", str(tmp_path), T0)
    sessions = FakeSessions()
    registry = Registry.from_plugins({"fake-agent": make_sessions_plugin(sessions)}, environ={})
    service = _service(home)
    time.sleep(PAUSE)
    first = _listed(service, registry)
    assert _listed(service, registry) == first
    assert sessions.walks == 1
    _listed(service, registry, limit=1)  # another request is another answer
    assert sessions.walks == 2
    time.sleep(PAUSE)
    write_fake_session(home, "def", str(tmp_path), T0 + timedelta(minutes=1))
    assert [row[0] for row in _listed(service, registry)] == ["def", "abc"]
    assert sessions.walks == 3


@settings(max_examples=12, stateful_step_count=10, deadline=None)
class StoreUnderChange(RuleBasedStateMachine):
    """Whatever happens to a store, a service that remembers answers as a fresh one does.

    Every step changes the store (or not), waits past a timestamp tick, then
    lists with the long-lived service and with a new one; they must agree,
    and a step that changed nothing must not have walked the store.
    """

    IDS = ("a", "b", "c", "d")
    PROJECTS = ("p0", "p1", "p2")

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self._directory = tempfile.TemporaryDirectory()
        self.home = Path(self._directory.name) / "home"
        self.sessions = FakeSessions()
        self.registry = Registry.from_plugins(
            {"fake-agent": make_sessions_plugin(self.sessions)}, environ={})
        self.patch = pytest.MonkeyPatch()
        self.patch.setattr(witness_module, "SETTLE_NS", SETTLE_NS)
        self.service = _service(self.home)
        self.clock = T0

    def teardown(self) -> None:
        self.patch.undo()
        self._directory.cleanup()

    def _files(self) -> list[Path]:
        return sorted((self.home / "sessions").glob("*/*.jsonl"))

    def _check(self, *, changed: bool) -> None:
        time.sleep(PAUSE)
        walks = self.sessions.walks
        remembered = _listed(self.service, self.registry)
        assert remembered == _listed(_service(self.home), self.registry)
        if not changed:
            assert self.sessions.walks == walks + 1  # only the fresh service walked
        time.sleep(PAUSE)

    @initialize()
    def start(self) -> None:
        (self.home / "sessions").mkdir(parents=True)
        self._check(changed=True)

    @rule(native_id=st.sampled_from(IDS), project=st.sampled_from(PROJECTS))
    def write(self, native_id: str, project: str) -> None:
        self.clock += timedelta(minutes=1)
        write_fake_session(self.home, native_id, "/work/x", self.clock, project=project)
        self._check(changed=True)

    @rule(pick=st.integers(0, 10))
    def append(self, pick: int) -> None:
        files = self._files()
        if files:
            self.clock += timedelta(minutes=1)
            with files[pick % len(files)].open("a") as handle:
                handle.write(f'{{"type":"message","role":"user","text":"more",'
                             f'"timestamp":"{self.clock.isoformat()}"}}\n')
        self._check(changed=bool(files))

    @rule(pick=st.integers(0, 10))
    def rewrite_in_place(self, pick: int) -> None:
        files = self._files()
        if files:
            path = files[pick % len(files)]
            data = path.read_bytes()
            path.write_bytes(data.replace(b"task", b"TASK", 1))
        self._check(changed=bool(files))

    @rule(pick=st.integers(0, 10), project=st.sampled_from(PROJECTS))
    def move(self, pick: int, project: str) -> None:
        files = self._files()
        if files:
            source = files[pick % len(files)]
            (self.home / "sessions" / project).mkdir(exist_ok=True)
            source.rename(self.home / "sessions" / project / f"moved-{source.name}")
        self._check(changed=bool(files))

    @rule(pick=st.integers(0, 10))
    def delete(self, pick: int) -> None:
        files = self._files()
        if files:
            files[pick % len(files)].unlink()
        self._check(changed=bool(files))

    @rule()
    def nothing(self) -> None:
        self._check(changed=False)


TestStoreUnderChange = StoreUnderChange.TestCase
