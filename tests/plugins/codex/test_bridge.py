"""Codex's agent bridge (``-c mcp_servers.clanker.*``) and guidance (``-c
developer_instructions``): what a launch gets, before a ``resume`` / ``fork`` subcommand,
when the user's own configuration keeps it out, and that the bridge token is never in
argv. The replay test sends the requests Codex 0.171.0's own MCP client sent (captured
live, fixtures/bridge-live.json) to a real grid's endpoint."""

from __future__ import annotations

import json
import os
import shutil
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from attrs import evolve
from hypothesis import given, settings
from hypothesis import strategies as st

from clanker.attachment import AttachmentContext, AttachmentPlan
from clanker.bridge.capability import BridgeEndpoint
from clanker.bridge.shipped import SHIPPED_NAMES
from clanker.launch.capability import LaunchRequest, SessionTarget
from clanker.testing.doubles import attachment_context
from clanker.testing.strategies import user_flags
from clanker_codex.attention import CodexAttention
from clanker_codex.bridge import CodexBridge, bridge_arguments
from clanker_codex.guidance import CodexGuidance
from clanker_codex.launch import CodexLaunch
from clanker_codex.overrides import toml_key, toml_string
from tests.core.bridge.mcp_peer import grant, live_grid
from tests.plugins.bridge_replay import JsonLines, load, replay

CAPTURE = Path(__file__).with_name("fixtures") / "bridge-live.json"
SESSION = "01a22b86-c7d0-79e0-b3c0-03c56f3ce14a"
TOKEN = "ckb_" + "5a" * 32  # a fake credential
ENDPOINT = BridgeEndpoint(url="http://127.0.0.1:41234/mcp", server_name="clanker",
                          token_variable="CLANKER_BRIDGE_TOKEN")
OVERRIDES = ("-c", 'mcp_servers.clanker.url="http://127.0.0.1:41234/mcp"',
             "-c", 'mcp_servers.clanker.bearer_token_env_var="CLANKER_BRIDGE_TOKEN"')
GUIDANCE = 'You were launched by clanker.\nRun "clanker cmd list --json"\tto see\\what you may ask.'


@pytest.fixture
def launch(tmp_path: Path) -> dict[str, Path]:
    home, cwd, system = tmp_path / "home", tmp_path / "work", tmp_path / "etc" / "config.toml"
    for directory in (home / ".codex", cwd, tmp_path / "private"):
        directory.mkdir(parents=True)
    return {"home": home, "cwd": cwd, "private": tmp_path / "private", "system": system}


def context(launch: dict[str, Path], flags: tuple[str, ...] = (), *,
            argv: tuple[str, ...] | None = None, env: dict[str, str] | None = None,
            token: str = TOKEN) -> AttachmentContext:
    environ = {"HOME": str(launch["home"]), "CODEX_HOME": str(launch["home"] / ".codex"),
               "CLANKER_BRIDGE_TOKEN": token, **(env or {})}
    return attachment_context(argv=argv or ("codex", *flags), env=environ,
                              cwd=str(launch["cwd"]), private_dir=launch["private"],
                              user_flags=flags)


def bridge_for(launch: dict[str, Path]) -> CodexBridge:
    return CodexBridge(system_config=launch["system"])


def bridge(launch: dict[str, Path], flags: tuple[str, ...] = (), **options: Any
           ) -> AttachmentPlan | None:
    return CodexBridge(system_config=launch["system"]).prepare(context(launch, flags, **options),
                                                               ENDPOINT)


def guide(launch: dict[str, Path], flags: tuple[str, ...] = (), **options: Any
          ) -> AttachmentPlan | None:
    return CodexGuidance(system_config=launch["system"]).prepare(
        context(launch, flags, **options), GUIDANCE)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def config(launch: dict[str, Path]) -> Path:
    return launch["home"] / ".codex" / "config.toml"


def value_of(override: str) -> Any:
    """What Codex reads from one ``-c key=value`` (a TOML value)."""
    _, _, value = override.partition("=")
    return tomllib.loads(f"v = {value}")["v"]


# -- the bridge: what a launch gets ------------------------------------------------------------


