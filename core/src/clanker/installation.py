"""Is a harness installed, where, and which version: asked of the binary itself."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Mapping, Sequence

from attrs import frozen

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandExecutor
from clanker.registry import HarnessProvider

__all__ = ["Installation", "probe_installation", "probe_installations"]


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
    provider: HarnessProvider,
    executor: CommandExecutor,
    environ: Mapping[str, str] | None = None,
) -> Installation:
    """Locate ``provider``'s executable and ask it for its version."""
    environ = os.environ if environ is None else environ
    path = shutil.which(provider.descriptor.executable, path=environ.get("PATH", os.defpath))
    if path is None or provider.launch is None:
        return Installation(provider=provider, path=path)
    try:
        result = await executor.run(provider.launch.version_request())
        version = provider.launch.parse_version(result)
    except HarnessCapabilityError as exc:
        if exc.kind is ErrorKind.BINARY_UNAVAILABLE:  # vanished since which()
            return Installation(provider=provider, path=None)
        return Installation(provider=provider, path=path, error=exc.with_harness(provider.id))
    return Installation(provider=provider, path=path, version=version)


async def probe_installations(
    providers: Sequence[HarnessProvider], executor: CommandExecutor
) -> list[Installation]:
    """Probe every provider concurrently (each probe is bounded by its own timeout)."""
    return list(await asyncio.gather(*(probe_installation(p, executor) for p in providers)))
