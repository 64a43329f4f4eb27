"""``clanker sessions --json``: ``complete`` and the ``incomplete`` list that says why not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from clanker.cli import cli
from clanker.cli.common import _BATCH
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.registry import Registry, override_registry
from clanker.sessions.capability import SessionsContext
from clanker.sessions.types import SessionScan
from tests.helpers import FakeSessions, make_sessions_plugin, write_fake_session

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PARTIAL = "lists only the project of the directory it runs in"


class Failing(FakeSessions):
    async def discover(self, context: SessionsContext) -> SessionScan:
        raise HarnessCapabilityError(ErrorKind.NOT_CONFIGURED, "the store cannot be read")


class OneProject(FakeSessions):
    """A harness that, like OpenCode, can list only part of its history from here."""

    async def discover(self, context: SessionsContext) -> SessionScan:
        found = await super().discover(context)
        return SessionScan(sessions=found.sessions, truncated=found.truncated, partial=PARTIAL)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "agent-home"
    monkeypatch.setenv("FAKE_AGENT_HOME", str(home))
    monkeypatch.setenv("CLANKER_HOME", str(tmp_path / "clanker"))
    registry = Registry.from_plugins({
        "fake-agent": make_sessions_plugin(FakeSessions()),
        "broken-agent": make_sessions_plugin(Failing(), "broken-agent"),
        "partial-agent": make_sessions_plugin(OneProject(), "partial-agent"),
    }, environ={})
    with override_registry(registry):
        yield home


def listing(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["sessions", "--all", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)  # type: ignore[no-any-return]


def test_a_complete_listing_has_nothing_incomplete(home: Path, tmp_path: Path) -> None:
    write_fake_session(home, "abc", str(tmp_path), T0)
    data = listing("--harness", "fake-agent")
    assert (data["complete"], data["incomplete"]) == (True, [])


def test_each_reason_is_named_per_harness(home: Path, tmp_path: Path) -> None:
    for index in range(3):
        write_fake_session(home, f"s{index}", str(tmp_path), T0)
    data = listing("--limit", "2")
    assert data["complete"] is False
    by_harness = {(gap["harness"], gap["reason"]): gap for gap in data["incomplete"]}
    assert set(by_harness) == {("broken-agent", "error"), ("fake-agent", "limit"),
                               ("partial-agent", "limit"), ("partial-agent", "partial")}
    assert by_harness["broken-agent", "error"]["kind"] == "not-configured"
    assert "the store cannot be read" in by_harness["broken-agent", "error"]["detail"]
    assert by_harness["partial-agent", "partial"] == {
        "harness": "partial-agent", "reason": "partial", "kind": None, "detail": PARTIAL}
    assert by_harness["fake-agent", "limit"]["kind"] is None


def test_skipped_files_do_not_make_a_listing_incomplete(home: Path, tmp_path: Path) -> None:
    write_fake_session(home, "abc", str(tmp_path), T0)
    (home / "sessions" / "p" / "bad.jsonl").write_text("garbage")
    data = listing("--harness", "fake-agent")
    assert data["scans"][0]["skipped"] == 1
    assert (data["complete"], data["incomplete"]) == (True, [])


# Around the batch's size, where a write ends and the next begins.
@pytest.mark.parametrize("count", [0, 1, _BATCH - 1, _BATCH, _BATCH + 1, 2 * _BATCH + 7, 1100])
def test_a_streamed_listing_is_the_same_json_one_item_a_line(
    count: int, capsys: pytest.CaptureFixture[str],
) -> None:
    from clanker.cli.common import echo_json_listing

    items = [{"id": f"s{n}", "title": "Ünïcode \"quoted\"\nline", "n": n} for n in range(count)]
    document = {"workspace": None, "incomplete": [{"harness": "x", "detail": None}],
                "sessions": None, "scans": [{"harness": "x", "skipped": 0}]}
    echo_json_listing(document, "sessions", iter(items))
    out = capsys.readouterr().out
    assert json.loads(out) == {**document, "sessions": items}
    assert out.endswith("}\n")
    lines = out.splitlines()
    assert sum(line.startswith('    {"id": ') for line in lines) == count
