"""Attention: the hook bridge's transaction latency and the broker's throughput.

Measured in one run:

* the hook bridge (``python -I -S clanker/attention/hook.py``) from process
  spawn to the moment a real Unix-socket grid stand-in receives its
  ``deliver`` request, with a trivial interpreter that keeps a counter in its
  state (so every run reads, writes and delivers). Each run is paired with a
  bare ``python -c pass`` spawned the same way, so both see the same machine
  load. Target: hook p50 at most 4x the bare interpreter's p50.
* the broker in process: ``Broker.apply`` over many terminals cycling through
  turn start, input request, resolution and completion (target: at least
  50,000 events/s), and the grid's whole path per delivered envelope, the
  boundary's ``parse_envelope`` then ``apply``.

    uv run python benchmarks/attention.py [--runs 200] [--events 200000] [--json] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from results import record

HOOK = Path(__file__).resolve().parents[1] / "core/src/clanker/attention/hook.py"
TERMINAL = "bench-terminal"
TOKEN = "0f" * 32
HOOK_TARGET = 4.0
BROKER_TARGET = 50_000

INTERPRETER = '''\
def interpret(payload, state):
    count = state.get("count", 0)
    envelope = {"event": "turn_started", "scope": "root", "sessionId": "bench-session",
                "turnId": "turn-%d" % count}
    return [envelope], {"count": count + 1}
'''


class Grid(socketserver.ThreadingUnixStreamServer):
    """Answers each ``deliver`` request ``ok`` and notes when it arrived."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, path: str) -> None:
        self.arrivals: list[float] = []
        self.arrived = threading.Event()
        super().__init__(path, DeliverHandler)


class DeliverHandler(socketserver.StreamRequestHandler):
    server: Grid

    def handle(self) -> None:
        line = self.rfile.readline(65_537)
        arrived = time.perf_counter()
        request = json.loads(line)
        decisions = ["accepted"] * len(request["envelopes"])
        self.wfile.write(json.dumps({"v": 1, "ok": True, "decisions": decisions}).encode()
                         + b"\n")
        self.server.arrivals.append(arrived)
        self.server.arrived.set()


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def spawn(argv: list[str], env: dict[str, str], payload: bytes) -> float:
    """Wall time of one process, start to exit."""
    started = time.perf_counter()
    subprocess.run(argv, input=payload, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=env, check=True)
    return time.perf_counter() - started


def measure_hook(runs: int) -> dict[str, Any]:
    root = tempfile.mkdtemp(dir="/tmp", prefix="clanker-attn-")
    try:
        state = Path(root) / "state"
        state.mkdir(mode=0o700)
        interpreter = Path(root) / "interpreter.py"
        interpreter.write_text(INTERPRETER)
        grid = Grid(os.path.join(root, "grid.sock"))
        threading.Thread(target=grid.serve_forever, daemon=True).start()
        env = {
            "PATH": os.environ.get("PATH", ""),
            "CLANKER_ATTENTION_INTERPRETER": str(interpreter),
            "CLANKER_ATTENTION_SOCKET": grid.server_address,
            "CLANKER_ATTENTION_TERMINAL": TERMINAL,
            "CLANKER_ATTENTION_TOKEN": TOKEN,
            "CLANKER_ATTENTION_STATE": str(state),
        }
        payload = json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "s"}).encode()
        hook_argv = [sys.executable, "-I", "-S", str(HOOK)]
        bare_argv = [sys.executable, "-c", "pass"]
        bare, isolated, delivery, whole = [], [], [], []
        try:
            for _ in range(runs):
                bare.append(spawn(bare_argv, env, b""))
                isolated.append(spawn([sys.executable, "-I", "-S", "-c", "pass"], env, b""))
                grid.arrived.clear()
                started = time.perf_counter()
                subprocess.run(hook_argv, input=payload, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=env, check=True)
                whole.append(time.perf_counter() - started)
                if not grid.arrived.wait(5):
                    raise SystemExit("the hook delivered nothing: is the bridge broken?")
                delivery.append(grid.arrivals[-1] - started)
        finally:
            grid.shutdown()
            grid.server_close()
        if (state / "poison").exists():
            raise SystemExit("the hook poisoned its state: the measurement is not of the "
                             "healthy path")
        count = json.loads((state / "state.json").read_text())["count"]
        if count != runs:
            raise SystemExit(f"expected {runs} transactions in the state, found {count}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "runs": runs,
        "bare_p50_ms": statistics.median(bare) * 1000,
        "bare_p95_ms": percentile(bare, 0.95) * 1000,
        "isolated_p50_ms": statistics.median(isolated) * 1000,
        "isolated_p95_ms": percentile(isolated, 0.95) * 1000,
        "delivery_p50_ms": statistics.median(delivery) * 1000,
        "delivery_p95_ms": percentile(delivery, 0.95) * 1000,
        "exit_p50_ms": statistics.median(whole) * 1000,
        "exit_p95_ms": percentile(whole, 0.95) * 1000,
        "ratio_p50": statistics.median(delivery) / statistics.median(bare),
        "target_ratio": HOOK_TARGET,
    }


