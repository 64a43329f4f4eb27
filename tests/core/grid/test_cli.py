"""``clanker grid``, ``status``, ``watch`` and ``attention explain``, end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from clanker.cli import cli
from clanker.errors import EXIT_GRID_UNAVAILABLE, EXIT_USAGE
from clanker.grid import daemon
from clanker.grid.client import GridClient
from clanker.grid.protocol import Registration
from clanker.testing.doubles import write_script
from tests.core.grid.conftest import eventually, root


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def agent(home: Path) -> tuple[GridClient, Registration]:
    """A running daemon with one registered terminal (launched by this test process)."""
    client = GridClient(daemon.ensure_running())
    registration = client.register(harness="fake-agent", workspace="/tmp", cwd="/tmp",
                                   launcher_pid=os.getpid())
    return client, registration


def test_status_without_a_grid_says_nothing_runs_and_starts_nothing(home: Path) -> None:
    result = invoke("status")
    assert result.exit_code == 0
    assert "Nothing is running" in result.output
    result = invoke("status", "--json")
    assert (result.exit_code, json.loads(result.output)) == (0, [])
    assert not daemon.grid_location().directory.exists()


def test_status_lists_terminals_with_state_and_location(
    agent: tuple[GridClient, Registration],
) -> None:
    client, reg = agent
    client.deliver(reg.terminal, reg.token,
                   [root("turn_started", turnId="u1", cwd="/srv/elsewhere")])
    result = invoke("status", "--json")
    assert result.exit_code == 0
    [record] = json.loads(result.output)
    assert record["terminal"] == reg.terminal
    assert record["harness"] == "fake-agent"
    assert record["attention"] == "working"
    assert (record["cwd"], record["location"]) == ("/tmp", "/srv/elsewhere")
    assert record["snapshot"]["runtime"]["state"] == "running"
    assert reg.token not in result.output
    table = invoke("status")
    assert table.exit_code == 0
    assert "TERMINAL" in table.output
    assert reg.terminal in table.output
    assert "working" in table.output
    assert "/srv/elsewhere" in table.output


def test_attention_explain(agent: tuple[GridClient, Registration]) -> None:
    client, reg = agent
    client.deliver(reg.terminal, reg.token, [root("session_started", nativeEvent="Start")])
    result = invoke("attention", "explain", reg.terminal, "--json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["explanation"]["runtime"] == "idle"
    assert data["explanation"]["recent"][-1]["decision"] == "accepted"
    human = invoke("attention", "explain", reg.terminal[:6])  # a unique prefix
    assert human.exit_code == 0
    assert "session_started -> accepted (Start)" in human.output
    assert reg.token not in human.output + result.output
    missing = invoke("attention", "explain", "t-nothere")
    assert missing.exit_code == EXIT_USAGE


def test_watch_and_explain_need_a_running_grid(home: Path) -> None:
    for args in (["watch"], ["watch", "--json"], ["attention", "explain", "t-1"]):
        result = invoke(*args)
        assert result.exit_code == EXIT_GRID_UNAVAILABLE, args
        assert "not running" in result.output


def test_grid_start_status_stop(home: Path) -> None:
    started = invoke("grid", "start")
    assert started.exit_code == 0
    assert "started" in started.output
    again = invoke("grid", "start")
    assert "already running" in again.output
    status = invoke("grid", "status", "--json")
    data = json.loads(status.output)
    assert data["running"] is True
    assert data["socket"] == str(home / "run" / "grid" / "grid.sock")
    assert "The grid is running" in invoke("grid", "status").output
    assert invoke("grid", "stop").output.strip() == "The grid stopped."
    assert invoke("grid", "stop").output.strip() == "The grid is not running."
    assert json.loads(invoke("grid", "status", "--json").output)["running"] is False


def test_an_unsafe_grid_directory_is_exit_18(home: Path) -> None:
    directory = daemon.grid_location().directory
    directory.mkdir(parents=True, mode=0o700)
    directory.chmod(0o777)
    result = invoke("grid", "start")
    assert result.exit_code == EXIT_GRID_UNAVAILABLE
    assert "needs 0700" in result.output
    assert invoke("status").exit_code == EXIT_GRID_UNAVAILABLE


def watch_process(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "clanker.cli", "watch", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env or dict(os.environ),
    )


def read_json_line(process: subprocess.Popen[str]) -> dict[str, Any]:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, process.stderr.read() if process.stderr else ""
    data: dict[str, Any] = json.loads(line)
    return data


def test_watch_json_streams_one_line_per_revision(
    agent: tuple[GridClient, Registration],
) -> None:
    client, reg = agent
    process = watch_process("--json")
    try:
        first = read_json_line(process)
        assert (first["kind"], first["terminal"], first["attention"]) == (
            "snapshot", reg.terminal, "unknown")
        client.deliver(reg.terminal, reg.token, [root("turn_started", turnId="u1")])
        second = read_json_line(process)
        assert (second["kind"], second["attention"]) == ("revision", "working")
        assert second["revision"] > first["revision"]
        client.retire(reg.terminal, reg.token)
        third = read_json_line(process)
        assert (third["kind"], third["snapshot"]) == ("revision", None)
        assert third["revision"] > second["revision"]
        daemon.stop()
        assert process.wait(timeout=30) == EXIT_GRID_UNAVAILABLE
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def test_watch_notify_rings_and_notifies_on_needs_input_and_done(
    agent: tuple[GridClient, Registration], short_dir: Path
) -> None:
    client, reg = agent
    bin_dir = short_dir / "bin"
    bin_dir.mkdir()
    record = short_dir / "notified"
    write_script(bin_dir, "notify-send", f"""
        import sys
        with open({str(record)!r}, "a") as handle:
            handle.write(sys.argv[-1] + "\\n")
    """)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    process = watch_process("--json", "--notify", env=env)
    try:
        read_json_line(process)  # the snapshot
        client.deliver(reg.terminal, reg.token, [root("turn_started", turnId="u1")])
        read_json_line(process)
        client.deliver(reg.terminal, reg.token,
                       [root("input_requested", turnId="u1", inputId="i1")])
        assert read_json_line(process)["attention"] == "needs-input"
        client.deliver(reg.terminal, reg.token, [
            root("input_resolved", turnId="u1", inputId="i1"),
            root("turn_completed", turnId="u1")])
        read_json_line(process)
        assert read_json_line(process)["attention"] == "done"
        eventually(lambda: record.exists() and len(record.read_text().splitlines()) == 2)
        # Notifiers run concurrently: their order in the file is not the events' order.
        assert sorted(record.read_text().splitlines()) == [
            "fake-agent is done in /tmp", "fake-agent needs input in /tmp"]
    finally:
        process.kill()
        _, stderr = process.communicate()
    assert stderr.count("\a") == 2  # with --json the bell goes to stderr
