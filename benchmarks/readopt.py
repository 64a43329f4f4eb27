"""How long a launch's attention is dark after its grid is killed.

In a fresh clanker home: start the grid daemon as a launch does, register a
terminal (and grant its bridge credential) as this process, SIGKILL the
daemon, wait until the kernel has released its lock, then time
:class:`~clanker.launch.readopt.Readopter` (from the moment the launcher would
notice, through starting the next daemon, re-presenting the terminal and
carrying its bridge credential) until the terminal is listed again. The
first attempt's wait (:data:`~clanker.launch.readopt.FIRST_DELAY`) is part of
the figure, as it is of a launch's.

    uv run python benchmarks/readopt.py [--rounds 9] [--write]
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from results import record


def one_round(home: Path) -> float:
    os.environ["CLANKER_HOME"] = str(home)
    from clanker.grid.client import GridClient
    from clanker.grid.daemon import _lock_held, ensure_running, grid_location
    from clanker.launch.readopt import Readopter, Readoption
    from clanker.paths import clanker_paths

    paths = clanker_paths()
    socket = ensure_running(paths)
    client = GridClient(socket)
    registration = client.register(harness="fake-agent", workspace="/tmp", cwd="/tmp",
                                   launcher_pid=os.getpid())
    bridge = client.grant_bridge(registration.terminal, registration.token,
                                 ["clanker_agents"])
    os.kill(client.hello().pid, signal.SIGKILL)
    lock = grid_location(paths).lock
    while _lock_held(lock):
        time.sleep(0.01)
    readoption = Readoption(paths=paths, socket=socket, harness="fake-agent",
                            workspace="/tmp", cwd="/tmp", launcher_pid=os.getpid(),
                            registration=registration, bridge_token=bridge,
                            grants=("clanker_agents",))
    started = time.perf_counter()
    taken, notice = Readopter(readoption, ended=threading.Event()).run()
    took = time.perf_counter() - started
    if not taken:
        raise SystemExit(notice)
    [entry] = client.list_terminals()
    assert entry.terminal == registration.terminal
    client.shutdown()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--write", action="store_true", help="record in RESULTS.md")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    figures = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="ck-", dir="/tmp") as home:
            figures.append(one_round(Path(home)) * 1000)
    median = statistics.median(figures)
    report = (
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}. Date: {datetime.now(UTC):%Y-%m-%d}. Load "
        f"average before the runs {load:.1f}.\n\n"
        f"| grid SIGKILLed, its lock released; then until the terminal is listed by the "
        f"next grid (median of {args.rounds}) | ms |\n| --- | ---: |\n"
        f"| start the next daemon, re-present the terminal, carry its bridge credential "
        f"(includes the first attempt's 250 ms wait) | {median:.0f} |\n\n"
        f"Every round: {', '.join(f'{f:.0f}' for f in figures)} ms.")
    print(report)
    if args.write:
        record("readopt", "A launch taken up by the grid that replaced a killed one", report)


if __name__ == "__main__":
    main()
