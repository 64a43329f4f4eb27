"""Removed-worktree resume through the real plugins, on captured sessions of each store.

Each fixture is a session a real CLI wrote (see its harness's fixture README),
placed in a temporary home with its recorded directory changed to a clanker
worktree that was then removed. OpenCode's store is read through its own CLI,
so it is not among them.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from attrs import frozen

from clanker.api import Clanker
from clanker.sessions.selection import DirectoryGoneError
from tests.core.checkouts.conftest import make_repository

FIXTURES = Path(__file__).parents[2] / "fixtures"


@frozen
class Store:
    harness: str
    native_id: str
    fixture: str
    recorded: str
    variable: str
    """The environment variable naming the harness's home, and where a session goes in it."""
    place: str


def _encode_claude(cwd: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def _encode_pi(cwd: str) -> str:
    return "--" + cwd.strip("/").replace("/", "-") + "--"


STORES = [
    Store("claude", "810adeb4-1b42-408d-83a8-e7fa0f6b854e",
          "claude/sessions/claude-config/projects/-home-dev-src-app/"
          "810adeb4-1b42-408d-83a8-e7fa0f6b854e.jsonl",
          "/home/dev/src/app", "CLAUDE_CONFIG_DIR", "projects/{claude}"),
    Store("codex", "01a22bbd-9b3a-7f73-ae36-75a8131c0999",
          "codex/sessions/codex-home/sessions/2026/11/30/"
          "rollout-2026-11-30T09-16-16-01a22bbd-9b3a-7f73-ae36-75a8131c0999.jsonl",
          "/home/dev/src/my project.v2", "CODEX_HOME", "sessions/2026/11/30"),
    Store("pi", "01a22b88-3feb-75b8-aeec-e180f9f7f187",
          "pi/session-loopback--2026-11-30T08-17-59-277Z_01a22b88-3feb-75b8-aeec-e180f9f7f187"
          ".jsonl", "/home/dev/src/pirepo", "PI_CODING_AGENT_DIR", "sessions/{pi}"),
    Store("omp", "01a22b8d-3fe3-723f-b65b-0b7774ede243",
          "omp/session-loopback-fork--2026-11-30T08-23-26-947Z_"
          "01a22b8d-3fe3-723f-b65b-0b7774ede243.jsonl",
          "/home/dev/src/omprepo", "HOME", ".omp/agent/sessions/{omp}"),
    # A dump of the SQLite store, loaded into a database of the temporary home.
    Store("hermes", "20261130_090406_abb367",
          "hermes/sessions/hermes-home/.hermes/state.sql", "/home/dev/src/gone", "HERMES_HOME",
          "state.db"),
]


def _place(store: Store, root: Path, cwd: str) -> None:
    source = FIXTURES / store.fixture
    if source.suffix == ".sql":
        root.mkdir()
        dump = source.read_text().replace(f"'{store.recorded}'", f"'{cwd}'")
        assert f"'{cwd}'" in dump
        with contextlib.closing(sqlite3.connect(root / store.place)) as db:
            # SQLite's own table is in the dump and cannot be created by hand.
            db.executescript("\n".join(line for line in dump.splitlines()
                                        if not line.startswith("CREATE TABLE sqlite_sequence")))
        return
    folder = root / store.place.format(claude=_encode_claude(cwd), pi=_encode_pi(cwd),
                                       omp="-" + cwd.strip("/").replace("/", "-"))
    folder.mkdir(parents=True)
    text = source.read_text().replace(f'"cwd":"{store.recorded}"', f'"cwd":"{cwd}"')
    assert f'"cwd":"{cwd}"' in text
    (folder / source.name).write_text(text)


@pytest.mark.parametrize("store", STORES, ids=lambda s: s.harness)
def test_each_store_follows_its_harness_fact(store: Store, tmp_path: Path, home: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repository(tmp_path / "projets" / "naïve app")
    # OMP reads Pi's variable too: only the home under test may be named.
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    monkeypatch.setenv(store.variable, str(tmp_path / "harness-home"))
    clanker = Clanker()
    made = asyncio.run(clanker.create_worktree(repo, "feature/resume"))
    _place(store, tmp_path / "harness-home", made.path)
    shutil.rmtree(made.path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    key = f"{store.harness}:{store.native_id}"
    provider = clanker.harness(store.harness)
    assert provider.sessions is not None
    if provider.sessions.resumes_without_original_directory:
        found = asyncio.run(clanker.find_session(key, workspace=elsewhere))
        assert found.launch_cwd == str(repo)
        assert found.notice is not None and "was removed" in found.notice
    else:
        with pytest.raises(DirectoryGoneError) as gone:
            asyncio.run(clanker.find_session(key, workspace=elsewhere))
        assert gone.value.removed is not None and gone.value.removed.recreatable
        found = asyncio.run(clanker.find_session(key, workspace=elsewhere,
                                                 recreate_worktree=True))
        assert found.launch_cwd == made.path and Path(made.path).is_dir()
    assert found.session.native_id == store.native_id
