"""What a usage probe is given, and what it must declare."""

from __future__ import annotations

from attrs import frozen

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandExecutor, SessionExecutor

__all__ = ["UsageContext"]


@frozen(kw_only=True)
class UsageContext:
    """Bound executors and the account asked about; never a path, target or credential."""

    executor: CommandExecutor
    session_executor: SessionExecutor | None
    account_id: str | None = None

    def require_sessions(self, harness: str) -> SessionExecutor:
        """Return the session executor, or raise ``unsupported`` where there is none."""
        if self.session_executor is None:
            raise HarnessCapabilityError(
                ErrorKind.UNSUPPORTED, "the probe needs a stdio session", harness=harness
            )
        return self.session_executor
