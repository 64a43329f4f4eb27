"""The same synthetic tree listed by clanker and by the Python session readers people install.

The peers, pinned (PyPI): ``agent-chat-reader`` (Codex and Claude Code),
``agent-history`` (Claude Code and Codex), ``agent-sessions`` (Claude Code,
Codex, OpenCode, Pi; a library, called as ``discover_sessions``) and
``agent-session-reader`` (``ai-r``: Claude Code, Codex, OpenCode, Antigravity,
Pi). They are installed into a virtual environment of their own
(``--venv``, created with ``python -m venv`` and ``pip`` when it is missing),
never into clanker's; a peer that cannot be installed or started is skipped
with a note in the report.

The tree is the one ``benchmarks/sessions.py`` builds (Codex, Claude Code and Pi
layouts, sizes log-uniform from 2 KB to 5 MB). The peers find the stores under
``$HOME`` (``~/.claude``, ``~/.codex``, ``~/.pi/agent``), so they get a home
whose entries link into the tree; clanker gets the same directories through
its environment variables. Each peer is paired with clanker reading the same
harnesses (``CLANKER_LOAD_PLUGINS``), as ``clanker sessions --json --all
--limit 100000``: every session of every store. In interleaved rounds, for
both sides:

* cold: no cache of the tool's own (a fresh clanker home, a fresh cache
  directory for the peer); the files themselves are in the OS page cache,
  read by the build or the previous round;
* warm: the same command again, its caches kept;

with each process's wall time and peak RSS (measured by a parent that runs
nothing else), the median of the rounds, and peer / clanker ratios.

    uv run python benchmarks/peers.py [--sessions 3000] [--runs 3] [--venv PATH] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from results import record
from sessions import build, environ

PINNED = ("agent-chat-reader==0.1.7", "agent-history==0.10.0", "agent-sessions==0.2.0",
          "agent-session-reader==0.4.2")
# Runs a command with stdout into a file; prints its wall time and peak RSS (MiB).
_PEAK = (
    "import resource, subprocess, sys, time\n"
    "started = time.perf_counter()\n"
    "with open(sys.argv[1], 'wb') as out:\n"
    "    subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.DEVNULL, check=True)\n"
    "took = time.perf_counter() - started\n"
    "print(took, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)\n"
)
_DISCOVER = ("from agent_sessions import discover_sessions; "
             "print(len(discover_sessions(limit=100_000)))")


def _rows(pattern: str) -> Callable[[bytes], int]:
    compiled = re.compile(pattern.encode(), re.M)
    return lambda out: len(compiled.findall(out))


# name, executable in the venv, its arguments, the harnesses it reads (of the
# tree's), how its output counts the sessions it listed.
PEERS: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...], Callable[[bytes], int]], ...] = (
    ("agent-chat-reader 0.1.7", "agent-chat-reader", ("--list", "--limit", "100000"),
     ("claude", "codex"), _rows(r"^\S+ +\d{4}-\d\d-\d\d \d\d:\d\d ")),
    ("agent-history 0.10.0", "agent-history", ("list", "-n", "100000"),
     ("claude", "codex"), _rows(r"^\d+\t")),
    ("agent-sessions 0.2.0", "python", ("-c", _DISCOVER),
     ("claude", "codex", "pi"), lambda out: int(out.strip() or 0)),
    ("agent-session-reader 0.4.2 (`ai-r`)", "ai-r", ("list", "--json", "--limit", "100000"),
     ("claude", "codex", "pi"), lambda out: len(json.loads(out))),
)


def ensure_venv(venv: Path) -> str | None:
    """The peers' environment, created when missing; a note when it cannot be."""
    python = venv / "bin" / "python"
    if python.exists():
        return None
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True,
                       capture_output=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PINNED], check=True,
                       capture_output=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the peers' environment could not be made ({type(exc).__name__}): all skipped"
    return None


def peer_home(tree: Path, home: Path) -> None:
    """A home whose ``.claude``, ``.codex`` and ``.pi/agent`` are the tree's stores."""
    shutil.rmtree(home, ignore_errors=True)
    (home / ".pi").mkdir(parents=True)
    (home / ".claude").symlink_to(tree / "claude")
    (home / ".codex").symlink_to(tree / "codex")
    (home / ".pi" / "agent").symlink_to(tree / "pi")


def run(argv: list[str], env: dict[str, str], out: Path) -> tuple[float, float, bytes]:
    done = subprocess.run([sys.executable, "-c", _PEAK, str(out), *argv], env=env,
                          capture_output=True, text=True, check=True)
    took, peak = done.stdout.split()
    return float(took), float(peak), out.read_bytes()


