"""The agent-bridge and guidance parts of the provider contract.

Whatever a provider adds for the bridge, it adds without the credential: the
launch's token is in the environment the provider sees and nowhere it writes
(not argv, not its environment additions, not a file in its private
directory), which a harness reaches by the variable's name. It only adds: the
launch's argv stays in it, in order. Guidance reaches the harness: the text is
in argv, the environment additions or a file the provider wrote. Each holds
for a fresh launch, a resume and a fork, and for any of the person's flags
(``None`` is always an answer: the person may own the name or the channel).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clanker.attachment import AttachmentContext, AttachmentPlan
from clanker.bridge import wire
from clanker.bridge.capability import AgentBridgeCapability, BridgeEndpoint
from clanker.capabilities import Capability
from clanker.descriptor import SessionOperation, Transport
from clanker.environment.local import LocalFiles
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, CommandResult
from clanker.guidance.capability import GuidanceCapability
from clanker.launch.planning import plan_launch
from clanker.launch.request import LaunchOperation, LaunchRequest, SessionTarget
from clanker.testing.base import PROPERTY, ContractBase
from clanker.testing.strategies import user_flags

__all__ = ["BridgingContract"]

_VARIABLE = wire.TOKEN_VARIABLE
_MARKER = "contract-guidance-marker"
_TOKENS = st.binary(min_size=32, max_size=32).map(lambda raw: "ckb_" + raw.hex())


def _refuse(request: CommandRequest) -> CommandResult:
    raise HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE,
                                 f"the contract runs no {request.command}")


def _is_subsequence(inner: tuple[str, ...], outer: tuple[str, ...]) -> bool:
    remaining = iter(outer)
    return all(any(item == candidate for candidate in remaining) for item in inner)


class BridgingContract(ContractBase):
    """What every ``agent_bridge`` and ``guidance`` capability must do."""

    def bridge_environ(self, home: Path) -> dict[str, str]:
        """The launch environment the provider sees besides the bridge's variables: by
        default ``HOME`` (an empty directory)."""
        return {"HOME": str(home)}

    def _bridge(self) -> AgentBridgeCapability:
        return cast(AgentBridgeCapability, self._implementation(Capability.AGENT_BRIDGE))

    def _guidance(self) -> GuidanceCapability:
        return cast(GuidanceCapability, self._implementation(Capability.GUIDANCE))

    def _requests(self, flags: tuple[str, ...], cwd: str) -> list[LaunchRequest]:
        provider = self.provider()
        requests = [LaunchRequest(cwd=cwd, user_flags=flags)]
        ids = getattr(self, "valid_session_ids", ())
        for operation in (LaunchOperation.RESUME, LaunchOperation.FORK):
            support = provider.descriptor.operation(SessionOperation(operation.value))
            if ids and support is not None and Transport.LOCAL in support.transports:
                requests.append(LaunchRequest(cwd=cwd, user_flags=flags, operation=operation,
                                              session=SessionTarget(native_id=ids[0])))
        return requests

    @contextmanager
    def _launches(self, flags: tuple[str, ...], token: str
                  ) -> Iterator[Iterator[tuple[AttachmentContext, tuple[str, ...]]]]:
        provider = self._require(Capability.LAUNCH)
        with tempfile.TemporaryDirectory() as raw:
            base = Path(raw)
            (base / "home").mkdir()
            (base / "work").mkdir()

            def contexts() -> Iterator[tuple[AttachmentContext, tuple[str, ...]]]:
                for number, request in enumerate(self._requests(flags, str(base / "work"))):
                    plan = plan_launch(provider, request)
                    private = base / f"launch-{number}"
                    private.mkdir(mode=0o700)
                    env = {**plan.env, **self.bridge_environ(base / "home"), _VARIABLE: token}
                    yield AttachmentContext(
                        argv=plan.argv, env=env, cwd=str(base / "work"), private_dir=private,
                        user_flags=flags, files=LocalFiles(), run=_refuse), plan.argv

            yield contexts()

    @staticmethod
    def _check_plan(plan: object, context: AttachmentContext, argv: tuple[str, ...],
                    secret: str) -> list[str]:
        """Check what any bridge plan must be; return the texts it hands the harness."""
        assert isinstance(plan, AttachmentPlan), f"a plan or None, not {type(plan).__name__}"
        texts = [*plan.env.values(), *(plan.argv or ())]
        texts += [p.read_text(errors="replace") for p in context.private_dir.rglob("*")
                  if p.is_file()]
        assert not any(secret in text for text in texts), "the credential was written"
        if plan.argv is not None:
            assert plan.argv[0] == argv[0]
            assert _is_subsequence(argv, plan.argv), "the launch's argv was changed"
        assert _VARIABLE not in plan.env, "the credential's variable was replaced"
        return texts

    @PROPERTY
    @given(flags=user_flags(), token=_TOKENS)
    def test_the_bridge_never_writes_the_credential(
        self, flags: tuple[str, ...], token: str
    ) -> None:
        bridge = self._bridge()
        with self._launches(flags, token) as launches:
            for context, argv in launches:
                endpoint = BridgeEndpoint(url="http://127.0.0.1:49152/mcp",
                                          server_name="clanker", token_variable=_VARIABLE)
                plan = bridge.prepare(context, endpoint)
                if plan is None:
                    continue
                texts = self._check_plan(plan, context, argv, token)
                assert any(endpoint.url in text for text in texts), "the endpoint is not handed"

    @PROPERTY
    @given(flags=user_flags(), token=_TOKENS)
    def test_guidance_reaches_the_harness_and_only_adds(
        self, flags: tuple[str, ...], token: str
    ) -> None:
        guidance = self._guidance()
        text = f"{_MARKER}: run `clanker cmd list --json` to see what you may ask."
        with self._launches(flags, token) as launches:
            for context, argv in launches:
                plan = guidance.prepare(context, text)
                if plan is None:
                    continue
                texts = self._check_plan(plan, context, argv, token)
                assert any(_MARKER in t for t in texts), "the guidance is not handed"

    def test_a_plain_launch_gets_the_bridge_and_the_guidance(self) -> None:
        """With no flags and an empty home nothing is the person's: each capability answers
        a plan (``None`` is kept for what the person owns)."""
        provider = self.provider()
        if provider.agent_bridge is None and provider.guidance is None:
            pytest.skip(f"{self.harness_id} has neither bridge capability")
        with self._launches((), "ckb_" + "0" * 64) as launches:
            context, _ = next(launches)
            endpoint = BridgeEndpoint(url="http://127.0.0.1:49152/mcp", server_name="clanker",
                                      token_variable=_VARIABLE)
            if provider.agent_bridge is not None:
                assert provider.agent_bridge.prepare(context, endpoint) is not None
            if provider.guidance is not None:
                assert provider.guidance.prepare(context, _MARKER) is not None
