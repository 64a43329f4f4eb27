"""A Claude Code transcript that holds no conversation yet is not an unreadable file.

Claude Code 2.1.197 creates `<uuid>.jsonl` for a title before any message (`claude -n
NAME`, then quit) and appends `mode` / `permission-mode` records when it quits; such a
file cannot be resumed (by path: "Unable to load transcript from file", by id: "No
conversation found"). Fixtures: tests/fixtures/claude/sessions-empty (README section
"Transcripts without a conversation").
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

import clanker_claude
from clanker.environment.files import read_sample
from clanker.environment.local import LocalEnvironment
from clanker.ids import HarnessId
from clanker.registry import HarnessProvider, Registry
from clanker.sessions.service import SessionService
from clanker.stores import EMPTY
from clanker.testing.sessions import sample_of_bytes
from clanker_claude.summaries import HEAD_BYTES, TAIL_BYTES, holds_no_conversation, summarize

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "claude"
CAPTURED = FIXTURES / "sessions" / "claude-config"
EMPTY_STORE = FIXTURES / "sessions-empty" / "claude-config" / "projects" / "-home-dev-src-app"
NAMED = "609ade25-1871-40f3-ad0b-bd14db2fb6d1"  # claude -n myname, /exit
RESUMED = "13118261-81d1-463e-817f-9938e875687e"  # -n, plan mode, /exit; picker resume, quit
MODES = "3f0c2d1e-8b7a-4c6d-9e5f-a1b2c3d4e5f6"  # mode + permission-mode only: 185 bytes
NOTHING = (NAMED, RESUMED, MODES)
LISTED = ["810adeb4-1b42-408d-83a8-e7fa0f6b854e", "f9538709-d6ed-4910-9a11-6d4ba0c0b85a",
          "7f580a28-e36b-442e-8a18-32ece3323a24"]


def provider() -> HarnessProvider:
    registry = Registry.from_plugins({"claude": clanker_claude.plugin}, environ={})
    return registry.get_provider(HarnessId("claude"))


@pytest.fixture
def store(tmp_path: Path) -> dict[str, str]:
    """The captured store with the three transcripts that hold no conversation added."""
    shutil.copytree(CAPTURED, tmp_path / "claude")
    project = tmp_path / "claude" / "projects" / "-home-dev-src-app"
    for path in EMPTY_STORE.iterdir():
        shutil.copy(path, project / path.name)
    return {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
            "PATH": os.environ["PATH"]}


@pytest.mark.parametrize("native_id", NOTHING)
def test_a_captured_transcript_without_a_conversation_is_empty(native_id: str) -> None:
    path = EMPTY_STORE / f"{native_id}.jsonl"
    found = summarize(read_sample(path, head_bytes=HEAD_BYTES, tail_bytes=TAIL_BYTES))
    assert found is EMPTY


def test_the_listing_neither_shows_nor_counts_them(store: dict[str, str], tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # Twice: parsed, then answered by the disk cache of a new service (a new process).
    for _ in range(2):
        service = SessionService(environment=LocalEnvironment(store), cache_dir=cache)
        listing = asyncio.run(service.discover([provider()], workspace=None))
        [scan] = listing.scans
        assert scan.scan.skipped == 0
        assert listing.complete
        assert [s.native_id for s in listing.sessions] == LISTED
    # The disk cache remembers them as empty, not as unreadable.
    rows = json.loads((cache / "sessions" / "claude.json").read_text())["rows"]
    assert sorted(Path(row[0]).stem for row in rows if row[4:] == ["empty"]) == sorted(NOTHING)


@pytest.mark.parametrize("native_id", NOTHING)
def test_one_is_not_found_by_id_either(store: dict[str, str], native_id: str) -> None:
    # Claude itself cannot resume it, by id or by path: clanker says "not found".
    service = SessionService(environment=LocalEnvironment(store), cache_dir=None)
    assert asyncio.run(service.find(provider(), native_id)) is None


def test_an_unreadable_transcript_is_still_a_skip(store: dict[str, str], tmp_path: Path) -> None:
    project = tmp_path / "claude" / "projects" / "-home-dev-src-app"
    damaged = (EMPTY_STORE / f"{MODES}.jsonl").read_bytes()[:-40]  # its last line cut
    (project / "aaaaaaaa-2222-4333-8444-555555555555.jsonl").write_bytes(damaged)
    service = SessionService(environment=LocalEnvironment(store), cache_dir=None)
    listing = asyncio.run(service.discover([provider()], workspace=None))
    assert listing.scans[0].scan.skipped == 1


SID = "11111111-2222-4333-8444-555555555555"


def sample(data: bytes, *, head: int = HEAD_BYTES) -> object:
    return summarize(sample_of_bytes(data, head_bytes=head, tail_bytes=TAIL_BYTES,
                                     path=Path(f"/p/-w/{SID}.jsonl")))


def meta(kind: str, session: str = SID) -> bytes:
    return f'{{"type":"{kind}","{kind}":"x","sessionId":"{session}"}}\n'.encode()


def test_what_counts_as_no_conversation() -> None:
    assert sample(b"") is EMPTY  # an empty file
    assert sample(meta("mode") + meta("custom-title")) is EMPTY
    assert sample(meta("mode") + b"\n\n") is EMPTY  # blank lines are no records
    # Not provably empty: a skip.
    assert sample(meta("mode") + b"not json\n") is None
    assert sample(meta("mode", "99999999-2222-4333-8444-555555555555")) is None
    assert sample(meta("mode") + b'{"type":"user","uuid":"u"}\n') is None
    assert sample(b'{"type":"mode","uuid":"u","sessionId":"%s"}\n' % SID.encode()) is None
    assert sample(b'["mode"]\n') is None
    # Only what was read whole can be known to hold nothing.
    assert sample(meta("mode") * 10, head=100) is None


def test_only_a_transcript_name_can_be_empty() -> None:
    data = sample_of_bytes(meta("mode"), path=Path("/p/-w/agent-abc.jsonl"))
    assert not holds_no_conversation(data)
    assert summarize(data) is None
