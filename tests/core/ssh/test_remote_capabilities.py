"""Capabilities through an SSH host: providers unchanged, only the environment differs."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from clanker.api import Clanker
from clanker.cli import cli
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.models.types import CatalogSource, ModelCatalog
from tests.sshd import Sshd

_FIXTURES = Path(__file__).parents[2] / "fixtures"


_LISTING = (_FIXTURES / "opencode" / "models-offline.txt").read_text()


@pytest.fixture
def remote_opencode(remote_bin: Path) -> Path:
    """``opencode models`` on the host as opencode-ai 1.18.33 answers it offline
    (tests/fixtures/opencode/models-offline.txt, captured from the real CLI)."""
    double = remote_bin / "opencode"
    double.write_text(f"#!/bin/sh\n[ \"$1\" = models ] || exit 2\n"
                      f"cat <<'LISTING'\n{_LISTING}LISTING\n")
    double.chmod(0o755)
    return double


def test_models_of_a_host_come_from_the_host_and_are_cached_apart(
    sshd: Sshd, remote_opencode: Path
) -> None:
    local = Clanker(ssh_config_file=sshd.config_file)
    local.add_host("box", sshd.alias)

    async def on_host(refresh: bool) -> ModelCatalog:
        async with await local.on_host("box") as remote:
            return await remote.models("opencode", refresh=refresh)

    live = asyncio.run(on_host(refresh=True))
    assert (live.source, live.failure) == (CatalogSource.LIVE, None)
    assert [model.id for model in live.models] == _LISTING.split()
    remote_opencode.unlink()  # from now on only a cache can answer with that listing
    cached = asyncio.run(on_host(refresh=False))
    assert cached.source is CatalogSource.CACHE
    assert cached.models == live.models
    # Same cache directory, this machine: the host's entry is not this machine's.
    assert asyncio.run(local.models("opencode")).source is not CatalogSource.CACHE


def test_host_options_refuse_unknown_and_unreachable_hosts() -> None:
    runner = CliRunner()
    unknown = runner.invoke(cli, ["models", "opencode", "--host", "nope", "--json"])
    assert unknown.exit_code == 40
    assert runner.invoke(cli, ["hosts", "add", "box", "ssh://nobody@127.0.0.1:9"]).exit_code == 0
    for command in (["models", "opencode"], ["usage"]):
        unreachable = runner.invoke(cli, [*command, "--host", "box"])
        assert unreachable.exit_code == 13, unreachable.output
        assert "connection was refused" in unreachable.stderr


def test_what_stays_on_this_machine_is_refused_for_a_host(tmp_path: Path) -> None:
    from clanker.environment.ssh import SshEnvironment
    from clanker.hosts import Host
    from clanker.launch.request import LaunchRequest
    from clanker.launch.service import LaunchOptions

    # Never connected: every refusal comes before anything is run.
    environment = SshEnvironment(Host("box", "box.invalid"), control_dir=tmp_path)
    clanker = Clanker(environment=environment)
    attempts = {
        "commit messages": lambda: asyncio.run(clanker.commit_message("codex", tmp_path)),
        "isolated worktrees": lambda: asyncio.run(clanker.create_worktree(tmp_path, "b")),
        "the agent bridge": lambda: clanker.prepare_launch(
            "codex", LaunchRequest(cwd=str(tmp_path), transport="ssh"),
            LaunchOptions(bridge=True)),
    }
    for what, attempt in attempts.items():
        with pytest.raises(HarnessCapabilityError) as caught:
            attempt()
        assert caught.value.kind is ErrorKind.UNSUPPORTED
        assert f"{what} is not available for SSH hosts" in str(caught.value)
    assert environment.executor.executions == 0
    assert not clanker.accounts.managed_supported


def test_each_host_answers_beside_a_host_that_cannot_be_reached(
    sshd: Sshd, remote_opencode: Path
) -> None:
    clanker = Clanker(ssh_config_file=sshd.config_file)
    clanker.add_host("box", sshd.alias)
    clanker.add_host("dead", "ssh://nobody@127.0.0.1:9")
    outcomes = asyncio.run(clanker.each_host(
        lambda place: place.models("opencode", refresh=True)))
    assert [o.host for o in outcomes] == [None, "box", "dead"]
    local, box, dead = outcomes
    assert local.error is None and local.value is not None
    assert box.value is not None
    assert [m.id for m in box.value.models] == _LISTING.split()
    assert dead.value is None and dead.error is not None
    assert dead.error.kind.value == "transport-failure"


def test_all_hosts_in_the_cli_reports_each_place() -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["hosts", "add", "dead", "ssh://nobody@127.0.0.1:9"]).exit_code == 0
    result = runner.invoke(cli, ["models", "opencode", "--all-hosts", "--json"])
    entries = json.loads(result.stdout)
    assert [entry["host"] for entry in entries] == [None, "dead"]
    assert entries[1]["catalog"] is None
    assert entries[1]["error"]["kind"] == "transport-failure"
    assert result.exit_code != 0
    both = runner.invoke(cli, ["models", "opencode", "--all-hosts", "--host", "dead"])
    assert both.exit_code == 2


def test_history_on_a_host_without_stores_is_empty_store_by_store(sshd: Sshd) -> None:
    clanker = Clanker(ssh_config_file=sshd.config_file)
    clanker.add_host("box", sshd.alias)

    async def listing() -> dict[str, HarnessCapabilityError | None]:
        async with await clanker.on_host("box") as remote:
            found = await remote.sessions(workspace=None)
            assert list(found.sessions) == []
            return {scan.harness: scan.scan.error for scan in found.scans}

    errors = asyncio.run(listing())
    # Stores read from files are empty there, and OpenCode, not installed on the host
    # and never used there, has nothing to list.
    assert errors and all(error is None for error in errors.values())
    assert "opencode" in errors


def test_opencode_data_left_on_a_host_without_opencode_is_binary_unavailable(
    sshd: Sshd,
) -> None:
    """Its data directory holds sessions only its command can list."""
    if os.geteuid() != 0:
        pytest.skip("writing in the host user's home needs the dedicated test user (root)")
    clanker = Clanker(ssh_config_file=sshd.config_file)
    clanker.add_host("box", sshd.alias)

    async def listing() -> HarnessCapabilityError | None:
        async with await clanker.on_host("box") as remote:
            found = await remote.sessions(workspace=None, harnesses=["opencode"])
            return found.scans[0].scan.error

    (sshd.home / ".local" / "share" / "opencode").mkdir(parents=True)
    try:
        error = asyncio.run(listing())
    finally:
        shutil.rmtree(sshd.home / ".local")
    assert error is not None and error.kind is ErrorKind.BINARY_UNAVAILABLE


def test_usage_of_all_hosts_reports_each_place() -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["hosts", "add", "dead", "ssh://nobody@127.0.0.1:9"]).exit_code == 0
    result = runner.invoke(cli, ["usage", "--all-hosts", "--json"])
    entries = json.loads(result.stdout)
    assert [entry["host"] for entry in entries] == [None, "dead"]
    assert isinstance(entries[0]["entries"], list) and entries[0]["error"] is None
    assert entries[1]["entries"] is None
    assert entries[1]["error"]["kind"] == "transport-failure"
    assert result.exit_code != 0
    text = runner.invoke(cli, ["usage", "--all-hosts"])
    assert "[local]" in text.stdout and "[dead]" in text.stdout
