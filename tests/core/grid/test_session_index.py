"""The grid's session index: its answers against a fresh local scan, after real file
operations, through real inotify and a real grid (in-process, and the daemon).

Nothing waits for time: the grid's barrier makes every change made before a
question part of its answer, so each check compares at once. The ground truth is
a new :class:`SessionService` without caches, reading every file afresh.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from clanker.api import Clanker, _listing
from clanker.environment.local import LocalEnvironment
from clanker.grid.client import GridClient
from clanker.grid.index import SessionIndex
from clanker.grid.protocol import SessionsRequest
from clanker.registry import Registry
from clanker.sessions.service import SessionListing, SessionService
from tests.core.grid.conftest import LiveGrid

FIXTURE = Path(__file__).parents[2] / "fixtures/codex/sessions/codex-home"
TEMPLATE = sorted((FIXTURE / "sessions").rglob("rollout-*.jsonl"))[0]
TEMPLATE_ID = TEMPLATE.stem[-36:]


def environ(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "PATH": os.environ.get("PATH", ""),
            "CODEX_HOME": str(home / "codex"), "CLANKER_HOME": str(home / "clanker"),
            "CLANKER_LOAD_PLUGINS": "codex"}


def new_session(day: Path, minute: int, cwd: Path | None = None) -> Path:
    """A copy of a captured Codex rollout under a fresh id, in ``day`` (recorded in
    ``cwd`` when given)."""
    native = str(uuid.uuid4())
    day.mkdir(parents=True, exist_ok=True)
    path = day / f"rollout-2026-11-30T09-{minute % 60:02d}-00-{native}.jsonl"
    text = TEMPLATE.read_text().replace(TEMPLATE_ID, native)
    # The captured session moved between two directories: both become ``cwd``.
    path.write_text(text if cwd is None else re.sub(r"/home/dev/src/[a-z]+", str(cwd), text))
    return path


def truth(env: dict[str, str], workspace: str | None = None) -> SessionListing:
    registry = Registry.from_entry_points(env)
    service = SessionService(environment=LocalEnvironment(env), cache_dir=None)
    return asyncio.run(service.discover([registry.providers["codex"]],  # type: ignore[index]
                                        workspace=workspace))


def asked(socket_path: Path, env: dict[str, str], workspace: str | None = None
          ) -> SessionListing:
    request = SessionsRequest(environ=env, harnesses=["codex"], limit=512,
                              workspace=workspace)
    return _listing(*GridClient(socket_path, timeout=60).sessions(request))


def same(answer: SessionListing, expected: SessionListing) -> None:
    assert answer.sessions == expected.sessions
    assert [(r.harness, r.account, r.scan.skipped, r.scan.truncated, r.scan.partial,
             None if r.scan.error is None else r.scan.error.message) for r in answer.scans] \
        == [(r.harness, r.account, r.scan.skipped, r.scan.truncated, r.scan.partial,
             None if r.scan.error is None else r.scan.error.message) for r in expected.scans]


@pytest.fixture
def live(short_dir: Path) -> Any:
    index = SessionIndex(settle_ns=0)
    with LiveGrid(short_dir / "g.sock", sessions=index) as grid:
        yield grid, index


def test_every_kind_of_change_shows_in_the_next_answer(live: Any, tmp_path: Path) -> None:
    grid, index = live
    env = environ(tmp_path)
    sessions = tmp_path / "codex" / "sessions"
    day = sessions / "2026" / "11" / "30"
    first = new_session(day, 1)
    second = new_session(day, 2)

    def check() -> None:
        same(asked(grid.path, env), truth(env))

    check()
    check()
    assert index.watch is not None and index.watch.held >= 1  # the watch answered
    with first.open("a") as handle:  # an agent appends a turn
        handle.write(TEMPLATE.read_text().splitlines()[-1] + "\n")
    check()
    new_session(day, 3)  # added
    check()
    second.unlink()  # removed
    check()
    fresh = day / "tmp.jsonl"  # replaced by an atomic rename
    fresh.write_text(first.read_text().replace("09-01-00", "09-01-00"))
    os.replace(fresh, first)
    check()
    os.rename(first, day / first.name.replace("T09-01", "T09-59"))  # renamed
    check()
    new_session(sessions / "2026" / "12" / "01", 4)  # directories that appear later
    check()
    shutil.rmtree(sessions / "2026" / "12")
    check()


def test_a_store_that_appears_later_is_listed(live: Any, tmp_path: Path) -> None:
    grid, _ = live
    env = environ(tmp_path)
    same(asked(grid.path, env), truth(env))  # no ~/.codex at all yet
    new_session(tmp_path / "codex" / "sessions" / "2026" / "11" / "30", 5)
    answer = asked(grid.path, env)
    assert len(answer.sessions) == 1
    same(answer, truth(env))


def test_lost_events_void_every_proof(live: Any, tmp_path: Path) -> None:
    """The kernel's overflow, as watchdog reports it, makes the next answer a check."""
    from watchdog.observers.inotify_c import InotifyConstants, InotifyEvent, Mask

    grid, index = live
    env = environ(tmp_path)
    day = tmp_path / "codex" / "sessions" / "2026" / "11" / "30"
    new_session(day, 6)
    same(asked(grid.path, env), truth(env))
    watch = index.watch
    assert watch is not None
    epoch = watch.epoch
    # The event inotify reads when its queue overflowed, through watchdog's own path.
    watch._fd.handle_event(InotifyEvent(-1, Mask(InotifyConstants.IN_Q_OVERFLOW), 0, b""))
    assert watch.epoch == epoch + 1
    held = watch.held
    same(asked(grid.path, env), truth(env))
    assert watch.held == held  # answered by stat, not by the voided proof
    same(asked(grid.path, env), truth(env))


