"""History per account: each managed account's home is read as a store of its own,
its sessions say whose they are, and a resume continues under the owning account."""

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
from clanker.registry import override_registry
from tests.core.accounts.test_service import Provider
from tests.helpers import (
    FakeSessions,
    fake_agent_registry,
    install_fake_agent,
    write_fake_session,
)

WHEN = datetime(2026, 12, 1, 9, tzinfo=UTC)
AGENT = """
    import json, os, sys
    with open(os.environ["FAKE_RECORD"], "w") as handle:
        json.dump({"home": os.environ.get("FAKE_AGENT_HOME"), "argv": sys.argv[1:]}, handle)
"""


class HomeProvider(Provider):
    """The accounts double, pointing the fake harness at its sessions' home."""

    home_variable = "FAKE_AGENT_HOME"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    own = tmp_path / "own"
    write_fake_session(own, "own1", str(tmp_path), WHEN)
    monkeypatch.setenv("FAKE_AGENT_HOME", str(own))
    monkeypatch.setenv("CLANKER_HOME", str(tmp_path / "clanker"))
    monkeypatch.setenv("FAKE_RECORD", str(tmp_path / "record.json"))
    install_fake_agent(tmp_path, monkeypatch, AGENT)
    provider = HomeProvider()
    registry = fake_agent_registry(accounts=provider, sessions=FakeSessions())
    clanker = Clanker(registry=registry, environment=LocalEnvironment())
    record = asyncio.run(clanker.accounts.add("fake-agent", label="work",
                                              show_url=lambda url: None))
    home = Path(dict(clanker.accounts.binding("fake-agent", "work").env)["FAKE_AGENT_HOME"])
    write_fake_session(home, "work1", str(tmp_path), WHEN.replace(hour=10))
    # A second managed account beside it, and the default: three stores side by side.
    other = asyncio.run(clanker.accounts.add("fake-agent", label="side",
                                             show_url=lambda url: None))
    side = Path(dict(clanker.accounts.binding("fake-agent", "side").env)["FAKE_AGENT_HOME"])
    write_fake_session(side, "side1", str(tmp_path), WHEN.replace(hour=8))
    return {"clanker": clanker, "registry": registry, "record": record, "home": home,
            "own": own, "cwd": tmp_path, "other": other, "side": side}


def test_each_account_s_history_is_listed_with_its_account(setup: dict[str, Any]) -> None:
    clanker: Clanker = setup["clanker"]
    listing = asyncio.run(clanker.sessions(workspace=None))
    assert [(s.native_id, s.account) for s in listing.sessions] == [
        ("work1", setup["record"].id), ("own1", None), ("side1", setup["other"].id)]
    assert [(r.harness, r.account) for r in listing.scans] == [
        ("fake-agent", None), ("fake-agent", setup["record"].id),
        ("fake-agent", setup["other"].id)]
    with override_registry(setup["registry"]):
        table = CliRunner().invoke(cli, ["sessions", "--all"]).stdout.splitlines()
        as_json = json.loads(CliRunner().invoke(cli, ["sessions", "--all", "--json"]).stdout)
    assert table[0].split() == ["UPDATED", "TITLE", "MODEL", "ACCOUNT", "SESSION"]
    assert " work " in table[1] and " default " in table[2] and " side " in table[3]
    assert [s["account"] for s in as_json["sessions"]] == [
        setup["record"].id, None, setup["other"].id]


def test_a_resume_continues_under_the_account_that_holds_the_session(
    setup: dict[str, Any]
) -> None:
    with override_registry(setup["registry"]):
        # The fake harness's launch plan sets its home to /tmp/fake: the default
        # account leaves it as it is, a managed one points it at its own home.
        for key, home in (("fake-agent:work1", setup["home"]), ("fake-agent:own1", "/tmp/fake"),
                          ("fake-agent:side1", setup["side"])):
            result = CliRunner().invoke(cli, ["resume", key, "--no-attention"])
            assert result.exit_code == 0, result.output
            record = json.loads((setup["cwd"] / "record.json").read_text())
            assert record["home"] == str(home)
    found = asyncio.run(setup["clanker"].find_session("fake-agent:work1",
                                                      workspace=setup["cwd"]))
    assert found.session.account == setup["record"].id


def test_a_removed_account_s_history_is_no_longer_listed(setup: dict[str, Any]) -> None:
    clanker: Clanker = setup["clanker"]
    asyncio.run(clanker.accounts.remove("work"))
    listing = asyncio.run(clanker.sessions(workspace=None))
    assert [s.native_id for s in listing.sessions] == ["own1", "side1"]
