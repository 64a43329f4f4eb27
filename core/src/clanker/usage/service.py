"""The shared usage service: probes through the registry, cached by policy.

One entry per (environment, harness, account). Probes run concurrently,
each under a 45 s deadline, deduplicated while in flight; the refresh policy
(:mod:`clanker.usage.policy`) decides whether a read may probe at all. A failed
refresh keeps the last good reading, flagged stale. Nothing here names a
harness.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Final

from attrs import evolve, frozen

from clanker.environment import Environment
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.registry import HarnessProvider
from clanker.usage.capability import UsageContext
from clanker.usage.policy import decide
from clanker.usage.store import Remembered, UsageStore
from clanker.usage.types import UsageSnapshot

__all__ = ["PROBE_DEADLINE", "UsageEntry", "UsageService", "UsageStatus"]

PROBE_DEADLINE: Final = timedelta(seconds=45)


class UsageStatus(enum.StrEnum):
    OK = "ok"  # a reading within its policy
    STALE = "stale"  # the last good reading; the latest refresh failed
    FAILED = "failed"  # no reading at all, and a failure
    UNSUPPORTED = "unsupported"  # the harness has no usage capability
    NOT_INSTALLED = "not-installed"  # its executable is not on PATH: nothing probed


@frozen(kw_only=True)
class UsageEntry:
    harness: str
    status: UsageStatus
    snapshot: UsageSnapshot | None = None
    failure: HarnessCapabilityError | None = None
    checked_at: datetime | None = None
    next_refresh_at: datetime | None = None
    refreshable_at: datetime | None = None
    account: str | None = None
    """The managed account read (its id), or ``None`` for the harness's own sign-in."""


class UsageService:
    """Reads usage for providers; remembers readings in ``store`` between runs."""

    def __init__(
        self,
        *,
        environment: Environment,
        store: UsageStore,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        deadline: timedelta = PROBE_DEADLINE,
    ) -> None:
        self._environment = environment
        self._store = store
        self._clock = clock
        self._deadline = deadline
        self._inflight: dict[str, asyncio.Task[UsageEntry]] = {}

    async def read(
        self, provider: HarnessProvider, *, force: bool = False, account: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> UsageEntry:
        """Return ``provider``'s usage, probing only when the policy allows; for a managed
        ``account``, ``env`` points the harness at its home (each of the probe's
        commands gets it)."""
        if provider.usage is None:
            return UsageEntry(harness=provider.id, status=UsageStatus.UNSUPPORTED)
        executable = provider.descriptor.executable
        found = await self._environment.locate([executable])
        if found.get(executable) is None:
            return UsageEntry(harness=provider.id, status=UsageStatus.NOT_INSTALLED)
        key = f"{self._environment.name}\0{provider.id}\0{account or ''}"
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._read(provider, key, force, account, env or {}))
            self._inflight[key] = task
            task.add_done_callback(lambda _: self._inflight.pop(key, None))
        return await asyncio.shield(task)

    async def close(self) -> None:
        """Cancel every probe in flight and wait for each to be cleaned up."""
        tasks = list(self._inflight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _read(
        self, provider: HarnessProvider, key: str, force: bool, account: str | None,
        env: Mapping[str, str],
    ) -> UsageEntry:
        capability = provider.usage
        assert capability is not None
        remembered = self._store.load(key, provider.id)
        now = self._clock()
        decision = decide(remembered.state, capability.policy, now, force=force)
        if decision.probe:
            remembered = await self._probe(provider, remembered, account, env, now)
            self._store.save(key, remembered)
            decision = decide(remembered.state, capability.policy, self._clock(), force=False)
        return evolve(_entry(provider.id, remembered, decision.next_refresh_at,
                             decision.refreshable_at), account=account)

    async def _probe(
        self, provider: HarnessProvider, remembered: Remembered, account: str | None,
        env: Mapping[str, str], started: datetime,
    ) -> Remembered:
        capability = provider.usage
        assert capability is not None
        state = evolve(remembered.state, last_probe_at=started)
        environment = self._environment
        executor, sessions = environment.executor, environment.session_executor
        if env:
            from clanker.environment.bound import BoundExecutor, BoundSessionExecutor

            executor = BoundExecutor(executor, env)
            sessions = None if sessions is None else BoundSessionExecutor(sessions, env)
        context = UsageContext(
            executor=executor, session_executor=sessions, files=environment.files,
            environ={**environment.environ, **env}, account_id=account,
        )
        try:
            async with asyncio.timeout(self._deadline.total_seconds()):
                snapshot = await capability.probe(context)
        except TimeoutError as exc:
            failure = HarnessCapabilityError(ErrorKind.TIMEOUT, "usage probe", harness=provider.id,
                                             cause=exc)
        except HarnessCapabilityError as exc:
            failure = exc.with_harness(provider.id)
        else:
            finished = self._clock()
            return Remembered(
                state=evolve(state, last_success_at=finished, last_failure_at=None,
                             retry_after_until=None),
                snapshot=snapshot, failure=None, checked_at=finished,
            )
        finished = self._clock()
        retry_until = (finished + timedelta(seconds=failure.retry_after)
                       if failure.retry_after else None)
        return Remembered(
            state=evolve(state, last_failure_at=finished, retry_after_until=retry_until),
            snapshot=remembered.snapshot, failure=failure, checked_at=finished,
        )


def _entry(
    harness: str, remembered: Remembered, next_refresh_at: datetime | None,
    refreshable_at: datetime | None,
) -> UsageEntry:
    if remembered.failure is None:
        status = UsageStatus.OK if remembered.snapshot is not None else UsageStatus.FAILED
    else:
        status = UsageStatus.STALE if remembered.snapshot is not None else UsageStatus.FAILED
    if remembered.snapshot is None and remembered.failure is None:
        # Nothing was ever read and nothing probed (a hard limit held): say so plainly.
        failure: HarnessCapabilityError | None = HarnessCapabilityError(
            ErrorKind.ABORTED, "no reading yet", harness=harness
        )
    else:
        failure = remembered.failure
    return UsageEntry(
        harness=harness, status=status, snapshot=remembered.snapshot, failure=failure,
        checked_at=remembered.checked_at, next_refresh_at=next_refresh_at,
        refreshable_at=refreshable_at,
    )
