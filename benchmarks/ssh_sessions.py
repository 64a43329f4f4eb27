"""A session listing of an SSH host against the same listing of this machine.

Starts the test server of ``tests/sshd.py`` (as root: the ``clanker-sshd``
user, whose home this process can write), places N Claude Code transcripts
(default 2,000: copies of a fixture, each its own session, over 20 project
directories) in a home of their own inside that user's, and lists every
harness's sessions there through ``SshEnvironment.gather`` and here through
``LocalEnvironment``, both reading that home (every harness's, through the
service's ``homes`` seam, with the system's PATH alone), interleaved, with no
summary cache. Reports the medians, their ratio, the executions a remote
listing used and how many sessions it listed and skipped (one round's answer
is bounded: past it files are skipped).
``--write`` records the table in ``benchmarks/RESULTS.md``.

    sudo uv run python benchmarks/ssh_sessions.py [--sessions 2000] [--runs 3] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import pwd
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from results import record

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clanker.environment.local import LocalEnvironment
from clanker.environment.ssh import SshEnvironment
from clanker.hosts import Host
from clanker.registry import get_registry
from clanker.sessions.service import SessionListing, SessionService
from tests.sshd import start_sshd

_FIXTURE = (Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "claude" / "sessions"
            / "claude-config" / "projects" / "-home-dev-src-app"
            / "810adeb4-1b42-408d-83a8-e7fa0f6b854e.jsonl")


def _place(home: Path, count: int) -> Path:
    """The transcripts in a home of their own inside the test user's (``home``):
    other processes using that user's home neither see nor change them."""
    home = Path(tempfile.mkdtemp(prefix="bench-", dir=home))
    store = home / ".claude"
    text = _FIXTURE.read_bytes()
    for index in range(count):
        project = store / "projects" / f"-home-dev-src-p{index % 20:02d}"
        project.mkdir(parents=True, exist_ok=True)
        name = f"{index:08x}-5555-4555-8555-555555555555"
        (project / f"{name}.jsonl").write_bytes(text.replace(_FIXTURE.stem.encode(),
                                                             name.encode()))
    entry = pwd.getpwnam(home.parent.name)
    for directory, dirs, files in os.walk(home):
        for item in (directory, *(os.path.join(directory, n) for n in (*dirs, *files))):
            os.chown(item, entry.pw_uid, entry.pw_gid)
    return home


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write", action="store_true")
    arguments = parser.parse_args()
    os.environ["CLANKER_HOME"] = tempfile.mkdtemp(prefix="ckb-home-")
    control = Path(tempfile.mkdtemp(prefix="ckb-", dir="/tmp"))
    providers = list(get_registry().providers.values())
    samples: dict[str, list[float]] = {"local": [], "remote": []}
    found: dict[str, SessionListing] = {}
    executions: list[int] = []
    load = os.getloadavg()[0]
    try:
        with start_sshd() as (server, _):
            home = _place(server.home, arguments.sessions)
            # Every harness reads that home on either side (the service's homes seam),
            # with the system's PATH alone.
            env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}
            try:
                local = LocalEnvironment(env)
                for _ in range(arguments.runs):
                    started = time.perf_counter()
                    found["local"] = asyncio.run(SessionService(
                        environment=local, cache_dir=None).discover(providers, workspace=None))
                    samples["local"].append((time.perf_counter() - started) * 1000)

                    async def remote() -> SessionListing:
                        environment = SshEnvironment(Host("box", server.alias),
                                                     control_dir=control,
                                                     config_file=server.config_file)
                        try:
                            await environment.connect()
                            before = environment.session_executor.executions
                            service = SessionService(
                                environment=environment, cache_dir=None,
                                homes=lambda provider: ((None, env),))
                            listing = await environment.gather(
                                lambda: service.discover(providers, workspace=None))
                            executions.append(environment.session_executor.executions - before)
                            return listing
                        finally:
                            environment.close()

                    started = time.perf_counter()
                    found["remote"] = asyncio.run(remote())
                    samples["remote"].append((time.perf_counter() - started) * 1000)
            finally:
                shutil.rmtree(home, ignore_errors=True)
    finally:
        shutil.rmtree(control, ignore_errors=True)
    local_ms, remote_ms = (statistics.median(samples[k]) for k in ("local", "remote"))
    skipped = sum(scan.scan.skipped for scan in found["remote"].scans)
    report = "\n".join([
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}. Date: {datetime.now(UTC):%Y-%m-%d}. "
        f"Median of {arguments.runs} interleaved runs each; loopback OpenSSH server; "
        f"{arguments.sessions} Claude Code transcripts of "
        f"{_FIXTURE.stat().st_size} bytes; no summary cache; load average before the "
        f"runs {load:.1f}.",
        "",
        "| every harness's sessions, listed | median (ms) | ratio | sessions | skipped "
        "| executions |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        f"| on this machine | {local_ms:.0f} | 1.0 | {len(found['local'].sessions)} | "
        f"{sum(scan.scan.skipped for scan in found['local'].scans)} | - |",
        f"| on the host (connecting included) | {remote_ms:.0f} | "
        f"{remote_ms / local_ms:.1f} | {len(found['remote'].sessions)} | {skipped} | "
        f"{max(executions)} (+1 to connect) |",
    ])
    print(report)
    if arguments.write:
        record("ssh-sessions", "Session listing on an SSH host", report,
               script="benchmarks/ssh_sessions.py")


if __name__ == "__main__":
    main()
