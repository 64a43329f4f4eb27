"""The checkout-rehome part of the provider contract.

A provider that can move a conversation must be able to resume it at all
(native local resume) and report its lifecycle (attention: the live session id
comes from the harness's own events, never from the model); the request it
resume it composes for a target must keep the person's flags (a harness with
a target option may replace only that option) and build into a command with
the launch capability.
"""

from __future__ import annotations

from typing import ClassVar

from hypothesis import given

from clanker.capabilities import Capability
from clanker.checkouts.capability import CheckoutRehomeCapability, RehomeStrategy
from clanker.checkouts.rehome import rehome_request
from clanker.descriptor import SessionOperation, Transport
from clanker.launch.planning import plan_launch
from clanker.launch.request import LaunchOperation, SessionTarget
from clanker.testing.base import PROPERTY, ContractBase, contains_run
from clanker.testing.strategies import user_flags

__all__ = ["RehomeContract"]

_TARGET = "/tmp/clanker-contract-worktrees/feature-0123abcd"


class RehomeContract(ContractBase):
    """Rehome: a declared strategy, a real resume of the same session in the target."""

    valid_session_ids: ClassVar[tuple[str, ...]] = ()

    def _rehome(self) -> CheckoutRehomeCapability:
        provider = self._require(Capability.CHECKOUT_REHOME)
        assert provider.checkout_rehome is not None
        return provider.checkout_rehome

    def test_rehome_declares_a_strategy(self) -> None:
        assert isinstance(self._rehome().strategy, RehomeStrategy)

    def test_rehome_needs_native_local_resume_and_attention(self) -> None:
        self._rehome()
        provider = self.provider()
        resume = provider.descriptor.operation(SessionOperation.RESUME)
        assert resume is not None and Transport.LOCAL in resume.transports
        assert provider.capability(Capability.ATTENTION) is not None

    @PROPERTY
    @given(flags=user_flags())
    def test_rehome_resumes_the_same_session_in_the_target(self, flags: tuple[str, ...]) -> None:
        rehome = self._rehome()
        for session_id in self.valid_session_ids:
            request = rehome_request(rehome, SessionTarget(native_id=session_id), _TARGET, flags)
            assert request.operation is LaunchOperation.RESUME
            assert request.session is not None and request.session.native_id == session_id
            plan = plan_launch(self.provider(), request)
            assert request.cwd == _TARGET or _TARGET in plan.argv
            assert contains_run(plan.argv, request.user_flags)
            if rehome.resume_flags(_TARGET, ()) == ():
                assert request.user_flags == flags  # no target option: flags untouched

    def test_rehome_retries_nothing_unrecognised(self) -> None:
        rehome = self._rehome()
        for output in ("", "Error: No conversation found", "\x1b[2J", "x" * 10_000):
            assert rehome.is_transient_contention(output) is False
