"""What every part of the provider contract shares: the plugin under test, its
provider as the registry builds it, and skipping by capability.

:class:`~clanker.testing.HarnessProviderContract` is made of one part per
capability (:class:`~clanker.testing.contract.LaunchContract`,
:class:`~clanker.testing.sessions.SessionsContract`, ...); each part is a
:class:`ContractBase`, so a plugin may also subclass only the parts it wants.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, ClassVar, Final, TypeVar

import pytest
from hypothesis import HealthCheck, settings

from clanker.capabilities import Capability, contract
from clanker.ids import HarnessId
from clanker.registry import HarnessProvider, Registry

__all__ = ["PROPERTY", "STORE_PROPERTY", "ContractBase", "contains_run", "launch_argv",
           "registered"]

_T = TypeVar("_T")

PROPERTY: Final = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
)
"""The settings of the contract's property tests. Each plugin's subclass runs them on
its own instance; hypothesis would otherwise flag the shared test functions as run by
differing executors when several contract suites share a session."""

STORE_PROPERTY: Final = settings(PROPERTY, max_examples=25)
"""Fewer examples for the property tests that lay out a store on disk for each one."""


def registered(plugin: object, harness_id: str) -> HarnessProvider:
    """The provider of ``plugin`` registered as ``harness_id`` through the same validation
    as an entry point; the registration must report no problem."""
    registry = Registry.from_plugins({harness_id: plugin}, environ={})
    assert not registry.problems, registry.problems
    return registry.get_provider(HarnessId(harness_id))


def launch_argv(provider: HarnessProvider, cwd: str = "/w", **fields: Any) -> tuple[str, ...]:
    """The argv the launch planner builds for ``LaunchRequest(cwd=cwd, **fields)``."""
    from clanker.launch.planning import plan_launch
    from clanker.launch.request import LaunchRequest

    return plan_launch(provider, LaunchRequest(cwd=cwd, **fields)).argv


class ContractBase:
    """The plugin under test and its provider; subclasses set the class attributes."""

    plugin: ClassVar[object]
    """The plugin object, as the entry point names it (``clanker_zed:plugin``)."""
    harness_id: ClassVar[str]
    """The harness id the plugin is registered under (the entry-point name)."""
    capabilities: ClassVar[frozenset[Capability] | None] = None
    """What the plugin implements. When set, the registry must find exactly these,
    so a capability lost by accident fails a test instead of being skipped."""

    @classmethod
    @functools.cache
    def _registry(cls) -> Registry:
        return Registry.from_plugins({cls.harness_id: cls.plugin}, environ={})

    def provider(self) -> HarnessProvider:
        """The provider the registry builds from :attr:`plugin` (with no problem)."""
        registry = self._registry()
        assert not registry.problems, registry.problems
        return registry.get_provider(HarnessId(self.harness_id))

    def _require(self, capability: Capability) -> HarnessProvider:
        provider = self.provider()
        if provider.capability(capability) is None:
            pytest.skip(f"{self.harness_id} has no {capability.value} capability")
        return provider

    def _implementation(self, capability: Capability) -> Any:
        """The plugin's object for ``capability``, or skip the test: the plugin has none.
        (Each part's typed accessor casts it to the capability's protocol.)"""
        found = self._require(capability).capability(capability)
        assert found is not None
        return found

    @staticmethod
    def _unless(supplied: _T | None, what: str) -> _T:
        """``supplied``, or skip the test: the plugin did not supply ``what``."""
        if supplied is None:
            pytest.skip(f"the plugin's contract supplies no {what}")
        return supplied

    # -- registration ------------------------------------------------------------------

    def test_registers_without_problems(self) -> None:
        registry = self._registry()
        assert registry.problems == ()
        assert registry.ids() == (self.harness_id,)

    def test_descriptor_names_this_harness(self) -> None:
        descriptor = self.provider().descriptor
        assert descriptor.id == self.harness_id
        assert descriptor.display_name.strip()

    def test_the_acp_server_is_a_bare_command(self) -> None:
        acp = self.provider().acp
        if acp is None:
            pytest.skip("no acp capability")
        from clanker.acp.capability import AcpServer

        server = acp.server()
        assert isinstance(server, AcpServer)
        assert "/" not in server.argv[0]
        assert server.install_hint

    def test_the_capabilities_are_the_expected_ones(self) -> None:
        if self.capabilities is None:
            pytest.skip("set `capabilities` to check the set the plugin implements")
        provider = self.provider()
        assert provider.capabilities == self.capabilities
        assert {hook for hook in provider.hooks if hook != "clanker_descriptor"} == {
            contract(capability).hook for capability in self.capabilities
        }


def contains_run(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    """Say whether ``needle`` occurs in ``haystack`` contiguously, in order."""
    haystack, needle = tuple(haystack), tuple(needle)
    if not needle:
        return True
    width = len(needle)
    return any(haystack[i : i + width] == needle for i in range(len(haystack) - width + 1))
