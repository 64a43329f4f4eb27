"""The usage service: policy, staleness, dedupe, deadline, persistence, and the CLI."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from clanker.cli import cli
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import LocalTransport
from clanker.ids import HarnessId
from clanker.registry import HarnessProvider, Registry, override_registry
from clanker.testing.doubles import EnvironmentDouble
from clanker.usage.policy import RefreshPolicy
from clanker.usage.service import UsageService, UsageStatus
from clanker.usage.store import UsageStore
from tests.helpers import FakeUsage, make_plugin, make_usage_plugin, percent_snapshot, write_script

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def installed(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "fake-agent", "print('fake-agent 1.0')")
    return {"PATH": str(bin_dir)}


def setup(usage: FakeUsage, environ: dict[str, str], store: Path | None = None,
          clock: Clock | None = None) -> tuple[HarnessProvider, UsageService, Clock]:
    provider = Registry.from_plugins({"fake-agent": make_usage_plugin(usage)}, environ={}) \
        .get_provider(HarnessId("fake-agent"))
    clock = clock or Clock()
    service = UsageService(environment=EnvironmentDouble(executor=LocalTransport(),
                           environ=environ),
                           store=UsageStore(store), clock=clock)
    return provider, service, clock


def test_a_reading_is_cached_for_its_ttl_and_refresh_is_floored(installed: dict[str, str]) -> None:
    usage = FakeUsage(RefreshPolicy(cache_ttl=timedelta(minutes=5)))
    usage.outcomes = [percent_snapshot(28, T0), percent_snapshot(30, T0)]
    provider, service, clock = setup(usage, installed)
    first = asyncio.run(service.read(provider))
    assert first.status is UsageStatus.OK
    assert first.snapshot is not None
    assert first.snapshot.measurements[0].remaining_percent == 72
    assert first.next_refresh_at == T0 + timedelta(minutes=5)
    clock.now += timedelta(seconds=5)
    assert asyncio.run(service.read(provider, force=True)).snapshot == first.snapshot
    assert usage.calls == 1  # inside the 10 s manual floor
    clock.now += timedelta(seconds=6)
    forced = asyncio.run(service.read(provider, force=True))
    assert usage.calls == 2
    assert forced.snapshot is not None
    assert forced.snapshot.measurements[0].used == 30


def test_a_failed_refresh_keeps_the_last_reading_flagged_stale(installed: dict[str, str]) -> None:
    usage = FakeUsage(RefreshPolicy(cache_ttl=timedelta(0), failure_backoff=timedelta(minutes=2)))
    usage.outcomes = [percent_snapshot(10, T0),
                      HarnessCapabilityError(ErrorKind.COMMAND_FAILED, "exit 1")]
    provider, service, clock = setup(usage, installed)
    asyncio.run(service.read(provider))
    clock.now += timedelta(minutes=1)
    stale = asyncio.run(service.read(provider))
    assert stale.status is UsageStatus.STALE
    assert stale.snapshot is not None
    assert stale.failure is not None
    assert stale.failure.kind is ErrorKind.COMMAND_FAILED
    clock.now += timedelta(seconds=30)
    again = asyncio.run(service.read(provider, force=True))  # inside the backoff
    assert usage.calls == 2
    assert again.refreshable_at == T0 + timedelta(minutes=3)


def test_retry_after_is_honoured_even_by_force(installed: dict[str, str]) -> None:
    usage = FakeUsage(RefreshPolicy(failure_backoff=timedelta(0)))
    usage.outcomes = [HarnessCapabilityError(ErrorKind.COMMAND_FAILED, "guard", retry_after=3600)]
    provider, service, clock = setup(usage, installed)
    failed = asyncio.run(service.read(provider))
    assert failed.status is UsageStatus.FAILED
    clock.now += timedelta(minutes=30)
    asyncio.run(service.read(provider, force=True))
    assert usage.calls == 1


def test_concurrent_reads_share_one_probe(installed: dict[str, str]) -> None:
    usage = FakeUsage()
    usage.delay = 0.05
    usage.outcomes = [percent_snapshot(1, T0)]
    provider, service, _ = setup(usage, installed)

    async def scenario() -> None:
        entries = await asyncio.gather(*(service.read(provider) for _ in range(5)))
        assert {e.status for e in entries} == {UsageStatus.OK}

    asyncio.run(scenario())
    assert usage.calls == 1


def test_a_probe_that_never_answers_times_out(installed: dict[str, str]) -> None:
    usage = FakeUsage()
    usage.delay = 5
    usage.outcomes = [percent_snapshot(1, T0)]
    provider = Registry.from_plugins({"fake-agent": make_usage_plugin(usage)}, environ={}) \
        .get_provider(HarnessId("fake-agent"))
    service = UsageService(environment=EnvironmentDouble(executor=LocalTransport(),
                           environ=installed),
                           store=UsageStore(None), deadline=timedelta(seconds=0.1))
    entry = asyncio.run(service.read(provider))
    assert entry.status is UsageStatus.FAILED
    assert entry.failure is not None
    assert entry.failure.kind is ErrorKind.TIMEOUT


def test_not_installed_and_unsupported_never_probe(tmp_path: Path) -> None:
    usage = FakeUsage()
    provider, service, _ = setup(usage, {"PATH": str(tmp_path)})
    assert asyncio.run(service.read(provider)).status is UsageStatus.NOT_INSTALLED
    bare = Registry.from_plugins({"fake-agent": make_plugin()}, environ={}).get_provider(
        HarnessId("fake-agent"))
    assert asyncio.run(service.read(bare)).status is UsageStatus.UNSUPPORTED
    assert usage.calls == 0


def test_readings_and_clocks_survive_between_processes(
    installed: dict[str, str], tmp_path: Path
) -> None:
    usage = FakeUsage(RefreshPolicy(cache_ttl=timedelta(minutes=5)))
    usage.outcomes = [percent_snapshot(40, T0)]
    store = tmp_path / "cache"
    provider, service, clock = setup(usage, installed, store)
    asyncio.run(service.read(provider))
    other = FakeUsage(RefreshPolicy(cache_ttl=timedelta(minutes=5)))
    provider2, service2, _ = setup(other, installed, store, clock)
    entry = asyncio.run(service2.read(provider2))
    assert other.calls == 0
    assert entry.snapshot is not None
    assert entry.snapshot.measurements[0].used == 40


@pytest.mark.parametrize("content", ["{", "[]", '{"version":1}', "x" * 2_000_000])
def test_a_corrupt_store_is_no_store(installed: dict[str, str], tmp_path: Path,
                                     content: str) -> None:
    usage = FakeUsage()
    usage.outcomes = [percent_snapshot(1, T0)]
    store = tmp_path / "cache"
    provider, service, _ = setup(usage, installed, store)
    asyncio.run(service.read(provider))
    [path] = (store / "usage").iterdir()
    path.write_text(content)
    usage.outcomes = [percent_snapshot(2, T0)]
    provider, service, _ = setup(usage, installed, store)
    entry = asyncio.run(service.read(provider))
    assert entry.snapshot is not None
    assert entry.snapshot.measurements[0].used == 2


# -- the CLI ---------------------------------------------------------------------------------


@pytest.fixture
def cli_world(installed: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeUsage]:
    monkeypatch.setenv("PATH", f"{installed['PATH']}{os.pathsep}{os.environ['PATH']}")
    usage = FakeUsage()
    registry = Registry.from_plugins({"fake-agent": make_usage_plugin(usage)}, environ={})
    with override_registry(registry):
        yield usage


def test_usage_cli_shows_remaining_first(cli_world: FakeUsage) -> None:
    now = datetime.now(UTC)
    cli_world.outcomes = [percent_snapshot(28, now)]
    result = CliRunner().invoke(cli, ["usage"])
    assert result.exit_code == 0, result.output
    assert "72% remaining" in result.output
    assert "Fake · 5 hour" in result.output


def test_usage_cli_json_and_failure_exit(cli_world: FakeUsage) -> None:
    cli_world.outcomes = [HarnessCapabilityError(ErrorKind.UNAUTHENTICATED, "signed out")]
    result = CliRunner().invoke(cli, ["usage", "--json"])
    assert result.exit_code == 6
    [entry] = json.loads(result.output)
    assert entry["status"] == "failed"
    assert entry["failure"]["kind"] == "unauthenticated"
    assert entry["measurements"] == []
