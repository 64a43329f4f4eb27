"""Claude Code's agent bridge (``--mcp-config`` last) and guidance (``--append-system-prompt``):
what a launch gets, when the user's own setup keeps it out, and that the bridge token
is never written anywhere. The replay test sends the requests Claude Code 2.1.197's own
MCP client sent (captured live, fixtures/bridge-live.json) to a real grid's endpoint."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from attrs import evolve
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clanker.attachment import AttachmentContext, AttachmentPlan
from clanker.bridge.capability import BridgeEndpoint
from clanker.bridge.shipped import SHIPPED_NAMES
from clanker.launch.capability import LaunchRequest, SessionTarget
from clanker.testing.doubles import attachment_context
from clanker.testing.strategies import user_flags
from clanker_claude.bridge import MCP_CONFIG_FILE, ClaudeBridge, mcp_config
from clanker_claude.guidance import ClaudeGuidance
from clanker_claude.launch import ClaudeLaunch
from tests.core.bridge.mcp_peer import grant, live_grid
from tests.plugins.bridge_replay import JsonLines, load, replay

CAPTURE = Path(__file__).with_name("fixtures") / "bridge-live.json"
SESSION = "2bd84788-1866-4763-ad83-f2741628502f"
TOKEN = "ckb_" + "5a" * 32  # a fake credential
ENDPOINT = BridgeEndpoint(url="http://127.0.0.1:41234/mcp", server_name="clanker",
                          token_variable="CLANKER_BRIDGE_TOKEN")
GUIDANCE = "You were launched by clanker.\nRun `clanker cmd list --json` to see what you may ask."


@pytest.fixture
def launch(tmp_path: Path) -> dict[str, Path]:
    home, cwd, private, policy = (tmp_path / n for n in ("home", "work", "private", "policy"))
    for directory in (home / ".claude", cwd, private):
        directory.mkdir(parents=True)
    private.chmod(0o700)
    return {"home": home, "cwd": cwd, "private": private, "policy": policy}


def context(launch: dict[str, Path], flags: tuple[str, ...] = (), *,
            argv: tuple[str, ...] | None = None, env: dict[str, str] | None = None,
            token: str = TOKEN) -> AttachmentContext:
    environ = {"HOME": str(launch["home"]), "CLAUDE_CONFIG_DIR": str(launch["home"] / ".claude"),
               "CLANKER_BRIDGE_TOKEN": token, **(env or {})}
    return attachment_context(argv=argv or ("claude", *flags), env=environ,
                              cwd=str(launch["cwd"]), private_dir=launch["private"],
                              user_flags=flags)


def bridge_for(launch: dict[str, Path]) -> ClaudeBridge:
    return ClaudeBridge(policy_dir=launch["policy"])


def bridge(launch: dict[str, Path], flags: tuple[str, ...] = (), **options: Any
           ) -> AttachmentPlan | None:
    return ClaudeBridge(policy_dir=launch["policy"]).prepare(context(launch, flags, **options),
                                                             ENDPOINT)


def write(path: Path, content: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content))


def servers(**names: str) -> dict[str, Any]:
    return {"mcpServers": {name: {"type": "http", "url": url} for name, url in names.items()}}


# -- the bridge: what a launch gets ------------------------------------------------------------


def test_a_plain_launch_gets_one_more_mcp_config_file_last(launch: dict[str, Path]) -> None:
    plan = bridge(launch)
    assert plan is not None
    path = launch["private"] / MCP_CONFIG_FILE
    assert plan.argv == ("claude", "--mcp-config", str(path))
    assert dict(plan.env) == {}
    assert json.loads(path.read_text()) == mcp_config(ENDPOINT) == {"mcpServers": {"clanker": {
        "type": "http", "url": "http://127.0.0.1:41234/mcp",
        "headers": {"Authorization": "Bearer ${CLANKER_BRIDGE_TOKEN}"}}}}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize("operation", ["resume", "fork"])
def test_on_resume_and_fork_the_option_follows_everything(launch: dict[str, Path],
                                                          operation: str) -> None:
    flags = ("--add-dir", "/a", "/b", "fix the bug")  # variadic, then a prompt word
    argv = ClaudeLaunch().build(LaunchRequest(operation=operation, model="sonnet",
                                              session=SessionTarget(native_id=SESSION),
                                              user_flags=flags)).argv
    plan = bridge(launch, flags, argv=argv)
    assert plan is not None
    fork = ("--fork-session",) if operation == "fork" else ()
    assert plan.argv == ("claude", "--model", "sonnet", "--resume", SESSION, *fork, *flags,
                         "--mcp-config", str(launch["private"] / MCP_CONFIG_FILE))


def test_the_option_goes_before_the_users_double_dash(launch: dict[str, Path]) -> None:
    flags = ("--verbose", "--", "--strict-mcp-config is only a prompt word here")
    plan = bridge(launch, flags)
    assert plan is not None
    assert plan.argv == ("claude", "--verbose", "--mcp-config",
                         str(launch["private"] / MCP_CONFIG_FILE), *flags[1:])


def test_the_option_stays_before_the_prompt_words_whatever_follows_the_flags(
        launch: dict[str, Path]) -> None:
    flags = ("-p", "--", "hello")
    plan = bridge(launch, flags, argv=("claude", *flags, "--added-later"))
    assert plan is not None
    assert plan.argv == ("claude", "-p", "--mcp-config", str(launch["private"] / MCP_CONFIG_FILE),
                         "--", "hello", "--added-later")


def test_the_users_other_servers_stay_beside_clankers(launch: dict[str, Path]) -> None:
    write(launch["home"] / ".claude" / ".claude.json", {
        **servers(mine="http://127.0.0.1:9/u"),
        "projects": {str(launch["cwd"]): servers(local="http://127.0.0.1:9/l")}})
    write(launch["cwd"] / ".mcp.json", servers(project="http://127.0.0.1:9/p"))
    write(launch["cwd"] / "theirs.json", servers(flagged="http://127.0.0.1:9/f"))
    flags = ("--mcp-config", "theirs.json", json.dumps(servers(inline="http://127.0.0.1:9/i")))
    plan = bridge(launch, flags)
    assert plan is not None and plan.argv is not None
    assert plan.argv[:-2] == ("claude", *flags)  # nothing of theirs removed or moved


# -- the bridge: the user already owns the name or the channel ---------------------------------


def test_strict_mcp_config_is_the_users_choice(launch: dict[str, Path]) -> None:
    assert bridge(launch, ("--strict-mcp-config", "--mcp-config", "{}")) is None
    assert list(launch["private"].iterdir()) == []  # nothing written either


def test_a_clanker_server_in_the_users_own_mcp_config_flag(launch: dict[str, Path]) -> None:
    inline = json.dumps(servers(clanker="http://127.0.0.1:9/theirs"))
    assert bridge(launch, ("--mcp-config", inline)) is None
    assert bridge(launch, (f"--mcp-config={inline}",)) is None
    write(launch["cwd"] / "a.json", servers(other="http://127.0.0.1:9/a"))
    write(launch["cwd"] / "b.json", servers(clanker="http://127.0.0.1:9/b"))
    assert bridge(launch, ("--mcp-config", "a.json", "b.json")) is None
    assert bridge(launch, ("--mcp-config", "a.json", "--mcp-config", str(launch["cwd"] / "b.json"))
                  ) is None
    assert bridge(launch, ("--mcp-config", "a.json")) is not None


@pytest.mark.parametrize("where", ["user", "local", "local-parent", "project", "project-parent"])
def test_a_clanker_server_in_the_users_configuration(launch: dict[str, Path], where: str) -> None:
    theirs = servers(clanker="http://127.0.0.1:9/theirs")
    state = launch["home"] / ".claude" / ".claude.json"
    if where == "user":
        write(state, theirs)
    elif where.startswith("local"):
        directory = launch["cwd"] if where == "local" else launch["cwd"].parent
        write(state, {"projects": {str(directory): theirs}})
    else:
        directory = launch["cwd"] if where == "project" else launch["cwd"].parent
        write(directory / ".mcp.json", theirs)
    assert bridge(launch) is None


def test_the_default_config_location_is_read_without_claude_config_dir(
        launch: dict[str, Path]) -> None:
    write(launch["home"] / ".claude.json", servers(clanker="http://127.0.0.1:9/theirs"))
    environ = {"HOME": str(launch["home"]), "CLANKER_BRIDGE_TOKEN": TOKEN}
    ctx = attachment_context(argv=("claude",), env=environ, cwd=str(launch["cwd"]),
                             private_dir=launch["private"])
    assert ClaudeBridge(policy_dir=launch["policy"]).prepare(ctx, ENDPOINT) is None


def test_the_administrators_managed_servers_decide(launch: dict[str, Path]) -> None:
    write(launch["policy"] / "managed-mcp.json", servers(corp="https://mcp.example/"))
    assert bridge(launch) is None


@pytest.mark.parametrize("content", ["{broken", "[]", '{"mcpServers": []}', "\xff"])
@pytest.mark.parametrize("where", ["state", "project", "flag-file"])
def test_a_configuration_that_cannot_be_read_counts_as_owned(
        launch: dict[str, Path], where: str, content: str) -> None:
    flags: tuple[str, ...] = ()
    if where == "state":
        write(launch["home"] / ".claude" / ".claude.json", content)
    elif where == "project":
        write(launch["cwd"] / ".mcp.json", content)
    else:
        write(launch["cwd"] / "theirs.json", content)
        flags = ("--mcp-config", "theirs.json")
    assert bridge(launch, flags) is None


def test_a_missing_or_unparsable_flag_value_counts_as_owned(launch: dict[str, Path]) -> None:
    assert bridge(launch, ("--mcp-config", "nowhere.json")) is None
    assert bridge(launch, ("--mcp-config", "{not json")) is None
    assert bridge(launch, ("--mcp-config", '["a list"]')) is None


def test_a_malformed_projects_table_counts_as_owned(launch: dict[str, Path]) -> None:
    write(launch["home"] / ".claude" / ".claude.json", {"projects": []})
    assert bridge(launch) is None
    write(launch["home"] / ".claude" / ".claude.json", {"projects": {str(launch["cwd"]): 1}})
    assert bridge(launch) is None


def test_a_launch_without_the_token_variable_is_an_operational_failure(
        launch: dict[str, Path]) -> None:
    ctx = attachment_context(argv=("claude",), env={"HOME": str(launch["home"])},
                             cwd=str(launch["cwd"]), private_dir=launch["private"])
    with pytest.raises(ValueError, match="token"):
        ClaudeBridge(policy_dir=launch["policy"]).prepare(ctx, ENDPOINT)


# -- the token is never anywhere but the child's environment -----------------------------------

tokens = st.builds(lambda body: "ckb_" + body,
                   st.text(alphabet="0123456789abcdef", min_size=32, max_size=64))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(token=tokens, flags=user_flags())
def test_the_token_is_never_in_argv_env_or_files(token: str, flags: tuple[str, ...]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        launch = {"home": root / "home", "cwd": root / "work", "private": root / "private",
                  "policy": root / "policy"}
        for directory in (launch["home"] / ".claude", launch["cwd"], launch["private"]):
            directory.mkdir(parents=True)
        ctx = context(launch, flags, token=token)
        plans = [ClaudeBridge(policy_dir=launch["policy"]).prepare(ctx, ENDPOINT),
                 ClaudeGuidance().prepare(ctx, GUIDANCE)]
        for plan in plans:
            if plan is not None:
                assert not any(token in word for word in plan.argv or ())
                assert not any(token in value for value in plan.env.values())
        for path in launch["private"].iterdir():
            assert token not in path.read_text()


# -- the captured requests against a real grid ------------------------------------------------


def test_the_captured_requests_are_answered_by_a_real_grid(short_dir: Path) -> None:
    """Claude Code 2.1.197's client: the 2025-11-25 handshake, its notification, a GET
    for a stream (refused 405, which the client accepted), then ``tools/list``."""
    capture = load(CAPTURE)
    assert capture["version"] == "2.1.197 (Claude Code)"
    assert [s for s in capture["status"] if s["name"] == "clanker"] == [
        {"name": "clanker", "status": "connected", "scope": "dynamic",
         "tools": sorted(SHIPPED_NAMES)}]
    assert {s["name"] for s in capture["status"]} == {"clanker", "mine-user", "mine-project"}
    with live_grid(short_dir) as live:
        agent = grant(live, harness="claude")
        for record in capture["requests"]:
            answer = replay(record, agent)
            assert answer.status == record["status"]
            if record["method"] != "POST" or answer.status == 202:
                continue
            sent, got = json.loads(record["body"]), answer.json()
            assert got["id"] == sent["id"]
            if sent["method"] == "initialize":
                assert got["result"]["protocolVersion"] == sent["params"]["protocolVersion"]
            if sent["method"] == "tools/list":
                assert sorted(t["name"] for t in got["result"]["tools"]) == sorted(SHIPPED_NAMES)
        # The same request with another credential is refused before its body is read.
        stranger = evolve(agent, token=TOKEN)
        assert replay(capture["requests"][-1], stranger).status == 401


# -- guidance ---------------------------------------------------------------------------------


def guide(launch: dict[str, Path], flags: tuple[str, ...] = (), **options: Any
          ) -> AttachmentPlan | None:
    return ClaudeGuidance().prepare(context(launch, flags, **options), GUIDANCE)


def test_guidance_is_appended_right_after_the_executable(launch: dict[str, Path]) -> None:
    flags = ("--add-dir", "/a", "/b")
    plan = guide(launch, flags)
    assert plan is not None
    assert plan.argv == ("claude", f"--append-system-prompt={GUIDANCE}", *flags)
    assert dict(plan.env) == {}
    assert list(launch["private"].iterdir()) == []


@pytest.mark.parametrize("operation", ["resume", "fork"])
def test_guidance_on_resume_and_fork(launch: dict[str, Path], operation: str) -> None:
    argv = ClaudeLaunch().build(LaunchRequest(operation=operation,
                                              session=SessionTarget(native_id=SESSION))).argv
    plan = guide(launch, argv=argv)
    assert plan is not None and plan.argv is not None
    assert plan.argv[:2] == ("claude", f"--append-system-prompt={GUIDANCE}")
    assert plan.argv[2:] == argv[1:]


def test_a_text_starting_with_a_dash_stays_a_value(launch: dict[str, Path]) -> None:
    plan = ClaudeGuidance().prepare(context(launch), "-x marks the spot")
    assert plan is not None and plan.argv == ("claude", "--append-system-prompt=-x marks the spot")


def test_guidance_never_replaces_the_users_append_system_prompt(launch: dict[str, Path]) -> None:
    # A second --append-system-prompt replaces the first (seen live).
    assert guide(launch, ("--append-system-prompt", "mine")) is None
    assert guide(launch, ("--append-system-prompt=mine",)) is None


def test_guidance_never_meets_the_users_append_system_prompt_file(
        launch: dict[str, Path]) -> None:
    # Both together are an error in Claude Code (seen live).
    assert guide(launch, ("--append-system-prompt-file", "mine.txt")) is None
    assert guide(launch, ("--append-system-prompt-file=mine.txt",)) is None


def test_the_users_own_system_prompt_is_kept_and_guidance_follows_it(
        launch: dict[str, Path]) -> None:
    for flags in (("--system-prompt", "mine"), ("--system-prompt-file", "mine.txt")):
        plan = guide(launch, flags)
        assert plan is not None and plan.argv is not None
        assert plan.argv[-len(flags):] == flags


def test_prompt_words_after_double_dash_are_not_options(launch: dict[str, Path]) -> None:
    assert guide(launch, ("--", "--append-system-prompt")) is not None


@pytest.mark.parametrize("text", ["", "  \n", "a\0b"])
def test_an_unusable_text_is_an_operational_failure(launch: dict[str, Path], text: str) -> None:
    with pytest.raises(ValueError, match="guidance"):
        ClaudeGuidance().prepare(context(launch), text)


def test_nothing_is_written_to_the_users_files(launch: dict[str, Path]) -> None:
    write(launch["home"] / ".claude" / ".claude.json", servers(mine="http://127.0.0.1:9/u"))
    write(launch["cwd"] / ".mcp.json", servers(project="http://127.0.0.1:9/p"))
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns)
              for p in (launch["home"].rglob("*")) if p.is_file()}
    before.update({p: (p.read_bytes(), p.stat().st_mtime_ns)
                   for p in launch["cwd"].rglob("*") if p.is_file()})
    assert bridge(launch) is not None and guide(launch) is not None
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns)
             for p in (*launch["home"].rglob("*"), *launch["cwd"].rglob("*")) if p.is_file()}
    assert after == before
    assert os.listdir(launch["private"]) == [MCP_CONFIG_FILE]


# -- the real CLI, when it is installed ---------------------------------------------------


def _isolated_env(home: Path, **extra: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("CLAUDE_", "ANTHROPIC_", "CLANKER_"))}
    environ.update(HOME=str(home), CLAUDE_CONFIG_DIR=str(home / ".claude"),
                   DISABLE_TELEMETRY="1", DISABLE_AUTOUPDATER="1",
                   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", **extra)
    return environ


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("claude") is None, reason="claude is not installed")
def test_real_claude_connects_and_lists_the_granted_tools(tmp_path: Path,
                                                          short_dir: Path) -> None:
    """The control protocol only (``initialize``, then ``mcp_status``): no user message,
    no model request. Claude's own MCP client reaches the grid with the header it
    expanded from the environment, and the user's servers stay listed."""
    home, work, private = tmp_path / "home", tmp_path / "work", tmp_path / "private"
    for directory in (home / ".claude", work, private):
        directory.mkdir(parents=True)
    write(home / ".claude" / ".claude.json", {
        "hasCompletedOnboarding": True, **servers(mine="http://127.0.0.1:9/user"),
        "projects": {str(work): {"hasTrustDialogAccepted": True,
                                 "enabledMcpjsonServers": ["project"]}}})
    write(work / ".mcp.json", servers(project="http://127.0.0.1:9/project"))
    base = ("claude", "--output-format", "stream-json", "--verbose", "--input-format",
            "stream-json", "--no-session-persistence")
    with live_grid(short_dir) as live:
        agent = grant(live, harness="claude")
        environ = _isolated_env(home, CLANKER_BRIDGE_TOKEN=agent.token)
        endpoint = BridgeEndpoint(url=agent.url, server_name="clanker",
                                  token_variable="CLANKER_BRIDGE_TOKEN")
        plan = ClaudeBridge(policy_dir=tmp_path / "no-policy").prepare(attachment_context(
            argv=base, env=environ, cwd=str(work), private_dir=private), endpoint)
        assert plan is not None and plan.argv is not None
        assert agent.token not in (private / MCP_CONFIG_FILE).read_text()
        claude = JsonLines(plan.argv, env=environ, cwd=work)
        try:
            claude.send({"type": "control_request", "request_id": "init",
                         "request": {"subtype": "initialize"}})
            claude.until(lambda m: m.get("type") == "control_response")
            listed: dict[str, Any] = {}
            for attempt in range(60):  # until no server is still connecting (bounded)
                claude.send({"type": "control_request", "request_id": f"status-{attempt}",
                             "request": {"subtype": "mcp_status"}})
                reply = claude.until(lambda m, a=attempt: m.get("type") == "control_response"
                                     and m["response"].get("request_id") == f"status-{a}")
                listed = {s["name"]: s for s in reply["response"]["response"]["mcpServers"]}
                if listed and all(s["status"] != "pending" for s in listed.values()):
                    break
                time.sleep(0.5)
        finally:
            claude.close()
    assert set(listed) == {"clanker", "mine", "project"}
    assert listed["clanker"]["status"] == "connected"
    assert listed["clanker"]["scope"] == "dynamic"
    assert sorted(t["name"] for t in listed["clanker"]["tools"]) == sorted(SHIPPED_NAMES)
