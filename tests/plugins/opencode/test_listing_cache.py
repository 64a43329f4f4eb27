"""OpenCode's listing, kept across processes while its database's files are unchanged.

Checked against opencode-ai 1.18.33 (docs/harnesses/opencode.md, "The listing's answer,
kept"): every `opencode session list` (and `opencode db path`) writes to the database's
files as it opens them, before its query, without changing their sizes; a new session
changes them too. The double below does the same.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import clanker_opencode
from clanker.environment.local import LocalEnvironment
from clanker.ids import HarnessId
from clanker.registry import HarnessProvider, Registry
from clanker.sessions.answers import AnswerCache, FileState, look, settled
from clanker.sessions.service import SessionListing, SessionService
from clanker.testing.doubles import write_script
from clanker_opencode.sessions import parse_db_path, store_files
from clanker_opencode.summaries import PARTIAL_WITHOUT_WORKSPACE

ROOT = Path(__file__).resolve().parents[3]
STORE = ROOT / "tests" / "fixtures" / "opencode" / "sessions"
# Where the captured sessions were made (the git project, the 105-session one).
CAPTURED_DIRS = ("/home/dev/src/alpha", "/home/dev/src/many")
NEW_ID = "ses_dd459764affevH4X4nlzzHZzIQ"  # the newest row of the captured listing

DOUBLE = r'''
"""A stand-in for opencode 1.18.33's `session list --format json --max-count N` and
`db path`, speaking their captured output (tests/fixtures/opencode/sessions).

The database is found as opencode finds it (OPENCODE_DB, else XDG_DATA_HOME or
~/.local/share, then opencode/opencode.db). Its rows are the JSON list in `<db>.rows`
(a captured listing), printed pretty as opencode prints them, or nothing when empty.
Like opencode, each run opens the database first: the database and `-shm` are touched
(a checkpoint) and a listing rewrites `-wal` in place (the project upsert), sizes
unchanged, all before the rows are read. Every call is appended to $OC_DOUBLE_LOG.
"""
import json, os, sys

args = sys.argv[1:]
with open(os.environ["OC_DOUBLE_LOG"], "a") as log:
    log.write(json.dumps({"args": args, "cwd": os.getcwd()}) + "\n")
data = os.path.join(os.environ.get("XDG_DATA_HOME") or
                    os.path.join(os.environ["HOME"], ".local", "share"), "opencode")
db = os.environ.get("OPENCODE_DB") or "opencode.db"
if db != ":memory:" and not os.path.isabs(db):
    db = os.path.join(data, db)

def opened():
    if db == ":memory:":
        return
    os.makedirs(os.path.dirname(db), exist_ok=True)
    for path in (db, db + "-shm"):
        with open(path, "ab"):
            pass
        os.utime(path)

if args == ["db", "path"]:
    opened()
    print(db)
elif args[:4] == ["session", "list", "--format", "json"]:
    if os.environ.get("OC_DOUBLE_FAIL") == "list":
        sys.exit(1)
    opened()
    if db != ":memory:":
        with open(db + "-wal", "ab") as wal:
            pass
        with open(db + "-wal", "r+b") as wal:
            wal.write(wal.read(1) or b"")  # same size, a new time
        os.utime(db + "-wal")
    rows = json.load(open(db + ".rows")) if os.path.exists(db + ".rows") else []
    if rows:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
else:
    sys.exit(1)
'''


def rows(workspace: Path, name: str = "session-list-git-project.json") -> list[dict[str, Any]]:
    """A captured listing, its sessions moved from where they were made to ``workspace``."""
    captured = json.loads((STORE / name).read_text())
    for row in captured:
        for made in CAPTURED_DIRS:
            row["directory"] = row["directory"].replace(made, str(workspace))
    return captured


class World:
    """A home with OpenCode's database (the double's), a workspace, and the double on PATH."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.home = tmp_path / "home"
        self.workspace = tmp_path / "work" / "alpha"
        self.workspace.mkdir(parents=True)
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.log = tmp_path / "calls.jsonl"
        self.log.touch()
        self.binary = write_script(self.bin, "opencode", DOUBLE)
        self.env = {"HOME": str(self.home), "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
                    "OC_DOUBLE_LOG": str(self.log), "CLANKER_HOME": str(tmp_path / "clanker"),
                    "CLANKER_LOAD_PLUGINS": "opencode"}
        self.cache = tmp_path / "clanker" / "cache"

    @property
    def database(self) -> Path:
        data = self.env.get("XDG_DATA_HOME") or str(self.home / ".local" / "share")
        return Path(data) / "opencode" / "opencode.db"

    def write_sessions(self, listing: list[dict[str, Any]]) -> None:
        """What OpenCode does when a session is made: rows change, the WAL is written."""
        self.database.parent.mkdir(parents=True, exist_ok=True)
        self.database.with_name("opencode.db.rows").write_text(json.dumps(listing))
        with open(f"{self.database}-wal", "ab") as wal:
            wal.write(b"frame")

    def calls(self) -> list[list[str]]:
        return [json.loads(line)["args"] for line in self.log.read_text().splitlines()]

    def listings(self) -> int:
        return sum(call[:2] == ["session", "list"] for call in self.calls())

    def service(self) -> SessionService:
        """A new service, as a new `clanker` process has: nothing in memory."""
        return SessionService(environment=LocalEnvironment(self.env), cache_dir=self.cache)

    def discover(self, *, workspace: Path | None = None, everywhere: bool = False
                 ) -> SessionListing:
        where = None if everywhere else str(workspace or self.workspace)
        return asyncio.run(self.service().discover([provider()], workspace=where))

    def cli(self, *args: str) -> dict[str, Any]:
        """`clanker sessions --json --harness opencode`, a real process, in the workspace."""
        done = subprocess.run(
            [sys.executable, "-m", "clanker.cli", "sessions", "--json", "--harness",
             "opencode", *args],
            cwd=self.workspace, env=self.env, capture_output=True, text=True, check=False,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)  # type: ignore[no-any-return]


