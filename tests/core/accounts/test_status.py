"""An agent launched under a managed account is listed with that account's name."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from clanker.api import Clanker
from clanker.cli import cli
from clanker.grid import daemon
from clanker.launch.request import LaunchRequest
from clanker.launch.service import LaunchOptions
from clanker.paths import clanker_paths
from clanker.registry import override_registry
from tests.core.accounts.test_sessions import HomeProvider
from tests.core.bridge.test_launch import Accepting
from tests.helpers import fake_agent_registry, install_fake_agent


@pytest.fixture
def clanker(short_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[Clanker]:
    monkeypatch.setenv("CLANKER_HOME", str(short_dir))
    install_fake_agent(tmp_path, monkeypatch, "pass")
    registry = fake_agent_registry(accounts=HomeProvider(), attention=Accepting())
    try:
        yield Clanker(registry=registry)
    finally:
        daemon.stop(clanker_paths())


@pytest.mark.parametrize("bridge", [False, True])
def test_status_names_the_account_each_agent_runs_under(
    clanker: Clanker, tmp_path: Path, bridge: bool
) -> None:
    asyncio.run(clanker.accounts.add("fake-agent", label="work", show_url=lambda url: None))
    request = LaunchRequest(cwd=str(tmp_path))
    with clanker.prepare_launch("fake-agent", request, LaunchOptions(bridge=bridge)):
        [agent] = clanker.agents()
        assert agent.account is None
        with override_registry(clanker.registry):
            table = CliRunner().invoke(cli, ["status"]).stdout.splitlines()
        assert "ACCOUNT" not in table[0]
    options = LaunchOptions(account="work", bridge=bridge, attention=not bridge)
    with clanker.prepare_launch("fake-agent", request, options), \
            clanker.prepare_launch("fake-agent", request, LaunchOptions(attention=False,
                                                                        bridge=True)):
        accounts = sorted((a.account or "") for a in clanker.agents())
        assert accounts == ["", "work"]
        with override_registry(clanker.registry):
            rows = json.loads(CliRunner().invoke(cli, ["status", "--json"]).stdout)
            table = CliRunner().invoke(cli, ["status"]).stdout.splitlines()
        assert sorted(str(row["account"]) for row in rows) == ["None", "work"]
        assert table[0].split()[:3] == ["TERMINAL", "HARNESS", "ACCOUNT"]
        assert sorted(line.split()[2] for line in table[1:]) == ["default", "work"]
