"""Every capability a harness plugin can provide: one table, capability -> hook -> contract.

The registry, the provider record and a provider's capability set are all
derived from :data:`CONTRACTS`; each capability's protocol and context types
live in its own ``clanker/<capability>/capability.py``. Adding a capability
is a contract module, a row here, a hook specification and a provider field
(the meta-tests say which is missing).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from attrs import frozen

from clanker.accounts.capability import AccountsCapability
from clanker.acp.capability import AcpCapability
from clanker.attention.capability import AttentionCapability
from clanker.bridge.capability import AgentBridgeCapability
from clanker.checkouts.capability import CheckoutRehomeCapability
from clanker.commit.capability import CommitCapability
from clanker.guidance.capability import GuidanceCapability
from clanker.launch.capability import LaunchCapability
from clanker.models.capability import ModelsCapability
from clanker.sessions.capability import SessionsCapability
from clanker.usage.capability import UsageCapability

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
    protocol: type
    """What the implementation object must satisfy (checked at registration)."""


CONTRACTS: Final[Mapping[Capability, CapabilityContract]] = MappingProxyType({
    row.capability: row for row in (
        CapabilityContract(Capability.LAUNCH, "clanker_launch", "launch", LaunchCapability),
        CapabilityContract(Capability.MODELS, "clanker_models", "models", ModelsCapability),
        CapabilityContract(Capability.SESSIONS, "clanker_sessions", "sessions",
                           SessionsCapability),
        CapabilityContract(Capability.ATTENTION, "clanker_attention", "attention",
                           AttentionCapability),
        CapabilityContract(Capability.USAGE, "clanker_usage", "usage", UsageCapability),
        CapabilityContract(Capability.ACCOUNTS, "clanker_accounts", "accounts",
                           AccountsCapability),
        CapabilityContract(Capability.AGENT_BRIDGE, "clanker_agent_bridge", "agent_bridge",
                           AgentBridgeCapability),
        CapabilityContract(Capability.GUIDANCE, "clanker_guidance", "guidance",
                           GuidanceCapability),
        CapabilityContract(Capability.CHECKOUT_REHOME, "clanker_checkout_rehome",
                           "checkout_rehome", CheckoutRehomeCapability),
        CapabilityContract(Capability.COMMIT, "clanker_commit", "commit", CommitCapability),
        CapabilityContract(Capability.ACP, "clanker_acp", "acp", AcpCapability),
    )
})


def contract(capability: Capability) -> CapabilityContract:
    """Return the row of ``capability``."""
    return CONTRACTS[capability]