def provider() -> HarnessProvider:
    registry = Registry.from_plugins({"opencode": clanker_opencode.plugin}, environ={})
    return registry.get_provider(HarnessId("opencode"))


def ids(listing: SessionListing) -> list[str]:
    return [s.native_id for s in listing.sessions]


@pytest.fixture
def world(tmp_path: Path) -> World:
    made = World(tmp_path)
    made.write_sessions(rows(made.workspace, "session-list-n2.json"))
    return made


# -- across processes -------------------------------------------------------------------------


def test_a_second_clanker_run_answers_without_listing_again(world: World) -> None:
    world.write_sessions(rows(world.workspace))
    first = world.cli()
    assert world.calls().count(["db", "path"]) == 1
    assert world.listings() == 1
    second = world.cli()
    assert world.listings() == 1  # nothing ran: the database's files are as they were
    assert second == first
    assert second["sessions"][0]["id"] == NEW_ID
    assert second["complete"] is True
    assert second["incomplete"] == []


def test_a_new_session_is_seen_by_the_next_run(world: World) -> None:
    before = world.cli()
    assert NEW_ID not in [s["id"] for s in before["sessions"]]
    world.write_sessions(rows(world.workspace))  # another OpenCode made sessions
    after = world.cli()
    assert world.listings() == 2
    assert after["sessions"][0]["id"] == NEW_ID
    world.cli()
    assert world.listings() == 2


def test_what_the_listing_itself_writes_does_not_look_like_a_change(world: World) -> None:
    world.discover()
    database = str(world.database)
    written = look(LocalEnvironment(world.env).files, store_files(database))
    assert all(state.identity is not None for state in written)  # it wrote all three
    world.discover()
    assert world.listings() == 1


# -- what the answer depends on -------------------------------------------------------------


def test_an_upgraded_binary_lists_again(world: World) -> None:
    world.discover()
    replacement = world.bin / "opencode.new"
    replacement.write_bytes(world.binary.read_bytes() + b"# 1.18.34\n")
    replacement.chmod(0o755)
    replacement.replace(world.binary)  # as a package manager installs: a new file
    world.discover()
    assert world.listings() == 2
    # The database is asked again too: another version may keep it elsewhere.
    assert world.calls().count(["db", "path"]) == 2


