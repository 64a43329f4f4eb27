"""Session discovery at scale: cold, warm, a naive baseline, and peak memory.

Builds (once, then reuses) a synthetic tree of session files in the Codex,
Claude Code and Pi layouts, made from real captured sessions
(``tests/fixtures/*/sessions``) with fresh ids, directories and filler lines
so sizes spread from a few KB to 5 MB, then measures in one run:

* cold discovery: a new process, no clanker cache, with the default bound
  (the newest 512 sessions per store, what `clanker sessions --all` reads)
  and again with the bound lifted so every file is summarized;
* warm discovery: the same service asked again, nothing changed (the median
  of five), and again after one session file changed;
* a new process answering from the on-disk cache (a second CLI run);
* a naive baseline: read every file whole and decode every line;
* peak RSS of the discovering process.

    uv run python benchmarks/sessions.py [--sessions 10000] [--write]

Targets: cold <= 2 s, >= 20x faster than the naive baseline, warm <= 0.1 s,
peak RSS <= 150 MB. The OS page cache is warm for every timing (the files
were just written or read), so the comparison is of the work clanker does,
not of the disk.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from results import record

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
HARNESSES = ("codex", "claude", "pi")
WARM_RUNS = 5


def _template(harness: str) -> tuple[list[str], str, str]:
    """A real captured session of ``harness``: its lines, its id and its cwd."""
    if harness == "codex":
        path = max((FIXTURES / "codex/sessions/codex-home/sessions").rglob("rollout-*.jsonl"),
                   key=lambda p: p.stat().st_size)
        meta = json.loads(path.open().readline())["payload"]
        return path.read_text().splitlines(), meta["id"], meta["cwd"]
    if harness == "claude":
        path = max((FIXTURES / "claude/sessions/claude-config/projects/-home-dev-src-app")
                   .glob("*.jsonl"), key=lambda p: p.stat().st_size)
        lines = path.read_text().splitlines()
        cwd = next(json.loads(line)["cwd"] for line in lines if '"cwd"' in line)
        return lines, path.stem, cwd
    path = max((FIXTURES / "pi/sessions/pi-agent/sessions").rglob("*.jsonl"),
               key=lambda p: p.stat().st_size)
    header = json.loads(path.open().readline())
    return path.read_text().splitlines(), header["id"], header["cwd"]


def _filler(harness: str, size: int, when: str) -> str:
    text = "x" * size
    if harness == "codex":
        return json.dumps({"timestamp": when, "type": "response_item", "payload": {
            "type": "function_call_output", "call_id": "call_bench", "output": text}})
    if harness == "claude":
        return json.dumps({"type": "user", "isSidechain": False, "timestamp": when,
                           "message": {"role": "user", "content": [
                               {"type": "tool_result", "tool_use_id": "t", "content": text}]}})
    return json.dumps({"type": "message", "id": "f1", "parentId": "f0", "timestamp": when,
                       "message": {"role": "toolResult", "content": [{"type": "text",
                                                                      "text": text}]}})


def _size(rng: random.Random) -> int:
    """Sizes spread evenly on a log scale from 2 KB to 5 MB (the issue's range)."""
    low, high = 2e3, 5e6
    return int(low * (high / low) ** rng.random())


def _claude_dir(cwd: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def build(tree: Path, count: int, seed: int = 7) -> None:
    stamp = tree / f".built-{count}-{seed}-v3"
    if stamp.exists():
        return
    shutil.rmtree(tree, ignore_errors=True)
    rng = random.Random(seed)
    templates = {h: _template(h) for h in HARNESSES}
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for index in range(count):
        harness = HARNESSES[index % len(HARNESSES)]
        lines, old_id, old_cwd = templates[harness]
        new_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        cwd = f"/home/dev/src/project-{rng.randrange(200):03d}"
        when = start + timedelta(minutes=index * 37)
        body = [line.replace(old_id, new_id).replace(old_cwd, cwd) for line in lines]
        missing = _size(rng) - sum(len(line) + 1 for line in body)
        stamp_text = when.isoformat().replace("+00:00", "Z")
        while missing > 0:
            # Transcripts are mostly short lines (events, messages, small tool
            # results) with the odd large one.
            big = rng.random() < 0.05
            chunk = min(missing, rng.randrange(8_000, 60_000) if big else rng.randrange(200, 3_000))
            body.insert(len(body) - 1, _filler(harness, chunk, stamp_text))
            missing -= chunk
        if harness == "codex":
            path = (tree / "codex/sessions" / when.strftime("%Y/%m/%d")
                    / f"rollout-{when:%Y-%m-%dT%H-%M-%S}-{new_id}.jsonl")
        elif harness == "claude":
            path = tree / "claude/projects" / _claude_dir(cwd) / f"{new_id}.jsonl"
        else:
            folder = "--" + cwd.lstrip("/").replace("/", "-") + "--"
            path = (tree / "pi/sessions" / folder
                    / f"{when:%Y-%m-%dT%H-%M-%S}-000Z_{new_id}.jsonl")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(body) + "\n")
        os.utime(path, (when.timestamp(), when.timestamp()))
    stamp.touch()


def environ(tree: Path) -> dict[str, str]:
    return {
        "HOME": str(tree / "home"),
        "PATH": os.environ.get("PATH", ""),
        "CODEX_HOME": str(tree / "codex"),
        "CLAUDE_CONFIG_DIR": str(tree / "claude"),
        "PI_CODING_AGENT_DIR": str(tree / "pi"),
    }


def measure_discovery(tree: Path, cache: Path, limit: int) -> dict[str, float]:
    """Run in a child process: cold and warm discovery, and this process's peak RSS."""
    from clanker.environment.local import LocalEnvironment
    from clanker.registry import Registry
    from clanker.sessions.service import SessionService

    registry = Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": ",".join(HARNESSES)})
    providers = [registry.providers[h] for h in HARNESSES]  # type: ignore[index]
    service = SessionService(environment=LocalEnvironment(environ(tree)), cache_dir=cache)

    async def discover() -> int:
        listing = await service.discover(providers, workspace=None, limit=limit)
        bad = [r.harness for r in listing.scans if r.scan.error or r.scan.skipped]
        if bad:
            raise SystemExit(f"unexpected scan problems: {bad}")
        return len(listing.sessions)

    def timed() -> float:
        started = time.perf_counter()
        asyncio.run(discover())
        return time.perf_counter() - started

    started = time.perf_counter()
    found = asyncio.run(discover())
    cold = time.perf_counter() - started
    warm = statistics.median(timed() for _ in range(WARM_RUNS))
    # One session file changes (as while an agent works): its times move, so
    # the remembered answer no longer holds and that one file is read again.
    newest = max(tree.rglob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
    before = newest.stat()
    os.utime(newest, ns=(time.time_ns(), time.time_ns()))
    try:
        one_changed = timed()
    finally:
        os.utime(newest, ns=(before.st_atime_ns, before.st_mtime_ns))
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"cold": cold, "warm": warm, "one_changed": one_changed, "found": found,
            "rss_mb": rss_mb}


def naive(tree: Path) -> tuple[float, int]:
    """Read every file whole and decode every line: what a careless scan does."""
    started = time.perf_counter()
    count = 0
    for path in tree.rglob("*.jsonl"):
        with path.open("rb") as handle:
            for line in handle.read().splitlines():
                if line.strip():
                    json.loads(line)
        count += 1
    return time.perf_counter() - started, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--tree", type=Path, default=Path("/tmp/clanker-bench-sessions"))
    parser.add_argument("--write", action="store_true", help="record in benchmarks/RESULTS.md")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure_discovery(args.tree, args.cache, args.child)))
        return
    started = time.perf_counter()
    build(args.tree, args.sessions)
    built = time.perf_counter() - started
    total = sum(p.stat().st_size for p in args.tree.rglob("*.jsonl"))

    def child(limit: int, cache: Path, fresh: bool) -> dict[str, float]:
        if fresh:
            shutil.rmtree(cache, ignore_errors=True)
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(limit), "--cache", str(cache),
             "--tree", str(args.tree)],
            capture_output=True, text=True, check=True,
        )
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    default_cache = args.tree.with_name(args.tree.name + "-cache-default")
    full_cache = args.tree.with_name(args.tree.name + "-cache-full")
    bounded = child(512, default_cache, fresh=True)
    full = child(1_000_000, full_cache, fresh=True)
    reopened = child(1_000_000, full_cache, fresh=False)  # a second CLI run: the disk cache
    baseline, files = naive(args.tree)
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}. Date: {datetime.now(UTC):%Y-%m-%d}.",
        f"Tree: {files} session files (Codex, Claude Code, Pi layouts; sizes log-uniform "
        f"from 2 KB to 5 MB, mostly short lines), {total / 1e6:.0f} MB, built in {built:.0f} s.",
        "",
        "| measurement | default bound (512 per store) | every file | target |",
        "| --- | ---: | ---: | ---: |",
        f"| sessions listed | {bounded['found']:.0f} | {full['found']:.0f} | |",
        f"| cold discovery (no clanker cache) | {bounded['cold']:.2f} s "
        f"| {full['cold']:.2f} s | <= 2 s |",
        f"| warm discovery (same process, unchanged; median of {WARM_RUNS}) "
        f"| {bounded['warm'] * 1000:.0f} ms | {full['warm'] * 1000:.0f} ms | <= 100 ms |",
        f"| warm discovery, one session file changed | {bounded['one_changed'] * 1000:.0f} ms "
        f"| {full['one_changed'] * 1000:.0f} ms | |",
        f"| a new process, from the disk cache | | {reopened['cold']:.2f} s | |",
        f"| naive full parse (every line of every file) | | {baseline:.1f} s | |",
        f"| naive / cold | {baseline / bounded['cold']:.0f}x | {baseline / full['cold']:.0f}x "
        f"| >= 20x |",
        f"| peak RSS of the discovering process | {bounded['rss_mb']:.0f} MB "
        f"| {full['rss_mb']:.0f} MB | <= 150 MB |",
    ]
    report = "\n".join(lines)
    print(report)
    if args.write:
        record("sessions", "Sessions", report)


if __name__ == "__main__":
    main()
