"""The shared model service: native listing, TTL cache, fallback, typed failures.

Nothing here knows a harness; it calls the provider's models capability with a
bound executor. A successful listing is cached on disk for the provider's TTL;
an explicit refresh bypasses the cache; a failure falls back to the last good
listing (flagged stale) or to the provider's intentional fallback list, and
always carries the typed failure so a caller can tell.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from attrs import frozen

from clanker.converters import BoundaryError, make_boundary_converter, structure
from clanker.environment import Environment
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.models.capability import ModelsCapability, ModelsContext
from clanker.models.types import CatalogSource, Model, ModelCatalog
from clanker.registry import HarnessProvider
from clanker.storage import read_json, write_json_atomic

__all__ = ["EMPTY_TTL", "ModelService"]

_CACHE_VERSION: Final = 1
EMPTY_TTL: Final = 60.0
"""Seconds an empty listing stays fresh: a harness that lists nothing is usually one
being set up right now (a provider or key about to be added), so ask again soon."""
_converter = make_boundary_converter()


@frozen(kw_only=True)
class _CacheFile:
    version: int
    harness: str
    fetched_at: datetime
    models: tuple[Model, ...]


def _fresh_for(cached: _CacheFile, capability: ModelsCapability) -> float:
    return capability.cache_ttl if cached.models else min(capability.cache_ttl, EMPTY_TTL)


class ModelService:
    """Model catalogs for any provider, cached under ``cache_dir/models``."""

    def __init__(
        self,
        *,
        environment: Environment,
        cache_dir: Path,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._environment = environment
        self._dir = environment.cache_dir(cache_dir) / "models"  # hosts never mix
        self._clock = clock
        self._inflight: dict[tuple[str, bool], asyncio.Task[ModelCatalog]] = {}
        self._generation: dict[str, int] = {}

    async def catalog(self, provider: HarnessProvider, *, refresh: bool = False) -> ModelCatalog:
        """Return ``provider``'s models; ``refresh`` asks the harness, ignoring the cache.

        Raises ``unsupported`` if the provider has no models capability; every
        other failure is reported inside the returned catalog.
        """
        if provider.models is None:
            raise HarnessCapabilityError(ErrorKind.UNSUPPORTED, "models", harness=provider.id)
        key = (provider.id, refresh)
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._catalog(provider, refresh))
            self._inflight[key] = task
            task.add_done_callback(lambda _: self._inflight.pop(key, None))
        return await asyncio.shield(task)

    async def _catalog(self, provider: HarnessProvider, refresh: bool) -> ModelCatalog:
        capability = provider.models
        assert capability is not None
        harness = provider.id
        cached = self._read(harness)
        now = self._clock()
        if (
            not refresh
            and cached is not None
            and 0 <= (now - cached.fetched_at).total_seconds() < _fresh_for(cached, capability)
        ):
            return ModelCatalog(
                harness=harness, models=cached.models, source=CatalogSource.CACHE,
                fetched_at=cached.fetched_at,
            )
        generation = self._generation.get(harness, 0) + (1 if refresh else 0)
        self._generation[harness] = generation
        environment = self._environment
        context = ModelsContext(
            executor=environment.executor, session_executor=environment.session_executor,
            files=environment.files, environ=environment.environ, refresh=refresh,
        )
        try:
            models = tuple(await capability.discover(context))
        except HarnessCapabilityError as exc:
            return self._degraded(harness, cached, capability.fallback, exc.with_harness(harness))
        fetched = self._clock()
        # An ordinary listing that finishes after a newer explicit refresh
        # must not overwrite the refresh's result.
        if self._generation.get(harness, 0) == generation:
            self._write(harness, fetched, models)
        return ModelCatalog(
            harness=harness, models=models, source=CatalogSource.LIVE, fetched_at=fetched
        )

    def _degraded(
        self,
        harness: str,
        cached: _CacheFile | None,
        fallback: tuple[Model, ...],
        failure: HarnessCapabilityError,
    ) -> ModelCatalog:
        if cached is not None:
            return ModelCatalog(
                harness=harness, models=cached.models, source=CatalogSource.CACHE,
                fetched_at=cached.fetched_at, failure=failure,
            )
        source = CatalogSource.FALLBACK if fallback else CatalogSource.NONE
        return ModelCatalog(harness=harness, models=fallback, source=source, failure=failure)

    def _path(self, harness: str) -> Path:
        return self._dir / f"{harness}.json"

    def _read(self, harness: str) -> _CacheFile | None:
        data = read_json(self._path(harness))
        if data is None:
            return None
        try:
            cached = structure(_converter, data, _CacheFile)
        except BoundaryError:
            return None  # a corrupt or foreign cache is simply not a cache
        if cached.version != _CACHE_VERSION or cached.harness != harness:
            return None
        return cached

    def _write(self, harness: str, fetched_at: datetime, models: tuple[Model, ...]) -> None:
        record = _CacheFile(
            version=_CACHE_VERSION, harness=harness, fetched_at=fetched_at, models=models
        )
        # An unwritable cache costs a re-listing next time, nothing more.
        with contextlib.suppress(OSError):
            write_json_atomic(self._path(harness), _converter.unstructure(record))
