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
* a naive baseline: read every file whole and decode every line (``--no-naive``
  skips it: minutes on a large tree);
* peak RSS of the discovering process (that process alone: the worker that
  summarizes part of a large scan on the other core, ``clanker.sessions.pool``,
  is not in it; the CLI row's peak is the largest of the process and its worker);
* the whole CLI process, `clanker sessions --json --all --limit 100000`, with
  no clanker cache and again from the disk cache: wall time and peak RSS;
* OpenCode, whose history only its own `opencode session list` can read: a
  new process with no clanker cache (the listing, and `opencode db path`
  beside it), a new process answering from the kept answer (the database's
  files unchanged), and one after the database changed (a new session). The
  `opencode` on PATH is a double (written into the tree's `bin/`) that speaks
  the captured `session list --format json` output of opencode-ai 1.18.33
  (`tests/fixtures/opencode/sessions/session-list-max-count-4097.json`, 105
  sessions) and `db path`'s, after sleeping as long as the real ones took on
  this machine (`--opencode-list-seconds`, `--opencode-db-path-seconds`); it
  also writes to the database's files as it opens them, as OpenCode does.

    uv run python benchmarks/sessions.py [--sessions 10000] [--no-naive] [--no-opencode] [--write]
    uv run python benchmarks/sessions.py --opencode-only [--write]
    uv run python benchmarks/sessions.py --grid [--sessions 30000] [--write]

``--grid`` measures the grid's watched index instead (a section of its own per
size): a real grid daemon over the tree, the time to its first answer (no
clanker cache), then warm answers of `Clanker.sessions` through it from a client
process (median and p95 of ``GRID_RUNS``, one ``asyncio.run`` each, as a CLI run
makes it), the same after one session file changed, and the daemon's RSS.
Target: the warm answer <= 20 ms at 30,000 sessions.

Targets: cold <= 2 s per 10,000 files, >= 20x faster than the naive baseline,
warm <= 0.1 s, peak RSS <= 150 MB (the CLI process <= 100 MB at 30,000). A size
other than 10,000 is recorded in a section of its own. Every cold, CLI and naive
row is the median of ``--runs`` runs (3), and every file of the tree is read just
before each run: a machine may give cached files back within minutes (one seen
here dropped a third of a 7 GB tree in ten minutes with 19 GB free), and a run
that reads part of the tree from disk measures the disk. Whether a tree larger
than the page cache could stay in it, RESULTS.md says.
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
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from results import record

_T = TypeVar("_T")

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
HARNESSES = ("codex", "claude", "pi")
WARM_RUNS = 5
GRID_RUNS = 40
# Measured 2026-12-02 on the machine of RESULTS.md with opencode-ai 1.18.33 in a
# throwaway home: `opencode session list --format json --max-count 4097` 4.0-4.5 s
# (three runs), `opencode db path` 3.1 s.
OPENCODE_LIST_SECONDS = 4.0
OPENCODE_DB_PATH_SECONDS = 3.1
OPENCODE_DOUBLE = r'''
"""A stand-in for opencode 1.18.33's `session list --format json` and `db path`: it
sleeps as the real ones do, touches the database's files as they do when they open it,
and prints the captured listing (the rows in `<db>.rows`) or the database's path."""
import json, os, sys, time
args = sys.argv[1:]
db = os.path.join(os.environ["XDG_DATA_HOME"], "opencode", "opencode.db")
def opened():
    os.makedirs(os.path.dirname(db), exist_ok=True)
    for path in (db, db + "-shm", db + "-wal"):
        with open(path, "ab"):
            pass
        os.utime(path)
if args == ["db", "path"]:
    time.sleep(float(os.environ["OC_DB_PATH_SECONDS"]))
    opened()
    print(db)
elif args[:2] == ["session", "list"]:
    time.sleep(float(os.environ["OC_LIST_SECONDS"]))
    opened()
    print(json.dumps(json.load(open(db + ".rows")), indent=2, ensure_ascii=False))
else:
    sys.exit(1)
'''


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


def opencode_world(tree: Path, list_seconds: float, db_path_seconds: float) -> dict[str, str]:
    """The double on PATH, its database's rows (the captured listing, moved under the
    tree), and the environment a `clanker` process gets."""
    world = tree.with_name(tree.name + "-opencode")
    shutil.rmtree(world, ignore_errors=True)
    (world / "bin").mkdir(parents=True)
    double = world / "bin" / "opencode"
    double.write_text(f"#!{sys.executable}\n{OPENCODE_DOUBLE}")
    double.chmod(0o755)
    workspace = world / "work" / "many"
    workspace.mkdir(parents=True)
    rows = json.loads((FIXTURES / "opencode/sessions/session-list-max-count-4097.json")
                      .read_text())
    for row in rows:
        row["directory"] = row["directory"].replace("/home/dev/src/many", str(workspace))
    database = world / "data" / "opencode" / "opencode.db"
    database.parent.mkdir(parents=True)
    database.with_name("opencode.db.rows").write_text(json.dumps(rows))
    return {
        "HOME": str(world), "XDG_DATA_HOME": str(world / "data"),
        "PATH": f"{world / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "CLANKER_HOME": str(world / "clanker"), "CLANKER_LOAD_PLUGINS": "opencode",
        "OC_LIST_SECONDS": str(list_seconds), "OC_DB_PATH_SECONDS": str(db_path_seconds),
        "WORKSPACE": str(workspace), "DATABASE": str(database),
    }


def measure_opencode(env: dict[str, str]) -> dict[str, float]:
    """Run in a child process: one discovery of the workspace, as a CLI run makes it."""
    from clanker.environment.local import LocalEnvironment
    from clanker.paths import clanker_paths
    from clanker.registry import Registry
    from clanker.sessions.service import SessionService

    registry = Registry.from_entry_points(env)
    provider = registry.providers["opencode"]  # type: ignore[index]
    service = SessionService(environment=LocalEnvironment(env),
                             cache_dir=clanker_paths(env).cache)
    started = time.perf_counter()
    listing = asyncio.run(service.discover([provider], workspace=env["WORKSPACE"]))
    took = time.perf_counter() - started
    if not listing.complete:
        raise SystemExit(f"unexpected scan problems: {listing.incomplete}")
    return {"seconds": took, "found": len(listing.sessions)}


def opencode_runs(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    env = opencode_world(args.tree, args.opencode_list_seconds, args.opencode_db_path_seconds)

    def child() -> dict[str, float]:
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, __file__, "--opencode-child", "--tree", str(args.tree)],
            capture_output=True, text=True, check=True, env={**os.environ, **env},
        )
        measured: dict[str, float] = json.loads(done.stdout)
        return {**measured, "process": time.perf_counter() - started}

    def cli() -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "clanker.cli", "sessions", "--json", "--harness",
                        "opencode"], cwd=env["WORKSPACE"], capture_output=True, check=True,
                       env={**os.environ, **env})
        return time.perf_counter() - started

    cold = child()
    warm = [child() for _ in range(WARM_RUNS)]
    # A new session: OpenCode writes its WAL, so the kept answer no longer holds.
    with open(env["DATABASE"] + "-wal", "ab") as wal:
        wal.write(b"frame")
    changed = child()
    cli_warm = statistics.median(cli() for _ in range(WARM_RUNS))
    shutil.rmtree(Path(env["CLANKER_HOME"]), ignore_errors=True)
    cli_cold = cli()
    return {
        "cold": cold, "changed": changed,
        "warm": {"seconds": statistics.median(w["seconds"] for w in warm),
                 "process": statistics.median(w["process"] for w in warm),
                 "found": warm[0]["found"]},
        "cli": {"cold": cli_cold, "warm": cli_warm},
    }


