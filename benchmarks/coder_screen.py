"""``clanker coder``'s full-screen interface: first frame, a 5 MB answer, 10k updates.

The agent is a minimal stdlib ACP agent written by this script (``initialize``,
``session/new``, ``session/prompt`` streaming ``agent_message_chunk`` updates, or
tool calls and their completions), so what is measured is clanker. Measured:

* the agent's own start: spawn to its answer to an ``initialize`` written at once;
* ``clanker coder`` as a conversation on a pseudo-terminal (the full-screen
  interface): start to the ``initialize`` frame it sends (the transcript's first
  record), and start to the footer drawn on the terminal (rich and prompt_toolkit
  are imported while the agent starts, so only the second pays for them);
  target for the first frame: 4x a bare interpreter start plus the agent's start;
* a 5 MB answer in 1 KiB chunks through the real client into a running screen
  (prompt_toolkit drawing the live footer on a pseudo-terminal whose other end
  is read, finished blocks rendered by rich and printed above it): chunks per
  second, redraws, bytes drawn, peak memory;
* 10,000 updates (5,000 tool calls, each created and completed, every one
  rendered into the scrollback): time, and memory after.

    uv run python benchmarks/coder_screen.py [--runs 5] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coder import agent_workspace, bare_start, warm_up
from results import record

AGENT = r'''
import json, sys
out = sys.stdout
def send(frame):
    out.write(json.dumps(frame) + "\n"); out.flush()
def update(sid, body):
    send({"jsonrpc": "2.0", "method": "session/update",
          "params": {"sessionId": sid, "update": body}})
for line in sys.stdin:
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": 1,
              "agentCapabilities": {}}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "bench-%d" % id(msg)}})
    elif method == "session/prompt":
        sid = msg["params"]["sessionId"]
        verb, count = msg["params"]["prompt"][0]["text"].split()
        chunk = "x" * 1023 + "\n"
        for i in range(int(count)):
            if verb == "chunks":
                update(sid, {"sessionUpdate": "agent_message_chunk",
                             "content": {"type": "text", "text": chunk}})
            else:
                call = "call-%d" % i
                update(sid, {"sessionUpdate": "tool_call", "toolCallId": call,
                             "title": "read", "kind": "read", "status": "pending",
                             "locations": [{"path": "src/f%d.py" % i}]})
                update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": call,
                             "status": "completed", "content": [{"type": "content",
                             "content": {"type": "text", "text": "x = %d\n" % i}}]})
        send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
'''

SCREEN = r'''
import asyncio, fcntl, json, os, pty, resource, struct, sys, termios, threading, time
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output.vt100 import Vt100_Output
from clanker.api import Clanker
from clanker.acp.ui.screen import Screen

# A real terminal output: a pseudo-terminal 100x40 whose other end is read and counted.
reader, child = pty.openpty()
fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
drawn = [0]
def drain():
    while True:
        try:
            data = os.read(reader, 65536)
        except OSError:
            return
        if not data:
            return
        drawn[0] += len(data)
threading.Thread(target=drain, daemon=True).start()
output = Vt100_Output.from_pty(os.fdopen(child, "w", encoding="utf-8"), term="xterm-256color")

def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * (resource.getpagesize() // 1024)

async def main():
    verb, count = sys.argv[1], int(sys.argv[2])
    with create_pipe_input() as pipe:
        screen = Screen(cwd=sys.argv[4], agent="bench", input=pipe, output=output)
        async with Clanker().coder(agent_command=("python3", sys.argv[3]), cwd=sys.argv[4],
                                   on_event=screen.on_event) as client:
            async with screen.running():
                screen.attach(client)
                before = rss_kib()
                start = time.perf_counter()
                await client.prompt(f"{verb} {count}")
                elapsed = time.perf_counter() - start
                after = rss_kib()
                renders = screen.app.render_counter
    print(json.dumps({"seconds": elapsed, "written": drawn[0], "renders": renders,
                      "rss_before_kib": before, "rss_after_kib": after,
                      "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
asyncio.run(main())
'''


def _agent_start(agent: Path, runs: int) -> float:
    frame = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                        "params": {"protocolVersion": 1}}) + "\n"
    times = []
    for _ in range(runs):
        start = time.time()
        process = subprocess.Popen([sys.executable, str(agent)], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(frame)
        process.stdin.flush()
        process.stdout.readline()
        times.append(time.time() - start)
        process.stdin.close()
        process.wait()
    return statistics.median(times)


def _first_record(home: Path) -> float:
    transcript = next((home / "state" / "coder").glob("bench-*.jsonl"))
    return float(json.loads(transcript.read_text().splitlines()[0])["t"])


def _full_screen(root: Path, agent: Path, env: dict[str, str],
                 runs: int) -> tuple[float, float, float]:
    """Median seconds from start to the first frame sent and to the footer drawn, and
    (paired, run for run) to the first frame of a one-PROMPT run in line mode."""
    frames, footers, lines = [], [], []
    for index in range(runs):
        home = root / f"line-home-{index}"
        start = time.time()
        subprocess.run([sys.executable, "-m", "clanker", "coder", "--no-attention",
                        "--agent-command", f"python3 {agent}", "chunks 1"], cwd=root,
                       env={**env, "CLANKER_HOME": str(home)}, check=True, capture_output=True)
        lines.append(_first_record(home) - start)
        home = root / f"screen-home-{index}"
        main, child = pty.openpty()
        start = time.time()
        process = subprocess.Popen(
            [sys.executable, "-m", "clanker", "coder", "--no-attention", "--agent-command",
             f"python3 {agent}"], cwd=root, stdin=child, stdout=child, stderr=child,
            env={**env, "CLANKER_HOME": str(home), "TERM": "xterm-256color"})
        os.close(child)
        seen = b""
        deadline = time.time() + 60
        while b"Enter sends" not in seen and time.time() < deadline:
            ready, _, _ = select.select([main], [], [], 1)
            if ready:
                chunk = os.read(main, 65536)
                seen += chunk
                if b"\x1b[6n" in chunk:  # answer the cursor position request
                    os.write(main, b"\x1b[1;1R")
        footers.append(time.time() - start)
        os.write(main, b"\x04")  # Ctrl+D on the empty composer
        while process.poll() is None:
            ready, _, _ = select.select([main], [], [], 0.2)
            if ready:
                try:
                    os.read(main, 65536)
                except OSError:
                    break
        process.wait(timeout=60)
        os.close(main)
        frames.append(_first_record(home) - start)
    return statistics.median(frames), statistics.median(footers), statistics.median(lines)


def _screen(root: Path, agent: Path, env: dict[str, str], verb: str,
            count: int) -> dict[str, float]:
    script = root / "screen.py"
    script.write_text(SCREEN)
    done = subprocess.run([sys.executable, str(script), verb, str(count), str(agent), str(root)],
                          # no cursor position requests: nobody answers them on this pty
                          env={**env, "CLANKER_HOME": str(root / f"{verb}-home"),
                               "PROMPT_TOOLKIT_NO_CPR": "1"},
                          check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        agent, env = agent_workspace(root, AGENT)
        warm_up(root, agent, env, "chunks 1")
        load = os.getloadavg()[0]
        bare = bare_start(args.runs)
        agent_start = _agent_start(agent, args.runs)
        frame, footer, line = _full_screen(root, agent, env, args.runs)
        five = _screen(root, agent, env, "chunks", 5 * 1024)
        many = _screen(root, agent, env, "tools", 5_000)
        load_after = os.getloadavg()[0]
    target = 4 * bare + agent_start
    rows = [
        ("`python -c pass`", f"{bare * 1000:.0f} ms", ""),
        ("the agent's own start (spawn to its `initialize` answer)",
         f"{agent_start * 1000:.0f} ms", ""),
        ("`clanker coder` (full screen) to its first frame",
         f"{frame * 1000:.0f} ms", f"<= {target * 1000:.0f} ms (4x bare + agent start)"),
        ("`clanker coder` (full screen) to its footer drawn", f"{footer * 1000:.0f} ms", ""),
        ("`clanker coder PROMPT` (line mode, paired) to its first frame",
         f"{line * 1000:.0f} ms", ""),
        ("5 MB answer, 1 KiB chunks, into the screen",
         f"{5 * 1024 / five['seconds']:,.0f} chunks/s ({five['seconds']:.2f} s), "
         f"{five['renders']:.0f} redraws, {five['written'] / 1024:,.0f} KiB drawn, "
         f"peak {five['maxrss_kib'] / 1024:.0f} MiB", ""),
        ("10,000 updates (5,000 tool calls, each rendered into the scrollback)",
         f"{many['seconds']:.2f} s, {many['written'] / 1024:,.0f} KiB drawn, "
         f"resident {many['rss_before_kib'] / 1024:.0f} → "
         f"{many['rss_after_kib'] / 1024:.0f} MiB, peak {many['maxrss_kib'] / 1024:.0f} MiB", ""),
    ]
    table = ["| measurement | result | target |", "| --- | ---: | ---: |"]
    table += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    report = (f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
              f"Python {platform.python_version()}. Date: {time.strftime('%Y-%m-%d %H:%M')} "
              f"UTC. Median of {args.runs} runs (the streams: one run each); load average "
              f"{load:.1f} before the runs, {load_after:.1f} after.\n\n"
              + "\n".join(table) + "\n")
    print(report)
    if args.write:
        record("coder-screen", "The coder's full-screen interface", report,
               script="benchmarks/coder_screen.py")


if __name__ == "__main__":
    main()
