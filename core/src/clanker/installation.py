"""Is a harness installed, where, and which version: asked of the binary itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from attrs import frozen

from clanker.environment import Environment, LocatesAtOnce
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.registry import HarnessProvider

__all__ = ["Installation", "installations_at_once", "probe_installation", "probe_installations"]


@frozen(kw_only=True)
class Installation:
    """What was found for one harness.

    ``path`` is ``None`` when the executable is not on PATH (absent, not
    broken). ``error`` is set when it is there but its version could not be
    read: that *is* broken.
    """

    provider: HarnessProvider
    path: str | None
    version: str | None = None
    error: HarnessCapabilityError | None = None

    @property
    def installed(self) -> bool:
        return self.path is not None

    @property
    def broken(self) -> bool:
        return self.error is not None


async def probe_installation(
    provider: HarnessProvider, environment: Environment, path: str | None
) -> Installation:
    """Ask ``provider``'s executable, found at ``path``, for its version."""
    if path is None or provider.launch is None:
        return Installation(provider=provider, path=path)
    try:
        result = await environment.executor.run(provider.launch.version_request())
        version = provider.launch.parse_version(result)
    except HarnessCapabilityError as exc:
        if exc.kind is ErrorKind.BINARY_UNAVAILABLE:  # vanished since which()
            return Installation(provider=provider, path=None)
        return Installation(provider=provider, path=path, error=exc.with_harness(provider.id))
    return Installation(provider=provider, path=path, version=version)


async def probe_installations(
    providers: Sequence[HarnessProvider], environment: Environment
) -> list[Installation]:
    """Locate every executable in one lookup, then ask each for its version
    concurrently (each probe is bounded by its own timeout)."""
    found = await environment.locate({p.descriptor.executable for p in providers})
    if not _to_ask(providers, found):
        return _unasked(providers, found)
    import asyncio  # here: with nothing to ask, no event loop is needed

    return list(await asyncio.gather(*(
        probe_installation(p, environment, found.get(p.descriptor.executable))
        for p in providers
    )))


def installations_at_once(
    providers: Sequence[HarnessProvider], environment: Environment
) -> list[Installation] | None:
    """What :func:`probe_installations` answers, when it can be known without
    waiting: the environment looks executables up at once (this machine) and no
    executable found has a version to ask. Otherwise ``None``: probe them."""
    if not isinstance(environment, LocatesAtOnce):
        return None
    found = environment.locate_now({p.descriptor.executable for p in providers})
    return None if _to_ask(providers, found) else _unasked(providers, found)


def _unasked(providers: Sequence[HarnessProvider], found: Mapping[str, str | None]
             ) -> list[Installation]:
    return [Installation(provider=p, path=found.get(p.descriptor.executable)) for p in providers]


def _to_ask(providers: Sequence[HarnessProvider], found: Mapping[str, str | None]) -> bool:
    """Whether any provider's executable was found and has a version to ask."""
    return any(found.get(p.descriptor.executable) is not None and p.launch is not None
               for p in providers)
