"""Bounded file reading, timestamps, confinement, directory walks, read-only SQLite."""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from attrs import evolve
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clanker.environment.files import FileSample, confined, read_sample
from clanker.environment.sqlite import open_readonly, require_columns
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.ids import HarnessId
from clanker.sessions.filestore import find_files
from clanker.sessions.types import (
    HarnessSession,
    bounded_text,
    clean_text,
    parse_timestamp,
    placed,
)

_files = settings(max_examples=80, deadline=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture])


@_files
@given(data=st.binary(max_size=5000), head=st.integers(1, 2048), tail=st.integers(1, 2048))
def test_any_bytes_never_crash_the_sample(tmp_path: Path, data: bytes, head: int,
                                          tail: int) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    sample = read_sample(path, head_bytes=head, tail_bytes=tail)
    assert sample.size == len(data)
    assert len(sample.head) <= head
    assert len(sample.tail) <= tail
    for line in sample.head_lines() + sample.tail_lines():
        assert b"\n" not in line
    list(sample.head_objects())
    list(sample.tail_objects())


@_files
@given(lines=st.lists(st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
                      min_size=1, max_size=40),
       head=st.integers(16, 400))
def test_only_whole_lines_are_ever_parsed(tmp_path: Path, lines: list[dict[str, int]],
                                          head: int) -> None:
    import json

    path = tmp_path / "f.jsonl"
    encoded = [json.dumps(line) for line in lines]
    path.write_text("".join(e + "\n" for e in encoded))
    sample = read_sample(path, head_bytes=head, tail_bytes=head)
    for line in sample.head_lines() + sample.tail_lines():
        assert line.decode() in encoded


def test_a_huge_first_line_yields_no_objects(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text('{"a":"' + "x" * 100_000 + '"}\n{"b":1}\n')
    sample = read_sample(path, head_bytes=1024, tail_bytes=1024)
    assert list(sample.head_objects()) == []
    assert list(sample.tail_objects()) == [{"b": 1}]  # the cut line is dropped, not parsed


def test_reading_a_link_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("{}\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(OSError):
        read_sample(link)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2026-11-30T07:42:14.368Z", datetime(2026, 11, 30, 7, 42, 14, 368000, tzinfo=UTC)),
        ("2026-11-30T08:42:14+01:00", datetime(2026, 11, 30, 7, 42, 14, tzinfo=UTC)),
        (1796025320, datetime.fromtimestamp(1796025320, UTC)),
        (1796025320480, datetime.fromtimestamp(1796025320.48, UTC)),
        (1796025320.48, datetime.fromtimestamp(1796025320.48, UTC)),
        ("2026-11-30T07:42:14", None),
        ("yesterday", None),
        (True, None),
        (None, None),
        (10**30, None),
        (10**400, None),  # too large for a float: no timestamp, not an OverflowError
        (float("inf"), None),
        (float("nan"), None),
    ],
)
def test_parse_timestamp(raw: object, expected: datetime | None) -> None:
    assert parse_timestamp(raw) == expected


@given(st.text())
def test_clean_text_is_one_printable_bounded_line(raw: str) -> None:
    cleaned = clean_text(raw, limit=50)
    if cleaned is not None:
        assert cleaned.isprintable()
        assert len(cleaned) <= 50
        assert cleaned == cleaned.strip()


@given(st.text(st.characters(codec=None)) | st.text(st.sampled_from(" \t\n\r\x00\x0b\x1c\x1f"
                                                              "\x85\xa0\u1680\u200b\u2028"
                                                              "\u3000\ufeffab\u00e9")))
def test_clean_text_folds_as_one_character_at_a_time(raw: str) -> None:
    """Each unprintable character is a space, runs of spaces one, the ends trimmed."""
    by_character = " ".join("".join(c if c.isprintable() else " " for c in raw).split())
    expected = (None if not by_character else by_character if len(by_character) <= 50
                else by_character[:49].rstrip() + "\u2026")
    assert clean_text(raw, limit=50) == expected


@given(st.text(), st.integers(0, 20))
def test_bounded_text_passes_a_usable_string_unchanged(raw: str, limit: int) -> None:
    usable = bool(raw.strip()) and len(raw) <= limit and "\x00" not in raw
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        usable = False
    assert bounded_text(raw, limit) == (raw if usable else None)


