"""The launch contract: what a provider implements to start its harness, and
what a launch hands a provider's attachment (attention today).

A plugin imports its launch types from here.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from clanker.attachment import AttachmentContext, AttachmentPlan
from clanker.execution import CommandRequest, CommandResult
from clanker.launch.request import (
    LaunchOperation,
    LaunchPlan,
    LaunchRequest,
    SessionTarget,
    split_user_flags,
)
from clanker.launch.session_ids import LOWERCASE_UUID, checked_session_id
from clanker.launch.version import parse_version_output

__all__ = [
    "LOWERCASE_UUID",
    "AttachmentContext",
    "AttachmentPlan",
    "LaunchCapability",
    "LaunchOperation",
    "LaunchPlan",
    "LaunchRequest",
    "SessionTarget",
    "checked_session_id",
    "parse_version_output",
    "split_user_flags",
]


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
