"""Every capability a harness plugin can provide: one table, capability -> hook -> contract.

The registry, the provider record and a provider's capability set are all
derived from :data:`CONTRACTS`; each capability's protocol and context types
live in its own ``clanker/<capability>/capability.py``. Adding a capability
is a contract module, a row here, a hook specification and a provider field
(the meta-tests say which is missing).
"""

from __future__ import annotations

import enum
import importlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from attrs import frozen

__all__ = ["CONTRACTS", "Capability", "CapabilityContract", "contract"]


class Capability(enum.StrEnum):
    """A capability's stable name (it appears in ``--json``)."""

    LAUNCH = "launch"
    MODELS = "models"
    SESSIONS = "sessions"
    ATTENTION = "attention"
    USAGE = "usage"
    ACCOUNTS = "accounts"
    AGENT_BRIDGE = "agent-bridge"
    GUIDANCE = "guidance"
    CHECKOUT_REHOME = "checkout-rehome"
    COMMIT = "commit"
    ACP = "acp"


@frozen
class CapabilityContract:
    """One row of the table."""

    capability: Capability
    hook: str
    """The pluggy hook that returns the implementation object."""
    attribute: str
    """The :class:`~clanker.registry.HarnessProvider` field that holds it."""
    module: str
    """The contract module that defines the protocol (``clanker.<capability>.capability``)."""
    name: str
    """The protocol's name in :attr:`module`."""

    @property
    def protocol(self) -> type:
        """What the implementation object must satisfy (checked when it is made).

        Imported here, not with this table: a command that loads the registry
        but never uses a capability (``clanker harnesses``) does not pay for its
        contract module.
        """
        found: type = getattr(importlib.import_module(self.module), self.name)
        return found


CONTRACTS: Final[Mapping[Capability, CapabilityContract]] = MappingProxyType({
    row.capability: row for row in (
        CapabilityContract(Capability.LAUNCH, "clanker_launch", "launch",
                           "clanker.launch.capability", "LaunchCapability"),
        CapabilityContract(Capability.MODELS, "clanker_models", "models",
                           "clanker.models.capability", "ModelsCapability"),
        CapabilityContract(Capability.SESSIONS, "clanker_sessions", "sessions",
                           "clanker.sessions.capability", "SessionsCapability"),
        CapabilityContract(Capability.ATTENTION, "clanker_attention", "attention",
                           "clanker.attention.capability", "AttentionCapability"),
        CapabilityContract(Capability.USAGE, "clanker_usage", "usage",
                           "clanker.usage.capability", "UsageCapability"),
        CapabilityContract(Capability.ACCOUNTS, "clanker_accounts", "accounts",
                           "clanker.accounts.capability", "AccountsCapability"),
        CapabilityContract(Capability.AGENT_BRIDGE, "clanker_agent_bridge", "agent_bridge",
                           "clanker.bridge.capability", "AgentBridgeCapability"),
        CapabilityContract(Capability.GUIDANCE, "clanker_guidance", "guidance",
                           "clanker.guidance.capability", "GuidanceCapability"),
        CapabilityContract(Capability.CHECKOUT_REHOME, "clanker_checkout_rehome",
                           "checkout_rehome",
                           "clanker.checkouts.capability", "CheckoutRehomeCapability"),
        CapabilityContract(Capability.COMMIT, "clanker_commit", "commit",
                           "clanker.commit.capability", "CommitCapability"),
        CapabilityContract(Capability.ACP, "clanker_acp", "acp",
                           "clanker.acp.capability", "AcpCapability"),
    )
})


def contract(capability: Capability) -> CapabilityContract:
    """Return the row of ``capability``."""
    return CONTRACTS[capability]