@pytest.mark.parametrize("raw", [None, 42, b"/bytes", " \t\n", "/a\x00b", "/lone\ud800", "x" * 5])
def test_bounded_text_refuses(raw: object) -> None:
    assert bounded_text(raw, 4) is None


def test_confinement(tmp_path: Path) -> None:
    root = tmp_path / "store"
    (root / "p").mkdir(parents=True)
    inside = root / "p" / "s.jsonl"
    inside.write_text("{}")
    outside = tmp_path / "outside.jsonl"
    outside.write_text("{}")
    (root / "p" / "link.jsonl").symlink_to(outside)
    assert confined(inside, (root,))
    assert confined(root / "p" / ".." / "p" / "s.jsonl", (root,))
    assert not confined(root / ".." / "outside.jsonl", (root,))
    assert not confined(root / "p" / "link.jsonl", (root,))
    assert not confined(root / "p" / "missing.jsonl", (root,))
    assert not confined(root / "p", (root,))
    assert not confined(inside, (tmp_path / "nonexistent-root",))


def test_find_files_depth_filters_and_bound(tmp_path: Path) -> None:
    for day in ("01", "02"):
        directory = tmp_path / "2026" / "11" / day
        directory.mkdir(parents=True)
        (directory / f"rollout-{day}.jsonl").write_text("{}")
        (directory / "notes.txt").write_text("")
    (tmp_path / "2026" / "stray.jsonl").write_text("{}")
    found, cut = find_files(tmp_path, depth=3, accept_file=lambda n: n.endswith(".jsonl"))
    assert sorted(Path(c.path).name for c in found) == ["rollout-01.jsonl", "rollout-02.jsonl"]
    assert not cut
    pruned, _ = find_files(tmp_path, depth=3, accept_file=lambda n: True,
                           accept_dir=lambda level, name: level != 2 or name == "02")
    assert sorted(Path(c.path).name for c in pruned) == ["notes.txt", "rollout-02.jsonl"]
    _, cut = find_files(tmp_path, depth=3, accept_file=lambda n: True, max_entries=3)
    assert cut
    assert find_files(tmp_path / "missing", depth=1, accept_file=lambda n: True) == ([], False)


def make_db(path: Path) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE conversations (id TEXT, title TEXT, updated REAL)")
        connection.execute("INSERT INTO conversations VALUES ('c1', 'hello', 1.5)")