@pytest.mark.parametrize(("name", "value"), [
    ("XDG_DATA_HOME", "elsewhere"), ("OPENCODE_DB", "other.db"),
    ("OPENCODE_DISABLE_CHANNEL_DB", "1"), ("HOME", "other-home"),
])
def test_the_variables_that_select_the_store_are_part_of_the_answer(
    world: World, name: str, value: str
) -> None:
    world.discover()
    world.env[name] = value if name.startswith("OPENCODE") else str(world.tmp / value)
    world.discover()
    assert world.listings() == 2


def test_each_directory_has_its_own_answer_and_shares_the_database(world: World) -> None:
    other = world.tmp / "work" / "beta"
    other.mkdir()
    world.discover()
    world.discover(workspace=other)
    world.discover(workspace=other)
    assert world.listings() == 2
    assert world.calls().count(["db", "path"]) == 1  # learnt once per binary and variables
    # The listing in `beta` wrote to the shared database: `alpha`'s answer is not
    # carried over (a session made elsewhere meanwhile would never show).
    world.discover()
    assert world.listings() == 3
    assert [json.loads(line)["cwd"] for line in world.log.read_text().splitlines()
            if '"list"' in line] == [str(world.workspace), str(other), str(world.workspace)]


def test_a_refind_answers_from_the_kept_listing(world: World) -> None:
    world.write_sessions(rows(world.workspace))
    world.discover()
    found = asyncio.run(world.service().find(provider(), NEW_ID, workspace=str(world.workspace)))
    assert found is not None and found.native_id == NEW_ID
    assert world.listings() == 1


def test_a_removed_database_lists_again(world: World) -> None:
    world.discover()
    for path in store_files(str(world.database)):
        os.unlink(path)
    world.discover()
    assert world.listings() == 2


def test_an_in_memory_database_is_never_kept(world: World) -> None:
    world.env["OPENCODE_DB"] = ":memory:"
    world.discover()
    world.discover()
    assert world.listings() == 2
    assert not world.cache.joinpath("sessions", "opencode.answers.json").exists()


def test_a_failed_listing_is_not_kept(world: World) -> None:
    world.env["OC_DOUBLE_FAIL"] = "list"
    failed = world.discover()
    assert failed.scans[0].scan.error is not None
    del world.env["OC_DOUBLE_FAIL"]
    assert ids(world.discover()) != []
    assert world.listings() == 2


def test_a_corrupt_cache_file_is_no_cache(world: World) -> None:
    world.discover()
    path = world.cache / "sessions" / "opencode.answers.json"
    document = json.loads(path.read_text())
    document["entries"][0]["sessions"][0]["updated_at"] = 1  # not a time
    path.write_text(json.dumps(document))
    assert ids(world.discover()) != []
    assert world.listings() == 2


