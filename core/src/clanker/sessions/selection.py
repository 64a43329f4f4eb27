"""From ``HARNESS:ID`` to a session clanker may launch: re-found, confined, placed.

A selection names a harness and a native id, nothing else. Everything a launch
uses (the store path, the directory) comes from clanker re-finding the session
in the harness's own store, never from the caller.
"""

from __future__ import annotations

import stat

from attrs import frozen

from clanker.descriptor import SessionOperation
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.registry import HarnessProvider, Registry
from clanker.sessions.service import SessionService
from clanker.sessions.types import HarnessSession

__all__ = [
    "InvalidSelectionError",
    "Selection",
    "SessionNotFoundError",
    "parse_selection",
    "resolve_selection",
]


class InvalidSelectionError(ValueError):
    """The selection is not ``HARNESS:ID`` for a known harness and a well-formed id."""


class SessionNotFoundError(LookupError):
    """The harness's history has no session with that id (any more)."""


@frozen(kw_only=True)
class Selection:
    """A re-found session and the directory to launch it in.

    ``notice`` is set when the launch directory is not the session's own
    (its recorded directory is gone and the harness can continue elsewhere).
    """

    provider: HarnessProvider
    session: HarnessSession
    launch_cwd: str
    notice: str | None = None


def parse_selection(registry: Registry, raw: str) -> tuple[HarnessProvider, str]:
    """Split ``HARNESS:ID`` and check both parts (syntax only)."""
    harness, sep, native_id = raw.partition(":")
    if not sep or not native_id:
        raise InvalidSelectionError("a session is selected as HARNESS:ID (see `clanker sessions`)")
    provider = registry.find_provider(harness)
    if provider is None:
        known = ", ".join(registry.ids()) or "none installed"
        raise InvalidSelectionError(f"unknown harness {harness!r} (known: {known})")
    if provider.sessions is None:
        raise HarnessCapabilityError(ErrorKind.UNSUPPORTED, "session history", harness=provider.id)
    if provider.launch is None:
        raise HarnessCapabilityError(ErrorKind.UNSUPPORTED, "launch", harness=provider.id)
    try:
        native_id = provider.launch.validate_session_id(native_id)
    except ValueError as exc:
        raise InvalidSelectionError(f"{provider.id}: {exc}") from exc
    return provider, native_id


async def resolve_selection(
    service: SessionService,
    registry: Registry,
    raw: str,
    *,
    operation: SessionOperation | None,
    workspace: str,
) -> Selection:
    """Re-find ``raw`` in its harness's store and decide where it may be launched.

    ``operation`` (resume or fork) is checked against the descriptor first, so
    an unsupported fork fails before any scan. ``None`` only looks it up.
    """
    provider, native_id = parse_selection(registry, raw)
    if operation is not None and provider.descriptor.operation(operation) is None:
        raise HarnessCapabilityError(ErrorKind.UNSUPPORTED, operation.value, harness=provider.id)
    session = await service.find(provider, native_id, workspace=workspace)
    if session is None:
        raise SessionNotFoundError(f"{provider.id} has no session {native_id} in its history")
    capability = provider.sessions
    assert capability is not None
    environment = service.environment
    roots = capability.store_roots(environment.environ, environment.files)
    if session.store_path is not None and not environment.files.confined(
        session.store_path, roots
    ):
        raise HarnessCapabilityError(
            ErrorKind.STORAGE_CHANGED, "the session file lies outside the harness's store",
            harness=provider.id,
        )
    place = None if session.cwd is None else environment.files.stat(session.cwd)
    if session.cwd is None or (place is not None and stat.S_ISDIR(place.st_mode)):
        return Selection(provider=provider, session=session, launch_cwd=session.cwd or workspace)
    if capability.resumes_without_original_directory:
        return Selection(
            provider=provider, session=session, launch_cwd=workspace,
            notice=f"{session.cwd} no longer exists; continuing the session in {workspace}",
        )
    raise HarnessCapabilityError(
        ErrorKind.UNSUPPORTED,
        f"{session.cwd} no longer exists and this harness only continues a session "
        "in its own directory; recreate the directory to resume it",
        harness=provider.id,
    )