def test_sqlite_is_read_only_and_schema_checked(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    make_db(db)
    with open_readonly(db, harness="h") as connection:
        require_columns(connection, {"conversations": frozenset({"id", "title"})}, harness="h")
        assert connection.execute("SELECT id FROM conversations").fetchall() == [("c1",)]
        with pytest.raises(sqlite3.OperationalError):
            connection.execute("DELETE FROM conversations")
        with pytest.raises(HarnessCapabilityError) as caught:
            require_columns(connection, {"conversations": frozenset({"id", "cwd"})}, harness="h")
        assert caught.value.kind is ErrorKind.STORAGE_CHANGED
        assert "cwd" in str(caught.value)
        with pytest.raises(HarnessCapabilityError):
            require_columns(connection, {"missing_table": frozenset({"id"})}, harness="h")


def test_a_corrupt_database_is_storage_changed(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    db.write_bytes(b"not a database at all" * 100)
    with pytest.raises(HarnessCapabilityError) as caught, open_readonly(db, harness="h") as conn:
        conn.execute("SELECT * FROM sqlite_master").fetchall()
    assert caught.value.kind is ErrorKind.STORAGE_CHANGED


def test_opening_never_creates_a_database(tmp_path: Path) -> None:
    with pytest.raises(HarnessCapabilityError), open_readonly(tmp_path / "absent.db", harness="h"):
        pass
    assert not (tmp_path / "absent.db").exists()


def test_year_one_east_of_utc_is_no_timestamp() -> None:
    assert parse_timestamp("0001-01-01T00:00:00+01:00") is None


@pytest.mark.parametrize("cwd", ["relative/dir", "/a\0b", "/bad\udcff", ""])
def test_sessions_refuse_unusable_directories(cwd: str) -> None:
    from clanker.ids import HarnessId
    from clanker.sessions.types import HarnessSession

    with pytest.raises(ValueError):
        HarnessSession(harness=HarnessId("h"), native_id="x", cwd=cwd,
                       updated_at=datetime(2026, 1, 1, tzinfo=UTC))


def test_a_wal_database_in_a_read_only_directory_is_readable(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root can write anywhere; the read-only case cannot be built")
    store = tmp_path / "ro"
    store.mkdir()
    db = store / "store.db"
    make_db(db)
    with sqlite3.connect(db) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
    store.chmod(0o500)
    try:
        with open_readonly(db, harness="h") as connection:
            assert connection.execute("SELECT id FROM conversations").fetchall() == [("c1",)]
    finally:
        store.chmod(0o700)


def test_an_unwritable_directory_opens_the_database_immutable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoever runs the suite (root included), the branch is taken and reads work."""
    db = tmp_path / "store.db"
    make_db(db)
    with sqlite3.connect(db) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
    opened: list[str] = []
    real_connect = sqlite3.connect

    def spy(database: str, **kwargs: object) -> sqlite3.Connection:
        opened.append(database)
        return real_connect(database, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("clanker.environment.sqlite.os.access", lambda path, mode: False)
    monkeypatch.setattr("clanker.environment.sqlite.sqlite3.connect", spy)
    with open_readonly(db, harness="h") as connection:
        assert connection.execute("SELECT id FROM conversations").fetchall() == [("c1",)]
    assert opened[0].endswith("?mode=ro&immutable=1")
    assert not (tmp_path / "store.db-shm").exists()


# -- odd files and directories inside a store ------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "socket", "directory"])
def test_a_file_replaced_since_the_walk_is_refused_without_blocking(
    tmp_path: Path, kind: str
) -> None:
    import socket
    import threading

    path = tmp_path / "s.jsonl"
    path.write_text('{"a":1}\n')
    walked = os.lstat(path)  # what the walk saw: a regular file
    path.unlink()
    server = socket.socket(socket.AF_UNIX)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        server.bind(str(path))
    else:
        path.mkdir()
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            read_sample(path, stat=walked)
        except OSError as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=30)  # a hang guard only: the read must not block at all
    server.close()
    assert not reader.is_alive(), "reading a replaced file blocked"
    assert isinstance(outcome[0], OSError)


def test_an_unreadable_project_directory_is_a_skip_not_a_lost_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clanker.environment.witness import Witness

    for project in ("a", "b"):
        (tmp_path / project).mkdir()
        (tmp_path / project / "s.jsonl").write_text("{}\n")
    refused = str(tmp_path / "a")
    real_scandir = os.scandir

    def scandir(path: object) -> object:
        # Root reads any directory, so the refusal (EACCES, as for mode 000) is injected.
        if os.fspath(path) == refused:  # type: ignore[arg-type]
            raise PermissionError(13, "Permission denied", refused)
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", scandir)
    witness = Witness()
    found, cut = find_files(tmp_path, depth=1, accept_file=lambda n: True, witness=witness)
    assert [Path(c.path).parent.name for c in found] == ["b"]
    assert not cut
    assert witness.unreadable == 1 and not witness.usable
    monkeypatch.setattr(os, "scandir", lambda path: (_ for _ in ()).throw(
        PermissionError(13, "Permission denied", os.fspath(path))))
    with pytest.raises(PermissionError):  # the store itself: the provider reports it
        find_files(tmp_path, depth=1, accept_file=lambda n: True)


_AWARE = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1),
                      timezones=st.just(UTC))


@given(session=st.builds(
    HarnessSession, harness=st.sampled_from([HarnessId("pi"), HarnessId("claude")]),
    native_id=st.text(min_size=1, max_size=8), updated_at=_AWARE,
    title=st.none() | st.text(max_size=8), cwd=st.none() | st.just("/work"),
    created_at=st.none() | _AWARE, model=st.none() | st.text(max_size=8),
    message_count=st.none() | st.integers(0, 9), parent_id=st.none() | st.text(max_size=8),
    store_path=st.none() | st.text(max_size=8), order=st.integers(0, 9), hidden=st.booleans(),
    account=st.none() | st.text(max_size=8)),
    order=st.integers(0, 10_000), store_path=st.text(max_size=20))
def test_a_placed_session_is_the_one_evolve_makes(session: HarnessSession, order: int,
                                                  store_path: str) -> None:
    harness = HarnessId("codex")
    shared: dict[str | None, str | None] = {}
    copy = placed(session, harness, store_path, order, shared)
    expected = evolve(session, harness=harness, store_path=store_path, order=order)
    assert copy == expected
    # Placed again, with the strings the first one left in `shared`: the same session.
    assert placed(session, harness, store_path, order, shared) == expected
    assert hash(copy) == hash(expected)
    assert repr(copy) == repr(expected)
    assert type(copy) is HarnessSession


def test_a_file_whose_name_is_not_text_is_a_skip_and_the_rest_is_kept(tmp_path: Path) -> None:
    """A name of bytes no UTF-8 decodes (the walk spells it with surrogates) is a
    counted skip: its session could not be printed or kept, and the store's other
    sessions are listed and kept on disk as usual."""
    import asyncio

    from clanker.environment.local import LocalEnvironment
    from clanker.registry import Registry
    from clanker.sessions.service import SessionService

    fixtures = Path(__file__).resolve().parents[1] / "fixtures/pi/sessions/pi-agent/sessions"
    source = min(fixtures.rglob("*.jsonl"))
    project = tmp_path / "pi/sessions" / source.parent.name
    project.mkdir(parents=True)
    (project / "good.jsonl").write_bytes(source.read_bytes())
    os.makedirs(os.fsencode(project), exist_ok=True)
    with open(os.fsencode(project) + b"/bad\xff.jsonl", "wb") as handle:
        handle.write(source.read_bytes())
    provider = Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": "pi"}).providers[
        HarnessId("pi")]
    environ = {"HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(tmp_path / "pi"),
               "PATH": os.environ.get("PATH", "")}

    def listing() -> tuple[list[str | None], int]:
        service = SessionService(environment=LocalEnvironment(environ),
                                 cache_dir=tmp_path / "cache")
        found = asyncio.run(service.discover([provider], workspace=None))
        (scan,) = found.scans
        assert scan.scan.error is None
        return [s.store_path for s in found.sessions], scan.scan.skipped

    assert listing() == ([str(project / "good.jsonl")], 1)
    assert (tmp_path / "cache/sessions/pi.json").is_file()  # the rest was kept
    assert listing() == ([str(project / "good.jsonl")], 1)  # and read back from there


def test_a_file_a_sniff_decides_is_never_read_whole(tmp_path: Path) -> None:
    """scan_files shows a sniff each file's first bytes: a file it decides is never read
    whole (the summarizer never sees it), the others are summarized as without one, and
    the scan is the one made without a sniff."""
    from clanker.sessions.filestore import scan_files
    from clanker.sessions.sniffing import SNIFF_BYTES
    from clanker.sessions.types import FOREIGN, NoSession
    from clanker.testing.sessions import sessions_context

    theirs = b'{"owner":"other"}\n'
    for number in range(6):
        body = theirs if number % 2 else b'{"owner":"mine"}\n'
        (tmp_path / f"s{number}.jsonl").write_bytes(body + b"x" * (4 * SNIFF_BYTES) + b"\n")
    # Shorter than what a sniff is shown: its first read is its sample, read once.
    (tmp_path / "s6.jsonl").write_bytes(b'{"owner":"mine"}\n{"short":true}\n')
    summarized: list[str] = []
    shown: list[int] = []

    def summarize(sample: FileSample) -> HarnessSession | None:
        summarized.append(sample.path.name)
        if sample.head.startswith(theirs):
            return None  # never asked: the sniff decided it
        assert sample.head.endswith(b"\n") and (sample.whole or sample.tail)
        return HarnessSession(harness=HarnessId("fake-agent"), native_id=sample.path.stem,
                              updated_at=sample.mtime)

    def sniff(sample: FileSample) -> NoSession | None:
        shown.append(len(sample.head) + len(sample.tail))
        return FOREIGN if sample.head.startswith(theirs) else None

    candidates, _ = find_files(tmp_path, depth=0, accept_file=lambda name: True)
    sniffed = scan_files(sessions_context("fake-agent", {}), candidates, summarize,
                         sniff=sniff)
    assert sorted(summarized) == ["s0.jsonl", "s2.jsonl", "s4.jsonl", "s6.jsonl"]
    assert len(shown) == 7 and max(shown) <= SNIFF_BYTES
    assert sorted(s.native_id for s in sniffed.sessions) == ["s0", "s2", "s4", "s6"]
    summarized.clear()

    def reference(sample: FileSample) -> HarnessSession | NoSession | None:
        return FOREIGN if sample.head.startswith(theirs) else summarize(sample)

    assert scan_files(sessions_context("fake-agent", {}), candidates, reference) == sniffed