def test_a_plain_launch_gets_two_overrides_naming_the_variable(launch: dict[str, Path]) -> None:
    plan = bridge(launch, ("--search",))
    assert plan is not None
    assert plan.argv == ("codex", *OVERRIDES, "--search")
    assert bridge_arguments(ENDPOINT) == OVERRIDES
    assert dict(plan.env) == {}
    assert list(launch["private"].iterdir()) == []  # no file: nothing to leave behind


@pytest.mark.parametrize("operation", ["resume", "fork"])
def test_on_resume_and_fork_the_overrides_come_before_the_subcommand(
        launch: dict[str, Path], operation: str) -> None:
    flags = ("-m", "theirs")
    argv = CodexLaunch().build(LaunchRequest(
        operation=operation, model="gpt-x", session=SessionTarget(native_id=SESSION),
        cwd=str(launch["cwd"]), user_flags=flags)).argv
    plan = bridge(launch, flags, argv=argv)
    assert plan is not None
    assert plan.argv == ("codex", *OVERRIDES, "-m", "gpt-x", "-C", str(launch["cwd"]),
                         operation, SESSION, *flags)


def test_attention_then_the_bridge_both_before_the_subcommand(launch: dict[str, Path]) -> None:
    argv = CodexLaunch().build(LaunchRequest(
        operation="resume", session=SessionTarget(native_id=SESSION))).argv
    ctx = context(launch, argv=argv, env={"CLANKER_ATTENTION_COMMAND": "/bin/true"})
    attended = CodexAttention(policy_file=launch["system"]).prepare(ctx)
    assert isinstance(attended, AttachmentPlan) and attended.argv is not None
    plan = CodexBridge(system_config=launch["system"]).prepare(
        evolve(ctx, argv=attended.argv), ENDPOINT)
    assert plan is not None and plan.argv is not None
    assert plan.argv[-2:] == ("resume", SESSION)
    assert plan.argv[1:5] == OVERRIDES


def test_the_users_other_servers_leave_room_for_clankers(launch: dict[str, Path]) -> None:
    write(config(launch), '[mcp_servers.mine]\nurl = "http://127.0.0.1:9/u"\n')
    write(launch["home"] / ".codex" / "work.config.toml", '[mcp_servers.w]\ncommand = "w"\n')
    write(launch["cwd"] / ".codex" / "config.toml", '[mcp_servers.p]\ncommand = "p"\n')
    assert bridge(launch, ("-p", "work", "-c", 'mcp_servers_extra="x"')) is not None


def test_the_url_and_the_name_are_quoted_as_toml() -> None:
    odd = BridgeEndpoint(url='http://127.0.0.1:1/mcp?a="b"', server_name="clanker.grid",
                         token_variable="V")
    key = toml_key("clanker.grid")
    assert key == '"clanker.grid"'
    url_override = bridge_arguments(odd)[1]
    assert url_override.startswith(f"mcp_servers.{key}.url=")
    assert value_of(url_override) == 'http://127.0.0.1:1/mcp?a="b"'


# -- the bridge: the user already owns the name ------------------------------------------------


@pytest.mark.parametrize("flags", [
    ("-c", 'mcp_servers.clanker.url="http://127.0.0.1:9/theirs"'),
    ("-c", "mcp_servers.clanker.enabled=false"),
    ("--config", 'mcp_servers."clanker".command="x"'),
    ("--config=mcp_servers.clanker.command=x",),
    ("-cmcp_servers.clanker.command=x",),
    ("-c", 'mcp_servers={clanker={command="x"}}'),
])
def test_a_clanker_server_on_the_command_line(launch: dict[str, Path],
                                              flags: tuple[str, ...]) -> None:
    assert bridge(launch, flags) is None


def test_words_after_double_dash_are_the_prompt(launch: dict[str, Path]) -> None:
    assert bridge(launch, ("--", "-c", "mcp_servers.clanker.url=x")) is not None