def test_without_enough_watches_answers_stay_right(short_dir: Path, tmp_path: Path) -> None:
    index = SessionIndex(settle_ns=0, max_watches=1)
    with LiveGrid(short_dir / "g.sock", sessions=index) as grid:
        env = environ(tmp_path)
        day = tmp_path / "codex" / "sessions" / "2026" / "11" / "30"
        path = new_session(day, 7)
        same(asked(grid.path, env), truth(env))
        path.unlink()
        same(asked(grid.path, env), truth(env))
        assert index.watch is not None and index.watch.held == 0


def test_workspace_matching_is_the_local_one(live: Any, tmp_path: Path) -> None:
    grid, _ = live
    env = environ(tmp_path)
    new_session(tmp_path / "codex" / "sessions" / "2026" / "11" / "30", 8)
    cwd = truth(env).sessions[0].cwd
    assert cwd is not None
    for workspace in (cwd, "/nowhere/else"):
        same(asked(grid.path, env, workspace), truth(env, workspace))


def test_a_link_put_on_a_sessions_directory_moves_it(live: Any, tmp_path: Path) -> None:
    """A session's directory is resolved through links: one that appears on the way
    (here, its parent moved away and replaced by a link elsewhere) changes where
    it belongs, and the grid's remembered resolution shows it."""
    grid, _ = live
    env = environ(tmp_path)
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / "app").mkdir(parents=True)
    (elsewhere / "app").mkdir(parents=True)
    new_session(tmp_path / "codex" / "sessions" / "2026" / "11" / "30", 11, cwd=work / "app")
    for _ in range(2):
        for workspace in (str(work / "app"), str(elsewhere / "app")):
            same(asked(grid.path, env, workspace), truth(env, workspace))
    assert len(asked(grid.path, env, str(work / "app")).sessions) == 1
    work.rename(tmp_path / "old-work")
    work.symlink_to(elsewhere)
    for workspace in (str(work / "app"), str(elsewhere / "app")):
        same(asked(grid.path, env, workspace), truth(env, workspace))
    assert len(asked(grid.path, env, str(elsewhere / "app")).sessions) == 1


class StoreOperations(RuleBasedStateMachine):
    """Random file operations on one store; after each, the grid answers as a fresh scan."""

    grid: Any = None
    base: Path | None = None

    @initialize()
    def make_store(self) -> None:
        assert self.base is not None
        self.home = self.base / uuid.uuid4().hex[:8]
        self.env = environ(self.home)
        self.days = [self.home / "codex" / "sessions" / "2026" / "11" / f"{d:02d}"
                     for d in (28, 29, 30)]
        self.files: list[Path] = []
        self.minute = 0

    @rule(day=st.integers(0, 2))
    def add(self, day: int) -> None:
        self.minute += 1
        self.files.append(new_session(self.days[day], self.minute))

    @rule(pick=st.integers(0, 99))
    def append(self, pick: int) -> None:
        if self.files:
            with self.files[pick % len(self.files)].open("a") as handle:
                handle.write('{"not": "a turn"}\n')

    @rule(pick=st.integers(0, 99))
    def remove(self, pick: int) -> None:
        if self.files:
            self.files.pop(pick % len(self.files)).unlink()

    @rule(pick=st.integers(0, 99))
    def replace(self, pick: int) -> None:
        if self.files:
            target = self.files[pick % len(self.files)]
            fresh = target.with_suffix(".tmp")
            fresh.write_text(target.read_text() + '{"more": 1}\n')
            os.replace(fresh, target)

    @rule(pick=st.integers(0, 99))
    def corrupt(self, pick: int) -> None:
        if self.files:
            self.files[pick % len(self.files)].write_text("not json\n")

    @rule(day=st.integers(0, 2))
    def drop_day(self, day: int) -> None:
        shutil.rmtree(self.days[day], ignore_errors=True)
        self.files = [f for f in self.files if f.parent != self.days[day]]

    @invariant()
    def answers_as_a_fresh_scan(self) -> None:
        if hasattr(self, "env"):
            same(asked(self.grid.path, self.env), truth(self.env))


def test_random_operations_keep_the_index_exact(live: Any, tmp_path: Path) -> None:
    grid, _ = live
    StoreOperations.grid, StoreOperations.base = grid, tmp_path
    runner = StoreOperations.TestCase
    runner.settings = settings(max_examples=10, stateful_step_count=8, deadline=None,
                               suppress_health_check=list(HealthCheck))
    runner().runTest()


def test_the_library_asks_a_running_daemon(home: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``Clanker.sessions`` through a real daemon, and the same after a change."""
    for name, value in environ(tmp_path).items():
        if name != "CLANKER_HOME":
            monkeypatch.setenv(name, value)
    day = tmp_path / "codex" / "sessions" / "2026" / "11" / "30"
    path = new_session(day, 9)
    clanker = Clanker()
    assert clanker.start_grid().running

    def listed() -> SessionListing:
        return asyncio.run(clanker.sessions(workspace=None, harnesses=["codex"]))

    def local() -> SessionListing:
        return asyncio.run(Clanker().sessions(workspace=None, harnesses=["codex"], grid=False))

    status = clanker.grid_status()
    log = status.location.log

    def answered() -> int:  # the grid's own word that it answered a listing
        return log.read_text().count("INFO clanker.grid.index: sessions:")

    same(asked(status.location.socket, dict(os.environ)), local())
    before = answered()
    same(listed(), local())
    path.unlink()
    new_session(day, 10)
    same(listed(), local())
    assert answered() > before
