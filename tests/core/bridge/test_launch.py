"""``--bridge`` launches: the credential in the child's environment only, shared with
attention's terminal, revoked first when the launch ends, off unless asked for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from clanker import hookimpl
from clanker.api import Clanker
from clanker.attention.capability import AttachmentContext, AttachmentPlan
from clanker.bridge import wire
from clanker.bridge.cmd import CommandError
from clanker.bridge.shipped import SHIPPED_NAMES
from clanker.cli import cli
from clanker.launch.request import LaunchRequest
from clanker.launch.service import LaunchOptions
from clanker.registry import Registry, override_registry
from clanker.testing.doubles import prepend_to_path
from tests.helpers import make_plugin, write_script

# Asks the host for its own launch's facts, as an agent would (through `clanker cmd`
# and, when the launch has the MCP endpoint, a `tools/call` as a harness's MCP client
# sends it), and records them.
AGENT = """
    import http.client, json, os, subprocess, sys, urllib.parse
    asked = subprocess.run([sys.executable, "-m", "clanker", "cmd", "run", "clanker_context",
                            "--json"], capture_output=True, text=True, timeout=60)
    listed = subprocess.run([sys.executable, "-m", "clanker", "cmd", "list", "--json"],
                            capture_output=True, text=True, timeout=60)
    mcp = None
    url = os.environ.get("CLANKER_BRIDGE_URL")
    if url:
        parts = urllib.parse.urlsplit(url)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        connection.request("POST", parts.path, json.dumps({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "clanker_context", "arguments": {}}}), {
            "Authorization": "Bearer " + os.environ["CLANKER_BRIDGE_TOKEN"],
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-06-18"})
        answer = connection.getresponse()
        mcp = {"status": answer.status, "body": json.loads(answer.read())}
    with open(os.environ["FAKE_RECORD"], "w") as handle:
        json.dump({"code": asked.returncode, "context": asked.stdout, "stderr": asked.stderr,
                   "listed": listed.stdout, "mcp": mcp,
                   "env": sorted(k for k in os.environ if k.upper().startswith("CLANKER"))},
                  handle)
"""


class Accepting:
    """An attention capability that wires nothing (the grid registers the terminal)."""

    interpreter = None
    resume_preserves_session_id = False

    def prepare(self, context: AttachmentContext) -> AttachmentPlan:
        return AttachmentPlan()


def plugin(*, attention: bool) -> object:
    made = make_plugin()
    if attention:
        type(made).clanker_attention = hookimpl(lambda self: Accepting())  # type: ignore[attr-defined]
    return made


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "fake-agent", AGENT)
    prepend_to_path(monkeypatch, bin_dir)
    monkeypatch.setenv("FAKE_RECORD", str(tmp_path / "record.json"))
    return bin_dir


def library(*, attention: bool) -> Clanker:
    return Clanker(registry=Registry.from_plugins({"fake-agent": plugin(attention=attention)},
                                                  environ={}))


@pytest.mark.parametrize("attention", [True, False])
def test_a_bridge_launch_puts_the_credential_in_the_child_environment_only(
    home: Path, fake_bin: Path, tmp_path: Path, attention: bool
) -> None:
    clanker = library(attention=attention)
    request = LaunchRequest(cwd=str(tmp_path))
    with clanker.prepare_launch("fake-agent", request, LaunchOptions(bridge=True)) as launch:
        assert launch.failed == ()
        token = launch.env[wire.TOKEN_VARIABLE]
        assert wire.is_bridge_token(token)
        assert token not in " ".join(launch.argv) and token not in repr(launch)
        commands = clanker.host_commands(launch.env)
        assert [c["name"] for c in commands.capabilities()] == sorted(SHIPPED_NAMES)
        [agent] = clanker.agents()  # one terminal, whether attention registered it or not
        assert agent.bridge == tuple(sorted(SHIPPED_NAMES))
        assert (agent.attention == "unavailable") is not attention
        if not attention:
            assert agent.unavailable == "this harness reports no attention to clanker"
    with pytest.raises(CommandError) as refused:
        commands.capabilities()
    assert refused.value.exit_code == wire.EXIT_NO_AUTHORITY
    assert clanker.agents() == []
    log = (home / "state" / "grid.log").read_text()
    revoked = log.index(f"terminal {agent.terminal}: bridge revoked")
    assert revoked < log.index(f"terminal {agent.terminal} retired")


def test_without_attention_asked_the_terminal_says_why(
    home: Path, fake_bin: Path, tmp_path: Path
) -> None:
    clanker = library(attention=True)
    options = LaunchOptions(attention=False, bridge=True)
    with clanker.prepare_launch("fake-agent", LaunchRequest(cwd=str(tmp_path)), options):
        [agent] = clanker.agents()
    assert agent.unavailable == "this launch runs without attention (it was asked for none)"
    assert not any(k.startswith("CLANKER_ATTENTION") for k in agent.revision)


def test_the_bridge_is_off_unless_asked_for_or_configured(
    home: Path, fake_bin: Path, tmp_path: Path
) -> None:
    clanker = library(attention=True)
    request = LaunchRequest(cwd=str(tmp_path))
    with clanker.prepare_launch("fake-agent", request) as launch:
        assert wire.TOKEN_VARIABLE not in launch.env
    (home / "config").mkdir()
    (home / "config" / "config.toml").write_text('[bridge]\nharnesses = ["fake-agent"]\n')
    with clanker.prepare_launch("fake-agent", request) as launch:
        assert wire.TOKEN_VARIABLE in launch.env
    with clanker.prepare_launch("fake-agent", request, LaunchOptions(bridge=False)) as launch:
        assert wire.TOKEN_VARIABLE not in launch.env


def test_a_bridge_that_cannot_be_granted_leaves_an_ordinary_launch(
    home: Path, fake_bin: Path, tmp_path: Path
) -> None:
    clanker = library(attention=False)
    options = LaunchOptions(bridge=True, grants=("clanker_nothing",))
    reported: list[tuple[str, str]] = []
    with clanker.prepare_launch("fake-agent", LaunchRequest(cwd=str(tmp_path)), options,
                                report=lambda step, phase: reported.append((step, phase))
                                ) as launch:
        assert launch.failed == ("bridge",)
        assert not any(k.startswith("CLANKER_BRIDGE") for k in launch.env)
        assert clanker.agents() == []  # the terminal it registered was given back
    assert reported == [("bridge", "prepare")]


@pytest.mark.parametrize("attention", [True, False])
def test_an_agent_launched_with_bridge_gets_its_own_launchs_facts(
    home: Path, fake_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attention: bool
) -> None:
    project = tmp_path / "my project"
    (project / "api").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "feature-x", str(project)], check=True)
    # Stale credentials of an outer launch, in any spelling: never the agent's.
    monkeypatch.setenv("clanker_bridge_token", "ckb_" + "1" * 64)
    monkeypatch.setenv("CLANKER_BRIDGE_SOCKET", "/stale.sock")
    registry = Registry.from_plugins({"fake-agent": plugin(attention=attention)}, environ={})
    with override_registry(registry):
        result = CliRunner().invoke(cli, ["launch", "fake-agent", "--bridge", "--cwd",
                                          str(project / "api")])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["code"] == 0, record["stderr"]
    facts = {
        "workspace": "api", "environment": "local", "harness": "fake-agent",
        "checkout": {"kind": "repository", "branch": "feature-x"}, "launchDirectory": "api",
        "capabilities": sorted(SHIPPED_NAMES)}
    assert json.loads(record["context"]) == facts
    assert [e["name"] for e in json.loads(record["listed"])] == sorted(SHIPPED_NAMES)
    # The same facts over MCP: one tools/call, the result as one text block.
    assert record["mcp"]["status"] == 200
    result = record["mcp"]["body"]["result"]
    assert result["isError"] is False
    assert json.loads(result["content"][0]["text"]) == facts
    expected = {"CLANKER_BRIDGE_SOCKET", "CLANKER_BRIDGE_TOKEN", "CLANKER_BRIDGE_URL",
                "CLANKER_HOME"}
    if attention:
        expected |= {"CLANKER_ATTENTION_COMMAND", "CLANKER_ATTENTION_SOCKET",
                     "CLANKER_ATTENTION_STATE", "CLANKER_ATTENTION_TERMINAL",
                     "CLANKER_ATTENTION_TOKEN"}
    assert set(record["env"]) == expected


def test_stale_bridge_variables_are_stripped_from_an_ordinary_launch(
    home: Path, fake_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("Clanker_Bridge_Token", "CLANKER_BRIDGE_SOCKET", "clanker_bridge_anything"):
        monkeypatch.setenv(name, "stale")
    registry = Registry.from_plugins({"fake-agent": plugin(attention=False)}, environ={})
    with override_registry(registry):
        result = CliRunner().invoke(cli, ["launch", "fake-agent", "--no-bridge", "--cwd",
                                          str(tmp_path)])
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["env"] == ["CLANKER_HOME"]
    assert record["code"] == wire.EXIT_NO_AUTHORITY


def test_status_shows_which_agents_have_the_bridge(
    home: Path, fake_bin: Path, tmp_path: Path
) -> None:
    clanker = library(attention=True)
    request = LaunchRequest(cwd=str(tmp_path))
    with clanker.prepare_launch("fake-agent", request, LaunchOptions(bridge=True)), \
            clanker.prepare_launch("fake-agent", request, LaunchOptions(bridge=False)):
        status = CliRunner().invoke(cli, ["status", "--json"])
        rows = json.loads(status.stdout)
        assert sorted(len(row["bridge"]) for row in rows) == [0, 3]
        table = CliRunner().invoke(cli, ["status"]).stdout.splitlines()
        assert table[0].split() == ["TERMINAL", "HARNESS", "STATE", "SINCE", "BRIDGE",
                                    "LOCATION"]
        assert sorted(" 3 capabilities " in line for line in table[1:]) == [False, True]


def test_a_broken_config_is_a_usage_error(home: Path, fake_bin: Path, tmp_path: Path) -> None:
    (home / "config").mkdir()
    (home / "config" / "config.toml").write_text('[bridge]\nharnesses = "fake-agent"\n')
    registry = Registry.from_plugins({"fake-agent": plugin(attention=False)}, environ={})
    with override_registry(registry):
        result = CliRunner().invoke(cli, ["launch", "fake-agent", "--cwd", str(tmp_path)])
        assert result.exit_code == 2
        assert "bridge.harnesses" in result.stderr
        flagged = CliRunner().invoke(cli, ["launch", "fake-agent", "--bridge", "--cwd",
                                           str(tmp_path)])
    assert flagged.exit_code == 0  # asked for explicitly: the configuration is not read


def test_resume_and_fork_take_the_bridge_flag() -> None:
    for command in ("resume", "fork", "launch"):
        usage = CliRunner().invoke(cli, [command, "--help"]).stdout
        assert "--bridge / --no-bridge" in usage


def test_nothing_but_the_child_environment_holds_the_credential(
    home: Path, fake_bin: Path, tmp_path: Path
) -> None:
    clanker = library(attention=True)
    with clanker.prepare_launch("fake-agent", LaunchRequest(cwd=str(tmp_path)),
                                LaunchOptions(bridge=True)) as launch:
        token = launch.env[wire.TOKEN_VARIABLE]
        launches = home / "run" / "launches"
        for path in [*launches.rglob("*"), *(home / "state").rglob("*")]:
            if path.is_file():
                assert token[4:] not in path.read_text(errors="replace"), path
        assert os.environ.get(wire.TOKEN_VARIABLE) is None
        assert token not in sys.argv


def test_an_agent_whose_path_finds_no_clanker_is_handed_one_for_this_interpreter(
    home: Path, fake_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fake-agent is found; `clanker` is not (the guidance's `clanker cmd` would fail).
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}/usr/bin{os.pathsep}/bin")
    clanker = library(attention=False)
    request = LaunchRequest(cwd=str(tmp_path))
    with clanker.prepare_launch("fake-agent", request, LaunchOptions(bridge=True)) as launch:
        first, _, rest = launch.env["PATH"].partition(os.pathsep)
        assert rest == f"{fake_bin}{os.pathsep}/usr/bin{os.pathsep}/bin"
        assert Path(first).is_relative_to(home)  # clanker's own runtime directory
        ran = subprocess.run(["clanker", "cmd", "list", "--json"], env=dict(launch.env),
                             capture_output=True, text=True, timeout=60, check=False)
        assert ran.returncode == 0, ran.stderr
        assert sorted(c["name"] for c in json.loads(ran.stdout)) == sorted(SHIPPED_NAMES)
        assert (Path(first) / "clanker").stat().st_mode & 0o777 == 0o700


def test_an_agent_whose_path_finds_a_clanker_keeps_its_path(
    home: Path, fake_bin: Path, tmp_path: Path
) -> None:
    write_script(fake_bin, "clanker", "raise SystemExit(0)")
    clanker = library(attention=False)
    request = LaunchRequest(cwd=str(tmp_path))
    with clanker.prepare_launch("fake-agent", request, LaunchOptions(bridge=True)) as launch:
        assert launch.env["PATH"] == os.environ["PATH"]