@pytest.mark.parametrize("where", ["config", "profile", "project", "project-parent", "system"])
def test_a_clanker_server_in_a_configuration_layer(launch: dict[str, Path], where: str) -> None:
    theirs = '[mcp_servers.clanker]\ncommand = "my-own"\n'
    flags: tuple[str, ...] = ()
    if where == "config":
        write(config(launch), theirs)
    elif where == "profile":
        write(launch["home"] / ".codex" / "work.config.toml", theirs)
        flags = ("--profile", "work")
        assert bridge(launch) is not None  # only the selected profile is read
    elif where == "system":
        write(launch["system"], theirs)
    else:
        directory = launch["cwd"] if where == "project" else launch["cwd"].parent
        write(directory / ".codex" / "config.toml", theirs)
    assert bridge(launch, flags) is None


@pytest.mark.parametrize("content", ["this is [not toml", "mcp_servers = 3", "\xff = 1"])
def test_a_malformed_configuration_counts_as_owned(launch: dict[str, Path],
                                                   content: str) -> None:
    # Codex itself refuses to start on a malformed config.toml (seen live).
    write(config(launch), content)
    assert bridge(launch) is None
    # Valid TOML that only breaks the servers table says nothing about instructions.
    assert (guide(launch) is None) == (content != "mcp_servers = 3")


def test_an_oversized_or_odd_configuration_counts_as_owned(launch: dict[str, Path]) -> None:
    write(config(launch), "# " + "x" * (1 << 20) + "\n")
    assert bridge(launch) is None and guide(launch) is None
    config(launch).unlink()
    config(launch).mkdir()  # not a regular file
    assert bridge(launch) is None and guide(launch) is None


@pytest.mark.parametrize("name", ["../elsewhere", ".hidden", ""])
def test_a_profile_name_that_is_not_a_file_name_counts_as_owned(launch: dict[str, Path],
                                                                name: str) -> None:
    assert bridge(launch, ("-p", name)) is None
    assert guide(launch, ("-p", name)) is None


def test_no_home_means_the_configuration_cannot_be_told(launch: dict[str, Path]) -> None:
    ctx = attachment_context(argv=("codex",), env={"CLANKER_BRIDGE_TOKEN": TOKEN},
                             cwd=str(launch["cwd"]), private_dir=launch["private"])
    assert CodexBridge(system_config=launch["system"]).prepare(ctx, ENDPOINT) is None
    assert CodexGuidance(system_config=launch["system"]).prepare(ctx, GUIDANCE) is None


def test_a_launch_without_the_token_variable_is_an_operational_failure(
        launch: dict[str, Path]) -> None:
    ctx = attachment_context(argv=("codex",), env={"CODEX_HOME": str(launch["home"])},
                             cwd=str(launch["cwd"]), private_dir=launch["private"])
    with pytest.raises(ValueError, match="token"):
        CodexBridge(system_config=launch["system"]).prepare(ctx, ENDPOINT)


# -- the token is never anywhere but the child's environment -----------------------------------

tokens = st.builds(lambda body: "ckb_" + body,
                   st.text(alphabet="0123456789abcdef", min_size=32, max_size=64))


@settings(max_examples=200, deadline=None)
@given(token=tokens, flags=user_flags())
def test_the_token_is_never_in_argv_or_env_additions(token: str, flags: tuple[str, ...]) -> None:
    root = Path("/nonexistent-clanker-test")  # nothing to read: every layer is absent
    launch = {"home": root / "home", "cwd": root / "work", "private": root / "private",
              "system": root / "etc" / "config.toml"}
    ctx = context(launch, flags, token=token)
    for plan in (CodexBridge(system_config=launch["system"]).prepare(ctx, ENDPOINT),
                 CodexGuidance(system_config=launch["system"]).prepare(ctx, GUIDANCE)):
        if plan is not None:
            assert not any(token in word for word in plan.argv or ())
            assert not any(token in value for value in plan.env.values())


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(blacklist_categories=["Cs"]), min_size=1))
def test_any_text_reads_back_exactly_as_toml(text: str) -> None:
    assert value_of(f"k={toml_string(text)}") == text


# -- the captured requests against a real grid ------------------------------------------------


