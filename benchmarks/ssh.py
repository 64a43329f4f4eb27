"""What one shared SSH connection saves: a command over the host's ControlMaster
against one over a fresh connection each time, on a loopback sshd.

Starts the test server of ``tests/sshd.py`` (Debian's ``openssh-server``; as
root it logs in the ``clanker-sshd`` user), then runs ``true`` N times
(default 20) in interleaved rounds three ways: locally through
``LocalTransport``, through ``SshTransport`` (one ControlMaster, started
before the timing), and through a plain ``ssh`` with ``ControlPath=none`` (a
new connection, key exchange and authentication per command). Reports the
medians and the ratios. ``--write`` records the table in
``benchmarks/RESULTS.md``.

    uv run python benchmarks/ssh.py [--runs 20] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clanker.execution import CommandRequest, LocalTransport
from clanker.execution.ssh import SshTransport
from tests.sshd import start_sshd


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--write", action="store_true")
    arguments = parser.parse_args()
    runs, write = arguments.runs, arguments.write
    control = Path(tempfile.mkdtemp(prefix="ckb-", dir="/tmp"))
    try:
        with start_sshd() as (server, _):
            shared = SshTransport(server.alias, control_dir=control,
                                  config_file=server.config_file)
            local = LocalTransport()
            request = CommandRequest(command="true")
            fresh = ["ssh", "-F", str(server.config_file), "-o", "BatchMode=yes",
                     "-o", "ControlPath=none", "-T", server.alias, "true"]
            samples: dict[str, list[float]] = {"local": [], "shared": [], "fresh": []}

            async def timed(key: str, work: object) -> None:
                started = time.perf_counter()
                await work  # type: ignore[misc]
                samples[key].append((time.perf_counter() - started) * 1000)

            async def rounds() -> None:
                await shared.run(request)  # the master, before the timing
                for _ in range(runs):
                    await timed("local", local.run(request))
                    await timed("shared", shared.run(request))
                    await timed("fresh", asyncio.to_thread(
                        subprocess.run, fresh, stdin=subprocess.DEVNULL, check=True,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

            try:
                asyncio.run(rounds())
            finally:
                shared.close()
    finally:
        shutil.rmtree(control, ignore_errors=True)
    local_ms, shared_ms, fresh_ms = (statistics.median(samples[k])
                                     for k in ("local", "shared", "fresh"))
    report = "\n".join([
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}. Date: {datetime.now(UTC):%Y-%m-%d}. "
        f"Median of {runs} interleaved runs each; loopback OpenSSH server; load average "
        f"before the runs {os.getloadavg()[0]:.1f}.",
        "",
        "| `true`, run through | median (ms) | ratio |",
        "| --- | ---: | ---: |",
        f"| this machine (`LocalTransport`) | {local_ms:.1f} | 1.0 |",
        f"| the host's ControlMaster (`SshTransport`) | {shared_ms:.1f} | "
        f"{shared_ms / local_ms:.1f} |",
        f"| a fresh `ssh` connection each time | {fresh_ms:.1f} | {fresh_ms / local_ms:.1f} |",
        "",
        f"A fresh connection costs {fresh_ms / shared_ms:.1f}x a command over the shared one.",
    ])
    print(report)
    if write:
        record("ssh", "SSH commands", report)


if __name__ == "__main__":
    main()