def clanker_sessions(out: bytes) -> int:
    return len(json.loads(out)["sessions"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=3_000)
    parser.add_argument("--tree", type=Path, default=None,
                        help="default: /tmp/clanker-bench-peers-<sessions>")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--venv", type=Path, default=Path("/tmp/clanker-bench-peers-venv"))
    parser.add_argument("--write", action="store_true", help="record in benchmarks/RESULTS.md")
    args = parser.parse_args()
    tree = args.tree or Path(f"/tmp/clanker-bench-peers-{args.sessions}")
    build(tree, args.sessions)
    notes = [note] if (note := ensure_venv(args.venv)) else []
    scratch = Path(tempfile.mkdtemp(prefix="clanker-bench-peers-"))
    home = scratch / "home"
    peer_home(tree, home)
    base = {"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"}
    clanker = [sys.executable, "-m", "clanker.cli", "sessions", "--json", "--all",
               "--limit", "100000"]
    rows: list[str] = []
    load = os.getloadavg()[0]
    try:
        for number, (name, executable, arguments, harnesses, count) in enumerate(PEERS):
            binary = args.venv / "bin" / executable
            if not binary.exists():
                notes.append(f"{name}: not installed in {args.venv}, skipped")
                continue
            ours_env = {**base, **environ(tree), "CLANKER_LOAD_PLUGINS": ",".join(harnesses)}
            samples: dict[str, list[tuple[float, float]]] = {
                key: [] for key in ("peer cold", "peer warm", "clanker cold", "clanker warm")}
            listed: dict[str, int] = {}
            for index in range(args.runs):
                cache = scratch / f"cache-{number}-{index}"  # fresh for each cold run
                peer_env = {**base, "HOME": str(home), "XDG_CACHE_HOME": str(cache),
                            "AGENT_HISTORY_CACHE_DIR": str(cache / "agent-history"),
                            "AGENT_CHAT_READER_CACHE_DIR": str(cache / "agent-chat-reader")}
                clanker_home = scratch / f"clanker-{number}-{index}"
                clanker_env = {**ours_env, "CLANKER_HOME": str(clanker_home)}
                for side, argv, env, counted in (
                    ("peer", [str(binary), *arguments], peer_env, count),
                    ("clanker", clanker, clanker_env, clanker_sessions),
                ):
                    for state in ("cold", "warm"):
                        try:
                            took, peak, out = run(argv, env, scratch / "out")
                        except subprocess.CalledProcessError as exc:
                            notes.append(f"{name}: {side} exited {exc.returncode}")
                            raise
                        samples[f"{side} {state}"].append((took, peak))
                        listed[side] = counted(out)
            wall = {key: statistics.median(t for t, _ in v) for key, v in samples.items()}
            peak = {key: statistics.median(p for _, p in v) for key, v in samples.items()}
            rows.append(
                f"| {name} | {', '.join(harnesses)} | {listed['peer']} / {listed['clanker']} "
                f"| {wall['peer cold']:.2f} / {wall['clanker cold']:.2f} s "
                f"| {wall['peer cold'] / wall['clanker cold']:.1f}x "
                f"| {wall['peer warm']:.2f} / {wall['clanker warm']:.2f} s "
                f"| {wall['peer warm'] / wall['clanker warm']:.1f}x "
                f"| {peak['peer cold']:.0f} / {peak['clanker cold']:.0f} MiB "
                f"| {peak['clanker cold'] / peak['peer cold']:.2f} |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    files = sum(1 for _ in tree.rglob("*.jsonl"))
    total = sum(p.stat().st_size for p in tree.rglob("*.jsonl"))
    report = "\n".join([
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}. Date: {datetime.now(UTC):%Y-%m-%d}. "
        f"Load average before the runs {load:.1f}.",
        f"Tree: {files} session files (`benchmarks/sessions.py`'s, {total / 1e6:.0f} MB). "
        f"Whole processes, median of {args.runs} interleaved rounds.",
        "",
        "| peer | harnesses | sessions listed (peer / clanker) | cold (peer / clanker) "
        "| peer / clanker | warm (peer / clanker) | peer / clanker "
        "| peak RSS, cold (peer / clanker) | clanker / peer memory |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows,
        *(["", *(f"- {note}" for note in notes)] if notes else []),
    ])
    print(report)
    if args.write:
        record("peers", "Peers", report, script="benchmarks/peers.py")


if __name__ == "__main__":
    main()
