"""The bridging part of the provider contract fails a provider that writes the
credential, drops the launch's argv, or loses the guidance, and passes one that
does neither."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from clanker import hookimpl
from clanker.attachment import AttachmentContext, AttachmentPlan
from clanker.bridge.capability import BridgeEndpoint
from clanker.testing import BridgingContract
from tests.helpers import make_plugin


class ConfigFile:
    """Writes the endpoint into a config file naming the token's variable."""

    def __init__(self, leak: bool = False) -> None:
        self._leak = leak

    def prepare(self, context: AttachmentContext, endpoint: BridgeEndpoint
                ) -> AttachmentPlan | None:
        bearer = (context.env[endpoint.token_variable] if self._leak
                  else "${" + endpoint.token_variable + "}")
        path = context.private_dir / "mcp.json"
        path.write_text(json.dumps({"url": endpoint.url, "bearer": bearer}))
        return AttachmentPlan(argv=(*context.argv, "--mcp-config", str(path)))


class Flag:
    """Appends the guidance as a flag (or, broken, drops the argv or the text)."""

    def __init__(self, fault: str | None = None) -> None:
        self._fault = fault

    def prepare(self, context: AttachmentContext, text: str) -> AttachmentPlan | None:
        if self._fault == "argv":
            return AttachmentPlan(argv=(context.argv[0], "--append", text))
        if self._fault == "text":
            return AttachmentPlan(argv=(*context.argv, "--append", "something else"))
        return AttachmentPlan(argv=(*context.argv, "--append", text))


def contract(bridge: object, guidance: object) -> BridgingContract:
    made = make_plugin()
    type(made).clanker_agent_bridge = hookimpl(lambda self: bridge)  # type: ignore[attr-defined]
    type(made).clanker_guidance = hookimpl(lambda self: guidance)  # type: ignore[attr-defined]

    class Contract(BridgingContract):
        plugin: ClassVar[object] = made
        harness_id: ClassVar[str] = "fake-agent"
        valid_session_ids: ClassVar[tuple[str, ...]] = ("s1",)

    return Contract()


TESTS: list[Callable[[BridgingContract], Any]] = [
    BridgingContract.test_the_bridge_never_writes_the_credential,
    BridgingContract.test_guidance_reaches_the_harness_and_only_adds,
    BridgingContract.test_a_plain_launch_gets_the_bridge_and_the_guidance,
]


def test_a_provider_that_keeps_the_rules_passes() -> None:
    suite = contract(ConfigFile(), Flag())
    for test in TESTS:
        test(suite)


@pytest.mark.parametrize(("bridge", "guidance", "failing", "says"), [
    (ConfigFile(leak=True), Flag(), 0, "the credential was written"),
    (ConfigFile(), Flag("argv"), 1, "the launch's argv was changed"),
    (ConfigFile(), Flag("text"), 1, "the guidance is not handed"),
])
def test_a_provider_that_breaks_one_fails_it(
    bridge: object, guidance: object, failing: int, says: str
) -> None:
    suite = contract(bridge, guidance)
    # One example is enough to fail: hypothesis's search (and shrinking) is not under test.
    inner = TESTS[failing].hypothesis.inner_test  # type: ignore[attr-defined]
    with pytest.raises(AssertionError, match=says):
        inner(suite, flags=("--model", "m"), token="ckb_" + "ab" * 32)