def test_the_captured_requests_are_answered_by_a_real_grid(short_dir: Path) -> None:
    """Codex 0.171.0's client (rmcp) in ``codex app-server``: the 2025-06-18 handshake,
    its notification, ``tools/list``, then ``resources/list`` and
    ``resources/templates/list`` at once on two connections (answered "Method not
    found", which Codex takes as no resources)."""
    capture = load(CAPTURE)
    assert capture["version"] == "codex-cli 0.171.0"
    assert capture["argv"][1:5] == ["-c", 'mcp_servers.clanker.url="http://127.0.0.1:${PORT}/mcp"',
                                    "-c", OVERRIDES[3]]
    by_name = {s["name"]: s for s in capture["status"]}
    assert by_name["clanker"] == {"name": "clanker", "tools": sorted(SHIPPED_NAMES), "error": ""}
    assert "mine-user" in by_name  # the user's own server, beside clanker's
    _replay_against_a_real_grid(capture, short_dir)


def test_the_requests_of_a_starting_session_are_answered_by_a_real_grid(
        short_dir: Path) -> None:
    """``codex exec`` connects as a session starts, before its first model request:
    the handshake, its notification and ``tools/list``."""
    capture = load(CAPTURE.with_name("bridge-live-exec.json"))
    assert capture["version"] == "codex-cli 0.171.0"
    assert capture["argv"][1:5] == ["-c", 'mcp_servers.clanker.url="http://127.0.0.1:${PORT}/mcp"',
                                    "-c", OVERRIDES[3]]
    assert [json.loads(r["body"])["method"] for r in capture["requests"]] == [
        "initialize", "notifications/initialized", "tools/list"]
    _replay_against_a_real_grid(capture, short_dir)


def _replay_against_a_real_grid(capture: dict[str, Any], short_dir: Path) -> None:
    with live_grid(short_dir) as live:
        agent = grant(live, harness="codex")
        for record in capture["requests"]:
            headers = dict(record["headers"])
            assert headers["authorization"] == "Bearer ${TOKEN}"
            assert headers.get("mcp-protocol-version", "2025-06-18") == "2025-06-18"
            answer = replay(record, agent)
            assert answer.status == record["status"]
            if answer.status == 202:
                continue
            sent, got = json.loads(record["body"]), answer.json()
            assert got["id"] == sent["id"]
            if sent["method"] == "initialize":
                assert got["result"]["protocolVersion"] == sent["params"]["protocolVersion"]
            elif sent["method"] == "tools/list":
                assert sorted(t["name"] for t in got["result"]["tools"]) == sorted(SHIPPED_NAMES)
            else:
                assert got["error"]["code"] == -32601
        stranger = evolve(agent, token=TOKEN)
        assert replay(capture["requests"][-1], stranger).status == 401


# -- guidance ---------------------------------------------------------------------------------


def test_guidance_is_one_developer_instructions_override(launch: dict[str, Path]) -> None:
    plan = guide(launch, ("--search",))
    assert plan is not None and plan.argv is not None
    assert plan.argv[:2] == ("codex", "-c") and plan.argv[3:] == ("--search",)
    key, _, _ = plan.argv[2].partition("=")
    assert key == "developer_instructions"
    assert value_of(plan.argv[2]) == GUIDANCE
    assert dict(plan.env) == {}


@pytest.mark.parametrize("operation", ["resume", "fork"])
def test_guidance_comes_before_the_subcommand(launch: dict[str, Path], operation: str) -> None:
    argv = CodexLaunch().build(LaunchRequest(operation=operation,
                                             session=SessionTarget(native_id=SESSION))).argv
    plan = guide(launch, argv=argv)
    assert plan is not None and plan.argv is not None
    assert plan.argv[-2:] == (operation, SESSION) and plan.argv[1] == "-c"


@pytest.mark.parametrize("flags", [
    ("-c", 'developer_instructions="mine"'),
    ("--config=developer_instructions=mine",),
    ("-cdeveloper_instructions=mine",),
])
def test_guidance_never_replaces_the_users_command_line_instructions(
        launch: dict[str, Path], flags: tuple[str, ...]) -> None:
    assert guide(launch, flags) is None


def test_guidance_never_replaces_the_users_config_instructions(launch: dict[str, Path]) -> None:
    write(config(launch), 'developer_instructions = "mine"\n')
    assert guide(launch) is None


def test_guidance_never_replaces_the_profiles_instructions(launch: dict[str, Path]) -> None:
    write(launch["home"] / ".codex" / "work.config.toml", 'developer_instructions = "mine"\n')
    assert guide(launch) is not None  # that profile is not selected
    assert guide(launch, ("-p", "work")) is None
    assert guide(launch, ("--profile=work",)) is None


