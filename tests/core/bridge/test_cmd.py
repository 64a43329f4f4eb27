"""``clanker cmd``: one request, typed refusals with documented exit codes, a lean start."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from clanker.bridge import wire
from clanker.bridge.cmd import main
from clanker.bridge.shipped import OFFERED, SHIPPED_NAMES
from clanker.cli import cli
from clanker.grid.client import GridClient
from tests.core.grid.conftest import LiveGrid


class Agent:
    """An agent's environment with a live bridge credential."""

    def __init__(self, live: LiveGrid, names: tuple[str, ...] = SHIPPED_NAMES) -> None:
        grid = GridClient(live.path)
        self.registration = grid.register(harness="fake-agent", workspace="/tmp", cwd="/tmp",
                                          launcher_pid=os.getpid())
        self.token = grid.grant_bridge(self.registration.terminal, self.registration.token,
                                       names)
        self.env = {wire.TOKEN_VARIABLE: self.token, wire.SOCKET_VARIABLE: str(live.path)}
        self.live = live

    def __call__(self, *args: str, env: dict[str, str] | None = None
                 ) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = main(list(args), environ=self.env if env is None else env, stdout=out,
                    stderr=err)
        return code, out.getvalue(), err.getvalue()


@pytest.fixture
def agent(short_dir: Path) -> Iterator[Agent]:
    with LiveGrid(short_dir / "g.sock") as live:
        yield Agent(live)


def test_list_describe_run(agent: Agent) -> None:
    code, out, err = agent("list", "--json")
    assert (code, err) == (0, "")
    assert [entry["name"] for entry in json.loads(out)] == sorted(SHIPPED_NAMES)
    code, out, _ = agent("list")
    assert code == 0 and out.splitlines()[0].split() == ["NAME", "DESCRIPTION"]
    code, out, _ = agent("describe", "clanker_notify", "--json")
    described = json.loads(out)
    assert described["inputSchema"]["additionalProperties"] is False
    code, out, _ = agent("describe", "clanker_notify")
    assert "example: clanker cmd run clanker_notify --arg message=..." in out
    code, out, _ = agent("run", "clanker_context", "--json")
    assert code == 0 and json.loads(out)["harness"] == "fake-agent"
    code, out, _ = agent("clanker_context")  # shorthand
    assert code == 0 and json.loads(out)["workspace"] == "tmp"
    code, out, _ = agent("run", "clanker_notify", "--arg", "message=hello there")
    assert (code, json.loads(out)) == (0, {"delivered": 0})
    code, out, _ = agent("run", "clanker_notify", "--json", '{"message": "as JSON"}')
    assert (code, json.loads(out)) == (0, {"delivered": 0})


@pytest.mark.parametrize(("args", "code", "kind", "said"), [
    (("run", "clanker_notify"), 2, "invalid-arguments", "message: is required"),
    (("run", "clanker_notify", "--arg", "message="), 2, "invalid-arguments",
     "message: must be 1 to 200 characters"),
    (("run", "clanker_notify", "--json", '{"message": true}'), 2, "invalid-arguments",
     "message: must be a string"),
    (("run", "clanker_notify", "--json", '{"message": "x", "terminal": "t-1"}'), 2,
     "invalid-arguments", "terminal: is not an argument of this capability"),
    (("run", "clanker_notify", "--json", '{"message": {"nested": 1}}'), 2,
     "invalid-arguments", "message: must be a string"),
    (("run", "clanker_notify", "--json", "[1]"), 2, "usage", "run takes one capability name"),
    (("run", "clanker_notify", "--json", "{nope"), 2, "usage", "--json needs one JSON object"),
    (("run", "clanker_notify", "--arg", "message=a", "--arg", "message=b"), 2, "usage",
     "--arg message is given twice"),
    (("run", "clanker_notify", "--arg", "novalue"), 2, "usage", "--arg needs KEY=VALUE"),
    (("run",), 2, "usage", "run takes one capability name"),
    (("list", "extra"), 2, "usage", "list takes no arguments"),
    (("list", "--bogus"), 2, "usage", "unknown option '--bogus'"),
    (("--bogus",), 2, "usage", "unknown option '--bogus'"),
    (("run", "clanker_nothing"), 20, "unknown-capability", "clanker_nothing"),
    (("describe", "Not-A-Name"), 20, "unknown-capability", "see `clanker cmd list`"),
    (("list", "--all"), 2, "usage", "--all is for a person"),
])
def test_bad_input_is_a_typed_refusal_with_a_documented_code(
    agent: Agent, args: tuple[str, ...], code: int, kind: str, said: str
) -> None:
    before = GridClient(agent.live.path).list_terminals()
    got, out, err = agent(*args, "--json")
    assert got == code
    error = json.loads(out.splitlines()[-1])["error"]
    assert (error["kind"], error["exit_code"]) == (kind, code)
    assert said in error["message"]
    assert err == f"clanker: {error['message']}\n" and "Traceback" not in err
    assert GridClient(agent.live.path).list_terminals() == before


