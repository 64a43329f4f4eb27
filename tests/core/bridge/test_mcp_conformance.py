"""The MCP endpoint as the official ``mcp`` client sees it, in both eras of the
protocol: the handshake revisions (``initialize``) and the stateless 2026-07-28 one
(``server/discover``, a per-request ``_meta``), against a real grid."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import mcp_types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from clanker.bridge.declaration import Caller
from clanker.bridge.mcp_protocol import HANDSHAKE_VERSIONS
from clanker.bridge.shipped import SHIPPED_NAMES
from tests.core.bridge.mcp_peer import MODERN, Agent, grant, live_grid, modern, post
from tests.core.grid.conftest import LiveGrid

T = TypeVar("T")
MODES = ["legacy", MODERN, "auto"]


def guidance(caller: Caller) -> str:
    return f"You may ask the host for: {', '.join(caller.granted)}."


@pytest.fixture
def live(short_dir: Path) -> Iterator[LiveGrid]:
    with live_grid(short_dir, bridge_instructions=guidance) as grid:
        yield grid


def connect(agent: Agent, mode: str, use: Callable[[Client], Awaitable[T]]) -> T:
    """Run ``use`` with the official client connected to the endpoint in ``mode``."""

    async def main() -> T:
        headers = {"Authorization": f"Bearer {agent.token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
                Client(streamable_http_client(agent.url, http_client=http), mode=mode) as client:
            return await use(client)

    return asyncio.run(main())


def text_of(result: mcp_types.CallToolResult) -> str:
    [block] = result.content
    assert isinstance(block, mcp_types.TextContent)
    return block.text


@pytest.mark.parametrize("mode", MODES)
def test_the_listing_is_exactly_the_grant_with_the_declarations_schemas(
    live: LiveGrid, mode: str
) -> None:
    agent = grant(live, names=("clanker_context", "clanker_notify"))
    listed = connect(agent, mode, lambda client: client.list_tools())
    assert [tool.name for tool in listed.tools] == ["clanker_context", "clanker_notify"]
    assert live.grid is not None
    declared = live.grid.bridge.capabilities
    for tool in listed.tools:
        entry = declared[tool.name].entry()
        schema = tool.input_schema
        assert schema == entry["inputSchema"]
        # Clients drop every tool of a server when one tool's top level is not an object.
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert not {"oneOf", "anyOf", "allOf", "not"} & set(schema)
        assert tool.description == entry["description"]
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint == entry["annotations"]["readOnlyHint"]
        assert tool.annotations.idempotent_hint == entry["annotations"]["idempotentHint"]
        assert tool.output_schema is None


@pytest.mark.parametrize("mode", MODES)
def test_each_agent_gets_its_own_launchs_facts(
    live: LiveGrid, tmp_path: Path, mode: str
) -> None:
    workspace = tmp_path / "shop"
    (workspace / "api").mkdir(parents=True)
    mine = grant(live, cwd=str(workspace / "api"), workspace=str(workspace))
    other = grant(live, cwd=str(tmp_path), harness="other-agent", names=("clanker_context",))

    async def ask(client: Client) -> Any:
        return await client.call_tool("clanker_context", {})

    for agent, facts in ((mine, {"workspace": "shop", "harness": "fake-agent",
                                 "launchDirectory": "api",
                                 "capabilities": sorted(SHIPPED_NAMES)}),
                         (other, {"workspace": tmp_path.name, "harness": "other-agent",
                                  "launchDirectory": ".",
                                  "capabilities": ["clanker_context"]})):
        result = connect(agent, mode, ask)
        assert result.is_error is False
        assert result.structured_content is None  # no declaration has an output schema
        context = json.loads(text_of(result))
        assert {key: context[key] for key in facts} == facts
        assert context["checkout"] == {"kind": "none", "branch": None}
        assert agent.registration.terminal not in text_of(result)
        assert str(tmp_path) not in text_of(result)


@pytest.mark.parametrize("mode", MODES)
def test_refusals_are_generic_tool_errors_or_json_rpc_errors(live: LiveGrid, mode: str) -> None:
    agent = grant(live, names=("clanker_context", "clanker_notify"))

    async def misuse(client: Client) -> list[Any]:
        seen: list[Any] = []
        for name in ("clanker_agents", "clanker_nothing"):  # ungranted, unknown: one answer
            try:
                await client.call_tool(name, {})
            except MCPError as exc:
                seen.append((exc.error.code, exc.error.message))
        for arguments in ({"message": ""}, {"message": "hi", "terminal": "t-1"},
                          {"message": True}):
            result = await client.call_tool("clanker_notify", arguments)
            seen.append((result.is_error, text_of(result)))
        return seen

    unknown, ungranted, empty, extra, mistyped = connect(agent, mode, misuse)
    assert unknown == ungranted == (-32602, "Unknown tool")
    assert empty == (True, "the arguments do not fit the capability "
                           "(message: must be 1 to 200 characters)")
    assert extra == (True, "the arguments do not fit the capability "
                           "(terminal: is not an argument of this capability)")
    assert mistyped == (True, "the arguments do not fit the capability "
                              "(message: must be a string)")


@pytest.mark.parametrize("mode", MODES)
def test_a_call_reaches_the_person_and_its_rate_limit_is_a_tool_error(
    live: LiveGrid, mode: str
) -> None:
    agent = grant(live)

    async def notify(client: Client) -> list[Any]:
        results = []
        for _ in range(4):  # three at once, then one every 10 s
            result = await client.call_tool("clanker_notify", {"message": "review me"})
            results.append((result.is_error, text_of(result)))
        return results

    *delivered, limited = connect(agent, mode, notify)
    assert delivered == [(False, '{"delivered":0}')] * 3
    assert limited[0] is True and limited[1].startswith(
        "too many calls of this capability; try again later (clanker_notify allows 3 calls")


def test_the_handshake_era_negotiates_and_carries_the_guidance(live: LiveGrid) -> None:
    agent = grant(live, names=("clanker_context",))

    async def handshake(client: Client) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the client warns that 2026-07-28 dropped ping
            await client.send_ping()
        return client.session.initialize_result

    result = connect(agent, "legacy", handshake)
    assert result.protocol_version == HANDSHAKE_VERSIONS[-1]
    assert result.server_info.name == "clanker"
    assert result.instructions == "You may ask the host for: clanker_context."
    assert result.capabilities.tools is not None
    assert result.capabilities.resources is None and result.capabilities.prompts is None
    for version in HANDSHAKE_VERSIONS:
        answer = post(agent, {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "old", "version": "1"}}})
        assert answer.status == 200
        assert answer.json()["result"]["protocolVersion"] == version
        assert "mcp-session-id" not in answer.headers  # stateless: no session, ever
    newer = post(agent, {"jsonrpc": "2.0", "id": 8, "method": "initialize", "params": {
        "protocolVersion": "2099-01-01", "capabilities": {}}})
    assert newer.json()["result"]["protocolVersion"] == HANDSHAKE_VERSIONS[-1]
    initialized = post(agent, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                       version=HANDSHAKE_VERSIONS[-1])
    assert (initialized.status, initialized.body) == (202, b"")
    # Stateless: a request needs no initialize before it.
    listed = post(agent, {"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
                  version="2025-06-18")
    assert [t["name"] for t in listed.json()["result"]["tools"]] == ["clanker_context"]


def test_the_stateless_era_discovers_and_checks_its_envelope(live: LiveGrid) -> None:
    agent = grant(live, names=("clanker_context",))

    async def discover(client: Client) -> Any:
        await client.list_tools()
        return client.session.discover_result

    result = connect(agent, "auto", discover)
    assert result is not None  # auto chose the stateless revision
    assert result.supported_versions == [MODERN]
    assert result.instructions == "You may ask the host for: clanker_context."
    listed = post(agent, modern("tools/list"), version=MODERN).json()["result"]
    assert (listed["resultType"], listed["ttlMs"], listed["cacheScope"]) == (
        "complete", 0, "private")
    assert listed["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "clanker"
    called = post(agent, modern("tools/call", {"name": "clanker_context"}), version=MODERN)
    assert called.json()["result"]["resultType"] == "complete"
    # The envelope: _meta, and headers that agree with the body.
    no_meta = post(agent, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, version=MODERN)
    assert (no_meta.status, no_meta.json()["error"]["code"]) == (400, -32602)
    for headers in ({"Mcp-Method": "tools/list"}, {"Mcp-Name": "clanker_agents"}):
        mismatch = post(agent, modern("tools/call", {"name": "clanker_context"}),
                        version=MODERN, headers=headers)
        assert (mismatch.status, mismatch.json()["error"]["code"]) == (400, -32020)
    for removed in ("ping", "initialize"):
        gone = post(agent, modern(removed), version=MODERN)
        assert (gone.status, gone.json()["error"]["code"]) == (404, -32601)
    unknown = post(agent, modern("tools/list"), version="2031-01-01")
    assert unknown.status == 400
    error = unknown.json()["error"]
    assert error["code"] == -32022 and MODERN in error["data"]["supported"]
    noted = post(agent, {"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": 1}}, version=MODERN)
    assert (noted.status, noted.body) == (202, b"")


def test_an_ended_credential_has_no_authority_in_either_era(live: LiveGrid) -> None:
    from clanker.grid.client import GridClient

    agent = grant(live)
    GridClient(live.path).revoke_bridge(agent.registration.terminal, agent.registration.token)
    for mode in MODES:  # the client reports an HTTP error (it wraps it in task groups)
        with pytest.raises(Exception, match="errors"):
            connect(agent, mode, lambda client: client.list_tools())
    answer = post(agent, modern("tools/list"), version=MODERN)
    assert answer.status == 401
    assert "www-authenticate" not in answer.headers
    assert b"resource_metadata" not in answer.body and b"oauth" not in answer.body.lower()
