"""``clanker accounts`` and ``clanker launch --account``: a person with one account sees
only the default; a managed one is added, chosen, used by a launch, and removed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from clanker.cli import cli
from clanker.errors import EXIT_ACCOUNT
from clanker.registry import override_registry
from tests.core.accounts.test_service import VARIABLE, Provider
from tests.helpers import fake_agent_registry, install_fake_agent

# The harness double records the home variable it was started with.
AGENT = f"""
    import json, os
    with open(os.environ["FAKE_RECORD"], "w") as handle:
        json.dump({{"home": os.environ.get("{VARIABLE}")}}, handle)
"""


@pytest.fixture
def provider() -> Provider:
    return Provider()


@pytest.fixture
def invoke(tmp_path: Path, provider: Provider, monkeypatch: pytest.MonkeyPatch
           ) -> Any:
    monkeypatch.setenv("CLANKER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(VARIABLE, raising=False)
    install_fake_agent(tmp_path, monkeypatch, AGENT)
    monkeypatch.setenv("FAKE_RECORD", str(tmp_path / "record.json"))
    registry = fake_agent_registry(accounts=provider)

    def run(*args: str, stdin: str | None = None) -> Result:
        with override_registry(registry):
            return CliRunner().invoke(cli, list(args), input=stdin)
    return run


def launched_home(tmp_path: Path) -> str | None:
    return json.loads((tmp_path / "record.json").read_text())["home"]  # type: ignore[no-any-return]


def test_one_account_only_ever_shows_the_default(invoke: Any, tmp_path: Path) -> None:
    listed = invoke("accounts", "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == {"managed_supported": True, "accounts": [{
        "harness": "fake-agent", "id": "default", "selected": True, "managed": False,
        "label": None, "email": None, "plan": None, "status": None,
        "identity_changed": None, "created_at": None}]}
    launched = invoke("launch", "fake-agent", "--no-attention")
    assert launched.exit_code == 0, launched.output
    assert launched_home(tmp_path) is None
    assert not (tmp_path / "home" / "state" / "accounts").exists()


def test_an_account_is_added_chosen_used_and_removed(invoke: Any, tmp_path: Path) -> None:
    added = invoke("accounts", "add", "fake-agent", "--label", "work", "--no-browser")
    assert added.exit_code == 0, added.output
    assert "Sign in at: https://sign-in.example/?code=1" in added.stderr
    listed = json.loads(invoke("accounts", "list", "--json").stdout)["accounts"]
    managed = listed[1]
    assert (managed["label"], managed["email"], managed["status"], managed["selected"]) == (
        "work", "person@example.com", "connected", False)
    home = str(tmp_path / "home" / "state" / "accounts" / "fake-agent" / managed["id"])
    assert invoke("launch", "fake-agent", "--no-attention", "--account", "work").exit_code == 0
    assert launched_home(tmp_path) == home
    assert invoke("accounts", "select", "fake-agent", "work").exit_code == 0
    assert invoke("launch", "fake-agent", "--no-attention").exit_code == 0
    assert launched_home(tmp_path) == home
    # A resume continues a session of the harness's own home: the default account.
    assert invoke("launch", "fake-agent", "--no-attention", "--resume", "s1").exit_code == 0
    assert launched_home(tmp_path) is None
    table = invoke("accounts").stdout
    assert "work *" in table and "person@example.com" in table
    refused = invoke("accounts", "remove", "work", stdin="n\n")
    assert refused.exit_code == EXIT_ACCOUNT and Path(home).is_dir()
    removed = invoke("accounts", "remove", "work", "--yes")
    assert removed.exit_code == 0, removed.output
    assert not Path(home).exists()
    assert invoke("launch", "fake-agent", "--no-attention").exit_code == 0
    assert launched_home(tmp_path) is None  # the selection fell back to the default


def test_refusals_are_one_line_with_their_exit_code(invoke: Any, provider: Provider,
                                                    tmp_path: Path) -> None:
    missing = invoke("launch", "fake-agent", "--no-attention", "--account", "nobody")
    assert missing.exit_code == EXIT_ACCOUNT
    assert missing.stderr == ("clanker: no managed account is called 'nobody' "
                              "(`clanker accounts` lists them)\n")
    assert not (tmp_path / "record.json").exists()  # nothing was started
    listed = invoke("accounts", "list", "--json")
    assert listed.exit_code == 0
    chosen = invoke("accounts", "select", "fake-agent", "nobody")
    assert chosen.exit_code == EXIT_ACCOUNT and chosen.stderr.startswith("clanker: no managed")
    assert invoke("accounts", "remove", "default").exit_code == EXIT_ACCOUNT
    bad = invoke("accounts", "add", "fake-agent", "--label", "x" * 65, "--no-browser")
    assert bad.exit_code == 2 and provider.calls == []