_PEAK = (
    "import resource, subprocess, sys, time\n"
    "started = time.perf_counter()\n"
    "done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, check=True)\n"
    "took = time.perf_counter() - started\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
    "print(took, peak, len(done.stdout))\n"
)


def cli_listing(tree: Path, home: Path) -> dict[str, float]:
    """One whole `clanker sessions --json --all --limit 100000` process: wall time and
    its peak RSS (measured by a parent that runs nothing else)."""
    env = {**environ(tree), "CLANKER_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, sys.executable, "-m", "clanker.cli", "sessions", "--json",
         "--all", "--limit", "100000"],
        capture_output=True, text=True, check=True, env={**os.environ, **env},
    )
    took, peak, size = done.stdout.split()
    return {"seconds": float(took), "rss_mb": float(peak), "bytes": float(size)}


def prime(tree: Path) -> None:
    """Read every session file once, so the run that follows finds the tree in the page
    cache (a machine may hand cached files back within minutes of their last read)."""
    for path in tree.rglob("*.jsonl"):
        with path.open("rb", buffering=0) as handle:
            while handle.read(1 << 20):
                pass


def median_run(runs: int, tree: Path, measure: Callable[[], _T],
               seconds: Callable[[_T], float]) -> _T:
    """The run of ``measure`` with the median time of ``runs``, the tree read just
    before each (:func:`prime`)."""
    found = []
    for _ in range(runs):
        prime(tree)
        found.append(measure())
    return sorted(found, key=seconds)[len(found) // 2]


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


def _rss_mb(pid: int) -> tuple[float, float]:
    """The process's resident and peak resident memory, in MB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) / 1024
    return found["VmRSS"], found["VmHWM"]


def measure_grid(tree: Path, home: Path) -> dict[str, float]:
    """Run in a child process whose environment points at ``tree``: start a grid
    daemon, ask it, and measure (see the module notes)."""
    from clanker.api import Clanker
    from clanker.grid import daemon
    from clanker.paths import clanker_paths

    os.environ.update(environ(tree))
    os.environ["CLANKER_HOME"] = str(home)
    shutil.rmtree(home, ignore_errors=True)
    clanker = Clanker()
    status = clanker.start_grid()
    assert status.pid is not None

    def ask(limit: int | None = None, workspace: str | None = None) -> float:
        started = time.perf_counter()
        listing = asyncio.run(clanker.sessions(workspace=workspace, harnesses=HARNESSES,
                                               limit=limit))
        took = time.perf_counter() - started
        if not listing.sessions or any(r.scan.error or r.scan.skipped for r in listing.scans):
            raise SystemExit("unexpected scan problems through the grid")
        return took

    def spread(limit: int | None = None, workspace: str | None = None
               ) -> tuple[float, float]:
        runs = sorted(ask(limit, workspace) for _ in range(GRID_RUNS))
        return statistics.median(runs), runs[int(len(runs) * 0.95) - 1]

    try:
        first = ask()
        warm, warm_p95 = spread()
        # One project's sessions, as `clanker sessions` lists them by default (the
        # tree's directories are /home/dev/src/project-NNN).
        ask(workspace="/home/dev/src/project-007")
        one, one_p95 = spread(workspace="/home/dev/src/project-007")
        first_all = ask(1_000_000)
        warm_all, warm_all_p95 = spread(1_000_000)
        newest = max(tree.rglob("*.jsonl"), key=lambda p: p.stat().st_mtime_ns)
        before = newest.stat()
        os.utime(newest, ns=(time.time_ns(), time.time_ns()))
        try:
            changed = ask()
            after_change = ask()
        finally:
            os.utime(newest, ns=(before.st_atime_ns, before.st_mtime_ns))
        rss, peak = _rss_mb(status.pid)
    finally:
        daemon.stop(clanker_paths())
    return {"first": first, "warm": warm, "warm_p95": warm_p95, "one": one, "one_p95": one_p95,
            "first_all": first_all,
            "warm_all": warm_all, "warm_all_p95": warm_all_p95, "changed": changed,
            "after_change": after_change, "rss_mb": rss, "peak_mb": peak}


def grid_report(args: argparse.Namespace) -> str:
    build(args.tree, args.sessions)
    files = sum(1 for _ in args.tree.rglob("*.jsonl"))
    home = Path(f"/tmp/ck-bench-grid-{os.getpid()}")
    done = subprocess.run(
        [sys.executable, __file__, "--grid-child", "--tree", str(args.tree), "--cache",
         str(home)], capture_output=True, text=True, check=True)
    shutil.rmtree(home, ignore_errors=True)
    grid = json.loads(done.stdout)
    ms = 1000
    return "\n".join([
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}. Date: {datetime.now(UTC):%Y-%m-%d}. "
        f"Load average before the run {os.getloadavg()[0]:.1f}.",
        f"Tree: {files} session files (Codex, Claude Code, Pi layouts), a real grid daemon "
        f"watching it; `Clanker.sessions` asked from a client process, one `asyncio.run` "
        f"per answer, {GRID_RUNS} answers per row.",
        "",
        "| measurement | default bound (512 per store: 1,536 sessions) | every file "
        "| target |",
        "| --- | ---: | ---: | ---: |",
        f"| first answer of a new grid, no clanker cache (time to first index) "
        f"| {grid['first']:.2f} s | {grid['first_all']:.2f} s | |",
        f"| warm answer through the grid, median "
        f"| {grid['warm'] * ms:.1f} ms | {grid['warm_all'] * ms:.1f} ms | <= 20 ms |",
        f"| warm answer through the grid, p95 "
        f"| {grid['warm_p95'] * ms:.1f} ms | {grid['warm_all_p95'] * ms:.1f} ms | |",
        f"| warm answer for one project's directory (`--workspace`; median / p95) "
        f"| {grid['one'] * ms:.1f} / {grid['one_p95'] * ms:.1f} ms | | |",
        f"| the answer after one session file changed, then the next "
        f"| {grid['changed'] * ms:.0f} / {grid['after_change'] * ms:.1f} ms | | |",
        f"| grid daemon RSS with the index (now / peak) "
        f"| {grid['rss_mb']:.0f} / {grid['peak_mb']:.0f} MB | | |",
    ])


def grid_main(args: argparse.Namespace) -> None:
    if args.grid_child:
        print(json.dumps(measure_grid(args.tree, args.cache)))
        return
    report = grid_report(args)
    print(report)
    if args.write:
        record(f"sessions-grid-{args.sessions}",
               f"Sessions: warm answers through the grid, {args.sessions:,} files", report,
               script=f"benchmarks/sessions.py --grid --sessions {args.sessions}")


def write(sessions: int, report: str) -> None:
    if sessions == 10_000:
        record("sessions", "Sessions", report)
    else:  # another size has a section of its own beside the usual one
        record(f"sessions-{sessions}", f"Sessions: {sessions:,} files", report,
               script=f"benchmarks/sessions.py --sessions {sessions}")


def main() -> None:  # noqa: PLR0915 (one flat dispatch over the modes)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--tree", type=Path, default=Path("/tmp/clanker-bench-sessions"))
    parser.add_argument("--write", action="store_true", help="record in benchmarks/RESULTS.md")
    parser.add_argument("--opencode-list-seconds", type=float, default=OPENCODE_LIST_SECONDS)
    parser.add_argument("--opencode-db-path-seconds", type=float,
                        default=OPENCODE_DB_PATH_SECONDS)
    parser.add_argument("--opencode-only", action="store_true",
                        help="measure OpenCode alone (no file-store tree)")
    parser.add_argument("--no-naive", action="store_true",
                        help="skip the naive full parse (minutes on a large tree)")
    parser.add_argument("--no-opencode", action="store_true", help="skip the OpenCode rows")
    parser.add_argument("--runs", type=int, default=3,
                        help="runs of each cold, CLI and naive row (their median is recorded)")
    parser.add_argument("--grid", action="store_true",
                        help="measure answers through a running grid's watched index")
    parser.add_argument("--grid-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--opencode-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure_discovery(args.tree, args.cache, args.child)))
        return
    if args.grid or args.grid_child:
        grid_main(args)
        return
    if args.opencode_child:
        print(json.dumps(measure_opencode(dict(os.environ))))
        return
    opencode = None if args.no_opencode else opencode_runs(args)
    opencode_lines = [] if opencode is None else [
        "",
        f"OpenCode (a double of `opencode` 1.18.33 that sleeps "
        f"{args.opencode_list_seconds:.1f} s per `session list` and "
        f"{args.opencode_db_path_seconds:.1f} s per `db path`, as the real ones took here; "
        f"{opencode['cold']['found']:.0f} captured sessions in the workspace):",
        "",
        "| measurement | discovery | whole process |",
        "| --- | ---: | ---: |",
        f"| a new process, no clanker cache (listing and `db path`) "
        f"| {opencode['cold']['seconds']:.2f} s | {opencode['cold']['process']:.2f} s |",
        f"| a new process, the kept answer (database unchanged; median of {WARM_RUNS}) "
        f"| {opencode['warm']['seconds'] * 1000:.0f} ms "
        f"| {opencode['warm']['process'] * 1000:.0f} ms |",
        f"| a new process after the database changed (listing only) "
        f"| {opencode['changed']['seconds']:.2f} s | {opencode['changed']['process']:.2f} s |",
        f"| `clanker sessions --json --harness opencode`, no cache / kept answer "
        f"(median of {WARM_RUNS}) | | {opencode['cli']['cold']:.2f} s / "
        f"{opencode['cli']['warm'] * 1000:.0f} ms |",
    ]
    if args.opencode_only:
        report = "\n".join([
            f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
            f"Python {platform.python_version()}. Date: {datetime.now(UTC):%Y-%m-%d}.",
            *opencode_lines])
        print(report)
        if args.write:
            record("sessions-opencode", "Sessions: OpenCode", report,
                   script="benchmarks/sessions.py --opencode-only")
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
    bounded = median_run(args.runs, args.tree, lambda: child(512, default_cache, fresh=True),
                         lambda found: found["cold"])
    # The every-file listing and the naive parse in turn, each on a tree read just
    # before: their ratio, run by run, holds when the machine's speed drifts between
    # runs (a shared machine's moved by a fifth within an hour).
    listings: list[dict[str, float]] = []
    naives: list[float] = []
    for _ in range(args.runs):
        prime(args.tree)
        listings.append(child(1_000_000, full_cache, fresh=True))
        if not args.no_naive:
            prime(args.tree)
            naives.append(naive(args.tree)[0])
    full = sorted(listings, key=lambda found: found["cold"])[len(listings) // 2]
    baseline = statistics.median(naives) if naives else 0.0
    ratio = statistics.median(
        n / found["cold"] for n, found in zip(naives, listings, strict=True)
    ) if naives else 0.0
    reopened = child(1_000_000, full_cache, fresh=False)  # a second CLI run: the disk cache
    cli_home = args.tree.with_name(args.tree.name + "-cli-home")

    def cli_cold_run() -> dict[str, float]:
        shutil.rmtree(cli_home, ignore_errors=True)
        return cli_listing(args.tree, cli_home)

    cli_cold = median_run(args.runs, args.tree, cli_cold_run, lambda found: found["seconds"])
    cli_cached = cli_listing(args.tree, cli_home)
    files = sum(1 for _ in args.tree.rglob("*.jsonl"))
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}. Date: {datetime.now(UTC):%Y-%m-%d}.",
        f"Tree: {files} session files (Codex, Claude Code, Pi layouts; sizes log-uniform "
        f"from 2 KB to 5 MB, mostly short lines), {total / 1e6:.0f} MB, built in {built:.0f} s.",
        f"Cold, CLI and naive rows: the median of {args.runs} runs, every file read just "
        "before each run, so that each finds the tree in the page cache; the every-file "
        "listing and the naive parse run in turn, and their ratio is the median of each "
        "pair's.",
        "",
        "| measurement | default bound (512 per store) | every file | target |",
        "| --- | ---: | ---: | ---: |",
        f"| sessions listed | {bounded['found']:.0f} | {full['found']:.0f} | |",
        f"| cold discovery (no clanker cache) | {bounded['cold']:.2f} s "
        f"| {full['cold']:.2f} s | <= {2 * args.sessions / 10_000:g} s |",
        f"| warm discovery (same process, unchanged; median of {WARM_RUNS}) "
        f"| {bounded['warm'] * 1000:.0f} ms | {full['warm'] * 1000:.0f} ms | <= 100 ms |",
        f"| warm discovery, one session file changed | {bounded['one_changed'] * 1000:.0f} ms "
        f"| {full['one_changed'] * 1000:.0f} ms | |",
        f"| a new process, from the disk cache | | {reopened['cold']:.2f} s | |",
        *([] if args.no_naive else [
            f"| naive full parse (every line of every file) | | {baseline:.1f} s | |",
            f"| naive / cold | {baseline / bounded['cold']:.0f}x "
            f"| {ratio:.1f}x | >= 20x |"]),
        f"| peak RSS of the discovering process | {bounded['rss_mb']:.0f} MB "
        f"| {full['rss_mb']:.0f} MB | <= 150 MB |",
        f"| `clanker sessions --json --all --limit 100000`, whole process, no cache "
        f"| | {cli_cold['seconds']:.2f} s | |",
        f"| the same, from the disk cache | | {cli_cached['seconds']:.2f} s | |",
        f"| peak RSS of that process (no cache / disk cache) "
        f"| | {cli_cold['rss_mb']:.0f} / {cli_cached['rss_mb']:.0f} MB | <= 100 MB |",
        *opencode_lines,
    ]
    report = "\n".join(lines)
    print(report)
    if args.write:
        write(args.sessions, report)


if __name__ == "__main__":
    main()
