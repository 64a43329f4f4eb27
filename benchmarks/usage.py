"""Usage probes run together: wall time against the slowest probe, and cached reads.

Five harness doubles (probes that answer after a set latency, standing in for
the real CLIs) are registered through the real registry and read through the
real `UsageService`, concurrently, the way `clanker usage` does. Measured in
one run:

* the wall time of one concurrent read of all five, against the slowest
  probe's latency (target: overhead <= 50 ms);
* a cached read of all five in the same process (target: <= 20 ms).

    uv run python benchmarks/usage.py [--runs 10] [--write]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from results import record

from clanker import hookimpl
from clanker.descriptor import HarnessDescriptor
from clanker.environment.local import LocalEnvironment
from clanker.ids import HarnessId
from clanker.registry import HarnessProvider, Registry
from clanker.usage.capability import UsageContext
from clanker.usage.policy import RefreshPolicy
from clanker.usage.service import UsageService, UsageStatus
from clanker.usage.store import UsageStore
from clanker.usage.types import Measurement, MeasurementKind, Scope, UsageSnapshot

LATENCIES = {"bench-a": 0.05, "bench-b": 0.12, "bench-c": 0.20, "bench-d": 0.35, "bench-e": 0.50}


class DelayedProbe:
    """A probe that answers with one percent meter after ``latency`` seconds."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.policy = RefreshPolicy(cache_ttl=timedelta(minutes=5))

    async def probe(self, context: UsageContext) -> UsageSnapshot:
        await asyncio.sleep(self.latency)
        return UsageSnapshot(observed_at=datetime.now(UTC), measurements=(Measurement(
            kind=MeasurementKind.RATE_LIMIT, unit="percent", label="Bench · 5 hour",
            scope=Scope(provider_id="bench"), used=40.0, remaining=60.0, limit=100.0,
        ),))


def plugin(harness: str, latency: float) -> object:
    class Plugin:
        @hookimpl
        def clanker_descriptor(self) -> HarnessDescriptor:
            return HarnessDescriptor(id=HarnessId(harness), display_name=harness,
                                     executable=harness)

        @hookimpl
        def clanker_usage(self) -> DelayedProbe:
            return DelayedProbe(latency)

    return Plugin()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--write", action="store_true", help="record in benchmarks/RESULTS.md")
    args = parser.parse_args()
    registry = Registry.from_plugins({h: plugin(h, s) for h, s in LATENCIES.items()},
                                     environ={})
    providers: list[HarnessProvider] = list(registry.providers.values())
    bin_dir = Path(tempfile.mkdtemp(prefix="clanker-usage-bench-"))
    for harness in LATENCIES:  # "installed": the service probes only what is on PATH
        (bin_dir / harness).write_text("#!/bin/sh\n")
        (bin_dir / harness).chmod(0o755)
    environ = {"PATH": str(bin_dir)}
    slowest = max(LATENCIES.values())
    overheads, cached = [], []
    try:
        for _ in range(args.runs):
            service = UsageService(environment=LocalEnvironment(environ), store=UsageStore(None))

            async def read_all(svc: UsageService = service) -> None:
                entries = await asyncio.gather(*(svc.read(p) for p in providers))
                assert all(e.status is UsageStatus.OK for e in entries)

            started = time.perf_counter()
            asyncio.run(read_all())
            overheads.append(time.perf_counter() - started - slowest)
            started = time.perf_counter()
            asyncio.run(read_all())
            cached.append(time.perf_counter() - started)
    finally:
        shutil.rmtree(bin_dir, ignore_errors=True)
    overhead = statistics.median(overheads)
    cache = statistics.median(cached)
    report = "\n".join([
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}, "
        f"Python {platform.python_version()}. Date: {datetime.now(UTC):%Y-%m-%d}. "
        f"Median of {args.runs} runs.",
        f"Five probes answering after {', '.join(f'{s * 1000:.0f}' for s in LATENCIES.values())}"
        " ms, read concurrently through the usage service.",
        "",
        "| measurement | result | target |",
        "| --- | ---: | ---: |",
        f"| wall time over the slowest probe ({slowest * 1000:.0f} ms) "
        f"| +{overhead * 1000:.1f} ms | <= +50 ms |",
        f"| cached read of all five, same process | {cache * 1000:.1f} ms | <= 20 ms |",
    ])
    print(report)
    if args.write:
        record("usage", "Usage", report)


if __name__ == "__main__":
    main()
