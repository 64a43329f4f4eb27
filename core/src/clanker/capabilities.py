"""The implementation objects the capability hooks return.

Each protocol is what shared code may call on a provider. A plugin that cannot
do something does not implement the hook at all; there is no object whose
methods only raise "unsupported".

Launch and models are settled. The others carry the contract their services
rely on (see ``docs/architecture.md``); their data types grow with the
services that consume them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from attrs import frozen

from clanker.attention.capability import AttentionCapability
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandExecutor, CommandRequest, CommandResult, SessionExecutor
from clanker.launch.request import LaunchPlan, LaunchRequest
from clanker.models.types import Model

if TYPE_CHECKING:
    from clanker.sessions.context import SessionsContext
    from clanker.sessions.types import SessionScan
    from clanker.usage.capability import UsageContext
    from clanker.usage.policy import RefreshPolicy
    from clanker.usage.types import UsageSnapshot

__all__ = [
    "AccountsCapability",
    "AcpCapability",
    "AgentBridgeCapability",
    "AttentionCapability",
    "CheckoutRehomeCapability",
    "CommitCapability",
    "GuidanceCapability",
    "LaunchCapability",
    "ModelsCapability",
    "ModelsContext",
    "SessionsCapability",
    "UsageCapability",
]


# -- launch ---------------------------------------------------------------


@runtime_checkable
class LaunchCapability(Protocol):
    """Owns the executable, base arguments, model flag and harness environment."""

    def build(self, request: LaunchRequest) -> LaunchPlan:
        """Return the exact command for a fresh launch, resume or fork.

        ``request.user_flags`` must appear verbatim, contiguous and in order.
        Called only for operations the descriptor declares, over a transport it
        allows; session ids have already passed :meth:`validate_session_id`.
        """
        ...

    def validate_session_id(self, raw: str) -> str:
        """Return ``raw`` (normalized) if it has this harness's session-id syntax.

        Raise :class:`ValueError` otherwise. Syntax only: whether the session
        exists is the sessions capability's question.
        """
        ...

    def version_request(self) -> CommandRequest:
        """Return the command that prints the installed version."""
        ...

    def parse_version(self, result: CommandResult) -> str:
        """Return the version from ``result`` or raise ``parse-failure``."""
        ...


# -- models ---------------------------------------------------------------


@frozen(kw_only=True)
class ModelsContext:
    """What a model discovery may use: bound executors, never a process or path."""

    executor: CommandExecutor
    session_executor: SessionExecutor | None
    refresh: bool = False

    def require_sessions(self, harness: str) -> SessionExecutor:
        """Return the session executor, or raise ``unsupported`` where there is none."""
        if self.session_executor is None:
            raise HarnessCapabilityError(
                ErrorKind.UNSUPPORTED, "listing needs a stdio session", harness=harness
            )
        return self.session_executor


@runtime_checkable
class ModelsCapability(Protocol):
    """Lists the models a harness accepts, through its own native command."""

    cache_ttl: float
    """Seconds a successful listing stays fresh for an ordinary read."""

    fallback: tuple[Model, ...]
    """The intentional static list shown when listing fails (may be empty)."""

    async def discover(self, context: ModelsContext) -> tuple[Model, ...]:
        """List models now. ``context.refresh`` asks the harness for a live catalog.

        Raise :class:`~clanker.errors.HarnessCapabilityError` on failure
        (``parse-failure`` for unrecognized output); never return an empty
        tuple to mean "it failed".
        """
        ...


# -- the capabilities whose services come in later work --------------------
# Their methods take the same bound executors; nothing here spawns a process.


@runtime_checkable
class SessionsCapability(Protocol):
    """Finds a harness's past conversations in its own store, bounded."""

    resumes_without_original_directory: bool
    """Whether the harness continues a session whose recorded directory is gone
    (verified per version; ``False`` unless proven)."""

    def store_roots(self, environ: Mapping[str, str]) -> tuple[Path, ...]:
        """Return the directories the store's files live under (for confinement checks).

        Empty for a harness whose history is only reachable through its own command.
        """
        ...

    async def discover(self, context: SessionsContext) -> SessionScan:
        """Summarize the store's sessions within ``context``'s bounds.

        A missing store is an empty scan. Malformed files are counted skips;
        an unreadable store or a changed schema raises a typed error.
        """
        ...


@runtime_checkable
class UsageCapability(Protocol):
    """Reads remaining quota from the harness's own authenticated interface."""

    policy: RefreshPolicy
    """Cache TTL, hard minimum probe interval and failure backoff for this harness."""

    async def probe(self, context: UsageContext) -> UsageSnapshot:
        """Return one snapshot (possibly with no measurements), or raise a typed failure:
        ``unauthenticated`` when signed out, ``unsupported`` when the account or version
        has no quota interface, ``parse-failure`` for unrecognized output."""
        ...


@runtime_checkable
class AccountsCapability(Protocol):
    """Authentication commands and the account-home variable of one harness."""

    def environment(self, home: str) -> Mapping[str, str]:
        """Return the variables that point the harness at a managed account home."""
        ...


@runtime_checkable
class AgentBridgeCapability(Protocol):
    """How the harness receives the one shared loopback MCP endpoint."""

    def prepare(self, context: Any) -> Any | None:
        """Return the attachment, or ``None`` when the user already owns the name."""
        ...


@runtime_checkable
class GuidanceCapability(Protocol):
    """Delivers the launch-scoped instruction through the harness's own mechanism."""

    def prepare(self, text: str, context: Any) -> Any | None:
        """Return the attachment, or ``None`` when the user's own instructions would be replaced."""
        ...


@runtime_checkable
class CheckoutRehomeCapability(Protocol):
    """Moves a conversation into an isolated worktree (hot-replace or after-turn)."""

    strategy: str


@runtime_checkable
class CommitCapability(Protocol):
    """Writes a commit message through the harness's non-interactive structured mode."""

    def build_invocation(self, model: str | None, prompt: str) -> CommandRequest:
        """Return the bounded inference command."""
        ...

    def parse_output(self, result: CommandResult) -> str:
        """Return the authoritative message text, or raise ``parse-failure``."""
        ...


@runtime_checkable
class AcpCapability(Protocol):
    """How to start the harness as an Agent Client Protocol server over stdio."""

    def server_command(self, model: str | None) -> CommandRequest:
        """Return the command that serves ACP on stdin/stdout."""
        ...

