"""``clanker coder``: time to the first frame, streaming throughput, memory.

The agent is a minimal stdlib ACP agent written by this script (it answers
``initialize``, ``session/new`` and ``session/prompt`` with the frames ACP v1
defines, streaming ``agent_message_chunk`` updates), so what is measured is
clanker, not an SDK. Measured:

* time from starting ``clanker coder`` to the ``initialize`` frame it sends
  (the transcript's first record), against a bare interpreter start
  (target: within 4x; the agent's own start is not part of it: the frame is
  written as soon as the pipe is open);
* a 5 MB answer in 1 KiB chunks through the library client: chunks per
  second, and the process's peak memory;
* the peak memory after a 10,000-update turn.

    uv run python benchmarks/coder.py [--runs 5] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import record

AGENT = r'''
import json, sys
out = sys.stdout
def send(frame):
    out.write(json.dumps(frame) + "\n"); out.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": 1,
              "agentCapabilities": {}}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "bench-%d" % id(msg)}})
    elif method == "session/prompt":
        count = int(msg["params"]["prompt"][0]["text"])
        chunk = "x" * 1024
        for _ in range(count):
            send({"jsonrpc": "2.0", "method": "session/update", "params": {
                "sessionId": msg["params"]["sessionId"],
                "update": {"sessionUpdate": "agent_message_chunk",
                           "content": {"type": "text", "text": chunk}}}})
        send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
'''

STREAM = r'''
import asyncio, json, resource, sys, time
from clanker.api import Clanker
count = int(sys.argv[1])
async def main():
    seen = 0
    def on_event(event):
        nonlocal seen
        seen += event.get("kind") == "agent_message_chunk"
    async with Clanker().coder(agent_command=("python3", sys.argv[2]), cwd=sys.argv[3],
                               on_event=on_event) as coder:
        start = time.perf_counter()
        await coder.prompt(str(count))
        elapsed = time.perf_counter() - start
    print(json.dumps({"seconds": elapsed, "seen": seen,
                      "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
asyncio.run(main())
'''


def bare_start(runs: int) -> float:
    """The median start of a bare interpreter, the unit start-up targets are given in."""
    times = []
    for _ in range(runs):
        start = time.time()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.time() - start)
    return statistics.median(times)


def agent_workspace(root: Path, source: str) -> tuple[Path, dict[str, str]]:
    """Write the agent ``source`` under ``root``; return it and an environment whose
    ``python3`` is this interpreter (the agent's ``#!`` finds the same Python).

    Python may write its bytecode (``PYTHONDONTWRITEBYTECODE`` removed): with
    :func:`warm_up` before anything is measured, what is timed is a start as a
    person gets it, not the compilation of every module."""
    agent = root / "agent.py"
    agent.write_text(source)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    return agent, env


def stop_grid(home: Path, env: dict[str, str]) -> None:
    """Stop the grid a run under ``home`` started (its attention), so none is left."""
    subprocess.run([sys.executable, "-m", "clanker", "grid", "stop"],
                   env={**env, "CLANKER_HOME": str(home)}, check=False, capture_output=True)


def warm_up(root: Path, agent: Path, env: dict[str, str], prompt: str) -> None:
    """One unmeasured run of ``clanker coder PROMPT`` and an import of the interface,
    so that every module's bytecode is written before the runs that are timed."""
    home = root / "warm-up"
    subprocess.run([sys.executable, "-m", "clanker", "coder", "--agent-command",
                    f"python3 {agent}", prompt], cwd=root, env={**env, "CLANKER_HOME": str(home)},
                   check=True, capture_output=True)
    stop_grid(home, env)
    subprocess.run([sys.executable, "-c", "import clanker.acp.ui.screen"], env=env, check=True)


def _first_frame(root: Path, agent: Path, env: dict[str, str], runs: int) -> float:
    times = []
    for index in range(runs):
        home = root / f"home-{index}"
        start = time.time()
        subprocess.run([sys.executable, "-m", "clanker", "coder", "--agent-command",
                        f"python3 {agent}", "1"], cwd=root, env={**env, "CLANKER_HOME": str(home)},
                       check=True, capture_output=True)
        stop_grid(home, env)
        transcript = next((home / "state" / "coder").glob("bench-*.jsonl"))
        first = json.loads(transcript.read_text().splitlines()[0])
        times.append(first["t"] - start)
    return statistics.median(times)


def _stream(root: Path, agent: Path, env: dict[str, str], count: int) -> dict[str, float]:
    script = root / "stream.py"
    script.write_text(STREAM)
    done = subprocess.run([sys.executable, str(script), str(count), str(agent), str(root)],
                          env={**env, "CLANKER_HOME": str(root / "stream-home")},
                          check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(done.stdout)
    assert result["seen"] == count
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        agent, env = agent_workspace(root, AGENT)
        warm_up(root, agent, env, "1")
        load = os.getloadavg()[0]
        bare = bare_start(args.runs)
        first = _first_frame(root, agent, env, args.runs)
        five = _stream(root, agent, env, 5 * 1024)
        many = _stream(root, agent, env, 10_000)
    rows = [
        ("`python -c pass`", f"{bare * 1000:.0f} ms", ""),
        ("`clanker coder` to its first frame", f"{first * 1000:.0f} ms ({first / bare:.1f}x)",
         "<= 4x bare"),
        ("5 MB answer, 1 KiB chunks", f"{5 * 1024 / five['seconds']:,.0f} chunks/s, "
         f"peak {five['maxrss_kib'] / 1024:.0f} MiB", ""),
        ("10,000-update turn", f"peak {many['maxrss_kib'] / 1024:.0f} MiB", ""),
    ]
    table = ["| measurement | result | target |", "| --- | ---: | ---: |"]
    table += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    report = (f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
              f"Python {platform.python_version()}. Date: {time.strftime('%Y-%m-%d')}. Median "
              f"of {args.runs} runs; load average before the runs {load:.1f}.\n\n"
              + "\n".join(table) + "\n")
    print(report)
    if args.write:
        record("coder", "The coder (ACP client)", report)


if __name__ == "__main__":
    main()
