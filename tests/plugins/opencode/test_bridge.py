"""OpenCode's agent bridge and guidance: what a launch gets, what is never touched, and
the requests OpenCode's own MCP client sent (captured from opencode-ai 1.18.33,
``fixtures/mcp-list-exchanges.json``) replayed against a real grid's endpoint."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import clanker_opencode
from clanker.bridge.capability import BridgeEndpoint
from clanker.bridge.shipped import SHIPPED_NAMES
from clanker.testing.doubles import attachment_context
from clanker_opencode.bridge import OpenCodeAgentBridge
from clanker_opencode.guidance import GUIDANCE_FILE_NAME, OpenCodeGuidance
from clanker_opencode.layers import CONFIG_VARIABLE
from tests.core.bridge.mcp_peer import exchange, grant, live_grid

FIXTURES = Path(__file__).with_name("fixtures")
TOKEN = "ckb_" + "ab" * 32
ENDPOINT = BridgeEndpoint(url="http://127.0.0.1:43210/mcp", server_name="clanker",
                          token_variable="CLANKER_BRIDGE_TOKEN")
ENTRY = {"type": "remote", "url": "http://127.0.0.1:43210/mcp",
         "headers": {"Authorization": "Bearer {env:CLANKER_BRIDGE_TOKEN}"}, "oauth": False}
ATTENTION = '{"plugin":["file:///run/clanker/launches/opencode-x/clanker-attention.mjs"]}'
RESUME = ("opencode", "-s", "ses_dd477e2caffeRx4w8c0S7Feig0")
FORK = (*RESUME, "--fork")


def launch(root: Path, *, argv: tuple[str, ...] = ("opencode",),
           env: dict[str, str] | None = None) -> Any:
    """A launch in ``root/home/project`` (a git checkout) with ``root/home`` as home."""
    home = root / "home"
    project = home / "project"
    (project / ".git").mkdir(parents=True, exist_ok=True)
    private = root / "private"
    private.mkdir(mode=0o700, exist_ok=True)
    base = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
            "CLANKER_BRIDGE_TOKEN": TOKEN}
    return attachment_context(argv=argv, env={**base, **(env or {})}, cwd=str(project),
                              private_dir=private)


def document(plan: Any) -> Any:
    assert plan is not None
    assert set(plan.env) == {CONFIG_VARIABLE}
    return json.loads(plan.env[CONFIG_VARIABLE])


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# --- the bridge -------------------------------------------------------------------------


def test_the_plugin_registers_both_capabilities() -> None:
    plugin = clanker_opencode.plugin
    assert isinstance(plugin.clanker_agent_bridge(), OpenCodeAgentBridge)
    assert isinstance(plugin.clanker_guidance(), OpenCodeGuidance)


def test_a_plain_launch_gets_one_remote_server_in_the_config_content(tmp_path: Path) -> None:
    plan = OpenCodeAgentBridge().prepare(launch(tmp_path), ENDPOINT)
    assert plan is not None and plan.argv is None
    assert document(plan) == {"mcp": {"clanker": ENTRY}}


@pytest.mark.parametrize("argv", [RESUME, FORK])
def test_resume_and_fork_get_the_same_server_and_keep_their_argv(tmp_path: Path,
                                                                argv: tuple[str, ...]) -> None:
    plan = OpenCodeAgentBridge().prepare(launch(tmp_path, argv=argv), ENDPOINT)
    assert plan is not None and plan.argv is None
    assert document(plan) == {"mcp": {"clanker": ENTRY}}


def test_attentions_plugin_is_kept_beside_the_server(tmp_path: Path) -> None:
    context = launch(tmp_path, env={CONFIG_VARIABLE: ATTENTION})
    merged = document(OpenCodeAgentBridge().prepare(context, ENDPOINT))
    assert merged == {**json.loads(ATTENTION), "mcp": {"clanker": ENTRY}}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)
user_documents = st.dictionaries(st.text().filter(lambda k: k != "mcp"), json_values, max_size=6)
user_servers = st.dictionaries(st.text().filter(lambda k: k != "clanker"),
                               st.dictionaries(st.text(), json_values, max_size=3), max_size=4)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(user=user_documents, servers=st.none() | user_servers, pretty=st.booleans())
def test_nothing_of_a_users_config_content_is_lost(tmp_path: Path, user: dict[str, Any],
                                                   servers: dict[str, Any] | None,
                                                   pretty: bool) -> None:
    theirs = dict(user) if servers is None else {**user, "mcp": servers}
    raw = json.dumps(theirs, indent=2 if pretty else None)
    merged = document(OpenCodeAgentBridge().prepare(
        launch(tmp_path, env={CONFIG_VARIABLE: raw}), ENDPOINT))
    assert merged["mcp"]["clanker"] == ENTRY
    rest = dict(merged)
    rest["mcp"] = {k: v for k, v in merged["mcp"].items() if k != "clanker"}
    if servers is None:
        assert rest.pop("mcp") == {}
    assert rest == theirs


def test_a_users_jsonc_config_content_is_merged_without_its_comments(tmp_path: Path) -> None:
    raw = '{\n  // mine\n  "model": "a/b", /* x */ "mcp": {"x": {"type": "local"},},\n}'
    merged = document(OpenCodeAgentBridge().prepare(
        launch(tmp_path, env={CONFIG_VARIABLE: raw}), ENDPOINT))
    assert merged == {"model": "a/b", "mcp": {"x": {"type": "local"}, "clanker": ENTRY}}


@pytest.mark.parametrize("raw", [
    '{"mcp": {"clanker": {"type": "local", "command": ["x"]}}}',
    '{"mcp": {"clanker": {"enabled": false}}}',
    '{"mcp": []}',
    "[1, 2]",
    "{not json",
])
def test_a_config_content_that_owns_the_name_or_cannot_be_read_means_no_bridge(
        tmp_path: Path, raw: str) -> None:
    assert OpenCodeAgentBridge().prepare(
        launch(tmp_path, env={CONFIG_VARIABLE: raw}), ENDPOINT) is None


OWNED = '{\n  // the user\'s own\n  "mcp": {"clanker": {"type": "remote", "url": "https://x"},},\n}'


@pytest.mark.parametrize("where", [
    "home/.config/opencode/opencode.json",
    "home/.config/opencode/opencode.jsonc",
    "home/.config/opencode/config.json",
    "home/project/opencode.json",
    "home/project/opencode.jsonc",
    "home/project/.opencode/opencode.json",
    "home/.opencode/opencode.jsonc",
])
def test_a_server_of_that_name_in_the_users_files_means_no_bridge(tmp_path: Path,
                                                                   where: str) -> None:
    write(tmp_path / where, OWNED)
    assert OpenCodeAgentBridge().prepare(launch(tmp_path), ENDPOINT) is None


def test_the_files_opencode_config_and_config_dir_name_count_too(tmp_path: Path) -> None:
    write(tmp_path / "extra.json", OWNED)
    context = launch(tmp_path, env={"OPENCODE_CONFIG": str(tmp_path / "extra.json")})
    assert OpenCodeAgentBridge().prepare(context, ENDPOINT) is None
    write(tmp_path / "dir" / "opencode.json", OWNED)
    context = launch(tmp_path, env={"OPENCODE_CONFIG_DIR": str(tmp_path / "dir")})
    assert OpenCodeAgentBridge().prepare(context, ENDPOINT) is None


def test_other_servers_in_the_users_files_are_not_a_conflict(tmp_path: Path) -> None:
    write(tmp_path / "home/.config/opencode/opencode.json",
          '{"mcp": {"mine": {"type": "local", "command": ["x"]}}}')
    assert document(OpenCodeAgentBridge().prepare(launch(tmp_path), ENDPOINT)) == {
        "mcp": {"clanker": ENTRY}}


def test_project_files_are_not_read_when_opencode_would_not_read_them(tmp_path: Path) -> None:
    write(tmp_path / "home/project/opencode.json", OWNED)
    context = launch(tmp_path, env={"OPENCODE_DISABLE_PROJECT_CONFIG": "1"})
    assert OpenCodeAgentBridge().prepare(context, ENDPOINT) is not None


def test_files_above_the_checkout_are_not_opencodes_project_files(tmp_path: Path) -> None:
    write(tmp_path / "home/opencode.json", OWNED)  # above home/project/.git
    assert OpenCodeAgentBridge().prepare(launch(tmp_path), ENDPOINT) is not None


def test_a_users_file_that_cannot_be_parsed_means_no_bridge(tmp_path: Path) -> None:
    write(tmp_path / "home/.config/opencode/opencode.json", '{"mcp": {"a": ')
    assert OpenCodeAgentBridge().prepare(launch(tmp_path), ENDPOINT) is None


def test_the_users_files_are_left_as_they_were(tmp_path: Path) -> None:
    path = tmp_path / "home/.config/opencode/opencode.json"
    write(path, '{"mcp": {"mine": {"type": "local", "command": ["x"]}}}')
    before = path.read_bytes(), path.stat().st_mtime_ns
    context = launch(tmp_path)
    OpenCodeAgentBridge().prepare(context, ENDPOINT)
    OpenCodeGuidance().prepare(context, "guidance")
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


# --- guidance --------------------------------------------------------------------------


def test_guidance_is_one_private_file_appended_to_the_instructions(tmp_path: Path) -> None:
    context = launch(tmp_path)
    plan = OpenCodeGuidance().prepare(context, "Ask clanker_context first.")
    target = context.private_dir / GUIDANCE_FILE_NAME
    assert document(plan) == {"instructions": [str(target)]}
    assert target.read_text() == "Ask clanker_context first."
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_guidance_keeps_the_users_instructions_in_the_config_content(tmp_path: Path) -> None:
    theirs = {"instructions": ["~/rules.md", "https://example.invalid/x.md"], "model": "a/b"}
    context = launch(tmp_path, env={CONFIG_VARIABLE: json.dumps(theirs)})
    merged = document(OpenCodeGuidance().prepare(context, "text"))
    assert merged == {**theirs, "instructions": [*theirs["instructions"],
                                                 str(context.private_dir / GUIDANCE_FILE_NAME)]}


def test_guidance_after_the_bridge_keeps_the_server_and_attentions_plugin(tmp_path: Path) -> None:
    context = launch(tmp_path, env={CONFIG_VARIABLE: ATTENTION})
    bridged = OpenCodeAgentBridge().prepare(context, ENDPOINT)
    assert bridged is not None
    after = launch(tmp_path, env={**context.env, **bridged.env})
    merged = document(OpenCodeGuidance().prepare(after, "text"))
    assert merged == {**json.loads(ATTENTION), "mcp": {"clanker": ENTRY},
                      "instructions": [str(after.private_dir / GUIDANCE_FILE_NAME)]}


@pytest.mark.parametrize("raw", ['{"instructions": "rules.md"}', '{"instructions": [1]}',
                                 "{broken"])
def test_guidance_that_would_replace_the_users_instructions_is_not_delivered(
        tmp_path: Path, raw: str) -> None:
    context = launch(tmp_path, env={CONFIG_VARIABLE: raw})
    assert OpenCodeGuidance().prepare(context, "text") is None
    assert not (context.private_dir / GUIDANCE_FILE_NAME).exists()


# --- the credential --------------------------------------------------------------------

tokens = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=16, max_size=80)


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=tokens, user=st.none() | user_documents, argv=st.sampled_from([("opencode",),
                                                                          RESUME, FORK]))
def test_the_raw_token_never_leaves_the_environment(tmp_path: Path, token: str,
                                                    user: dict[str, Any] | None,
                                                    argv: tuple[str, ...]) -> None:
    # Values of the user's own that happen to contain the token are theirs, not a leak.
    if user is not None and token in json.dumps(user, ensure_ascii=False):
        return
    for entry in (tmp_path / "private").glob("*"):
        entry.unlink()
    env = {"CLANKER_BRIDGE_TOKEN": token}
    if user is not None:
        env[CONFIG_VARIABLE] = json.dumps(user)
    context = launch(tmp_path, argv=argv, env=env)
    bridged = OpenCodeAgentBridge().prepare(context, ENDPOINT)
    assert bridged is not None
    after = launch(tmp_path, argv=argv, env={**context.env, **bridged.env})
    guided = OpenCodeGuidance().prepare(after, "text")
    assert guided is not None
    for plan in (bridged, guided):
        assert plan.argv is None
        assert all(token not in value for value in plan.env.values())
    for path in context.private_dir.rglob("*"):
        assert token.encode() not in path.read_bytes()


# --- OpenCode's own requests, replayed --------------------------------------------------


def replayed(raw: dict[str, Any], *, port: int, token: str) -> bytes:
    """The captured request as bytes, with this grid's port and credential."""
    body = b"" if raw["body"] == "" else json.dumps(raw["body"]).encode()
    headers = {k: v.replace("<token>", token).replace("<port>", str(port))
               for k, v in raw["headers"].items() if k != "content-length"}
    if body or raw["line"].startswith("POST"):
        headers["content-length"] = str(len(body))
    head = raw["line"] + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode("latin-1") + b"\r\n" + body


