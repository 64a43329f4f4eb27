"""Registered hosts: the store, the CLI and ``check`` against the loopback sshd."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from clanker.api import Clanker
from clanker.cli import cli
from clanker.errors import ErrorKind
from clanker.hosts import HOSTS_FILE, HostError, HostStore
from tests.sshd import Sshd

# `codex --version` as codex-cli 0.171.0 prints it (docs/harnesses/codex.md).
_CODEX_DOUBLE = "#!/bin/sh\necho 'codex-cli 0.171.0'\n"


def test_hosts_are_added_listed_and_removed(tmp_path: Path) -> None:
    store = HostStore(tmp_path)
    store.add("box", "me@box.example")
    store.add("alias", "my-alias")
    assert [(h.name, h.target) for h in store.list()] == [("alias", "my-alias"),
                                                          ("box", "me@box.example")]
    assert store.remove("box").target == "me@box.example"
    assert [h.name for h in HostStore(tmp_path).list()] == ["alias"]


@pytest.mark.parametrize(("name", "target"), [
    ("Box", "x"), ("local", "x"), ("", "x"), ("a b", "x"), ("box", "-oProxyCommand=sh"),
    ("box", "a b"), ("box", ""),
])
def test_bad_names_and_targets_are_refused_and_nothing_is_written(
    tmp_path: Path, name: str, target: str
) -> None:
    with pytest.raises(HostError):
        HostStore(tmp_path).add(name, target)
    assert not (tmp_path / HOSTS_FILE).exists()


def test_a_taken_name_and_an_unknown_name_are_errors(tmp_path: Path) -> None:
    store = HostStore(tmp_path)
    store.add("box", "one")
    before = (tmp_path / HOSTS_FILE).read_bytes()
    with pytest.raises(HostError, match="exists"):
        store.add("box", "two")
    with pytest.raises(HostError, match="no host"):
        store.remove("nope")
    assert (tmp_path / HOSTS_FILE).read_bytes() == before


@pytest.mark.parametrize("content", [
    b"{", b"[]", b'{"version": 2, "hosts": []}',
    b'{"version": 1, "hosts": [{"name": "x", "target": "-oX"}]}',
    b'{"version": 1, "hosts": [{"name": "x", "target": "a"}, {"name": "x", "target": "b"}]}',
])
def test_a_hosts_file_that_is_not_understood_is_refused_not_rewritten(
    tmp_path: Path, content: bytes
) -> None:
    (tmp_path / HOSTS_FILE).write_bytes(content)
    with pytest.raises(HostError):
        HostStore(tmp_path).list()
    with pytest.raises(HostError):
        HostStore(tmp_path).add("box", "target")
    assert (tmp_path / HOSTS_FILE).read_bytes() == content


def test_the_cli_adds_lists_removes_and_reports_an_unreachable_host() -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["hosts", "add", "box", "ssh://nobody@127.0.0.1:9"]).exit_code == 0
    listed = runner.invoke(cli, ["hosts", "list", "--json"])
    assert json.loads(listed.stdout) == [{"name": "box", "target": "ssh://nobody@127.0.0.1:9"}]
    taken = runner.invoke(cli, ["hosts", "add", "box", "other", "--json"])
    assert taken.exit_code == 40
    assert json.loads(taken.stdout)["error"]["kind"] == "host"
    checked = runner.invoke(cli, ["hosts", "check", "box", "--json"])
    assert checked.exit_code == 41
    report = json.loads(checked.stdout)
    assert report["reachable"] is False
    assert report["error"]["kind"] == ErrorKind.TRANSPORT_FAILURE.value
    assert runner.invoke(cli, ["hosts", "check", "nope"]).exit_code == 40
    assert runner.invoke(cli, ["hosts", "remove", "box"]).exit_code == 0
    assert json.loads(runner.invoke(cli, ["hosts", "list", "--json"]).stdout) == []


def test_check_finds_harnesses_on_the_login_path_with_their_versions(
    sshd: Sshd, remote_bin: Path
) -> None:
    (remote_bin / "codex").write_text(_CODEX_DOUBLE)
    (remote_bin / "codex").chmod(0o755)
    clanker = Clanker(ssh_config_file=sshd.config_file)
    clanker.add_host("box", sshd.alias)
    result = asyncio.run(clanker.check_host("box"))
    assert result.reachable, result.error
    found = {i.provider.id: i for i in result.installations}
    assert found["codex"].path == str(remote_bin / "codex")
    assert found["codex"].version == "0.171.0"
    assert all(not i.installed for harness, i in found.items() if harness != "codex")


def test_a_connected_host_reports_its_own_environment_and_counts_executions(
    sshd: Sshd,
) -> None:
    clanker = Clanker(ssh_config_file=sshd.config_file)
    clanker.add_host("box", sshd.alias)

    async def probe() -> tuple[str, int, dict[str, str | None]]:
        environment = await clanker.connect_host("box")
        try:
            found = await environment.locate(["sh", "clanker-no-such-program"])
            return environment.environ["HOME"], environment.executor.executions, found
        finally:
            environment.close()

    home, executions, found = asyncio.run(probe())
    assert home == str(sshd.home)
    assert executions == 2  # the environment, then one lookup for every command
    assert found["clanker-no-such-program"] is None
    assert found["sh"] is not None and found["sh"].endswith("/sh")


def test_the_control_directory_must_be_private_and_ours() -> None:
    from clanker.environment.ssh import control_directory
    from clanker.errors import HarnessCapabilityError

    runtime = Path(tempfile.mkdtemp(prefix="ck-", dir="/tmp"))
    try:
        made = control_directory(runtime)
        assert made == runtime / "ssh"
        assert made.stat().st_mode & 0o777 == 0o700
        made.chmod(0o755)
        with pytest.raises(HarnessCapabilityError, match="not a private directory"):
            control_directory(runtime)
        made.rmdir()
        (runtime / "elsewhere").mkdir(mode=0o700)
        made.symlink_to(runtime / "elsewhere")
        with pytest.raises(HarnessCapabilityError, match="not a private directory"):
            control_directory(runtime)
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def test_a_lock_that_is_a_link_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    (tmp_path / ".hosts.json.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(HostError, match="cannot be changed"):
        HostStore(tmp_path).add("box", "target")
    assert not (tmp_path / HOSTS_FILE).exists()
    assert not (tmp_path / "elsewhere").exists()
