"""Usage per account: one reading per sign-in once a harness has managed accounts, the
selected first, each probe's commands run under its own home, each cached apart."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from clanker.api import Clanker
from clanker.cli import cli
from clanker.environment.local import LocalEnvironment
from clanker.execution import CommandRequest
from clanker.registry import override_registry
from clanker.usage.capability import UsageContext
from clanker.usage.policy import RefreshPolicy
from clanker.usage.types import UsageSnapshot
from tests.core.accounts.test_sessions import HomeProvider
from tests.helpers import fake_agent_registry, install_fake_agent, percent_snapshot


class HomeUsage:
    """A probe that asks the harness (a real process) where its home is, and reports
    that home as its measurement's label."""

    policy = RefreshPolicy()

    async def probe(self, context: UsageContext) -> UsageSnapshot:
        result = await context.executor.run(CommandRequest(command="fake-agent"))
        home = result.stdout.strip()
        return percent_snapshot(10.0, datetime.now(UTC), label=home)


@pytest.fixture
def clanker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Clanker:
    monkeypatch.setenv("FAKE_AGENT_HOME", str(tmp_path / "own"))
    monkeypatch.setenv("CLANKER_HOME", str(tmp_path / "clanker"))
    install_fake_agent(tmp_path, monkeypatch, "import os; print(os.environ['FAKE_AGENT_HOME'])")
    registry = fake_agent_registry(accounts=HomeProvider(), usage=HomeUsage())
    return Clanker(registry=registry, environment=LocalEnvironment())


def labels(entries: list[Any]) -> list[tuple[str | None, str]]:
    return [(e.account, e.snapshot.measurements[0].label) for e in entries]


def test_one_reading_per_sign_in_the_selected_first(clanker: Clanker, tmp_path: Path) -> None:
    assert labels(asyncio.run(clanker.usage())) == [(None, str(tmp_path / "own"))]
    work = asyncio.run(clanker.accounts.add("fake-agent", label="work",
                                            show_url=lambda url: None))
    home = str(clanker.accounts.homes(clanker.harness("fake-agent"))[1][1]["FAKE_AGENT_HOME"])
    assert labels(asyncio.run(clanker.usage())) == [
        (None, str(tmp_path / "own")), (work.id, home)]
    side = asyncio.run(clanker.accounts.add("fake-agent", label="side",
                                            show_url=lambda url: None))
    side_home = str(clanker.accounts.homes(clanker.harness("fake-agent"))[2][1]["FAKE_AGENT_HOME"])
    clanker.accounts.select("fake-agent", "work")
    assert labels(asyncio.run(clanker.usage())) == [
        (work.id, home), (None, str(tmp_path / "own")), (side.id, side_home)]
    with override_registry(clanker.registry):
        table = CliRunner().invoke(cli, ["usage"]).stdout
        as_json = json.loads(CliRunner().invoke(cli, ["usage", "--json"]).stdout)
    assert "Fake Agent · work *" in table and "Fake Agent · default" in table
    assert [entry["account"] for entry in as_json] == [work.id, None, side.id]

