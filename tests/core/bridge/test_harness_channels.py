"""The harness's own channels for the bridge: its MCP client is handed the endpoint and
its instructions carry the guidance, each through the provider, in a launch-owned
directory that goes with the launch; a provider that declines or fails leaves the
launch as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clanker import hookimpl
from clanker.api import Clanker
from clanker.attachment import AttachmentContext, AttachmentPlan
from clanker.bridge import wire
from clanker.bridge.capability import BridgeEndpoint
from clanker.bridge.shipped import SHIPPED
from clanker.guidance.text import guidance_text
from clanker.launch.harness_bridge import OWNED_NOTICE
from clanker.launch.request import LaunchRequest
from clanker.launch.service import LaunchOptions
from clanker.registry import Registry
from clanker.testing.doubles import prepend_to_path
from tests.core.bridge.mcp_peer import Answer, exchange, request
from tests.helpers import make_plugin, write_script


class Registering:
    """An MCP channel that writes a config naming the token's variable, as harnesses do."""

    def __init__(self, *, owned: bool = False, fails: bool = False) -> None:
        self.owned, self.fails = owned, fails
        self.seen: list[tuple[AttachmentContext, BridgeEndpoint]] = []

    def prepare(self, context: AttachmentContext, endpoint: BridgeEndpoint
                ) -> AttachmentPlan | None:
        self.seen.append((context, endpoint))
        if self.fails:
            raise RuntimeError("the harness's config could not be read")
        if self.owned:
            return None
        config = context.private_dir / "mcp.json"
        config.write_text(json.dumps({endpoint.server_name: {
            "url": endpoint.url, "bearer": f"${{{endpoint.token_variable}}}"}}))
        return AttachmentPlan(argv=(*context.argv, "--mcp", str(config)))


class Instructing:
    """A guidance channel that appends the text as a flag."""

    def __init__(self, *, owned: bool = False) -> None:
        self.owned = owned
        self.texts: list[str] = []

    def prepare(self, context: AttachmentContext, text: str) -> AttachmentPlan | None:
        self.texts.append(text)
        if self.owned:
            return None
        return AttachmentPlan(argv=(*context.argv, "--append", text))


def library(bridge: Registering, guidance: Instructing) -> Clanker:
    made = make_plugin()
    type(made).clanker_agent_bridge = hookimpl(lambda self: bridge)  # type: ignore[attr-defined]
    type(made).clanker_guidance = hookimpl(lambda self: guidance)  # type: ignore[attr-defined]
    return Clanker(registry=Registry.from_plugins({"fake-agent": made}, environ={}))


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "fake-agent", "pass")
    prepend_to_path(monkeypatch, bin_dir)
    return bin_dir


def initialize(url: str, token: str) -> Answer:
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    answer = exchange(port, request(port, {
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}, token=token))
    assert answer is not None
    return answer


def files_under(directory: Path) -> dict[str, str]:
    return {str(p): p.read_text() for p in directory.rglob("*") if p.is_file()}


def test_the_harness_is_handed_the_endpoint_and_told_what_it_may_ask(
    home: Path, fake_bin: Path, tmp_path: Path
) -> None:
    bridge, guidance = Registering(), Instructing()
    clanker = library(bridge, guidance)
    options = LaunchOptions(bridge=True, attention=False)
    with clanker.prepare_launch("fake-agent", LaunchRequest(cwd=str(tmp_path)), options
                                ) as launch:
        assert launch.failed == () and launch.notices == ()
        token = launch.env[wire.TOKEN_VARIABLE]
        [(context, endpoint)] = bridge.seen
        assert endpoint == BridgeEndpoint(url=launch.env[wire.URL_VARIABLE],
                                          server_name="clanker",
                                          token_variable=wire.TOKEN_VARIABLE)
        assert context.cwd == str(tmp_path) and context.private_dir.stat().st_mode & 0o777 == 0o700
        config = context.private_dir / "mcp.json"
        # The MCP channel first, then the guidance, which says the tools are there.
        expected = guidance_text(SHIPPED, mcp=True)
        assert guidance.texts == [expected]
        assert launch.argv[-4:] == ("--mcp", str(config), "--append", expected)
        assert "MCP server named clanker" in expected
        written = files_under(home)
        assert written and not any(token in text for text in written.values())
        # The endpoint gives the same guidance as its instructions.
        answer = initialize(endpoint.url, token)
        assert answer.json()["result"]["instructions"] == expected
    assert not context.private_dir.exists()


def test_a_harness_that_owns_the_name_gets_no_endpoint_and_guidance_says_so(
    home: Path, fake_bin: Path, tmp_path: Path
) -> None:
    bridge, guidance = Registering(owned=True), Instructing()
    clanker = library(bridge, guidance)
    with clanker.prepare_launch("fake-agent", LaunchRequest(cwd=str(tmp_path)),
                                LaunchOptions(bridge=True, attention=False)) as launch:
        [(context, _)] = bridge.seen
        assert not context.private_dir.exists()  # nothing kept for a declined channel
        assert launch.notices == (f"agent-bridge: {OWNED_NOTICE}",)
        assert guidance.texts == [guidance_text(SHIPPED, mcp=False)]
        assert "MCP" not in guidance.texts[0]
        assert wire.TOKEN_VARIABLE in launch.env  # `clanker cmd` still works


def test_guidance_that_would_replace_the_persons_leaves_the_launch_alone(
    home: Path, fake_bin: Path, tmp_path: Path
) -> None:
    clanker = library(Registering(), Instructing(owned=True))
    with clanker.prepare_launch("fake-agent", LaunchRequest(cwd=str(tmp_path)),
                                LaunchOptions(bridge=True, attention=False)) as launch:
        assert "--append" not in launch.argv and "--mcp" in launch.argv
        assert launch.failed == ()


def test_a_failing_channel_is_reported_and_the_launch_goes_on(
    home: Path, fake_bin: Path, tmp_path: Path
) -> None:
    bridge, guidance = Registering(fails=True), Instructing()
    clanker = library(bridge, guidance)
    reported: list[tuple[str, str]] = []
    with clanker.prepare_launch("fake-agent", LaunchRequest(cwd=str(tmp_path)),
                                LaunchOptions(bridge=True, attention=False),
                                report=lambda step, phase: reported.append((step, phase))
                                ) as launch:
        [(context, _)] = bridge.seen
        assert not context.private_dir.exists()
        assert launch.failed == ("agent-bridge",) and reported == [("agent-bridge", "prepare")]
        assert guidance.texts == [guidance_text(SHIPPED, mcp=False)]


def test_without_the_bridge_neither_channel_is_asked(
    home: Path, fake_bin: Path, tmp_path: Path
) -> None:
    bridge, guidance = Registering(), Instructing()
    clanker = library(bridge, guidance)
    with clanker.prepare_launch("fake-agent", LaunchRequest(cwd=str(tmp_path))) as launch:
        assert "--mcp" not in launch.argv and "--append" not in launch.argv
    assert bridge.seen == [] and guidance.texts == []


def test_guidance_names_only_the_grant() -> None:
    [notify] = [c for c in SHIPPED if c.name == "clanker_notify"]
    text = guidance_text([notify], mcp=False)
    assert text is not None
    assert "clanker_notify" in text and "clanker_context" not in text
    assert notify.guidance is not None and text.endswith(notify.guidance)
    assert guidance_text([], mcp=True) is None
