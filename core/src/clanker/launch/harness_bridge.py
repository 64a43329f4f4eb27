"""The two launch steps that tell a harness about the bridge, through its own channels.

After the bridge step has put the launch's credential (and the MCP endpoint's
URL) into the child environment:

* :class:`McpAttachment` asks the provider's ``agent_bridge`` capability to
  register the endpoint with the harness's MCP client (a config file in a
  launch-owned directory, a ``-c`` override, a merged config variable), which
  references the credential's variable by name, never its value;
* :class:`GuidanceAttachment` asks the provider's ``guidance`` capability to
  deliver :func:`~clanker.guidance.text.guidance_text` for what was granted
  (an appended system prompt, a developer-instructions override, an
  instructions file), never replacing the person's own instructions.

Both are optional steps: one the provider declines (the person owns that
server name or channel) or that fails leaves the launch as it was, and
``clanker cmd`` still works. Each one's directory is removed on dispose.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from clanker._logging import get_logger
from clanker.attachment import AttachmentContext, AttachmentPlan
from clanker.environment import HostFiles
from clanker.execution import CommandRequest, CommandResult
from clanker.launch.attachments import LaunchState, PreparedAttachment
from clanker.launch.scratch import private_directory, remove_directory
from clanker.paths import ClankerPaths, clanker_paths

if TYPE_CHECKING:
    from clanker.bridge.capability import AgentBridgeCapability
    from clanker.guidance.capability import GuidanceCapability

__all__ = ["GuidanceAttachment", "HarnessChannel", "McpAttachment"]

log = get_logger(__name__)

OWNED_NOTICE = ("your own configuration already defines an MCP server named clanker, so "
                "this agent reaches clanker through `clanker cmd` only")


class HarnessChannel:
    """What both steps need of one launch: where it runs and how to reach its host,
    and whether the harness was handed the MCP endpoint (the guidance says so)."""

    def __init__(
        self,
        harness: str,
        *,
        cwd: str,
        files: HostFiles,
        run: Callable[[CommandRequest], CommandResult],
        user_flags: Sequence[str] = (),
        paths: ClankerPaths | None = None,
    ) -> None:
        self.harness = harness
        self.mcp_attached = False
        self._cwd = cwd
        self._files = files
        self._run = run
        self._user_flags = tuple(user_flags)
        self._paths = paths

    def attach(
        self, state: LaunchState, kind: str,
        ask: Callable[[AttachmentContext], AttachmentPlan | None],
    ) -> tuple[PreparedAttachment | None, AttachmentPlan | None]:
        """Ask the provider (``ask``) in a fresh private directory; return the step's
        result and the provider's plan (``None``: it declined, nothing is kept)."""
        directory = private_directory(self._paths or clanker_paths(), f"{self.harness}-{kind}")
        try:
            plan = ask(AttachmentContext(
                argv=state.argv, env=state.env, cwd=self._cwd, private_dir=directory,
                user_flags=self._user_flags, files=self._files, run=self._run,
            ))
            if plan is None:
                remove_directory(directory)
                return None, None
            if not isinstance(plan, AttachmentPlan):
                raise TypeError(f"the provider's {kind} returned {type(plan).__name__}")
            released = False

            def dispose() -> None:
                nonlocal released
                if not released:
                    released = True
                    remove_directory(directory)

            return PreparedAttachment(dispose=dispose, argv=plan.argv, env=plan.env,
                                      notice=plan.notice), plan
        except BaseException:
            remove_directory(directory)
            raise


class McpAttachment:
    """Registers the bridge's MCP endpoint with the harness (an optional step)."""

    name = "agent-bridge"
    optional = True

    def __init__(self, capability: AgentBridgeCapability, channel: HarnessChannel) -> None:
        self._capability = capability
        self._channel = channel

    def prepare(self, state: LaunchState) -> PreparedAttachment | None:
        from clanker.launch.bridge import bridge_endpoint

        endpoint = bridge_endpoint(state.env)
        if endpoint is None:
            return None  # no bridge on this launch, or its endpoint could not start
        prepared, plan = self._channel.attach(
            state, "mcp", lambda context: self._capability.prepare(context, endpoint))
        if plan is None:
            log.info("agent-bridge: %s's own configuration owns the name", self._channel.harness)
            return PreparedAttachment(dispose=_nothing, notice=OWNED_NOTICE)
        self._channel.mcp_attached = True
        return prepared


class GuidanceAttachment:
    """Tells the agent what it may ask the host for (an optional step)."""

    name = "guidance"
    optional = True

    def __init__(self, capability: GuidanceCapability, channel: HarnessChannel,
                 grants: Sequence[str]) -> None:
        self._capability = capability
        self._channel = channel
        self._grants = tuple(grants)

    def prepare(self, state: LaunchState) -> PreparedAttachment | None:
        from clanker.bridge import wire
        from clanker.bridge.shipped import OFFERED
        from clanker.guidance.text import guidance_text

        if wire.TOKEN_VARIABLE not in state.env:
            return None  # the bridge step did not take place: there is nothing to ask for
        granted = [capability for capability in OFFERED if capability.name in self._grants]
        text = guidance_text(granted, mcp=self._channel.mcp_attached)
        if text is None:
            return None
        prepared, plan = self._channel.attach(
            state, "guidance", lambda context: self._capability.prepare(context, text))
        if plan is None:
            log.info("guidance: %s's own instructions are left alone", self._channel.harness)
        return prepared


def _nothing() -> None:
    """Nothing to release."""
