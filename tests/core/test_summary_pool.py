"""Summaries made by the worker process (clanker.sessions.pool) against this process's own.

The pool's thresholds are lowered so that a small store goes through it; what
it answers must be what one process answers, file for file and listing for
listing, whichever side summarized a file.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path

import pytest
from attrs import evolve
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clanker.ids import HarnessId
from clanker.registry import Registry
from clanker.sessions import pool
from clanker.sessions.types import HarnessSession
from clanker.testing.sessions import session_service
from clanker.testing.strategies import awkward_values, json_line_records
from clanker_pi.summaries import summarize as pi_summarize

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
HARNESSES = ("codex", "claude", "pi")


PI = HarnessId("pi")


def _here(jobs: list[pool.Job]) -> list[pool.Outcome]:
    """Each job summarized in this process and placed as a scan places it (``evolve``)."""
    outcomes = [pool.summarize_one(pi_summarize, job, 64 * 1024, 128 * 1024) for job in jobs]
    return [evolve(found, harness=PI, store_path=path, order=order)
            if isinstance(found, HarnessSession) else found
            for found, (path, _, order) in zip(outcomes, jobs, strict=True)]


def _pi_jobs() -> list[pool.Job]:
    files = sorted((FIXTURES / "pi/sessions/pi-agent/sessions").rglob("*.jsonl"))
    assert files
    return [(str(path), path.stat(), order) for order, path in enumerate(files)]


@pytest.fixture
def through_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool, "MIN_FILES", 1)
    monkeypatch.setattr(pool, "CHUNK", 1)


@pytest.mark.usefixtures("through_the_pool")
def test_the_worker_answers_what_this_process_answers() -> None:
    jobs = _pi_jobs()
    gone = jobs[0][0] + ".gone"
    jobs.append((gone, jobs[0][1], len(jobs)))  # removed after the walk: its error, not a summary
    here = _here(jobs)
    process = pool._WORKER.start()
    assert process is not None
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        pool._send(process.stdin, (pi_summarize, jobs, PI, 64 * 1024, 128 * 1024, None))
        there = pool._receive(process.stdout)
    finally:
        pool._WORKER.rest()  # done with it, as a scan would be
    assert len(there) == len(here)
    for mine, theirs in zip(here[:-1], there[:-1], strict=True):
        assert theirs == mine
    assert any(isinstance(found, HarnessSession) for found in there)
    assert isinstance(here[-1], FileNotFoundError)
    assert isinstance(there[-1], FileNotFoundError)


@pytest.mark.usefixtures("through_the_pool")
def test_both_sides_together_keep_the_order_of_the_files() -> None:
    jobs = _pi_jobs() * 5
    alone = _here(jobs)
    assert pool.summarize_files(pi_summarize, jobs, PI, head_bytes=64 * 1024,
                                tail_bytes=128 * 1024, local_files=True) == alone


@pytest.mark.usefixtures("through_the_pool")
def test_a_closure_is_summarized_here() -> None:
    jobs = _pi_jobs()

    def summarize(sample):  # type: ignore[no-untyped-def]
        return pi_summarize(sample)

    assert not pool._sendable(summarize, None)
    assert pool.summarize_files(summarize, jobs, PI, head_bytes=64 * 1024, tail_bytes=128 * 1024,
                                local_files=True) == _here(jobs)


def _listing(tree: Path) -> list[tuple[object, ...]]:
    registry = Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": ",".join(HARNESSES)})
    providers = [registry.providers[h] for h in HARNESSES]  # type: ignore[index]
    environ = {"HOME": str(tree / "home"), "PATH": os.environ.get("PATH", ""),
               "CODEX_HOME": str(tree / "codex"), "CLAUDE_CONFIG_DIR": str(tree / "claude"),
               "PI_CODING_AGENT_DIR": str(tree / "pi")}
    listing = asyncio.run(session_service(environ).discover(providers, workspace=None,
                                                           limit=100_000))
    scans = [(r.harness, r.scan.skipped, r.scan.truncated, r.scan.error) for r in listing.scans]
    return [*scans, *listing.sessions]


def test_a_listing_through_the_pool_is_the_listing_of_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(FIXTURES / "codex/sessions/codex-home", tmp_path / "codex")
    shutil.copytree(FIXTURES / "claude/sessions/claude-config", tmp_path / "claude")
    shutil.copytree(FIXTURES / "pi/sessions/pi-agent", tmp_path / "pi")
    (tmp_path / "home").mkdir()
    monkeypatch.setattr(pool, "MIN_FILES", 10**9)
    alone = _listing(tmp_path)
    monkeypatch.setattr(pool, "MIN_FILES", 1)
    monkeypatch.setattr(pool, "CHUNK", 1)
    assert _listing(tmp_path) == alone
    assert len(alone) > 20


@pytest.mark.usefixtures("through_the_pool")
def test_an_idle_worker_stops_and_the_next_scan_starts_another(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pool, "IDLE_SECONDS", 0.01)
    jobs = _pi_jobs()
    alone = _here(jobs)
    assert pool.summarize_files(pi_summarize, jobs, PI, head_bytes=64 * 1024,
                                tail_bytes=128 * 1024, local_files=True) == alone
    stopped = threading.Event()
    # Waits for the stop however slow the machine; never a bound on how long it takes.
    for _ in range(6000):
        if pool._WORKER._process is None:
            stopped.set()
            break
        stopped.wait(0.01)
    assert stopped.is_set()
    assert pool.summarize_files(pi_summarize, jobs, PI, head_bytes=64 * 1024,
                                tail_bytes=128 * 1024, local_files=True) == alone
    assert not pool._WORKER._failed
    monkeypatch.setattr(pool, "IDLE_SECONDS", 30.0)
    pool._WORKER.rest()  # the short timer is replaced: it cannot stop the next test's worker


_HEADER = b'{"type":"session","id":"a","cwd":"/x","timestamp":"2026-01-01T00:00:00Z"}\n'
_FILES = json_line_records(
    ["session", "message", "session_info", "model_change", "x"],
    ["id", "cwd", "timestamp", "name", "provider", "modelId", "message", "parentSession"],
    awkward_values(),
    body=("message", ("message",), ("role", "content", "timestamp", "provider", "model")))
_STORES = st.lists(st.one_of(_FILES, _FILES.map(lambda body: _HEADER + body)),
                   min_size=1, max_size=6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(_STORES)
def test_any_file_the_worker_summarizes_comes_back_as_this_process_makes_it(
    through_the_pool: None, contents: list[bytes]
) -> None:
    """Whatever a file holds (lone surrogates, NUL, huge numbers, odd shapes), its
    summary survives the trip from the worker unchanged."""
    with tempfile.TemporaryDirectory() as folder:
        jobs: list[pool.Job] = []
        for number, data in enumerate(contents):
            path = Path(folder) / f"{number}.jsonl"
            path.write_bytes(data)
            jobs.append((str(path), path.stat(), number))
        alone = _here(jobs)
        # Straight to the worker: every file goes through it, whichever side is faster.
        process = pool._WORKER.start()
        assert process is not None
        assert process.stdin is not None
        assert process.stdout is not None
        try:
            pool._send(process.stdin, (pi_summarize, jobs, PI, 64 * 1024, 128 * 1024, None))
            assert pool._receive(process.stdout) == alone
        finally:
            pool._WORKER.rest()
        assert pool.summarize_files(pi_summarize, jobs, PI, head_bytes=64 * 1024,
                                    tail_bytes=128 * 1024, local_files=True) == alone


@pytest.mark.usefixtures("through_the_pool")
def test_two_scans_at_once_share_the_worker_without_mixing_their_answers() -> None:
    jobs = _pi_jobs() * 8
    alone = _here(jobs)
    answers: list[list[pool.Outcome]] = []

    def scan() -> None:
        answers.append(pool.summarize_files(pi_summarize, jobs, PI, head_bytes=64 * 1024,
                                            tail_bytes=128 * 1024, local_files=True))

    threads = [threading.Thread(target=scan) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [alone, alone, alone]
    assert not pool._WORKER._failed


def _stopped(pid: int) -> bool:
    """Whether the kernel reports ``pid`` as stopped (state ``T``)."""
    state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    return state in ("T", "t")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.skipif(pool._processors() < 2, reason="the worker takes part only with two processors")
@pytest.mark.usefixtures("through_the_pool")
def test_a_stopped_worker_does_not_hold_the_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that never answers (here a real one, stopped with SIGSTOP) is ended
    once its bound passes, and its files are summarized here: the same answer."""
    monkeypatch.setattr(pool, "ANSWER_SECONDS", 0.5)
    worker = pool._Worker()  # this test's own: the one the others share stays usable
    monkeypatch.setattr(pool, "_WORKER", worker)
    jobs = _pi_jobs() * 4
    alone = _here(jobs)
    process = worker.start()
    assert process is not None
    try:
        os.kill(process.pid, signal.SIGSTOP)
        seen = threading.Event()
        # Waits for the kernel to stop it however slow the machine; never a bound on time.
        for _ in range(6000):
            if _stopped(process.pid):
                seen.set()
                break
            seen.wait(0.01)
        assert seen.is_set()
        assert pool.summarize_files(pi_summarize, jobs, PI, head_bytes=64 * 1024,
                                    tail_bytes=128 * 1024, local_files=True) == alone
        assert process.returncode == -signal.SIGKILL  # ended, and reaped
        assert worker._failed and worker._process is None
        # From now on this process summarizes alone, with the same answers.
        assert pool.summarize_files(pi_summarize, jobs, PI, head_bytes=64 * 1024,
                                    tail_bytes=128 * 1024, local_files=True) == alone
    finally:
        if process.returncode is None:
            process.kill()
            process.wait()
        worker.rest()
