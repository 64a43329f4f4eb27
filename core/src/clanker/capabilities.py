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


def _row(capability: Capability, folder: str) -> CapabilityContract:
    """A row by the naming rule every capability follows: the field is the name with
    ``_`` for ``-``, the hook that name after ``clanker_``, the protocol its title-cased
    words and ``Capability``, in ``clanker.<folder>.capability``."""
    attribute = capability.value.replace("-", "_")
    name = "".join(word.title() for word in capability.value.split("-")) + "Capability"
    return CapabilityContract(capability, f"clanker_{attribute}", attribute,
                              f"clanker.{folder}.capability", name)


CONTRACTS: Final[Mapping[Capability, CapabilityContract]] = MappingProxyType({
    row.capability: row for row in (
        _row(Capability.LAUNCH, "launch"),
        _row(Capability.MODELS, "models"),
        _row(Capability.SESSIONS, "sessions"),
        _row(Capability.ATTENTION, "attention"),
        _row(Capability.USAGE, "usage"),
        _row(Capability.ACCOUNTS, "accounts"),
        _row(Capability.AGENT_BRIDGE, "bridge"),
        _row(Capability.GUIDANCE, "guidance"),
        _row(Capability.CHECKOUT_REHOME, "checkouts"),
        _row(Capability.COMMIT, "commit"),
        _row(Capability.ACP, "acp"),
    )
})


def contract(capability: Capability) -> CapabilityContract:
    """Return the row of ``capability``."""
    return CONTRACTS[capability]
