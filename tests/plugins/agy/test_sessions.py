"""Antigravity's session history, against a SYNTHETIC conversation index.

agy cannot be installed here: nothing below was checked against agy itself. The
fixture (tests/fixtures/agy/sessions, see its README) is hand-written from public
third-party readers of agy 1.1-1.2; the empty ``conversations/<id>.db`` files these
tests create stand in for agy's per-conversation stores, of which clanker only checks
that they exist.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import clanker_agy
import clanker_agy.summaries as agy_summaries
from clanker.descriptor import SessionOperation
from clanker.environment.files import confined
from clanker.environment.local import LocalFiles, host_environ
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
from clanker_agy.sessions import AgySessions, agy_dir
from clanker_agy.summaries import (
    REQUIRED_COLUMNS,
    SummaryRow,
    parse_time,
    summarize_row,
    workspace_path,
)

SYNTHETIC = (Path(__file__).resolve().parents[2] / "fixtures" / "agy" / "sessions"
             / "SYNTHETIC-agy-home" / ".gemini" / "antigravity-cli")
SQL = SYNTHETIC / "conversation_summaries.sql"
FIRST = "11111111-1111-4111-8111-111111111111"
CHILD = "77777777-7777-4777-8777-777777777777"
GONE = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"


def index_ids() -> list[str]:
    connection = sqlite3.connect(":memory:")
    connection.executescript(SQL.read_text())
    query = "SELECT conversation_id FROM conversation_summaries"
    return [row[0] for row in connection.execute(query)]


def build(home: Path, *, conversations: bool = True) -> Path:
    directory = home / ".gemini" / "antigravity-cli"
    (directory / "conversations").mkdir(parents=True)
    connection = sqlite3.connect(directory / "conversation_summaries.db")
    connection.executescript(SQL.read_text())
    connection.close()
    if conversations:
        for native_id in index_ids():
            (directory / "conversations" / f"{native_id}.db").write_bytes(b"")
    return directory


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    build(tmp_path)
    return {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}


def context(environ: Mapping[str, str], **fields: Any) -> SessionsContext:
    return sessions_context("agy", environ, **fields)


def scan(environ: Mapping[str, str], **fields: Any) -> SessionScan:
    return asyncio.run(AgySessions().discover(context(environ, **fields)))


def scan_or_failure(environ: Mapping[str, str]) -> SessionScan | HarnessCapabilityError:
    try:
        return scan(environ)
    except HarnessCapabilityError as exc:
        return exc


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text)


# -- every synthetic row --------------------------------------------------------------------

# (id, title, cwd, updated) of every offered row, newest first. Left out: the sub-agent
# (row 7, not counted); skipped and counted: malformed workspaces (8), a remote workspace
# (9), a Windows path (12), an id that is not a UUID (13).
OFFERED = [
    ("aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa", "Long refactor", "/home/dev/src/alpha",
     "2026-11-30 08:20:00.000000+00:00"),  # "…00.000000001": nanoseconds cut
    (FIRST, "Add retry to the HTTP client", "/home/dev/src/alpha",
     "2026-11-30 08:15:02.123456+00:00"),
    # No title: the preview (the first prompt) stands in; the space was percent-encoded.
    ("22222222-2222-4222-8222-222222222222", "fix the flaky test in test_io.py",
     "/home/dev/src/with space", "2026-11-30 07:50:11.765656+00:00"),
    ("33333333-3333-4333-8333-333333333333", "Übersetzung prüfen", "/home/dev/src/ünï-проект",
     "2026-11-30 07:40:00+00:00"),
    # `[]` and "": no workspace (headless `agy -p`), listed everywhere.
    ("44444444-4444-4444-8444-444444444444", "Summarise the changelog", None,
     "2026-11-30 07:30:00.25+00:00"),
    ("55555555-5555-4555-8555-555555555555", "Quick question", None, "2026-11-30 07:20:00+00:00"),
    # Two workspaces (--add-dir): the first one is the cwd.
    ("66666666-6666-4666-8666-666666666666", "Share the config loader", "/home/dev/src/alpha",
     "2026-11-30 07:10:00.1+00:00"),
    (GONE, "Feature X", "/home/dev/src/alpha-worktrees/feature-x", "2026-11-29 18:00:00+00:00"),
]


def test_every_offered_row_of_the_synthetic_index(home: dict[str, str], tmp_path: Path) -> None:
    found = scan(home)
    assert [(s.native_id, s.title, s.cwd, s.updated_at) for s in found.sessions] == [
        (native_id, title, cwd, utc(updated)) for native_id, title, cwd, updated in OFFERED]
    assert found.skipped == 4 and not found.truncated
    assert all(s.created_at is None and s.model is None and s.message_count is None
               and s.parent_id is None for s in found.sessions)
    directory = tmp_path / ".gemini" / "antigravity-cli"
    assert [s.store_path for s in found.sessions] == [
        str(directory / "conversations" / f"{row[0]}.db") for row in OFFERED]
    assert [s.order for s in found.sessions] == list(range(len(OFFERED)))


def test_the_table_covers_every_synthetic_row() -> None:
    skipped = {"88888888-8888-4888-8888-888888888888", "99999999-9999-4999-8999-999999999999",
               "cccccccc-cccc-4ccc-8ccc-cccccccccccc", "not-a-uuid"}
    assert set(index_ids()) == {row[0] for row in OFFERED} | skipped | {CHILD}


def test_a_sub_agent_is_never_offered(home: dict[str, str]) -> None:
    assert CHILD not in {s.native_id for s in scan(home).sessions}
    assert scan(home, native_id=CHILD).sessions == ()


def test_a_row_without_its_conversation_file_is_not_offered(home: dict[str, str],
                                                            tmp_path: Path) -> None:
    conversations = tmp_path / ".gemini" / "antigravity-cli" / "conversations"
    (conversations / f"{FIRST}.db").unlink()
    (conversations / f"{GONE}.db").unlink()
    (conversations / f"{GONE}.db").mkdir()  # not a regular file either
    found = scan(home)
    assert {s.native_id for s in found.sessions} == {row[0] for row in OFFERED} - {FIRST, GONE}
    assert found.skipped == 4  # the index lagging its store is not a malformed row


def test_a_linked_conversation_file_is_not_offered(home: dict[str, str], tmp_path: Path) -> None:
    conversation = tmp_path / ".gemini" / "antigravity-cli" / "conversations" / f"{FIRST}.db"
    conversation.unlink()
    outside = tmp_path / "outside.db"
    outside.write_bytes(b"")
    conversation.symlink_to(outside)
    assert FIRST not in {s.native_id for s in scan(home).sessions}


def test_the_ides_conversations_are_not_the_clis(home: dict[str, str], tmp_path: Path) -> None:
    db = tmp_path / ".gemini" / "antigravity-cli" / "conversation_summaries.db"
    connection = sqlite3.connect(db)
    connection.execute("UPDATE conversation_summaries SET app_data_dir = ? WHERE"
                       " conversation_id = ?", ("/home/dev/.gemini/antigravity-ide", FIRST))
    connection.execute("UPDATE conversation_summaries SET app_data_dir = '' WHERE"
                       " conversation_id = ?", (GONE,))
    connection.commit()
    connection.close()
    ids = {s.native_id for s in scan(home).sessions}
    assert FIRST not in ids and GONE in ids


# -- values ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-09-27 13:36:21.765656+00:00", datetime(2026, 9, 27, 13, 36, 21, 765656, UTC)),
    ("2026-10-01 10:00:13.002530482+00:00", datetime(2026, 10, 1, 10, 0, 13, 2530, UTC)),
    ("2026-10-01 10:00:13.5+00:00", datetime(2026, 10, 1, 10, 0, 13, 500000, UTC)),
    ("2026-10-01 10:00:13+00:00", datetime(2026, 10, 1, 10, 0, 13, tzinfo=UTC)),
    ("2026-10-01 12:00:13+02:00", datetime(2026, 10, 1, 10, 0, 13, tzinfo=UTC)),
    ("2026-10-01 05:30:13-04:30", datetime(2026, 10, 1, 10, 0, 13, tzinfo=UTC)),
    ("2026-10-01T10:00:13Z", datetime(2026, 10, 1, 10, 0, 13, tzinfo=UTC)),
    ("0001-01-01 00:00:00+00:00", None),  # Go's zero time: unset
    ("2026-10-01 10:00:13", None),  # no offset: never guessed
    ("2026-10-01 10:00:13.1234567890+00:00", None),
    ("2026-13-01 10:00:13+00:00", None),
    ("yesterday", None),
    (1796029389, None),
    (None, None),
])
def test_go_times(text: object, expected: datetime | None) -> None:
    assert parse_time(text) == expected


def test_times_of_mixed_shapes_sort_as_times(home: dict[str, str], tmp_path: Path) -> None:
    db = tmp_path / ".gemini" / "antigravity-cli" / "conversation_summaries.db"
    connection = sqlite3.connect(db)
    # As text this sorts before "2026-11-30 08:20…"; as a time it is the newest.
    connection.execute("UPDATE conversation_summaries SET last_modified_time = ?"
                       " WHERE conversation_id = ?", ("2026-11-30 04:21:00-04:00", GONE))
    connection.commit()
    connection.close()
    assert scan(home).sessions[0].native_id == GONE


@pytest.mark.parametrize(("uri", "expected"), [
    ("file:///home/dev/src/alpha", "/home/dev/src/alpha"),
    ("file:///home/dev/src/alpha/", "/home/dev/src/alpha"),
    ("file://localhost/home/dev/x", "/home/dev/x"),
    ("FILE:///home/dev/x", "/home/dev/x"),
    ("file:///home/dev/src/with%20space", "/home/dev/src/with space"),
    ("file:///home/dev/src/100%25", "/home/dev/src/100%"),
    ("file:///", "/"),
    ("file:///C:/Users/dev/Project", None),
    ("file:///c:", None),
    ("file://otherhost/home/dev", None),
    ("vscode-remote://ssh-remote%2Bexample-host/home/dev/src/alpha", None),
    ("/home/dev/plain-path", None),
    ("file:///home/dev/%FF", None),
    ("file:///home/dev/%00x", None),
    ("file:///home/dev/x?query", None),
    ("file:///home/dev/tab%09x", None),
])
def test_workspace_uris(uri: str, expected: str | None) -> None:
    assert workspace_path(uri) == expected


def row(**fields: object) -> SummaryRow:
    values: dict[str, object] = {
        "conversation_id": FIRST, "title": "t", "preview": "p",
        "last_modified_time": "2026-11-30 08:15:02+00:00",
        "workspace_uris": '["file:///home/dev/src/alpha"]',
    }
    values.update(fields)
    return SummaryRow(**values)


@pytest.mark.parametrize(("uris", "cwd"), [
    ("", None), ("[]", None),
    ('["vscode-remote://x/home", "file:///home/dev/b"]', "/home/dev/b"),
    ('["file:///home/dev/a", "file:///home/dev/b"]', "/home/dev/a"),
])
def test_the_first_local_workspace_is_the_cwd(uris: str, cwd: str | None) -> None:
    found = summarize_row(row(workspace_uris=uris))
    assert found is not None and found.cwd == cwd


@pytest.mark.parametrize("uris", [
    "{not json", "null", '"file:///home"', '{"a": 1}', "[1]", '["file:///a", null]', None, 5,
    '["vscode-remote://x/home"]', '["file:///C:/x"]', "[" * 10_000,
])
def test_malformed_or_foreign_workspaces_are_skipped(uris: object) -> None:
    assert summarize_row(row(workspace_uris=uris)) is None


@pytest.mark.parametrize(("title", "preview", "expected"), [
    ("T", "P", "T"), ("", "P", "P"), ("  \n", "first\nprompt", "first prompt"), ("", "", None),
    (None, 3, None),
])
def test_title_then_preview(title: object, preview: object, expected: str | None) -> None:
    found = summarize_row(row(title=title, preview=preview))
    assert found is not None and found.title == expected


@pytest.mark.parametrize("native_id", [
    "not-a-uuid", GONE.upper(), f" {FIRST}", FIRST.replace("-", ""), None, 7,
])
def test_only_canonical_conversation_ids_are_offered(native_id: object) -> None:
    assert summarize_row(row(conversation_id=native_id)) is None


# -- where the store is, and what it may look like ------------------------------------------


def test_the_store_is_under_the_home(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path), "GEMINI_HOME": str(tmp_path / "elsewhere")}
    assert agy_dir(environ) == tmp_path / ".gemini" / "antigravity-cli"
    assert (AgySessions().store_roots(environ, LocalFiles())
            == (tmp_path / ".gemini" / "antigravity-cli",))
    found = agy_dir(host_environ({}))
    assert found is not None and found.is_absolute() and found.name == "antigravity-cli"
    assert agy_dir({"HOME": "relative"}) is None


@pytest.mark.parametrize("column", sorted(REQUIRED_COLUMNS["conversation_summaries"]))
def test_a_missing_column_is_storage_changed(home: dict[str, str], tmp_path: Path,
                                             column: str) -> None:
    connection = sqlite3.connect(tmp_path / ".gemini" / "antigravity-cli"
                                 / "conversation_summaries.db")
    connection.execute(f"ALTER TABLE conversation_summaries RENAME COLUMN {column} TO x_{column}")
    connection.commit()
    connection.close()
    with pytest.raises(HarnessCapabilityError) as caught:
        scan(home)
    assert caught.value.kind is ErrorKind.STORAGE_CHANGED


def test_a_database_without_the_table_is_storage_changed(tmp_path: Path) -> None:
    directory = tmp_path / ".gemini" / "antigravity-cli"
    directory.mkdir(parents=True)
    sqlite3.connect(directory / "conversation_summaries.db").execute("CREATE TABLE t (x)").close()
    with pytest.raises(HarnessCapabilityError) as caught:
        scan({"HOME": str(tmp_path)})
    assert caught.value.kind is ErrorKind.STORAGE_CHANGED


def test_the_bound_keeps_the_newest(home: dict[str, str]) -> None:
    found = scan(home, limit=3)
    assert [s.native_id for s in found.sessions] == [r[0] for r in OFFERED[:3]]
    assert found.truncated
    assert scan(home, limit=len(OFFERED)).truncated is False


def test_a_huge_index_is_read_newest_first_and_said_to_be_cut(
        home: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agy_summaries, "_MAX_ROWS", 3)
    found = scan(home)
    assert [s.native_id for s in found.sessions] == [r[0] for r in OFFERED[:2]]
    assert found.skipped == 0 and found.truncated  # the third newest is the sub-agent


def test_the_workspace_is_matched_before_the_bound(home: dict[str, str]) -> None:
    found = scan(home, scopes=("/home/dev/src/with space",), limit=3)
    # The workspace's own conversation, then the global ones; alpha's never count.
    assert [s.native_id for s in found.sessions] == [
        "22222222-2222-4222-8222-222222222222", "44444444-4444-4444-8444-444444444444",
        "55555555-5555-4555-8555-555555555555"]
    assert not found.truncated


def test_the_index_is_never_written(home: dict[str, str], tmp_path: Path) -> None:
    db = tmp_path / ".gemini" / "antigravity-cli" / "conversation_summaries.db"
    before = db.read_bytes()
    scan(home)
    assert db.read_bytes() == before


# -- discovery and selection, end to end ----------------------------------------------------


def registry() -> Registry:
    return Registry.from_plugins({"agy": clanker_agy.plugin}, environ={})


PROVIDER = registered(clanker_agy.plugin, "agy")


def test_a_workspace_lists_its_own_and_the_global_conversations(home: dict[str, str]) -> None:
    listing = asyncio.run(service(home).discover([PROVIDER], workspace="/home/dev/src/alpha"))
    assert listing.complete
    assert [s.native_id for s in listing.sessions] == [
        "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa", FIRST, "44444444-4444-4444-8444-444444444444",
        "55555555-5555-4555-8555-555555555555", "66666666-6666-4666-8666-666666666666"]
    assert listing.scans[0].scan.skipped == 4


def test_a_refound_conversation_resumes_by_id_in_its_directory(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    directory = build(tmp_path)
    connection = sqlite3.connect(directory / "conversation_summaries.db")
    connection.execute("UPDATE conversation_summaries SET workspace_uris = ?"
                       " WHERE conversation_id = ?", (f'["{work.as_uri()}"]', FIRST))
    connection.commit()
    connection.close()
    environ = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    selection = asyncio.run(resolve_selection(
        service(environ), registry(), f"agy:{FIRST.upper()}", operation=SessionOperation.RESUME,
        workspace="/somewhere/else"))
    assert (selection.session.native_id, selection.launch_cwd) == (FIRST, str(work))
    assert selection.session.store_path == str(directory / "conversations" / f"{FIRST}.db")
    assert confined(selection.session.store_path, AgySessions().store_roots(environ, LocalFiles()))
    target = SessionTarget(native_id=FIRST, store_path=selection.session.store_path)
    for operation in (LaunchOperation.RESUME, LaunchOperation.FORK):  # fork: emulated resume
        plan = plan_launch(selection.provider, LaunchRequest(
            operation=operation, session=target, cwd=selection.launch_cwd))
        assert plan.argv == ("agy", f"--conversation={FIRST}")


def test_a_conversation_whose_directory_is_gone_is_refused(home: dict[str, str],
                                                           tmp_path: Path) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        asyncio.run(resolve_selection(
            service(home), registry(), f"agy:{GONE}", operation=SessionOperation.RESUME,
            workspace=str(tmp_path)))
    assert caught.value.kind is ErrorKind.UNSUPPORTED
    assert "no longer exists" in str(caught.value)


def test_a_global_conversation_resumes_in_the_workspace(home: dict[str, str],
                                                        tmp_path: Path) -> None:
    selection = asyncio.run(resolve_selection(
        service(home), registry(), "agy:44444444-4444-4444-8444-444444444444",
        operation=SessionOperation.RESUME, workspace=str(tmp_path)))
    assert (selection.launch_cwd, selection.notice) == (str(tmp_path), None)


def test_a_sub_agent_or_stale_row_is_not_found(home: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / ".gemini" / "antigravity-cli" / "conversations" / f"{FIRST}.db").unlink()
    for native_id in (CHILD, FIRST):
        with pytest.raises(SessionNotFoundError):
            asyncio.run(resolve_selection(
                service(home), registry(), f"agy:{native_id}",
                operation=SessionOperation.RESUME, workspace=str(tmp_path)))


def test_agy_is_not_trusted_to_resume_without_its_directory() -> None:
    # NOT verified: agy cannot be installed here, and the spec's removed-worktree probe
    # could not characterize it either ("recreate the worktree"). Unproven stays False.
    assert AgySessions.resumes_without_original_directory is False


# -- properties -----------------------------------------------------------------------------

_PROPERTY = settings(max_examples=200, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])

sqlite_values = (st.none() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text()
                 | st.binary(max_size=64)
                 | st.sampled_from([FIRST, "", "[]", '["file:///home/dev/a"]',
                                    "2026-11-30 08:15:02.1+00:00"]))


def check_types(found: HarnessSession | None) -> None:
    if found is None:
        return
    assert found.native_id == FIRST or len(found.native_id) == 36
    assert found.updated_at.tzinfo is not None
    assert found.title is None or (found.title.isprintable() and len(found.title) <= 200)
    assert found.cwd is None or (found.cwd.startswith("/") and found.cwd.isprintable())


@_PROPERTY
@given(st.fixed_dictionaries({name: sqlite_values for name in (
    "conversation_id", "title", "preview", "last_modified_time", "workspace_uris")}))
def test_summarize_never_raises(fields: dict[str, object]) -> None:
    check_types(summarize_row(SummaryRow(**fields)))


@_PROPERTY
@given(st.lists(st.text(), max_size=4), st.text())
def test_arbitrary_workspace_lists_never_raise(uris: list[str], raw: str) -> None:
    for value in (json.dumps(uris), raw):
        check_types(summarize_row(row(workspace_uris=value)))
    for uri in uris:
        path = workspace_path(uri)
        assert path is None or (path.startswith("/") and path.isprintable())


@_PROPERTY
@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
       st.integers(-23 * 60 - 59, 23 * 60 + 59), st.integers(0, 999_999_999))
def test_every_go_time_reads_back(when: datetime, minutes: int, nanos: int) -> None:
    zone = timezone(timedelta(minutes=minutes))
    local = when.replace(microsecond=0, tzinfo=zone)
    fraction = f".{nanos:09d}".rstrip("0").rstrip(".")
    sign = "-" if minutes < 0 else "+"
    offset = f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    text = f"{local.year:04d}-{local:%m-%d %H:%M:%S}{fraction}{offset}"  # Go pads the year
    parsed = parse_time(text)
    if local.year == 1:
        assert parsed is None
        return
    try:
        expected = (local + timedelta(microseconds=nanos // 1000)).astimezone(UTC)
    except OverflowError:
        return
    assert parsed == expected


