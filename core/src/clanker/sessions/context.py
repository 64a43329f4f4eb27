"""What a sessions provider is handed: bounds, scope, executors, its cache."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from attrs import field, frozen

from clanker.execution import CommandExecutor
from clanker.ids import HarnessId
from clanker.sessions.cache import SummaryCache

__all__ = ["DEFAULT_STORE_LIMIT", "SessionsContext"]

DEFAULT_STORE_LIMIT: Final = 512


@frozen(kw_only=True)
class SessionsContext:
    """One discovery request, as a provider sees it.

    ``scopes`` are the workspace's canonical directory and its git worktrees
    (plus the path as the caller spelled it), or empty for "everything". A
    provider may use them to skip whole project directories cheaply; the
    service still matches every session's canonical cwd itself, so a scope is
    never authority. ``native_id`` narrows discovery to one session when
    clanker re-finds a selection before launching it; then ``scopes`` only say
    where the caller is (for a harness that lists one project at a time) and
    must not filter. ``limit`` bounds how many sessions one store contributes
    (the newest first).
    """

    harness: HarnessId
    executor: CommandExecutor
    environ: Mapping[str, str]
    cache: SummaryCache
    scopes: tuple[str, ...] = ()
    native_id: str | None = None
    limit: int = field(default=DEFAULT_STORE_LIMIT)

    @limit.validator
    def _positive(self, _: object, value: int) -> None:
        if value < 1:
            raise ValueError("limit: must be at least 1")