def test_opencodes_captured_requests_are_answered_as_they_were(short_dir: Path) -> None:
    captured = json.loads((FIXTURES / "mcp-list-exchanges.json").read_text())["exchanges"]
    assert [e["request"]["line"].split()[0] for e in captured] == ["POST", "POST", "GET", "POST"]
    with live_grid(short_dir) as live:
        agent = grant(live, harness="opencode")
        for entry in captured:
            answer = exchange(agent.port, replayed(entry["request"], port=agent.port,
                                                   token=agent.token))
            assert answer is not None
            assert answer.status == entry["answer"]["status"]
            method = entry["request"]["body"] and entry["request"]["body"]["method"]
            if method == "initialize":
                result = answer.json()["result"]
                assert result["protocolVersion"] == "2025-11-25"
                assert result["serverInfo"]["name"] == ENDPOINT.server_name
            if method == "tools/list":
                names = {tool["name"] for tool in answer.json()["result"]["tools"]}
                assert names == set(SHIPPED_NAMES)
                recorded = {tool["name"] for tool in entry["answer"]["body"]["result"]["tools"]}
                assert recorded == set(SHIPPED_NAMES)


def test_a_captured_request_with_another_credential_is_refused(short_dir: Path) -> None:
    captured = json.loads((FIXTURES / "mcp-list-exchanges.json").read_text())["exchanges"]
    with live_grid(short_dir) as live:
        agent = grant(live, harness="opencode")
        answer = exchange(agent.port, replayed(captured[0]["request"], port=agent.port,
                                               token=TOKEN))
        assert answer is not None and answer.status == 401


def test_the_recorded_exchanges_hold_no_credential() -> None:
    text = (FIXTURES / "mcp-list-exchanges.json").read_text()
    assert "ckb_" not in text
    assert all(e["request"]["headers"]["authorization"] == "Bearer <token>"
               for e in json.loads(text)["exchanges"])


def test_the_captured_model_request_shows_both_servers_and_both_instructions() -> None:
    """What OpenCode sent its provider with the bridge and guidance attached: the granted
    tools beside the user's own server's, the user's instructions before ours."""
    seen = json.loads((FIXTURES / "run-model-request.json").read_text())
    assert {f"clanker_{name}" for name in SHIPPED_NAMES} <= set(seen["tools"])
    assert "mine_user_echo" in seen["tools"]
    sources = [line for line in seen["system_instruction_lines"]
               if line.startswith("Instructions from:")]
    assert sources == ["Instructions from: <home>/user-rules.md",
                       f"Instructions from: <launch private dir>/{GUIDANCE_FILE_NAME}"]
