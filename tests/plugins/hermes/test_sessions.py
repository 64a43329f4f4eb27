"""Hermes's session history, against a state.db captured from hermes-agent 0.19.0.

Fixtures: tests/fixtures/hermes/sessions (README section "sessions/"). The captured
database has no compression chain, delegate, ``tool`` or ACP session (those need a model
call or another front end); the rows marked SYNTHETIC below add them, shaped as Hermes's
own code writes them (hermes_state.py, 0.19.0).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import clanker_hermes
from clanker.descriptor import SessionOperation
from clanker.environment.local import LocalFiles
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.launch.planning import plan_launch
from clanker.launch.request import LaunchOperation, LaunchRequest, SessionTarget
from clanker.registry import Registry
from clanker.sessions.capability import SessionsContext
from clanker.sessions.selection import SessionNotFoundError, resolve_selection
from clanker.sessions.types import HarnessSession, SessionScan
from clanker.testing import registered
from clanker.testing.sessions import session_service as service
from clanker.testing.sessions import sessions_context
from clanker_hermes.models import gateway_interpreter
from clanker_hermes.sessions import HermesSessions, hermes_home, state_db
from clanker_hermes.summaries import REQUIRED_COLUMNS, SessionRow, summarize_row

STORE = Path(__file__).resolve().parents[2] / "fixtures" / "hermes" / "sessions"
DUMP = STORE / "hermes-home" / ".hermes" / "state.sql"
SCHEMA = STORE / "state-schema.sql"
ALPHA = "20261130_090307_ba7f22"
BRANCH = "20261130_090813_91a35b"
TUI = "20261130_091008_71da2f"
GONE = "20261130_090406_abb367"
ARCHIVED = "20261130_090628_e494ff"


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def build(db: Path, script: Path = DUMP) -> Path:
    db.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(db)
    # `.schema` shows SQLite's own sqlite_sequence, which cannot be created by hand.
    connection.executescript("\n".join(
        line for line in script.read_text().splitlines()
        if not line.startswith("CREATE TABLE sqlite_sequence")))
    connection.close()
    return db


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """The captured state.db under ``$HOME/.hermes``, and an environ pointing at it."""
    build(tmp_path / ".hermes" / "state.db")
    return {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}


def context(environ: Mapping[str, str], **fields: Any) -> SessionsContext:
    return sessions_context("hermes", environ, **fields)


def scan(environ: Mapping[str, str], **fields: Any) -> SessionScan:
    return asyncio.run(HermesSessions().discover(context(environ, **fields)))


def scan_or_failure(environ: Mapping[str, str]) -> SessionScan | HarnessCapabilityError:
    try:
        return scan(environ)
    except HarnessCapabilityError as exc:
        return exc


# -- the captured database ------------------------------------------------------------------

# (id, title, cwd, updated, created) for every listed row, newest first, read off
# state-rows.json: updated is the newest message, created is started_at. Every row has
# model probe-model and one message. The title is the row's own (`sessions rename`,
# `/branch NAME`) or its first user message.
CAPTURED = [
    (TUI, "hello from tui", None, 1796029833.3508048, 1796029833.2781086),
    # Its cwd was /home/dev/src/alpha/tmpwork, re-homed by a TUI resume after removal.
    ("20261130_090831_82a326", "hello tmpwork", "/home/dev/src/alpha", 1796029713.6646361,
     1796029713.6551518),
    (BRANCH, "forked-branch", None, 1796029693.3386357, 1796029693.3330877),
    ("20261130_090604_14d1c3", "привет unicode", "/home/dev/src/ünï-проект", 1796029565.420167,
     1796029565.4149637),
    ("20261130_090544_4ecfd5", "hello space", "/home/dev/src/with space", 1796029546.5335999,
     1796029546.5274866),
    ("20261130_090524_cf3421", "hello plain", "/home/dev/src/plain", 1796029526.2975132,
     1796029526.291907),
    # Started from the symlink ~/src/link-alpha: Hermes records the real path.
    ("20261130_090504_5e6917", "hello via symlink", "/home/dev/src/alpha", 1796029506.5642352,
     1796029506.5576117),
    ("20261130_090443_2caa88", "hello from wt", "/home/dev/src/alpha-wt", 1796029485.5268896,
     1796029485.521913),
    ("20261130_090424_76141c", "Sub dir work", "/home/dev/src/alpha/pkg/sub", 1796029465.588498,
     1796029465.584036),
    (GONE, "hello gone", "/home/dev/src/gone", 1796029447.6388671, 1796029447.6330318),
    (ALPHA, "hi", "/home/dev/src/alpha", 1796029389.891704, 1796029389.8869352),
]


def test_every_listed_row_of_the_captured_database(home: dict[str, str]) -> None:
    found = scan(home)
    assert found.complete and found.skipped == 0
    assert [(s.native_id, s.title, s.cwd, s.updated_at, s.created_at)
            for s in found.sessions] == [
        (native_id, title, cwd, at(updated), at(created))
        for native_id, title, cwd, updated, created in CAPTURED
    ]
    assert {(s.model, s.message_count) for s in found.sessions} == {("probe-model", 1)}
    assert [s.order for s in found.sessions] == list(range(len(CAPTURED)))
    # Database rows are not files: nothing to confine, nothing to pass to a launch.
    assert all(s.store_path is None for s in found.sessions)


def test_the_table_covers_every_captured_session() -> None:
    captured = json.loads((STORE / "state-rows.json").read_text())["sessions"]
    assert {row["id"] for row in captured} == {row[0] for row in CAPTURED} | {ARCHIVED}


def test_a_branch_names_its_parent_and_others_do_not(home: dict[str, str]) -> None:
    parents = {s.native_id: s.parent_id for s in scan(home).sessions}
    assert parents.pop(BRANCH) == ALPHA  # `/branch forked-branch` piped into --resume
    assert set(parents.values()) == {None}


def test_archived_sessions_are_not_listed(home: dict[str, str]) -> None:
    # `hermes sessions archive --cwd /home/dev/src/plain --yes` archived the ended one.
    assert ARCHIVED not in {s.native_id for s in scan(home).sessions}
    assert scan(home, native_id=ARCHIVED).sessions == ()


# -- rows the capture does not have (SYNTHETIC, shaped as Hermes writes them) ---------------

T = 1796030000.0
ROOT, MIDDLE, TIP, STALE = ("20261130_100000_c0c0c0", "20261130_100010_c1c1c1",
                            "20261130_100020_c2c2c2", "20261130_100021_c3c3c3")


def session(connection: sqlite3.Connection, native_id: str, started: float, *,
            parent: str | None = None, end: str | None = None, ended: float | None = None,
            cwd: str | None = None, source: str = "cli", title: str | None = None,
            config: dict[str, str] | None = None, archived: int = 0) -> None:
    connection.execute(
        "INSERT INTO sessions (id, source, model, model_config, parent_session_id, started_at,"
        " ended_at, end_reason, message_count, cwd, title, archived)"
        " VALUES (?, ?, 'probe-model', ?, ?, ?, ?, ?, 1, ?, ?, ?)",
        (native_id, source, None if config is None else json.dumps(config), parent, started,
         ended, end, cwd, title, archived))


def message(connection: sqlite3.Connection, native_id: str, role: str, content: str,
            when: float) -> None:
    connection.execute("INSERT INTO messages (session_id, role, content, timestamp)"
                       " VALUES (?, ?, ?, ?)", (native_id, role, content, when))


def extend(db: Path) -> None:
    connection = sqlite3.connect(db)
    # A compression chain: the root ended 'compression', its continuation too, then the live
    # tip (a titled row without a cwd, as compression creates it) and a stale sibling that
    # a dropped websocket left (Hermes prefers the compression-ended, then the live child).
    session(connection, ROOT, T, end="compression", ended=T + 10, cwd="/home/dev/src/alpha")
    message(connection, ROOT, "user", "compress me", T + 1)
    session(connection, MIDDLE, T + 10, parent=ROOT, end="compression", ended=T + 20)
    message(connection, MIDDLE, "user", "continued once", T + 11)
    session(connection, TIP, T + 20, parent=MIDDLE, title="Compressed tip")
    message(connection, TIP, "assistant", "late", T + 5000)
    session(connection, STALE, T + 21, parent=MIDDLE, end="ws_orphan_reap", ended=T + 22)
    message(connection, STALE, "user", "stale sibling", T + 21.5)
    # Hidden by Hermes's picker: a delegate sub-agent, a `tool` run, a plain child row.
    session(connection, "20261130_100100_d0d0d0", T + 100, parent=ALPHA,
            config={"_delegate_from": ALPHA}, cwd="/home/dev/src/alpha")
    session(connection, "20261130_100200_e0e0e0", T + 200, source="tool",
            cwd="/home/dev/src/alpha")
    session(connection, "20261130_100600_b0b0b0", T + 600, parent=GONE, cwd="/home/dev/src/gone")
    # A branch from before the `_branched_from` marker: the parent ended 'branched' first.
    session(connection, "20261130_100300_f0f0f0", T + 300, end="branched", ended=T + 310,
            cwd="/home/dev/src/plain")
    session(connection, "20261130_100320_f1f1f1", T + 320, parent="20261130_100300_f0f0f0")
    # A multimodal first message is passed over for the title.
    session(connection, "20261130_100400_a0a0a0", T + 400, cwd="/home/dev/src/plain")
    message(connection, "20261130_100400_a0a0a0", "user",
            '\x00json:{"parts":[{"type":"image"}]}', T + 401)
    message(connection, "20261130_100400_a0a0a0", "user", "describe the picture", T + 402)
    # An ACP session: its id is a UUID, which clanker never passes to --resume.
    session(connection, "3f1c2b4a-1111-4222-8333-444455556666", T + 500, source="acp",
            cwd="/home/dev/src/plain")
    connection.commit()
    connection.close()


# Hermes's own `list_sessions_rich(exclude_sources=["tool"], order_by_last_active=True)`
# on the extended database (run through the real_cli test below), without the ACP row.
HERMES_ORDER = [
    TIP, "20261130_100400_a0a0a0", "20261130_100320_f1f1f1", "20261130_100300_f0f0f0",
    *(row[0] for row in CAPTURED),
]


@pytest.fixture
def extended(home: dict[str, str]) -> dict[str, str]:
    extend(Path(home["HOME"]) / ".hermes" / "state.db")
    return home


def test_hermes_pickers_rows_in_hermes_pickers_order(extended: dict[str, str]) -> None:
    found = scan(extended)
    assert [s.native_id for s in found.sessions] == HERMES_ORDER
    assert found.skipped == 1  # the ACP session
    by_id = {s.native_id: s for s in found.sessions}
    assert by_id["20261130_100400_a0a0a0"].title == "describe the picture"
    assert by_id["20261130_100320_f1f1f1"].parent_id == "20261130_100300_f0f0f0"
    assert by_id["20261130_100320_f1f1f1"].cwd is None


def test_a_compressed_conversation_is_one_entry_named_by_its_tip(
        extended: dict[str, str]) -> None:
    [entry] = [s for s in scan(extended).sessions if s.native_id == TIP]
    assert entry.title == "Compressed tip"
    # Its last activity is the chain's; it started when the root did; the tip recorded no
    # directory, so the root's stands in.
    assert (entry.updated_at, entry.created_at) == (at(T + 5000), at(T))
    assert (entry.cwd, entry.parent_id) == ("/home/dev/src/alpha", None)
    ids = {s.native_id for s in scan(extended).sessions}
    assert not ids & {ROOT, MIDDLE, STALE}


@pytest.mark.parametrize(("member", "title"), [
    (ROOT, "compress me"), (MIDDLE, "continued once"), (TIP, "Compressed tip"),
    (STALE, "stale sibling"),
])
def test_any_row_of_a_chain_is_refound_as_itself(extended: dict[str, str], member: str,
                                                 title: str) -> None:
    # `hermes --resume <root>` follows the chain to its tip itself.
    [found] = scan(extended, native_id=member).sessions
    assert (found.native_id, found.title, found.cwd) == (member, title, "/home/dev/src/alpha")


@pytest.mark.parametrize("hidden", [
    "20261130_100100_d0d0d0", "20261130_100200_e0e0e0", "20261130_100600_b0b0b0",
    "3f1c2b4a-1111-4222-8333-444455556666", "20261130_999999_ffffff",
])
def test_hidden_rows_are_not_refound(extended: dict[str, str], hidden: str) -> None:
    assert scan(extended, native_id=hidden).sessions == ()


def test_the_bound_keeps_the_newest(extended: dict[str, str]) -> None:
    found = scan(extended, limit=3)
    # Rows that are read and skipped count towards the bound, as files do: the ACP
    # session is the second newest.
    assert [s.native_id for s in found.sessions] == HERMES_ORDER[:2]
    assert (found.skipped, found.truncated, found.complete) == (1, True, False)
    assert scan(extended, limit=len(HERMES_ORDER) + 1).truncated is False
    assert scan(extended, limit=len(HERMES_ORDER)).truncated is True


def test_the_workspace_is_matched_before_the_bound(extended: dict[str, str]) -> None:
    # The newest three *of the workspace*; rows without a directory are everyone's.
    found = scan(extended, scopes=("/home/dev/src/with space",), limit=3)
    assert [s.native_id for s in found.sessions] == ["20261130_100320_f1f1f1", TUI, BRANCH]
    assert found.truncated
    wider = scan(extended, scopes=("/home/dev/src/with space",), limit=4)
    assert [s.native_id for s in wider.sessions][-1] == "20261130_090544_4ecfd5"
    assert not wider.truncated


def test_a_compressed_conversation_belongs_where_its_entry_is(extended: dict[str, str]) -> None:
    # The tip records no directory, so the root's places the conversation.
    def listed(scope: str) -> set[str]:
        return {s.native_id for s in scan(extended, scopes=(scope,)).sessions}

    assert TIP in listed("/home/dev/src/alpha")
    assert TIP not in listed("/home/dev/src/plain")
    connection = sqlite3.connect(Path(extended["HOME"]) / ".hermes" / "state.db")
    connection.execute("UPDATE sessions SET cwd = '/home/dev/src/plain' WHERE id = ?", (TIP,))
    connection.commit()
    connection.close()
    assert TIP in listed("/home/dev/src/plain")


# -- where the store is ---------------------------------------------------------------------


def test_the_default_home(tmp_path: Path) -> None:
    assert hermes_home({"HOME": str(tmp_path)}, LocalFiles()) == tmp_path / ".hermes"
    assert state_db({"HOME": str(tmp_path)}, LocalFiles()) == tmp_path / ".hermes" / "state.db"


def test_hermes_home_wins_without_a_sticky_profile(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path), "HERMES_HOME": str(tmp_path / "elsewhere")}
    assert hermes_home(environ, LocalFiles()) == tmp_path / "elsewhere"


def sticky(root: Path, name: str, *, create: bool = True) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "active_profile").write_text(name + "\n")
    if create:
        (root / "profiles" / name.strip().lower()).mkdir(parents=True, exist_ok=True)


def test_the_sticky_profile(tmp_path: Path) -> None:
    sticky(tmp_path / ".hermes", "work")
    assert (hermes_home({"HOME": str(tmp_path)}, LocalFiles())
            == tmp_path / ".hermes" / "profiles" / "work")


def test_the_sticky_profile_beats_a_hermes_home_inside_the_default_root(tmp_path: Path) -> None:
    # HERMES_HOME=~/.hermes (systemd units do this): the root is ~/.hermes, and the
    # profile chosen with `hermes profile use` still applies.
    sticky(tmp_path / ".hermes", "work")
    environ = {"HOME": str(tmp_path), "HERMES_HOME": str(tmp_path / ".hermes")}
    assert hermes_home(environ, LocalFiles()) == tmp_path / ".hermes" / "profiles" / "work"


def test_a_hermes_home_outside_the_default_root_is_the_root(tmp_path: Path) -> None:
    sticky(tmp_path / ".hermes", "ignored")
    sticky(tmp_path / "opt", "coder")  # Docker-style HERMES_HOME=/opt/data
    environ = {"HOME": str(tmp_path), "HERMES_HOME": str(tmp_path / "opt")}
    assert hermes_home(environ, LocalFiles()) == tmp_path / "opt" / "profiles" / "coder"


def test_a_hermes_home_that_is_a_profile_is_used_as_it_is(tmp_path: Path) -> None:
    sticky(tmp_path / ".hermes", "work")
    chosen = tmp_path / ".hermes" / "profiles" / "other"
    assert hermes_home({"HOME": str(tmp_path), "HERMES_HOME": str(chosen)}, LocalFiles()) == chosen


@pytest.mark.parametrize("name", ["default", "Default", "", "  "])
def test_the_default_profile_is_no_profile(tmp_path: Path, name: str) -> None:
    sticky(tmp_path / ".hermes", name, create=False)
    assert hermes_home({"HOME": str(tmp_path)}, LocalFiles()) == tmp_path / ".hermes"


def test_a_sticky_name_is_lowered_as_hermes_does(tmp_path: Path) -> None:
    sticky(tmp_path / ".hermes", "Work")
    assert (hermes_home({"HOME": str(tmp_path)}, LocalFiles())
            == tmp_path / ".hermes" / "profiles" / "work")


@pytest.mark.parametrize(("name", "create"), [
    ("../escape", False), ("hermes", True), ("a" * 65, False), ("missing", False),
])
def test_a_profile_hermes_would_refuse_is_not_configured(tmp_path: Path, name: str,
                                                         create: bool) -> None:
    sticky(tmp_path / ".hermes", name, create=create)
    with pytest.raises(HarnessCapabilityError) as caught:
        hermes_home({"HOME": str(tmp_path)}, LocalFiles())
    assert caught.value.kind is ErrorKind.NOT_CONFIGURED
    assert HermesSessions().store_roots({"HOME": str(tmp_path)}, LocalFiles()) == ()


def test_a_relative_hermes_home_is_not_guessed(tmp_path: Path) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        hermes_home({"HOME": str(tmp_path), "HERMES_HOME": "rel/home"}, LocalFiles())
    assert caught.value.kind is ErrorKind.NOT_CONFIGURED


def test_an_unreadable_sticky_file_is_no_profile(tmp_path: Path) -> None:
    root = tmp_path / ".hermes"
    root.mkdir()
    (root / "active_profile").write_bytes(b"\xff\xfe")
    assert hermes_home({"HOME": str(tmp_path)}, LocalFiles()) == root
    (root / "active_profile").unlink()
    os.mkfifo(root / "active_profile")  # never waited on
    assert hermes_home({"HOME": str(tmp_path)}, LocalFiles()) == root


def test_the_store_root_is_the_directory_of_the_database(tmp_path: Path) -> None:
    assert (HermesSessions().store_roots({"HOME": str(tmp_path)}, LocalFiles())
            == (tmp_path / ".hermes",))


# -- the database as it may be found --------------------------------------------------------


def test_a_failed_first_run_is_an_empty_store(tmp_path: Path) -> None:
    # Verified: `hermes -z hi` without config leaves a state.db with only async_delegations.
    connection = sqlite3.connect(build(tmp_path / ".hermes" / "state.db", SCHEMA))
    for table in ("sessions", "messages", "schema_version"):
        connection.execute(f"DROP TABLE {table}")
    connection.close()
    assert scan({"HOME": str(tmp_path)}) == SessionScan()


@pytest.mark.parametrize(("table", "column"), sorted(
    (table, column) for table, columns in REQUIRED_COLUMNS.items() for column in columns))
def test_a_missing_column_is_storage_changed(tmp_path: Path, table: str, column: str) -> None:
    connection = sqlite3.connect(build(tmp_path / ".hermes" / "state.db", SCHEMA))
    connection.executescript("DROP TRIGGER messages_fts_insert; DROP TRIGGER messages_fts_update;"
                             " DROP TRIGGER messages_fts_trigram_insert;"
                             " DROP TRIGGER messages_fts_trigram_update;"
                             " DROP INDEX IF EXISTS idx_sessions_title_unique;")
    connection.execute(f"ALTER TABLE {table} RENAME COLUMN {column} TO renamed_{column}")
    connection.close()
    with pytest.raises(HarnessCapabilityError) as caught:
        scan({"HOME": str(tmp_path)})
    assert caught.value.kind is ErrorKind.STORAGE_CHANGED


def test_a_schema_without_sessions_is_storage_changed(tmp_path: Path) -> None:
    connection = sqlite3.connect(build(tmp_path / ".hermes" / "state.db", SCHEMA))
    connection.execute("DROP TABLE sessions")
    connection.close()
    with pytest.raises(HarnessCapabilityError) as caught:
        scan({"HOME": str(tmp_path)})
    assert caught.value.kind is ErrorKind.STORAGE_CHANGED


def test_an_older_database_without_reconciled_columns_is_read(home: dict[str, str]) -> None:
    db = Path(home["HOME"]) / ".hermes" / "state.db"
    connection = sqlite3.connect(db)
    connection.execute("ALTER TABLE sessions DROP COLUMN archived")
    connection.execute("ALTER TABLE sessions DROP COLUMN model_config")
    connection.commit()
    connection.close()
    found = scan(home)
    # Without the columns nothing is archived, and the branch is still found (legacy test).
    assert ARCHIVED in {s.native_id for s in found.sessions}
    assert {s.native_id: s.parent_id for s in found.sessions}[BRANCH] == ALPHA


def test_a_malformed_model_config_does_not_fail_the_listing(home: dict[str, str]) -> None:
    connection = sqlite3.connect(Path(home["HOME"]) / ".hermes" / "state.db")
    connection.execute("UPDATE sessions SET model_config = '{not json' WHERE id = ?", (ALPHA,))
    connection.commit()
    connection.close()
    assert ALPHA in {s.native_id for s in scan(home).sessions}


def test_bytes_that_are_not_utf8_do_not_fail_the_listing(home: dict[str, str]) -> None:
    connection = sqlite3.connect(Path(home["HOME"]) / ".hermes" / "state.db")
    connection.execute("UPDATE messages SET content = CAST(X'68E9FF6C6C6F' AS TEXT)"
                       " WHERE session_id = ?", (ALPHA,))
    connection.commit()
    connection.close()
    [found] = [s for s in scan(home).sessions if s.native_id == ALPHA]
    assert found.title == "h\ufffd\ufffdllo"


def test_the_database_is_never_written(home: dict[str, str]) -> None:
    db = Path(home["HOME"]) / ".hermes" / "state.db"
    before = db.read_bytes()
    scan(home)
    assert db.read_bytes() == before


# -- discovery and selection, end to end ----------------------------------------------------


def registry() -> Registry:
    return Registry.from_plugins({"hermes": clanker_hermes.plugin}, environ={})


PROVIDER = registered(clanker_hermes.plugin, "hermes")


def test_a_workspace_lists_its_sessions_and_those_without_a_directory(
        home: dict[str, str]) -> None:
    listing = asyncio.run(service(home).discover([PROVIDER], workspace="/home/dev/src/alpha"))
    assert listing.complete
    # TUI sessions and branches record no directory: they are listed in every workspace.
    assert [s.native_id for s in listing.sessions] == [
        TUI, "20261130_090831_82a326", BRANCH, "20261130_090504_5e6917",
        "20261130_090424_76141c", ALPHA]


def test_an_archived_session_is_not_refound(home: dict[str, str]) -> None:
    # (A re-find from another workspace is the contract's.)
    assert asyncio.run(service(home).find(PROVIDER, ARCHIVED)) is None


def test_a_session_whose_directory_is_gone_resumes_in_the_workspace(
        home: dict[str, str], tmp_path: Path) -> None:
    # /home/dev/src/gone does not exist: Hermes continues such a session elsewhere.
    selection = asyncio.run(resolve_selection(
        service(home), registry(), f"hermes:{GONE}", operation=SessionOperation.RESUME,
        workspace=str(tmp_path)))
    assert selection.launch_cwd == str(tmp_path)
    assert selection.notice is not None and "/home/dev/src/gone" in selection.notice
    target = SessionTarget(native_id=selection.session.native_id,
                           store_path=selection.session.store_path)
    plan = plan_launch(selection.provider, LaunchRequest(
        operation=LaunchOperation.RESUME, session=target, cwd=selection.launch_cwd))
    assert plan.argv == ("hermes", "--tui", "--resume", GONE)


def test_a_session_without_a_directory_resumes_in_the_workspace(home: dict[str, str],
                                                                tmp_path: Path) -> None:
    selection = asyncio.run(resolve_selection(
        service(home), registry(), f"hermes:{TUI}", operation=SessionOperation.RESUME,
        workspace=str(tmp_path)))
    assert (selection.launch_cwd, selection.notice) == (str(tmp_path), None)


def test_an_unknown_or_archived_session_is_not_found(home: dict[str, str],
                                                     tmp_path: Path) -> None:
    for native_id in (ARCHIVED, "20261130_000000_000000"):
        with pytest.raises(SessionNotFoundError):
            asyncio.run(resolve_selection(
                service(home), registry(), f"hermes:{native_id}",
                operation=SessionOperation.RESUME, workspace=str(tmp_path)))


def test_hermes_resumes_a_session_whose_directory_is_gone() -> None:
    # Verified 2026-11-30 with hermes-agent 0.19.0 (fixtures resume-removed-cwd-classic.*
    # and tui-resume-removed-cwd.screen.txt): `hermes --resume` stays in the current
    # directory, and `hermes --tui --resume` re-homes the row to the nearest existing git root.
    assert HermesSessions.resumes_without_original_directory is True
    classic = (STORE / "resume-removed-cwd-classic.stdout.txt").read_text()
    assert "recorded dir is gone" in classic and "Resumed session" in classic


# -- properties -----------------------------------------------------------------------------

_PROPERTY = settings(max_examples=150, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow,
                                            HealthCheck.function_scoped_fixture])

sqlite_values = (st.none() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text()
                 | st.binary(max_size=64) | st.sampled_from([ALPHA, "/home/dev", 1796029389.8]))


def check_types(found: HarnessSession | None) -> None:
    if found is None:
        return
    assert isinstance(found.native_id, str) and len(found.native_id) == 22
    assert found.updated_at.tzinfo is not None and found.updated_at >= (found.created_at or
                                                                       found.updated_at)
    assert found.title is None or (isinstance(found.title, str) and found.title.isprintable()
                                   and len(found.title) <= 200)
    assert found.cwd is None or (found.cwd.startswith("/") and "\x00" not in found.cwd)
    assert found.model is None or isinstance(found.model, str)
    assert found.message_count is None or (isinstance(found.message_count, int)
                                           and found.message_count >= 0)
    assert found.parent_id is None or isinstance(found.parent_id, str)
    assert found.store_path is None


@_PROPERTY
@given(st.fixed_dictionaries({name: sqlite_values for name in (
    "id", "title", "cwd", "model", "parent_session_id", "started_at", "message_count",
    "first_user")}), sqlite_values)
def test_summarize_never_raises(fields: dict[str, object], updated: object) -> None:
    row = SessionRow(**fields)
    check_types(summarize_row(row, row, updated))


@_PROPERTY
@given(st.lists(st.tuples(st.sampled_from(["id", "title", "cwd", "model", "parent_session_id",
                                           "started_at", "message_count", "end_reason",
                                           "model_config", "archived", "source"]),
                          st.sampled_from([ALPHA, BRANCH, TUI, GONE]), sqlite_values),
                max_size=6),
       st.lists(st.tuples(st.sampled_from(["content", "timestamp", "role", "session_id"]),
                          sqlite_values), max_size=4))
def test_wrong_typed_columns_never_fail_the_listing(
        tmp_path_factory: pytest.TempPathFactory,
        changes: list[tuple[str, str, object]], message_changes: list[tuple[str, object]]
) -> None:
    root = tmp_path_factory.mktemp("home")
    db = build(root / ".hermes" / "state.db")
    connection = sqlite3.connect(db)
    connection.execute("DROP INDEX idx_sessions_title_unique")
    connection.execute("PRAGMA foreign_keys = OFF")
    for column, native_id, value in changes:
        with contextlib.suppress(sqlite3.IntegrityError):  # NOT NULL columns stay set
            connection.execute(f"UPDATE sessions SET {column} = ? WHERE id = ?",
                               (value, native_id))
    for column, value in message_changes:
        with contextlib.suppress(sqlite3.IntegrityError):
            connection.execute(f"UPDATE messages SET {column} = ? WHERE id = 1", (value,))
    connection.commit()
    connection.close()
    found = scan({"HOME": str(root)})
    for session in found.sessions:
        check_types(session)
    assert len(found.sessions) + found.skipped <= len(CAPTURED) + 1


# -- the real CLI, when it is installed -----------------------------------------------------


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("hermes") is None, reason="hermes is not installed")
def test_real_hermes_picker_lists_the_same_conversations(extended: dict[str, str]) -> None:
    """Hermes's own picker query over the extended database agrees with clanker's."""
    python, _ = gateway_interpreter(os.environ, LocalFiles())
    db = Path(extended["HOME"]) / ".hermes" / "state.db"
    script = (
        "import sys, json\n"
        "from pathlib import Path\n"
        "from hermes_state import SessionDB\n"
        "db = SessionDB(db_path=Path(sys.argv[1]), read_only=True)\n"
        "rows = db.list_sessions_rich(exclude_sources=['tool'], limit=1000,\n"
        "                             order_by_last_active=True, compact_rows=True)\n"
        "print(json.dumps([[r['id'], r.get('title'), r['message_count']] for r in rows]))\n"
    )
    done = subprocess.run([python, "-c", script, str(db)], capture_output=True, text=True,
                          timeout=60, check=True)
    theirs = [row for row in json.loads(done.stdout) if "-" not in row[0]]  # ACP: not offered
    ours = scan(extended).sessions
    assert [row[0] for row in theirs] == [s.native_id for s in ours] == HERMES_ORDER
    assert [row[2] for row in theirs] == [s.message_count for s in ours]
    titled = {row[0]: row[1] for row in theirs if row[1]}
    assert titled == {s.native_id: s.title for s in ours if s.native_id in titled}


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("hermes") is None, reason="hermes is not installed")
def test_real_hermes_session_is_listed_in_its_directory(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``hermes -z`` writes its row before the (refused) model request."""
    hermes = tmp_path / ".hermes"
    hermes.mkdir()
    (hermes / "config.yaml").write_text(
        "model:\n  default: probe-model\n  provider: custom\n"
        "  base_url: http://127.0.0.1:9/v1\n  api_key: dummy-not-a-key\n"
        "security:\n  allow_lazy_installs: false\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("HERMES_HOME", raising=False)
    monkeypatch.setenv("HERMES_DISABLE_LAZY_INSTALLS", "1")
    # Still retrying the refused port at the timeout is fine: the row is already written.
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(["hermes", "-z", "real prompt"], cwd=work, capture_output=True,
                       timeout=45, check=False)
    environ = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    listing = asyncio.run(service(environ).discover([PROVIDER], workspace=str(work)))
    [found] = listing.sessions
    assert (found.title, found.cwd, found.model) == ("real prompt", str(work.resolve()),
                                                     "probe-model")
    assert listing.complete
