"""A harness's ``acp`` capability through the launch path: its environment
additions reach the agent, and every value clanker injected is redacted in
events and in the transcript."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from clanker.acp.capability import AcpServer
from clanker.acp.transcript import REDACTED, read_transcript
from clanker.api import Clanker
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.plugin import HarnessDescriptor, HarnessId, define_harness
from clanker.registry import Registry

from .conftest import FAKE_AGENT, Coder

SECRET = "tok-0123456789abcdef"


class FakeAcp:
    def server(self) -> AcpServer:
        return AcpServer(argv=("python3", FAKE_AGENT), env={"FAKE_AGENT_TOKEN": SECRET},
                         install_hint="pip install fake-agent")


def _clanker(coder: Coder, acp: type = FakeAcp) -> Clanker:
    """The library with one harness, ``fake-acp``, whose ``acp`` capability is ``acp``."""
    plugin = define_harness(
        HarnessDescriptor(id=HarnessId("fake-acp"), display_name="Fake", executable="python3"),
        acp=acp)
    registry = Registry.from_plugins({"fake-acp": plugin}, environ={})
    return Clanker(environment=coder.clanker.environment, registry=registry, paths=coder.paths)


def test_injected_values_reach_the_agent_and_never_a_transcript(coder: Coder) -> None:
    clanker = _clanker(coder)

    async def run() -> str | None:
        async with clanker.coder("fake-acp", cwd=coder.workspace,
                                 on_event=coder.events.append) as client:
            await client.prompt("env FAKE_AGENT_TOKEN")
            return client.transcript_path

    path = Path(str(asyncio.run(run())))
    assert coder.agent_text() == f"value:{REDACTED}"
    text = path.read_text()
    assert SECRET not in text
    assert REDACTED in text
    log = next((coder.paths.state / "coder").glob("agent-*.log"))
    assert log.read_text() == f"debug: token is {REDACTED}\n"


def test_an_adapter_that_is_not_installed_names_its_install_line(coder: Coder) -> None:
    class Missing:
        def server(self) -> AcpServer:
            return AcpServer(argv=("no-such-acp-adapter",), install_hint="npm install -g x")

    clanker = _clanker(coder, Missing)

    async def run() -> None:
        async with clanker.coder("fake-acp", cwd=coder.workspace):
            raise AssertionError("started")

    with pytest.raises(HarnessCapabilityError) as caught:
        asyncio.run(run())
    assert caught.value.kind is ErrorKind.BINARY_UNAVAILABLE
    assert "npm install -g x" in caught.value.message


@pytest.mark.parametrize(("flags", "resume", "method"), [
    ((), None, "session/new"), ((), "known", "session/resume"),
    (("--no-resume",), "known", "session/load")])
def test_the_servers_session_meta_opens_every_session(coder: Coder, flags: tuple[str, ...],
                                                      resume: str | None, method: str) -> None:
    meta = {"claudeCode": {"options": {"allowDangerouslySkipPermissions": False}}}

    class WithMeta:
        def server(self) -> AcpServer:
            return AcpServer(argv=("python3", FAKE_AGENT, *flags), session_meta=meta)

    clanker = _clanker(coder, WithMeta)

    async def run() -> str | None:
        async with clanker.coder("fake-acp", cwd=coder.workspace, resume=resume) as client:
            return client.transcript_path

    records = read_transcript(Path(str(asyncio.run(run()))))
    opened = [r["frame"] for r in records
              if r["dir"] == "out" and r["frame"].get("method", "").startswith("session/")]
    assert opened[0]["method"] == method
    assert opened[0]["params"]["_meta"] == meta


def test_a_server_without_session_meta_sends_none(coder: Coder) -> None:
    async def run() -> str | None:
        async with _clanker(coder).coder("fake-acp", cwd=coder.workspace) as client:
            return client.transcript_path

    records = read_transcript(Path(str(asyncio.run(run()))))
    opened = next(r["frame"] for r in records if r["frame"].get("method") == "session/new")
    assert "_meta" not in opened["params"]


def test_session_meta_must_be_json() -> None:
    with pytest.raises((TypeError, ValueError)):
        AcpServer(argv=("agent",), session_meta={"when": object()})