def test_without_a_workspace_the_directory_clanker_runs_in_is_the_key(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(world.workspace)
    first = world.discover(everywhere=True)
    assert first.scans[0].scan.partial == PARTIAL_WITHOUT_WORKSPACE
    world.discover(everywhere=True)
    assert world.listings() == 1
    other = world.tmp / "work" / "beta"
    other.mkdir()
    monkeypatch.chdir(other)
    world.discover(everywhere=True)
    assert world.listings() == 2


# -- the parts --------------------------------------------------------------------------------


def test_db_path_output() -> None:
    from clanker.execution import CommandResult

    captured = (STORE / "db-path.txt").read_text()
    assert parse_db_path(CommandResult(stdout=captured, stderr="", exit_code=0)) == (
        "/home/dev/.local/share/opencode/opencode.db")
    for stdout, code in [(":memory:\n", 0), ("relative.db\n", 0), ("/a\n/b\n", 0),
                         (captured, 1), ("", 0)]:
        assert parse_db_path(CommandResult(stdout=stdout, stderr="", exit_code=code)) is None


def test_states_settle_after_a_tick() -> None:
    fine = (FileState("/f", (1, 2, 3, 5_000_000_123, 5_000_000_123)),)
    assert settled(fine, now_ns=5_000_000_123) == 100_000_000
    assert settled(fine, now_ns=5_200_000_000) == 0
    coarse = (FileState("/f", (1, 2, 3, 5_000_000_000, 5_000_000_000)),)
    assert settled(coarse, now_ns=5_500_000_000) == 1_500_000_000
    assert settled((FileState("/f", None),), now_ns=0) == 0


def test_the_answer_cache_keeps_eight_and_replaces_by_key(tmp_path: Path) -> None:
    from clanker.stores import Answer

    cache = AnswerCache(HarnessId("opencode"), tmp_path / "a.json")
    for index in range(10):
        cache.keep({"cwd": f"/w{index % 9}"}, (), Answer(sessions=()))
    assert [key["cwd"] for key in cache.kept_keys()] == [f"/w{i}" for i in (0, 8, 7, 6, 5, 4,
                                                                             3, 2)]
    again = AnswerCache(HarnessId("opencode"), tmp_path / "a.json")
    assert again.kept_keys() == cache.kept_keys()
    assert AnswerCache(HarnessId("other"), tmp_path / "a.json").kept_keys() == ()


# -- the real CLI, when it is installed -----------------------------------------------------

LOOPBACK_CONFIG = {
    "$schema": "https://opencode.ai/config.json", "autoupdate": False,
    "provider": {"loop": {
        "npm": "@ai-sdk/openai-compatible", "name": "Loop",
        "options": {"baseURL": "http://127.0.0.1:9/v1", "apiKey": "dummy-not-a-key"},
        "models": {"m1": {"name": "Loop M1"}},
    }},
    "model": "loop/m1",
}


def acp_session(cwd: Path, env: dict[str, str]) -> str:
    """One empty session the cheap way OpenCode offers: ACP ``session/new``, no prompt."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": 1, "clientInfo": {"name": "t", "version": "0"},
            "clientCapabilities": {"terminal": False}}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new",
         "params": {"cwd": str(cwd), "mcpServers": []}},
    ]
    with subprocess.Popen(["opencode", "acp"], cwd=cwd, env=env, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as process:
        assert process.stdin is not None and process.stdout is not None
        replies: dict[int, Any] = {}
        for request in requests:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            while request["id"] not in replies:
                line = process.stdout.readline()
                assert line, "opencode acp stopped"
                message = json.loads(line)
                if isinstance(message.get("id"), int):
                    replies[message["id"]] = message
        process.stdin.close()
        process.wait(timeout=30)
    session_id = replies[2]["result"]["sessionId"]
    assert isinstance(session_id, str)
    return session_id


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("opencode") is None, reason="opencode is not installed")
def test_real_opencode_is_asked_again_only_when_its_database_changed(tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("OPENCODE_", "XDG_"))}
    env.update(HOME=str(tmp_path), OPENCODE_CONFIG_CONTENT=json.dumps(LOOPBACK_CONFIG))
    for name in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        env[name] = str(tmp_path / "xdg" / name.lower())
    work = tmp_path / "work"
    work.mkdir()
    first = acp_session(work, env)
    environment = LocalEnvironment(env)

    def discover() -> list[str]:
        service = SessionService(environment=environment, cache_dir=tmp_path / "cache")
        listing = asyncio.run(service.discover([provider()], workspace=str(work)))
        assert listing.complete
        return ids(listing)

    assert discover() == [first]
    database = str(tmp_path / "xdg" / "xdg_data_home" / "opencode" / "opencode.db")
    written = look(environment.files, store_files(database))
    assert all(state.identity is not None for state in written)
    # Any OpenCode run writes its database as it opens it: unchanged files prove that
    # the second discovery answered without running OpenCode.
    assert discover() == [first]
    assert look(environment.files, store_files(database)) == written
    second = acp_session(work, env)
    assert discover() == [second, first]
