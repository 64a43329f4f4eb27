"""Start-up of ``clanker cmd``, relative to a bare interpreter, and its round trip.

Starts a grid (a real daemon under a throwaway ``CLANKER_HOME``), registers a
terminal from this process and grants it the shipped capabilities, then runs
each command N times (default 30) with that credential in its environment
and reports the median wall time: ``python -c pass``, ``clanker cmd list``,
``clanker cmd list --json``, ``clanker cmd run clanker_context`` and, for
comparison, ``clanker --version`` (the click group). It also times the same
``cmd-list`` and ``cmd-run clanker_context`` requests from inside this
process (one connection each, as ``clanker cmd`` sends them), which is the
grid's share of a call without process start. Bytecode is cached as on an
installed system (``PYTHONDONTWRITEBYTECODE`` is dropped and each command
runs once before it is timed); the commands are sampled in interleaved rounds.
``--write`` records the table in ``benchmarks/RESULTS.md``.

    uv run python benchmarks/cmd.py [--runs 30] [--write]

The target: ``clanker cmd list`` at most 6x a bare interpreter start.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from results import record


def medians(rows: list[tuple[str, list[str]]], runs: int, env: dict[str, str]
            ) -> dict[str, float]:
    """The median wall time of each command, sampled in interleaved rounds (one run of
    each per round), so a change in the machine's load weighs on every row alike."""
    for _, argv in rows:
        done = subprocess.run(argv, capture_output=True, env=env, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{argv} failed: {done.stderr.decode(errors='replace')}")
    samples: dict[str, list[float]] = {name: [] for name, _ in rows}
    for _ in range(runs):
        for name, argv in rows:
            started = time.perf_counter()
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                           check=False)
            samples[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in samples.items()}


def in_process(client: object, runs: int, call: str) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        if call == "list":
            client.capabilities()  # type: ignore[attr-defined]
        else:
            client.run("clanker_context")  # type: ignore[attr-defined]
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--write", action="store_true", help="record in benchmarks/RESULTS.md")
    args = parser.parse_args()
    script = shutil.which("clanker", path=str(Path(sys.executable).parent)) or "clanker"
    home = Path(tempfile.mkdtemp(prefix="ckb-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("CLANKER_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["CLANKER_HOME"] = str(home)
    os.environ["CLANKER_HOME"] = str(home)

    from clanker.bridge.cmd import BridgeClient
    from clanker.bridge.shipped import SHIPPED_NAMES
    from clanker.grid import daemon
    from clanker.grid.client import GridClient
    from clanker.paths import clanker_paths

    paths = clanker_paths()
    socket_path = daemon.ensure_running(paths)
    try:
        grid = GridClient(socket_path)
        cwd = str(Path(__file__).resolve().parent.parent)
        registration = grid.register(harness="bench-agent", workspace=cwd, cwd=cwd,
                                     launcher_pid=os.getpid())
        token = grid.grant_bridge(registration.terminal, registration.token, SHIPPED_NAMES)
        agent_env = {**env, "CLANKER_BRIDGE_TOKEN": token,
                     "CLANKER_BRIDGE_SOCKET": str(socket_path)}
        rows = [
            ("python -c pass", [sys.executable, "-c", "pass"]),
            ("clanker cmd list", [script, "cmd", "list"]),
            ("clanker cmd list --json", [script, "cmd", "list", "--json"]),
            ("clanker cmd run clanker_context", [script, "cmd", "run", "clanker_context"]),
            ("clanker --version", [script, "--version"]),
        ]
        timed = medians(rows, args.runs, agent_env)
        client = BridgeClient(socket_path, token)
        inside = {"cmd-list": in_process(client, args.runs * 10, "list"),
                  "cmd-run clanker_context": in_process(client, args.runs * 10, "run")}
    finally:
        daemon.stop(paths)
        shutil.rmtree(home, ignore_errors=True)
    base = timed["python -c pass"]
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}. Date: {datetime.now(UTC):%Y-%m-%d}. "
        f"Median of {args.runs} runs each.",
        "",
        "| command | median (ms) | times bare interpreter |",
        "| --- | ---: | ---: |",
    ]
    for name, _ in rows:
        lines.append(f"| `{name}` | {timed[name] * 1000:.1f} | {timed[name] / base:.1f} |")
    lines += ["", "| request, from a running process (one connection each) | median (ms) |",
              "| --- | ---: |"]
    for name, seconds in inside.items():
        lines.append(f"| `{name}` | {seconds * 1000:.2f} |")
    report = "\n".join(lines)
    print(report)
    if args.write:
        record("cmd", "`clanker cmd`", report)


if __name__ == "__main__":
    main()