def test_guidance_never_replaces_a_projects_instructions(launch: dict[str, Path]) -> None:
    write(launch["cwd"] / ".codex" / "config.toml", 'developer_instructions = ""\n')
    assert guide(launch) is None


def test_other_user_settings_do_not_keep_guidance_out(launch: dict[str, Path]) -> None:
    write(config(launch), 'model = "gpt-x"\nmodel_instructions_file = "/x"\n')
    assert guide(launch, ("-c", "model=gpt-y")) is not None


@pytest.mark.parametrize("text", ["", "  \n", "a\0b"])
def test_an_unusable_text_is_an_operational_failure(launch: dict[str, Path], text: str) -> None:
    with pytest.raises(ValueError, match="guidance"):
        CodexGuidance(system_config=launch["system"]).prepare(context(launch), text)


def test_nothing_is_written_to_the_users_files(launch: dict[str, Path]) -> None:
    write(config(launch), '[mcp_servers.mine]\nurl = "http://127.0.0.1:9/u"\n')
    before = config(launch).read_bytes(), config(launch).stat().st_mtime_ns
    assert bridge(launch) is not None and guide(launch) is not None
    assert (config(launch).read_bytes(), config(launch).stat().st_mtime_ns) == before
    assert sorted(p.name for p in launch["home"].rglob("*")) == [".codex", "config.toml"]
    assert not (launch["cwd"] / "AGENTS.md").exists()


# -- the real CLI, when it is installed ---------------------------------------------------


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("codex") is None, reason="codex is not installed")
def test_real_codex_connects_and_lists_the_granted_tools(tmp_path: Path,
                                                         short_dir: Path) -> None:
    """``codex app-server`` with the overrides: ``initialize``, then
    ``mcpServerStatus/list``; no thread and no model request. Codex's own MCP client
    reaches the grid with the token it read from the variable, and the user's own
    server stays listed beside clanker's."""
    home, work, private = tmp_path / "home", tmp_path / "work", tmp_path / "private"
    for directory in (home / ".codex", work, private):
        directory.mkdir(parents=True)
    write(home / ".codex" / "config.toml", '[mcp_servers.mine]\nurl = "http://127.0.0.1:9/u"\n')
    with live_grid(short_dir) as live:
        agent = grant(live, harness="codex")
        environ = {k: v for k, v in os.environ.items()
                   if not k.startswith(("CODEX_", "OPENAI_", "CLANKER_"))}
        environ.update(HOME=str(home), CODEX_HOME=str(home / ".codex"),
                       CLANKER_BRIDGE_TOKEN=agent.token)
        endpoint = BridgeEndpoint(url=agent.url, server_name="clanker",
                                  token_variable="CLANKER_BRIDGE_TOKEN")
        plan = CodexBridge(system_config=tmp_path / "no-system.toml").prepare(
            attachment_context(argv=("codex", "app-server"), env=environ, cwd=str(work),
                               private_dir=private), endpoint)
        assert plan is not None and plan.argv is not None
        codex = JsonLines(plan.argv, env=environ, cwd=work)
        try:
            codex.send({"id": 1, "method": "initialize",
                        "params": {"clientInfo": {"name": "clanker-test", "version": "0"},
                                   "capabilities": None}})
            codex.until(lambda m: m.get("id") == 1)
            codex.send({"method": "initialized"})
            listed: dict[str, Any] = {}
            for attempt in range(60):  # until clanker's tools are in (bounded)
                codex.send({"id": 10 + attempt, "method": "mcpServerStatus/list", "params": {}})
                reply = codex.until(lambda m, a=attempt: m.get("id") == 10 + a)
                listed = {s["name"]: s for s in reply["result"]["data"]}
                if listed.get("clanker", {}).get("tools"):
                    break
                time.sleep(0.5)
        finally:
            codex.close()
    assert set(listed) == {"clanker", "mine"}
    assert sorted(listed["clanker"]["tools"]) == sorted(SHIPPED_NAMES)
    assert listed["clanker"]["authStatus"] == "bearerToken"
    assert listed["clanker"]["toolsError"] is None
