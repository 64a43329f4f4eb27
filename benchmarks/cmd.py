"""Start-up of ``clanker cmd``, relative to a bare interpreter, the bridge's round
trips over both transports, and the grid's memory.

Starts a grid (a real daemon under a throwaway ``CLANKER_HOME``), registers a
terminal from this process and grants it the shipped capabilities, then runs
each command N times (default 30) with that credential in its environment
and reports the median wall time: ``python -c pass``, ``clanker cmd list``,
``clanker cmd list --json``, ``clanker cmd run clanker_context`` and, for
comparison, ``clanker --version`` (the click group). It also times the same
``cmd-list`` and ``cmd-run clanker_context`` requests from inside this
process (one connection each, as ``clanker cmd`` sends them), which is the
grid's share of a call without process start, and the same two over the MCP
endpoint (``tools/list`` and ``tools/call clanker_context``, one connection
each, and on one kept-alive connection as a harness's MCP client holds it).
The grid's resident memory is read from ``/proc`` with the bridge granted and
idle, and again after 10,000 more requests (half ``cmd-run``, half MCP
``tools/call``). Bytecode is cached as on an
installed system (``PYTHONDONTWRITEBYTECODE`` is dropped and each command
runs once before it is timed); the commands are sampled in interleaved rounds.
``--write`` records the table in ``benchmarks/RESULTS.md``.

    uv run python benchmarks/cmd.py [--runs 30] [--write]

The targets: ``clanker cmd list`` at most 6x a bare interpreter start; each
round trip of ``clanker_context`` under 5 ms inside the grid; no memory growth.
"""

from __future__ import annotations

import argparse
import http.client
import json
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


def mcp_call(connection: http.client.HTTPConnection, token: str, method: str,
             params: dict[str, object]) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    connection.request("POST", "/mcp", body, {
        "Authorization": f"Bearer {token}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"})
    answer = connection.getresponse()
    data = answer.read()
    if answer.status != 200 or b'"isError":true' in data:
        raise SystemExit(f"mcp {method}: {answer.status} {data[:200]!r}")


def over_mcp(port: int, token: str, runs: int, method: str, *, kept: bool) -> float:
    params: dict[str, object] = ({"name": "clanker_context", "arguments": {}}
                                 if method == "tools/call" else {})
    samples = []
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for _ in range(runs):
        started = time.perf_counter()
        if not kept:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mcp_call(connection, token, method, params)
        if not kept:
            connection.close()
        samples.append(time.perf_counter() - started)
    connection.close()
    return statistics.median(samples)


def resident(pid: int) -> tuple[float, float]:
    """The process's resident and peak resident memory, in MiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text()
                  .splitlines() if ":" in line)
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


def table(rows: list[tuple[str, list[str]]], timed: dict[str, float],
          inside: dict[str, float], runs: int, memory: dict[str, tuple[float, float]]) -> str:
    base = timed["python -c pass"]
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}. Date: {datetime.now(UTC):%Y-%m-%d}. "
        f"Median of {runs} runs each.",
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
    lines += ["", "| the grid's memory | resident (MiB) | peak (MiB) |", "| --- | ---: | ---: |"]
    for name, (rss, peak) in memory.items():
        lines.append(f"| {name} | {rss:.1f} | {peak:.1f} |")
    return "\n".join(lines)


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
        granted = grid.grant_bridge_endpoint(registration.terminal, registration.token,
                                             SHIPPED_NAMES)
        token, url = granted.bridge_token, granted.mcp_url
        if url is None:
            raise SystemExit("the grid's MCP endpoint did not start")
        port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        pid = daemon.status(paths).pid
        assert pid is not None
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
        idle = resident(pid)
        many = args.runs * 10
        inside = {
            "cmd-list": in_process(client, many, "list"),
            "cmd-run clanker_context": in_process(client, many, "run"),
            "MCP tools/list": over_mcp(port, token, many, "tools/list", kept=False),
            "MCP tools/call clanker_context": over_mcp(port, token, many, "tools/call",
                                                       kept=False),
            "MCP tools/call clanker_context, kept-alive connection": over_mcp(
                port, token, many, "tools/call", kept=True),
        }
        settled = resident(pid)
        for _ in range(5_000):
            client.run("clanker_context")
        over_mcp(port, token, 5_000, "tools/call", kept=True)
        after = resident(pid)
    finally:
        daemon.stop(paths)
        shutil.rmtree(home, ignore_errors=True)
    report = table(rows, timed, inside, args.runs, memory={
        "bridge granted, idle": idle, f"after the {many * 5} timed requests": settled,
        "after 10,000 more requests": after})
    print(report)
    if args.write:
        record("cmd", "`clanker cmd`", report)


if __name__ == "__main__":
    main()
