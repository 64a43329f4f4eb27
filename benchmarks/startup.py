"""Start-up cost of the clanker CLI, relative to a bare interpreter.

Runs each command N times (default 15) and reports the median wall time:
``python -c pass``, ``clanker --version``, ``clanker --help``, ``clanker
status`` (no grid running: what a shell prompt calls) and ``clanker harnesses
--json`` (loads every plugin), plus which modules ``import clanker`` loads.
Bytecode is cached as on an installed system (``PYTHONDONTWRITEBYTECODE`` is
dropped and each command runs once before it is timed). Writes the table to
``benchmarks/RESULTS.md`` with the machine and date when ``--write`` is given.

    uv run python benchmarks/startup.py [--runs 15] [--write]

The target: ``clanker --version`` at most 10x a bare interpreter start, and
importing ``clanker`` loads no plugin.
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


def median_seconds(argv: list[str], runs: int, env: dict[str, str]) -> float:
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                   check=False)  # writes the bytecode cache, as any first run does
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                       check=False)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


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
    rows = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("clanker --version", [script, "--version"]),
        ("clanker --help", [script, "--help"]),
        ("clanker status", [script, "status"]),
        ("clanker harnesses --json", [script, "harnesses", "--json"]),
    ]
    medians = {name: median_seconds(argv, args.runs, env) for name, argv in rows}
    base = medians["python -c pass"]
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}. Date: {datetime.now(UTC):%Y-%m-%d}. "
        f"Median of {args.runs} runs each.",
        "",
        "| command | median (ms) | times bare interpreter |",
        "| --- | ---: | ---: |",
    ]
    for name, _ in rows:
        lines.append(f"| `{name}` | {medians[name] * 1000:.1f} | {medians[name] / base:.1f} |")
    modules = loaded_modules(env)
    lines += ["", f"`import clanker` loads: {', '.join(f'`{m}`' for m in modules)}."]
    report = "\n".join(lines)
    print(report)
    if args.write:
        record("startup", "Start-up", report)


if __name__ == "__main__":
    main()