def test_without_a_credential_or_a_grid(agent: Agent, short_dir: Path) -> None:
    code, _, err = agent("list", env={})
    assert code == wire.EXIT_NO_AUTHORITY
    assert "clanker launch --bridge" in err
    code, _, err = agent("list", env={**agent.env, wire.TOKEN_VARIABLE: "ckb_" + "0" * 64})
    assert code == wire.EXIT_NO_AUTHORITY
    code, _, err = agent("list", env={**agent.env,
                                      wire.SOCKET_VARIABLE: str(short_dir / "none.sock")})
    assert code == wire.EXIT_GRID_UNAVAILABLE


def test_list_all_is_for_a_person(agent: Agent) -> None:
    person = {wire.SOCKET_VARIABLE: str(agent.live.path)}
    code, out, _ = agent("list", "--all", "--json", env=person)
    entries = json.loads(out)
    assert code == 0 and [e["name"] for e in entries] == sorted(c.name for c in OFFERED)
    assert all(e["invokable"] is False for e in entries)
    # Refused where an agent's credential is present, in any spelling of the name.
    for name in (wire.TOKEN_VARIABLE, wire.TOKEN_VARIABLE.lower()):
        code, _, _ = agent("list", "--all", env={**person, name: agent.token})
        assert code == wire.EXIT_USAGE


def test_a_revoked_credential_and_a_retired_terminal_have_no_authority(agent: Agent) -> None:
    grid = GridClient(agent.live.path)
    grid.revoke_bridge(agent.registration.terminal, agent.registration.token)
    assert agent("run", "clanker_context")[0] == wire.EXIT_NO_AUTHORITY
    grid.retire(agent.registration.terminal, agent.registration.token)
    assert agent("list")[0] == wire.EXIT_NO_AUTHORITY


def test_rate_limited_is_exit_22(agent: Agent) -> None:
    for _ in range(3):
        assert agent("run", "clanker_notify", "--arg", "message=m")[0] == 0
    code, _, err = agent("run", "clanker_notify", "--arg", "message=m")
    assert code == wire.EXIT_BUSY
    assert "try again in" in err


def test_the_click_group_hands_cmd_its_arguments(agent: Agent) -> None:
    result = CliRunner().invoke(cli, ["cmd", "list", "--json"], env=agent.env)
    assert result.exit_code == 0
    assert [e["name"] for e in json.loads(result.stdout)] == sorted(SHIPPED_NAMES)
    assert "usage: clanker cmd list" in CliRunner().invoke(cli, ["cmd", "--help"]).stdout
    assert "cmd" in CliRunner().invoke(cli, ["--help"]).stdout


def test_the_script_and_python_dash_m_go_straight_to_the_lean_client(agent: Agent) -> None:
    env = {**os.environ, **agent.env}
    script = Path(sys.executable).parent / "clanker"
    for argv in ([str(script)], [sys.executable, "-m", "clanker"]):
        done = subprocess.run([*argv, "cmd", "run", "clanker_context", "--json"], env=env,
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["harness"] == "fake-agent"


def test_cmd_imports_only_the_standard_library(agent: Agent) -> None:
    code = (
        "import sys; sys.argv = ['clanker', 'cmd', 'list']\n"
        "import clanker.__main__ as m\n"
        "status = m.main()\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in "
        "('attrs', 'attr', 'cattrs', 'click', 'pluggy', 'platformdirs', 'asyncio') "
        "or n.startswith('clanker_') or n in ('clanker.registry', 'clanker.grid', "
        "'clanker.cli', 'clanker.bridge.declaration', 'clanker.bridge.input'))\n"
        "print(status, ','.join(bad))\n"
    )
    env = {**os.environ, **agent.env}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=60, check=True)
    assert done.stdout.split("\n")[-2] == "0 "