def broker_workload(events: int, terminals: int) -> list[tuple[str, dict[str, object]]]:
    """Wire objects: every terminal cycles start, input wait, resolution, completion."""
    cycle = ("turn_started", "input_requested", "input_resolved", "turn_completed")
    work: list[tuple[str, dict[str, object]]] = []
    turn = 0
    while len(work) < events:
        for terminal in range(terminals):
            for event in cycle:
                wire: dict[str, object] = {
                    "event": event, "scope": "root", "sessionId": f"session-{terminal}",
                    "turnId": f"turn-{turn}", "nativeEvent": "Bench",
                }
                if event.startswith("input_"):
                    wire["inputId"] = "permission"
                if event == "turn_completed":
                    wire["cwd"] = f"/work/tree-{terminal}"
                work.append((f"terminal-{terminal}", wire))
        turn += 1
    return work[:events]


def measure_broker(events: int, terminals: int = 100) -> dict[str, Any]:
    try:
        from clanker.attention.broker import Broker, Decision
        from clanker.attention.envelope import parse_envelope
    except ImportError as error:  # written against the brief's API; may not exist yet
        return {"error": f"broker unavailable: {error}"}
    work = broker_workload(events, terminals)
    published = 0

    def listener(_: object) -> None:
        nonlocal published
        published += 1

    def fresh() -> Any:
        broker = Broker(listener=listener)
        for terminal in range(terminals):
            broker.register(f"terminal-{terminal}")
        return broker

    # The broker alone, on envelopes the grid has already parsed.
    parsed = [(terminal_id, parse_envelope(wire)) for terminal_id, wire in work]
    broker = fresh()
    started = time.perf_counter()
    for terminal_id, envelope in parsed:
        broker.apply(terminal_id, envelope)
    apply_elapsed = time.perf_counter() - started
    # What the grid does per delivered envelope: parse at the boundary, then apply.
    broker = fresh()
    accepted = 0
    started = time.perf_counter()
    for terminal_id, wire in work:
        if broker.apply(terminal_id, parse_envelope(wire)) is Decision.ACCEPTED:
            accepted += 1
    elapsed = time.perf_counter() - started
    parse_started = time.perf_counter()
    for _, wire in work:
        parse_envelope(wire)
    parse_elapsed = time.perf_counter() - parse_started
    return {
        "events": len(work),
        "terminals": terminals,
        "accepted": accepted,
        "published": published,
        "seconds": elapsed,
        "apply_per_second": len(work) / apply_elapsed,
        "events_per_second": len(work) / elapsed,
        "parse_only_per_second": len(work) / parse_elapsed,
        "target_events_per_second": BROKER_TARGET,
    }


def report(hook: dict[str, Any], broker: dict[str, Any]) -> str:
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}. Date: {datetime.now(UTC):%Y-%m-%d}. "
        f"{hook['runs']} paired runs.",
        "",
        "| measurement | p50 | p95 | target |",
        "| --- | ---: | ---: | ---: |",
        f"| `python -c pass` (start to exit) | {hook['bare_p50_ms']:.1f} ms "
        f"| {hook['bare_p95_ms']:.1f} ms | |",
        f"| `python -I -S -c pass` (start to exit) | {hook['isolated_p50_ms']:.1f} ms "
        f"| {hook['isolated_p95_ms']:.1f} ms | |",
        f"| hook bridge, spawn to delivery | {hook['delivery_p50_ms']:.1f} ms "
        f"| {hook['delivery_p95_ms']:.1f} ms | |",
        f"| hook bridge, spawn to exit | {hook['exit_p50_ms']:.1f} ms "
        f"| {hook['exit_p95_ms']:.1f} ms | |",
        f"| hook delivery p50 / bare p50 | {hook['ratio_p50']:.1f}x | | <= {HOOK_TARGET:.0f}x |",
    ]
    if "error" in broker:
        lines.append(f"| broker throughput | {broker['error']} | | >= {BROKER_TARGET:,}/s |")
    else:
        lines += [
            f"| broker: Broker.apply ({broker['events']:,} parsed events, "
            f"{broker['terminals']} terminals) | {broker['apply_per_second']:,.0f} events/s "
            f"| | >= {BROKER_TARGET:,}/s |",
            f"| grid path: parse_envelope + apply | {broker['events_per_second']:,.0f} events/s "
            "| | |",
            f"| parse_envelope alone | {broker['parse_only_per_second']:,.0f} envelopes/s | | |",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="hook runs (default 200)")
    parser.add_argument("--events", type=int, default=200_000, help="broker events")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--write", action="store_true", help="record in benchmarks/RESULTS.md")
    args = parser.parse_args()
    hook = measure_hook(args.runs)
    broker = measure_broker(args.events)
    if args.json:
        print(json.dumps({"hook": hook, "broker": broker}, indent=2))
        return
    text = report(hook, broker)
    print(text)
    if args.write:
        record("attention", "Attention", text)


if __name__ == "__main__":
    main()
