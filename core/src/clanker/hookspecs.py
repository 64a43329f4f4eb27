"""The exhaustive list of what a harness plugin can provide.

One hook returns the descriptor; every other hook returns the implementation
object of one capability. A plugin is registered under its harness id and the
registry calls that plugin's own implementations, so no implementation ever
asks "is this call for me?". A plugin that lacks a hook lacks the capability.

Hooks take no arguments: a capability object is built once per process and
then called with the environment's bound pieces. Each capability's protocol
and context types live in ``clanker/<capability>/capability.py``;
:data:`clanker.capabilities.CONTRACTS` maps each hook to its protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pluggy import HookimplMarker, HookspecMarker

if TYPE_CHECKING:
    from clanker.accounts.capability import AccountsCapability
    from clanker.acp.capability import AcpCapability
    from clanker.attention.capability import AttentionCapability
    from clanker.bridge.capability import AgentBridgeCapability
    from clanker.checkouts.capability import CheckoutRehomeCapability
    from clanker.commit.capability import CommitCapability
    from clanker.descriptor import HarnessDescriptor
    from clanker.guidance.capability import GuidanceCapability
    from clanker.launch.capability import LaunchCapability
    from clanker.models.capability import ModelsCapability
    from clanker.sessions.capability import SessionsCapability
    from clanker.usage.capability import UsageCapability

__all__ = ["hookimpl", "hookspec"]

hookspec = HookspecMarker("clanker")
hookimpl = HookimplMarker("clanker")


# -------------------------------------------------------------------------
# Identity
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def clanker_descriptor() -> HarnessDescriptor:
    """Return the harness's descriptor: id, display name, executable, resume/fork support.

    Required of every harness plugin. ``descriptor.id`` must equal the
    entry-point name the plugin is registered under, and resume or fork
    support needs ``clanker_launch``; the registry refuses the plugin
    otherwise. The harness's capabilities are the capability hooks it
    implements: they are not declared again.
    """


# -------------------------------------------------------------------------
# launch
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def clanker_launch() -> LaunchCapability:
    """Return how to build the harness's interactive launch, resume and fork argv.

    Absent: clanker cannot start this harness (a plugin that only reads
    history, say). Which of resume/fork exist, natively or emulated, is
    declared in the descriptor.
    """


# -------------------------------------------------------------------------
# models
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def clanker_models() -> ModelsCapability:
    """Return the harness's model listing: native command, parser, fallback list, TTL.

    Absent: the harness has no machine-readable listing; a model can still be
    passed by name at launch.
    """


# -------------------------------------------------------------------------
# sessions
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def clanker_sessions() -> SessionsCapability:
    """Return how to find this harness's past conversations in its own store.

    Absent: the harness keeps no history clanker can read; ``clanker
    sessions`` does not list it and resume/fork by id is not offered.
    """


# -------------------------------------------------------------------------
# attention
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def clanker_attention() -> AttentionCapability:
    """Return the native event source and interpreter that report what the agent is doing.

    ``prepare(context)`` wires the harness's hooks, plugin or extension into
    one launch (``None``: the user's configuration owns what it would need);
    ``interpreter`` is the standard-library-only file the hook bridge runs for
    a hook-command harness, ``None`` for a source inside the harness.

    Absent: the harness shows no working / needs-input / done state; it is
    never guessed from screen output or silence.
    """


# -------------------------------------------------------------------------
# usage
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def clanker_usage() -> UsageCapability:
    """Return the probe that reads remaining quota from the harness itself.

    Absent: the harness exposes no authenticated quota interface; usage shows
    it as unsupported, never as an estimate.
    """


# -------------------------------------------------------------------------
# accounts
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def clanker_accounts() -> AccountsCapability:
    """Return how the harness is pointed at a managed account home, and how it
    signs in, verifies and signs out there (the accounts service calls it).

    Absent: only the harness's own (default) account exists.
    """


# -------------------------------------------------------------------------
# agent bridge
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def clanker_agent_bridge() -> AgentBridgeCapability:
    """Return how the harness is handed clanker's loopback MCP endpoint at launch.

    The launch path's bridge step calls it. Absent: the harness has no
    launch-scoped way to add an MCP server without rewriting the user's
    configuration.
    """


# -------------------------------------------------------------------------
# guidance
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def clanker_guidance() -> GuidanceCapability:
    """Return how the harness receives the launch-scoped instruction text.

    The launch path's guidance step calls it. Absent: the harness has no
    channel that leaves the user's own instructions untouched; the agent is
    not told about clanker.
    """


# -------------------------------------------------------------------------
# checkout rehome
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def clanker_checkout_rehome() -> CheckoutRehomeCapability:
    """Return how a live conversation moves to another checkout: the strategy
    and the resume flags for a target (``clanker.checkouts.capability``).

    Either strategy makes a launch with the bridge and attention run under the
    PTY relay, movable by ``clanker_create_isolated_checkout``: ``hot-replace``
    starts and proves the successor while the first process runs;
    ``after-turn`` waits for the turn to end, retires the first process, then
    resumes in the target. Absent: the harness cannot be proven to continue in
    another directory.
    """


# -------------------------------------------------------------------------
# commit
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def clanker_commit() -> CommitCapability:
    """Return the invocation and parser for writing a commit message.

    Absent: the harness has no structured, tool-free, non-persisting
    non-interactive mode.
    """


# -------------------------------------------------------------------------
# acp
# -------------------------------------------------------------------------


@hookspec(firstresult=True)
def clanker_acp() -> AcpCapability:
    """Return how to start the harness as an Agent Client Protocol server.

    ``clanker coder`` calls its ``server()`` for the command. Absent: the
    harness cannot be driven over ACP (``--agent-command`` still can).
    """
