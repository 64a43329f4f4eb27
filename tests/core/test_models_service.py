"""The shared model service: cache, TTL, refresh, fallback, typed failures."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, CommandResult
from clanker.ids import HarnessId
from clanker.models.service import EMPTY_TTL, ModelService
from clanker.models.types import CatalogSource
from clanker.registry import HarnessProvider, Registry
from clanker.testing import FailingExecutor, ScriptedExecutor
from clanker.testing.doubles import EnvironmentDouble
from tests.helpers import make_plugin


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def provider() -> HarnessProvider:
    return Registry.from_plugins({"fake-agent": make_plugin()}, environ={}).get_provider(
        HarnessId("fake-agent")
    )


def service(executor: object, cache: Path, clock: Clock) -> ModelService:
    return ModelService(environment=EnvironmentDouble(executor=executor),  # type: ignore[arg-type]
                        cache_dir=cache, clock=clock)


def test_a_listing_is_cached_until_its_ttl(provider: HarnessProvider, tmp_path: Path) -> None:
    clock = Clock()
    executor = ScriptedExecutor.returning("m1\tModel One\nm2\t\n")
    models = service(executor, tmp_path, clock)
    first = asyncio.run(models.catalog(provider))
    assert first.source is CatalogSource.LIVE
    assert [m.id for m in first.models] == ["m1", "m2"]
    assert first.models[0].label == "Model One"
    clock.now += timedelta(minutes=59)
    second = asyncio.run(models.catalog(provider))
    assert second.source is CatalogSource.CACHE
    assert second.models == first.models
    assert len(executor.requests) == 1
    clock.now += timedelta(minutes=2)
    assert asyncio.run(models.catalog(provider)).source is CatalogSource.LIVE
    assert len(executor.requests) == 2


def test_an_empty_listing_is_asked_again_soon(provider: HarnessProvider, tmp_path: Path) -> None:
    clock = Clock()
    executor = ScriptedExecutor.returning("")
    models = service(executor, tmp_path, clock)
    assert asyncio.run(models.catalog(provider)).models == ()
    clock.now += timedelta(seconds=EMPTY_TTL - 1)
    assert asyncio.run(models.catalog(provider)).source is CatalogSource.CACHE
    clock.now += timedelta(seconds=2)
    assert asyncio.run(models.catalog(provider)).source is CatalogSource.LIVE
    assert len(executor.requests) == 2


def test_refresh_bypasses_a_fresh_cache(provider: HarnessProvider, tmp_path: Path) -> None:
    clock = Clock()
    executor = ScriptedExecutor.returning("m1\tx\n")
    models = service(executor, tmp_path, clock)
    asyncio.run(models.catalog(provider))
    assert asyncio.run(models.catalog(provider, refresh=True)).source is CatalogSource.LIVE
    assert len(executor.requests) == 2


def test_the_cache_survives_between_processes(provider: HarnessProvider, tmp_path: Path) -> None:
    clock = Clock()
    asyncio.run(service(ScriptedExecutor.returning("m1\tx\n"), tmp_path, clock).catalog(provider))
    again = service(FailingExecutor(HarnessCapabilityError(ErrorKind.TIMEOUT)), tmp_path, clock)
    assert asyncio.run(again.catalog(provider)).source is CatalogSource.CACHE


def test_failure_keeps_the_last_good_list_flagged_stale(
    provider: HarnessProvider, tmp_path: Path
) -> None:
    clock = Clock()
    asyncio.run(service(ScriptedExecutor.returning("m1\tx\n"), tmp_path, clock).catalog(provider))
    clock.now += timedelta(days=3)
    broken = ScriptedExecutor.returning("not a listing\n")
    catalog = asyncio.run(service(broken, tmp_path, clock).catalog(provider))
    assert catalog.source is CatalogSource.CACHE
    assert catalog.stale
    assert catalog.failure is not None and catalog.failure.kind is ErrorKind.PARSE_FAILURE
    assert catalog.failure.harness == "fake-agent"
    assert [m.id for m in catalog.models] == ["m1"]


def test_failure_without_cache_shows_the_fallback_with_the_failure(
    provider: HarnessProvider, tmp_path: Path
) -> None:
    missing = FailingExecutor(HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE, "fake-agent"))
    catalog = asyncio.run(service(missing, tmp_path, Clock()).catalog(provider))
    assert catalog.source is CatalogSource.FALLBACK
    assert [m.id for m in catalog.models] == ["fallback-1"]
    assert catalog.failure is not None and catalog.failure.kind is ErrorKind.BINARY_UNAVAILABLE


def test_a_parse_failure_is_never_an_empty_success(
    provider: HarnessProvider, tmp_path: Path
) -> None:
    catalog = asyncio.run(
        service(ScriptedExecutor.returning("garbage"), tmp_path, Clock()).catalog(provider)
    )
    assert catalog.failure is not None
    assert catalog.source is not CatalogSource.LIVE


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        json.dumps({"version": 1, "harness": "fake-agent",
                    "fetched_at": "2026-11-30T12:00:00+00:00",
                    "models": [{"id": "m", "label": None, "provider": None, "is_default": False}],
                    "extra": 1}),
        json.dumps({"version": 1, "harness": "other", "fetched_at": "2026-11-30T12:00:00+00:00",
                    "models": []}),
        json.dumps({"version": 99, "harness": "fake-agent",
                    "fetched_at": "2026-11-30T12:00:00+00:00", "models": []}),
        json.dumps({"version": "1", "harness": "fake-agent",
                    "fetched_at": "2026-11-30T12:00:00+00:00", "models": []}),
        "x" * (5 * 1024 * 1024),
    ],
)
def test_a_corrupt_or_foreign_cache_is_ignored(
    provider: HarnessProvider, tmp_path: Path, content: str
) -> None:
    cache = tmp_path / "models" / "fake-agent.json"
    cache.parent.mkdir(parents=True)
    cache.write_text(content)
    executor = ScriptedExecutor.returning("m1\tx\n")
    catalog = asyncio.run(service(executor, tmp_path, Clock()).catalog(provider))
    assert catalog.source is CatalogSource.LIVE
    assert json.loads(cache.read_text())["models"][0]["id"] == "m1"


def test_concurrent_reads_share_one_listing(provider: HarnessProvider, tmp_path: Path) -> None:
    calls = 0

    class Slow:
        async def run(self, request: CommandRequest) -> CommandResult:
            nonlocal calls
            calls += 1
            await asyncio.sleep(0.05)
            return CommandResult("m1\tx\n", "", 0)

    models = service(Slow(), tmp_path, Clock())

    async def scenario() -> None:
        results = await asyncio.gather(*(models.catalog(provider) for _ in range(5)))
        assert {r.source for r in results} == {CatalogSource.LIVE}

    asyncio.run(scenario())
    assert calls == 1


def test_an_unwritable_cache_costs_nothing_but_a_relisting(
    provider: HarnessProvider, tmp_path: Path
) -> None:
    blocker = tmp_path / "models"
    blocker.write_text("a file where the cache directory should be")
    catalog = asyncio.run(
        service(ScriptedExecutor.returning("m1\tx\n"), tmp_path, Clock()).catalog(provider)
    )
    assert catalog.source is CatalogSource.LIVE


def test_no_models_capability_is_unsupported(tmp_path: Path) -> None:
    from clanker.capabilities import Capability

    bare = Registry.from_plugins(
        {"fake-agent": make_plugin(capabilities=(Capability.LAUNCH,))}, environ={}
    ).get_provider(HarnessId("fake-agent"))
    with pytest.raises(HarnessCapabilityError) as caught:
        asyncio.run(service(ScriptedExecutor.returning(""), tmp_path, Clock()).catalog(bare))
    assert caught.value.kind is ErrorKind.UNSUPPORTED


@pytest.mark.parametrize(
    ("raw", "usable"),
    [("gpt-6", True), ("anthropic/claude:free", True), ("", False), (" x", False),
     ("x\n", False), ("a\x1bb", False), ("a\0b", False), (3, False), (None, False)],
)
def test_model_text(raw: object, usable: bool) -> None:
    from clanker.models.types import model_text

    assert (model_text(raw) is not None) is usable
    if usable:
        assert model_text(raw) == raw
