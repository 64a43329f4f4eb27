"""``clanker sessions`` / ``resume`` / ``fork`` end to end, with a fake store and binary."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from attrs import evolve
from click.testing import CliRunner

from clanker.cli import cli
from clanker.cli.common import relative_time
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.registry import Registry, override_registry
from clanker.sessions.capability import SessionsContext
from clanker.sessions.types import SessionScan
from clanker.testing.doubles import prepend_to_path
from tests.core.test_cli import FAKE_AGENT
from tests.helpers import FakeSessions, make_sessions_plugin, write_fake_session, write_script

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "agent-home"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "fake-agent", FAKE_AGENT)
    prepend_to_path(monkeypatch, bin_dir)
    monkeypatch.setenv("FAKE_AGENT_HOME", str(home))
    monkeypatch.setenv("FAKE_RECORD", str(tmp_path / "record.json"))
    registry = Registry.from_plugins({"fake-agent": make_sessions_plugin(FakeSessions())},
                                     environ={})
    with override_registry(registry):
        yield home


def test_sessions_lists_this_workspace(world: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    write_fake_session(world, "abc", str(work), T0)
    write_fake_session(world, "zzz", str(tmp_path / "elsewhere"), T0 - timedelta(hours=1))
    monkeypatch.chdir(work)
    result = CliRunner().invoke(cli, ["sessions"])
    assert result.exit_code == 0
    assert "task abc #0" in result.output
    assert "zzz" not in result.output
    data = json.loads(CliRunner().invoke(cli, ["sessions", "--all", "--json"]).output)
    assert [s["key"] for s in data["sessions"]] == ["fake-agent:abc", "fake-agent:zzz"]
    assert data["complete"] is True
    assert data["scans"] == [
        {"harness": "fake-agent", "account": None, "skipped": 0, "truncated": False,
         "partial": None, "error": None}
    ]


def test_sessions_reports_skips_and_bounds_on_stderr(world: Path, tmp_path: Path) -> None:
    for index in range(3):
        write_fake_session(world, f"s{index}", str(tmp_path), T0)
    (world / "sessions" / "p" / "bad.jsonl").write_text("garbage")
    result = CliRunner().invoke(cli, ["sessions", "--all", "--limit", "2"])
    assert result.exit_code == 0
    assert "only the newest 2 sessions were read" in result.output


def test_show_and_resume_refind_the_session(world: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    write_fake_session(world, "abc", str(work), T0)
    shown = json.loads(CliRunner().invoke(cli, ["sessions", "show", "fake-agent:abc",
                                                "--json"]).output)
    assert shown["cwd"] == str(work.resolve())
    result = CliRunner().invoke(cli, ["resume", "fake-agent:abc", "--", "--yolo"])
    assert result.exit_code == 0
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["argv"] == ["resume", "abc", "--yolo"]
    assert record["cwd"] == str(work.resolve())
    CliRunner().invoke(cli, ["fork", "fake-agent:abc", "-m", "m2"])
    assert json.loads((tmp_path / "record.json").read_text())["argv"] == [
        "--model", "m2", "--fork", "abc"
    ]


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["resume", "fake-agent:missing"], 14, "no session missing"),
        (["resume", "nope:abc"], 2, "unknown harness 'nope'"),
        (["resume", "fake-agent:../etc"], 2, "alphanumeric"),
        (["sessions", "show", "fake-agent"], 2, "HARNESS:ID"),
    ],
)
def test_bad_selections_exit_with_clear_codes(world: Path, argv: list[str], code: int,
                                              message: str) -> None:
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == code
    assert message in result.output
    assert "Traceback" not in result.output


def test_resume_in_a_removed_directory_is_refused_when_the_harness_cannot(
    world: Path, tmp_path: Path
) -> None:
    write_fake_session(world, "abc", str(tmp_path / "removed"), T0)
    result = CliRunner().invoke(cli, ["resume", "fake-agent:abc"])
    assert result.exit_code == 3
    assert "no longer exists" in result.output
    assert not (tmp_path / "record.json").exists()


def test_relative_time() -> None:
    now = T0
    assert relative_time(now - timedelta(seconds=5), now) == "just now"
    assert relative_time(now - timedelta(minutes=5), now) == "5m ago"
    assert relative_time(now - timedelta(hours=3), now) == "3h ago"
    assert relative_time(now - timedelta(days=4), now) == "4d ago"
    assert relative_time(now - timedelta(days=90), now).count("-") == 2


class _OneStoreFails(FakeSessions):
    """The fake store, read in full, and yet one of the harness's stores failed."""

    async def discover(self, context: SessionsContext) -> SessionScan:
        found = await super().discover(context)
        return evolve(found, error=HarnessCapabilityError(
            ErrorKind.STORAGE_CHANGED, "another home of the harness", harness="fake-agent"))


def test_a_failed_store_blocks_a_selection_even_beside_a_match(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "agent-home"
    monkeypatch.setenv("FAKE_AGENT_HOME", str(home))
    work = tmp_path / "work"
    work.mkdir()
    write_fake_session(home, "abc", str(work), T0)
    registry = Registry.from_plugins({"fake-agent": make_sessions_plugin(_OneStoreFails())},
                                     environ={})
    with override_registry(registry):
        result = CliRunner().invoke(cli, ["resume", "fake-agent:abc"])
    assert result.exit_code == 12
    assert "another home of the harness" in result.output
