"""``clanker deck`` under load: 200 agents, 100 lifecycle events a second.

A real in-process grid (on the socket the library finds, in a throwaway
``CLANKER_HOME``) holds 200 registered terminals; a driver applies 100 events a
second through the grid's broker (turns starting and completing across the
agents) while a headless deck (prompt_toolkit pipe input, ``DummyOutput``)
follows the stream. For each event we record when it was applied and when the
deck's rows first showed that revision: the lag's median, p95 and max, and
whether it grows (the p95 of the last third against the first). CPU is the
deck's own threads (its event loop and its stream reader), from their thread
CPU clocks; memory is the process's resident set before the deck started and
at the end (the grid shares the process).

    uv run python benchmarks/deck.py [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from results import record

AGENTS = 200
RATE = 100


def _rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _thread_cpu(thread: threading.Thread) -> float:
    assert thread.ident is not None
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def _agents(live: Any) -> list[str]:
    """Register :data:`AGENTS` terminals, each with a session up."""
    from clanker.attention.envelope import parse_envelope
    from tests.core.grid.conftest import root

    terminals = [live.on_loop(lambda g: g.register(
        harness="bench", cwd="/tmp", launcher_pid=os.getpid())).terminal
        for _ in range(AGENTS)]
    for terminal in terminals:
        live.on_loop(lambda g, t=terminal: g.broker.apply(
            t, parse_envelope(root("session_started"))))
    return terminals


def _drive(live: Any, terminals: list[str], count: int,
           sent: dict[tuple[str, int], float]) -> None:
    """Apply ``count`` events at :data:`RATE` a second, noting when each revision went out."""
    from clanker.attention.envelope import parse_envelope
    from tests.core.grid.conftest import root

    turns = dict.fromkeys(terminals, 0)
    start = time.monotonic()
    for index in range(count):
        terminal = terminals[index % AGENTS]
        turn = turns[terminal]
        event = "turn_started" if turn % 2 == 0 else "turn_completed"
        turns[terminal] = turn + 1

        def apply(grid: Any, t: str = terminal, e: str = event, u: str = f"u{turn // 2}") -> int:
            grid.broker.apply(t, parse_envelope(root(e, turnId=u)))
            return int(grid.entry(t).revision["revision"])

        revision = live.on_loop(apply)
        sent[(terminal, revision)] = time.monotonic()
        delay = start + (index + 1) / RATE - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def _report(ordered: list[float], missed: int, count: int, elapsed: float, cpu: float,
            rss_before: float, rss_after: float) -> str:
    third = max(1, len(ordered) // 3)
    p95 = statistics.quantiles(ordered, n=20)[18]
    early = statistics.quantiles(ordered[:third], n=20)[18]
    late = statistics.quantiles(ordered[-third:], n=20)[18]
    load = os.getloadavg()[0]
    machine = (f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
               f"Python {platform.python_version()}")
    return "\n".join([
        f"Machine: {machine}. Date: {datetime.now(UTC).date()}. Load average before: "
        f"{load:.1f}.",
        f"{AGENTS} agents, {count} events at {RATE}/s over {elapsed:.1f} s "
        "(turns starting and completing), a headless deck following the grid's stream.",
        "",
        "| measurement | result |",
        "| --- | ---: |",
        f"| event → row lag, median | {statistics.median(ordered) * 1000:.1f} ms |",
        f"| event → row lag, p95 | {p95 * 1000:.1f} ms |",
        f"| event → row lag, max | {max(ordered) * 1000:.1f} ms |",
        f"| p95, first third → last third (no growth: similar) | "
        f"{early * 1000:.1f} → {late * 1000:.1f} ms |",
        f"| events never shown as their own revision (a newer one came first) | {missed} |",
        f"| deck CPU (its loop and stream threads) | {cpu / elapsed * 100:.1f}% of a core |",
        f"| resident memory, before the deck → end (grid in the same process) | "
        f"{rss_before:.0f} → {rss_after:.0f} MiB |",
        f"| peak resident memory of the process | "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB |",
    ])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    seconds = parser.parse_args().seconds
    home = Path(tempfile.mkdtemp(prefix="ck-bench-", dir="/tmp"))
    os.environ["CLANKER_HOME"] = str(home)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from clanker.api import Clanker
    from clanker.deck.app import Deck
    from clanker.deck.seen import SeenMarks
    from clanker.grid.daemon import grid_location
    from clanker.paths import clanker_paths
    from clanker.tmux.control import Tmux
    from tests.core.grid.conftest import LiveGrid

    (location := grid_location(clanker_paths())).directory.mkdir(mode=0o700, parents=True)
    sent: dict[tuple[str, int], float] = {}
    lags: list[float] = []
    with LiveGrid(location.socket, max_terminals=AGENTS + 10,
                  max_terminals_per_launcher=AGENTS + 10) as live, \
            create_pipe_input() as pipe:
        terminals = _agents(live)
        rss_before = _rss_mib()
        deck = Deck(Clanker(), seen=SeenMarks(home / "seen.json"), tmux=Tmux({"PATH": ""}),
                    workspace="/tmp", input=pipe, output=DummyOutput())
        refresh = deck._refresh

        def observed(kind: str = "") -> None:
            refresh(kind)
            now = time.monotonic()
            for row in deck.rows:
                at = sent.pop((row.terminal, row.revision), None)
                if at is not None:
                    lags.append(now - at)

        deck._refresh = observed  # type: ignore[method-assign]
        runner = threading.Thread(target=lambda: asyncio.run(deck.run()))
        runner.start()
        while not (deck.feed.synced and deck.app.is_running):
            time.sleep(0.05)
        cpu_start = _thread_cpu(runner) + _thread_cpu(deck.feed._thread)
        count = int(seconds * RATE)
        start = time.monotonic()
        _drive(live, terminals, count, sent)
        elapsed = time.monotonic() - start
        deadline = time.monotonic() + 30
        while sent and time.monotonic() < deadline:
            time.sleep(0.05)
        cpu = _thread_cpu(runner) + _thread_cpu(deck.feed._thread) - cpu_start
        rss_after = _rss_mib()
        pipe.send_text("q")
        runner.join(30)
    report = _report(lags, len(sent), count, elapsed, cpu, rss_before, rss_after)
    print(report)
    record("deck", "The deck: 200 agents at 100 events/s", report)
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
