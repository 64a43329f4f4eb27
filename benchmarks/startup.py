"""Start-up cost of the clanker CLI, relative to a bare interpreter.

Runs each command N times (default 15) and reports the median wall time:
``python -c pass``, ``clanker --version``, ``clanker --help``, ``clanker
status`` (no grid running: what a shell prompt calls), ``clanker harnesses
--json`` (loads every plugin) and ``clanker sessions --json --all`` over empty
stores (every store's directory points at an empty one and no harness CLI is
on PATH: the listing answered without a scan, ``clanker.sessions.empty``), plus
which modules ``import clanker`` loads.
Bytecode is cached as on an installed system (``PYTHONDONTWRITEBYTECODE`` is
dropped and each command runs once before it is timed). Writes the table to
``benchmarks/RESULTS.md`` with the machine and date when ``--write`` is given.

    uv run python benchmarks/startup.py [--runs 15] [--write]

The targets: ``clanker --version`` and ``clanker harnesses --json`` at most
10x a bare interpreter start, ``clanker status`` and ``clanker sessions`` over
empty stores at most 8x, and importing ``clanker`` loads no plugin.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from results import record


def seconds(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                   check=False)
    return time.perf_counter() - started


def medians(rows: list[tuple[str, list[str], dict[str, str]]], runs: int) -> dict[str, float]:
    """The median of each row, sampled in interleaved rounds (one run of each per
    round), so that load from other work on the machine weighs on every row alike."""
    for _, argv, env in rows:
        seconds(argv, env)  # writes the bytecode cache, as any first run does
    samples: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    for _ in range(runs):
        for name, argv, env in rows:
            samples[name].append(seconds(argv, env))
    return {name: statistics.median(values) for name, values in samples.items()}


def loaded_modules(env: dict[str, str]) -> list[str]:
    code = ("import sys, clanker; "
            "print(','.join(sorted(m for m in sys.modules if m.startswith('clanker'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          check=True)
    return done.stdout.strip().split(",")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--write", action="store_true", help="record in benchmarks/RESULTS.md")
    args = parser.parse_args()
    script = shutil.which("clanker", path=str(Path(sys.executable).parent)) or "clanker"
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("CLANKER_HOME", str(Path(os.environ.get("TMPDIR", "/tmp")) / "clanker-bench"))
    empty = Path(env["CLANKER_HOME"]) / "empty-stores"
    empty.mkdir(parents=True, exist_ok=True)
    # Every store's directory is an empty one (and no harness CLI is on PATH), so
    # `sessions` costs start-up, the registry and one look at each store.
    bare = {**env, "HOME": str(empty), "PATH": "/usr/bin:/bin", "XDG_DATA_HOME": str(empty),
            "CODEX_HOME": str(empty), "CLAUDE_CONFIG_DIR": str(empty),
            "PI_CODING_AGENT_DIR": str(empty)}
    rows = [
        ("python -c pass", [sys.executable, "-c", "pass"], env),
        ("clanker --version", [script, "--version"], env),
        ("clanker --help", [script, "--help"], env),
        ("clanker status", [script, "status"], env),
        ("clanker harnesses --json", [script, "harnesses", "--json"], env),
        ("clanker sessions --json --all (empty stores)", [script, "sessions", "--json", "--all"],
         bare),
    ]
    load = os.getloadavg()[0]
    measured = medians(rows, args.runs)
    base = measured["python -c pass"]
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}. Date: {datetime.now(UTC):%Y-%m-%d}. "
        f"Median of {args.runs} interleaved runs each; load average before the runs "
        f"{load:.1f}.",
        "",
        "| command | median (ms) | times bare interpreter |",
        "| --- | ---: | ---: |",
    ]
    for name, _, _ in rows:
        lines.append(f"| `{name}` | {measured[name] * 1000:.1f} | {measured[name] / base:.1f} |")
    modules = loaded_modules(env)
    lines += ["", f"`import clanker` loads: {', '.join(f'`{m}`' for m in modules)}."]
    report = "\n".join(lines)
    print(report)
    if args.write:
        record("startup", "Start-up", report)


if __name__ == "__main__":
    main()
