"""The sessions service, file scanning, cache, selection: with a fake store on disk."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clanker.descriptor import SessionOperation
from clanker.environment.local import LocalEnvironment, LocalFiles
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import LocalTransport
from clanker.ids import HarnessId
from clanker.registry import HarnessProvider, Registry
from clanker.sessions.capability import SessionsContext
from clanker.sessions.scope import workspace_scopes
from clanker.sessions.selection import (
    AmbiguousSelectionError,
    InvalidSelectionError,
    SessionNotFoundError,
    resolve_selection,
)
from clanker.sessions.service import SessionService
from clanker.sessions.types import SessionScan
from tests.helpers import (
    FakeSessions,
    make_sessions_plugin,
    path_with,
    write_fake_session,
    write_script,
)

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    directory = tmp_path / "agent-home"
    directory.mkdir()
    return directory


def registry_with(*pairs: tuple[str, FakeSessions]) -> Registry:
    return Registry.from_plugins({h: make_sessions_plugin(s, h) for h, s in pairs}, environ={})


def service(home: Path, cache: Path | None = None) -> SessionService:
    return SessionService(
        environment=LocalEnvironment({"FAKE_AGENT_HOME": str(home), "PATH": os.environ["PATH"]}),
        cache_dir=cache,
    )


def provider(registry: Registry, harness: str = "fake-agent") -> HarnessProvider:
    return registry.get_provider(HarnessId(harness))


def test_discovers_matches_the_workspace_and_sorts_newest_first(
    home: Path, tmp_path: Path
) -> None:
    work, other = tmp_path / "work", tmp_path / "other"
    (work / "sub").mkdir(parents=True)
    other.mkdir()
    write_fake_session(home, "a1", str(work), T0)
    write_fake_session(home, "a2", str(work / "sub"), T0 + timedelta(hours=1))
    write_fake_session(home, "b1", str(other), T0 + timedelta(hours=2))
    write_fake_session(home, "gone", str(work / "removed-worktree"), T0 - timedelta(days=1))
    registry = registry_with(("fake-agent", FakeSessions()))
    listing = asyncio.run(service(home).discover([provider(registry)], workspace=str(work)))
    assert [s.native_id for s in listing.sessions] == ["a2", "a1", "gone"]
    assert listing.sessions[0].title == "task a2 #0"
    assert listing.sessions[0].harness == "fake-agent"
    assert listing.complete
    everywhere = asyncio.run(service(home).discover([provider(registry)], workspace=None))
    assert [s.native_id for s in everywhere.sessions] == ["b1", "a2", "a1", "gone"]


def test_a_symlinked_workspace_matches_sessions_recorded_either_way(
    home: Path, tmp_path: Path
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    write_fake_session(home, "via-real", str(real), T0)
    write_fake_session(home, "via-link", str(link), T0 + timedelta(minutes=1))
    registry = registry_with(("fake-agent", FakeSessions()))
    for workspace in (real, link):
        listing = asyncio.run(
            service(home).discover([provider(registry)], workspace=str(workspace))
        )
        assert {s.native_id for s in listing.sessions} == {"via-real", "via-link"}
        assert {s.cwd for s in listing.sessions} == {str(real)}


def test_git_worktrees_of_the_workspace_count(home: Path, tmp_path: Path) -> None:
    repo, tree = tmp_path / "repo", tmp_path / "repo-worktrees" / "feature"
    repo.mkdir()
    git = ["git", "-c", "user.name=dev", "-c", "user.email=dev@example.com"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    subprocess.run([*git, "-C", str(repo), "worktree", "add", "-q", str(tree)], check=True)
    write_fake_session(home, "main", str(repo), T0)
    write_fake_session(home, "tree", str(tree), T0 + timedelta(minutes=1))
    write_fake_session(home, "elsewhere", str(tmp_path), T0)
    registry = registry_with(("fake-agent", FakeSessions()))
    listing = asyncio.run(service(home).discover([provider(registry)], workspace=str(repo)))
    assert [s.native_id for s in listing.sessions] == ["tree", "main"]


def test_the_worktree_listing_runs_git_without_locks_prompts_or_pager(tmp_path: Path) -> None:
    # The real git, behind a wrapper on PATH that notes what it was started with.
    repo, seen, bin_dir = tmp_path / "repo", tmp_path / "seen.json", tmp_path / "bin"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    bin_dir.mkdir()
    write_script(bin_dir, "git", f"""
        import json, os, sys
        names = ("GIT_OPTIONAL_LOCKS", "GIT_TERMINAL_PROMPT", "GIT_PAGER", "LC_ALL")
        with open({str(seen)!r}, "w") as out:
            json.dump({{name: os.environ.get(name) for name in names}}, out)
        os.execv({shutil.which("git")!r}, ["git", *sys.argv[1:]])
    """)
    scopes = asyncio.run(workspace_scopes(str(repo), LocalTransport(path_with(bin_dir))))
    assert scopes == tuple(dict.fromkeys([os.path.realpath(repo), str(repo)]))
    assert json.loads(seen.read_text()) == {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0",
                                            "GIT_PAGER": "cat", "LC_ALL": "C"}


def test_equal_timestamps_keep_provider_then_discovery_order(home: Path, tmp_path: Path) -> None:
    for name in ("x1", "x2", "x3"):
        write_fake_session(home, name, str(tmp_path), T0)
    registry = registry_with(("alpha-agent", FakeSessions()), ("beta-agent", FakeSessions()))
    providers = [provider(registry, "alpha-agent"), provider(registry, "beta-agent")]
    first = asyncio.run(service(home).discover(providers, workspace=None))
    again = asyncio.run(service(home).discover(providers, workspace=None))
    keys = [s.key for s in first.sessions]
    assert keys == [s.key for s in again.sessions]
    assert [k.split(":")[0] for k in keys] == ["alpha-agent"] * 3 + ["beta-agent"] * 3


def test_malformed_files_are_counted_skips(home: Path, tmp_path: Path) -> None:
    write_fake_session(home, "ok", str(tmp_path), T0)
    bad = home / "sessions" / "p"
    (bad / "empty.jsonl").write_bytes(b"")
    (bad / "garbage.jsonl").write_bytes(os.urandom(3000))
    (bad / "wrong-types.jsonl").write_text('{"type":"session","id":3,"cwd":[],"timestamp":"x"}\n')
    (bad / "huge-line.jsonl").write_text('{"type":"session","id":"' + "h" * 200_000 + '"}\n')
    (bad / "truncated.jsonl").write_text('{"type":"session","id":"t","cwd":"/x","timest')
    registry = registry_with(("fake-agent", FakeSessions()))
    listing = asyncio.run(service(home).discover([provider(registry)], workspace=None))
    assert [s.native_id for s in listing.sessions] == ["ok"]
    [result] = listing.scans
    assert result.scan.skipped == 5
    assert result.scan.error is None


def test_a_file_that_cannot_be_read_now_is_read_again_next_time(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Root reads anything, so the refusal (EACCES, as for mode 000) is injected
    # at the one call that reads; nothing about the file changes in between.
    from clanker.environment import files, witness

    path = write_fake_session(home, "abc", str(tmp_path), T0)
    monkeypatch.setattr(witness, "SETTLE_NS", 0)  # the store may be remembered at once
    time.sleep(0.03)
    real_read = files.read_sample

    def refuse(target: Path, **bounds: Any) -> Any:
        if str(target) == str(path):
            raise PermissionError(13, "Permission denied", str(target))
        return real_read(target, **bounds)

    sessions = FakeSessions()
    registry = registry_with(("fake-agent", sessions))
    listings = service(home)
    monkeypatch.setattr(files, "read_sample", refuse)
    refused = asyncio.run(listings.discover([provider(registry)], workspace=None))
    assert refused.sessions == () and refused.scans[0].scan.skipped == 1
    monkeypatch.setattr(files, "read_sample", real_read)
    again = asyncio.run(listings.discover([provider(registry)], workspace=None))
    assert [s.native_id for s in again.sessions] == ["abc"]


def test_a_file_dated_beyond_any_calendar_is_a_skip_not_a_failure(tmp_path: Path) -> None:
    # Year 11476: tmpfs, btrfs and zfs store it; a datetime cannot hold it.
    import tempfile

    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no tmpfs at /dev/shm")
    with tempfile.TemporaryDirectory(dir=shm) as directory:
        home = Path(directory)
        write_fake_session(home, "ok", str(tmp_path), T0)
        odd = write_fake_session(home, "odd", str(tmp_path), T0)
        os.utime(odd, (300_000_000_000, 300_000_000_000))
        if os.stat(odd).st_mtime < 300_000_000_000:
            pytest.skip("this file system clamps the time")
        registry = registry_with(("fake-agent", FakeSessions()))
        listing = asyncio.run(service(home).discover([provider(registry)], workspace=None))
    assert [s.native_id for s in listing.sessions] == ["ok"]
    assert listing.scans[0].scan.skipped == 1
    assert listing.scans[0].scan.error is None


def test_the_store_bound_keeps_the_newest_and_says_so(home: Path, tmp_path: Path) -> None:
    for index in range(5):
        path = write_fake_session(home, f"s{index}", str(tmp_path), T0 + timedelta(minutes=index))
        os.utime(path, (1_800_000_000 + index, 1_800_000_000 + index))
    registry = registry_with(("fake-agent", FakeSessions()))
    listing = asyncio.run(service(home).discover([provider(registry)], workspace=None, limit=2))
    assert [s.native_id for s in listing.sessions] == ["s4", "s3"]
    assert listing.scans[0].scan.truncated
    assert not listing.complete


def test_a_failing_provider_is_reported_beside_the_others(home: Path, tmp_path: Path) -> None:
    class Broken(FakeSessions):
        async def discover(self, context: SessionsContext) -> SessionScan:
            raise HarnessCapabilityError(ErrorKind.STORAGE_CHANGED, "schema")

    class Crashing(FakeSessions):
        async def discover(self, context: SessionsContext) -> SessionScan:
            raise RuntimeError("provider bug")

    write_fake_session(home, "ok", str(tmp_path), T0)
    registry = registry_with(("broken-agent", Broken()), ("crashy-agent", Crashing()),
                             ("fake-agent", FakeSessions()))
    listing = asyncio.run(service(home).discover(list(registry.providers.values()),
                                                 workspace=None))
    assert [s.native_id for s in listing.sessions] == ["ok"]
    errors = {r.harness: r.scan.error for r in listing.scans}
    assert errors["broken-agent"] is not None
    assert errors["broken-agent"].kind is ErrorKind.STORAGE_CHANGED
    assert errors["crashy-agent"] is not None
    assert errors["crashy-agent"].kind is ErrorKind.PARSE_FAILURE
    assert errors["fake-agent"] is None
    assert not listing.complete


def test_missing_store_is_empty_not_an_error(tmp_path: Path) -> None:
    registry = registry_with(("fake-agent", FakeSessions()))
    listing = asyncio.run(service(tmp_path / "nowhere").discover([provider(registry)],
                                                                  workspace=None))
    assert listing.sessions == ()
    assert listing.complete


def test_links_in_the_store_are_never_followed(home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = write_fake_session(outside, "secret", str(tmp_path), T0)
    write_fake_session(home, "ok", str(tmp_path), T0)
    (home / "sessions" / "p" / "link.jsonl").symlink_to(secret)
    (home / "sessions" / "linked-dir").symlink_to(secret.parent, target_is_directory=True)
    registry = registry_with(("fake-agent", FakeSessions()))
    listing = asyncio.run(service(home).discover([provider(registry)], workspace=None))
    assert [s.native_id for s in listing.sessions] == ["ok"]
    root = (home / "sessions").resolve()
    assert all(Path(s.store_path or "").resolve().is_relative_to(root) for s in listing.sessions)


# -- the per-file cache ------------------------------------------------------------------------


def test_unchanged_files_are_not_parsed_again_and_changed_ones_are(
    home: Path, tmp_path: Path
) -> None:
    fake = FakeSessions()
    registry = registry_with(("fake-agent", fake))
    path = write_fake_session(home, "s", str(tmp_path), T0)
    write_fake_session(home, "t", str(tmp_path), T0)
    svc = service(home)
    asyncio.run(svc.discover([provider(registry)], workspace=None))
    assert fake.parsed == 2
    asyncio.run(svc.discover([provider(registry)], workspace=None))
    assert fake.parsed == 2
    with path.open("a") as handle:
        handle.write('{"type":"message","role":"user","text":"more",'
                     f'"timestamp":"{(T0 + timedelta(days=1)).isoformat()}"}}\n')
    listing = asyncio.run(svc.discover([provider(registry)], workspace=None))
    assert fake.parsed == 3
    assert listing.sessions[0].native_id == "s"
    assert listing.sessions[0].updated_at == T0 + timedelta(days=1)


def test_the_disk_cache_survives_processes_and_forgets_deleted_files(
    home: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    keep = write_fake_session(home, "keep", str(tmp_path), T0)
    gone = write_fake_session(home, "gone", str(tmp_path), T0)
    first = FakeSessions()
    asyncio.run(service(home, cache).discover([provider(registry_with(("fake-agent", first)))],
                                              workspace=None))
    gone.unlink()
    second = FakeSessions()
    listing = asyncio.run(service(home, cache).discover(
        [provider(registry_with(("fake-agent", second)))], workspace=None))
    assert second.parsed == 0
    assert [s.native_id for s in listing.sessions] == ["keep"]
    assert listing.sessions[0].store_path == str(keep)
    assert "gone" not in (cache / "sessions" / "fake-agent.json").read_text()


def test_the_disk_cache_is_written_in_pieces_as_one_json_document(tmp_path: Path) -> None:
    import json as _json

    from clanker.sessions import cache
    from clanker.sessions.types import EMPTY, HarnessSession

    path = tmp_path / "sessions" / "fake-agent.json"
    kept = cache.SummaryCache(HarnessId("fake-agent"), path)
    kept.bind("shared: /x")
    count = cache._ROWS_PER_PIECE * 2 + 3  # several pieces, the last one short
    for index in range(count):
        stat = os.stat_result((0o100600, 10 + index, 1, 1, 0, 0, index, 0, 0, 0),
                              {"st_mtime_ns": 1_000_000_000 * index})
        summary = (None if index % 3 == 0 else EMPTY if index % 3 == 1 else HarnessSession(
            harness=HarnessId("fake-agent"), native_id=f"s{index}", updated_at=T0,
            title="ü \"quoted\"", cwd=str(tmp_path), store_path=f"/s/{index}.jsonl"))
        kept.store(f"/s/{index}.jsonl", stat, summary)
    kept.save()
    rows = [cache._row(p, entry) for p, entry in kept._entries.items()]
    document = {"version": cache._VERSION, "harness": "fake-agent", "reading": "shared: /x",
                "rows": rows}
    # The same text one `json.dumps` of the whole document gives.
    assert path.read_text(encoding="utf-8") == _json.dumps(
        document, separators=(",", ":"), ensure_ascii=False)
    again = cache.SummaryCache(HarnessId("fake-agent"), path)
    again.bind("shared: /x")
    assert again._entries == kept._entries
    again.forget_unseen()  # nothing was looked up: every file is gone
    again.save()
    assert _json.loads(path.read_text()) == {**document, "rows": []}


@pytest.mark.parametrize("content", ["{", "[]", '{"version":1,"harness":"fake-agent","entries":7}',
                                     '{"version":1,"harness":"other","entries":[]}'])
def test_a_corrupt_cache_is_ignored(home: Path, tmp_path: Path, content: str) -> None:
    cache = tmp_path / "cache"
    (cache / "sessions").mkdir(parents=True)
    (cache / "sessions" / "fake-agent.json").write_text(content)
    write_fake_session(home, "s", str(tmp_path), T0)
    fake = FakeSessions()
    listing = asyncio.run(service(home, cache).discover(
        [provider(registry_with(("fake-agent", fake)))], workspace=None))
    assert [s.native_id for s in listing.sessions] == ["s"]
    assert fake.parsed == 1


# -- selection ----------------------------------------------------------------------------------


def select(home: Path, registry: Registry, raw: str, op: SessionOperation | None,
           workspace: Path) -> object:
    return asyncio.run(resolve_selection(
        service(home), registry, raw, operation=op, workspace=str(workspace),
    ))


def test_selection_refinds_the_session_and_launches_in_its_directory(
    home: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    write_fake_session(home, "abc", str(work), T0)
    registry = registry_with(("fake-agent", FakeSessions()))
    found = select(home, registry, "fake-agent:abc", SessionOperation.RESUME, tmp_path)
    assert found.session.native_id == "abc"  # type: ignore[attr-defined]
    assert found.launch_cwd == str(work)  # type: ignore[attr-defined]
    assert found.notice is None  # type: ignore[attr-defined]


def test_a_unique_id_prefix_selects_its_session(home: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    write_fake_session(home, "abcdef0123456789", str(work), T0)
    write_fake_session(home, "abcdef99aaaa", str(work), T0, project="q")
    registry = registry_with(("fake-agent", FakeSessions()))
    found = select(home, registry, "fake-agent:ABCDEF01", SessionOperation.RESUME, tmp_path)
    assert found.session.native_id == "abcdef0123456789"  # type: ignore[attr-defined]
    assert found.launch_cwd == str(work)  # type: ignore[attr-defined]
    with pytest.raises(SessionNotFoundError):  # shorter than a prefix may be
        select(home, registry, "fake-agent:abcdef0", None, tmp_path)


def test_an_ambiguous_prefix_names_its_candidates(home: Path, tmp_path: Path) -> None:
    for native_id, project in (("abcdef01aaaa", "p"), ("abcdef01bbbb", "q")):
        write_fake_session(home, native_id, str(tmp_path), T0, project=project)
    registry = registry_with(("fake-agent", FakeSessions()))
    with pytest.raises(AmbiguousSelectionError) as caught:
        select(home, registry, "fake-agent:abcdef01", None, tmp_path)
    assert sorted(caught.value.candidates) == ["fake-agent:abcdef01aaaa",
                                               "fake-agent:abcdef01bbbb"]
    assert "fake-agent:abcdef01aaaa" in str(caught.value)


@pytest.mark.parametrize("raw", ["fake-agent", "fake-agent:", "nope:abc", "fake-agent:../x",
                                 ":abc", "fake-agent:a b"])
def test_malformed_selections(home: Path, tmp_path: Path, raw: str) -> None:
    registry = registry_with(("fake-agent", FakeSessions()))
    with pytest.raises(InvalidSelectionError):
        select(home, registry, raw, SessionOperation.RESUME, tmp_path)


def test_a_session_that_is_gone_is_not_found(home: Path, tmp_path: Path) -> None:
    registry = registry_with(("fake-agent", FakeSessions()))
    with pytest.raises(SessionNotFoundError):
        select(home, registry, "fake-agent:missing", SessionOperation.RESUME, tmp_path)


def test_a_removed_directory_follows_the_harness_policy(home: Path, tmp_path: Path) -> None:
    write_fake_session(home, "abc", str(tmp_path / "removed"), T0)
    strict = registry_with(("fake-agent", FakeSessions(resumes_elsewhere=False)))
    with pytest.raises(HarnessCapabilityError) as caught:
        select(home, strict, "fake-agent:abc", SessionOperation.RESUME, tmp_path)
    assert caught.value.kind is ErrorKind.UNSUPPORTED
    assert "no longer exists" in str(caught.value)
    lenient = registry_with(("fake-agent", FakeSessions(resumes_elsewhere=True)))
    found = select(home, lenient, "fake-agent:abc", SessionOperation.RESUME, tmp_path)
    assert found.launch_cwd == str(tmp_path)  # type: ignore[attr-defined]
    assert "no longer exists" in (found.notice or "")  # type: ignore[attr-defined]


def test_unsupported_fork_fails_before_any_scan(home: Path, tmp_path: Path) -> None:
    fake = FakeSessions()
    plugin = make_sessions_plugin(fake)
    registry = Registry.from_plugins({"fake-agent": plugin}, environ={})
    found_fork = registry.get_provider(HarnessId("fake-agent")).descriptor.fork
    assert found_fork is not None  # the helper declares a local native fork
    from attrs import evolve

    no_fork = evolve(registry.get_provider(HarnessId("fake-agent")),
                     descriptor=evolve(registry.get_provider(HarnessId("fake-agent")).descriptor,
                                       fork=None))
    stripped = Registry({HarnessId("fake-agent"): no_fork})
    with pytest.raises(HarnessCapabilityError) as caught:
        select(home, stripped, "fake-agent:abc", SessionOperation.FORK, tmp_path)
    assert caught.value.kind is ErrorKind.UNSUPPORTED
    assert fake.parsed == 0


def test_a_store_path_escaping_the_store_is_refused(home: Path, tmp_path: Path) -> None:
    class Escaping(FakeSessions):
        def store_roots(self, environ: object, files: object) -> tuple[Path, ...]:
            return (tmp_path / "elsewhere",)  # the files are not under the declared root

    write_fake_session(home, "abc", str(tmp_path), T0)
    registry = registry_with(("fake-agent", Escaping()))
    with pytest.raises(HarnessCapabilityError) as caught:
        select(home, registry, "fake-agent:abc", SessionOperation.RESUME, tmp_path)
    assert caught.value.kind is ErrorKind.STORAGE_CHANGED


def test_a_store_failure_is_never_treated_as_not_found(home: Path, tmp_path: Path) -> None:
    class Broken(FakeSessions):
        async def discover(self, context: SessionsContext) -> SessionScan:
            raise HarnessCapabilityError(ErrorKind.STORAGE_CHANGED, "schema")

    registry = registry_with(("fake-agent", Broken()))
    with pytest.raises(HarnessCapabilityError):
        select(home, registry, "fake-agent:abc", SessionOperation.RESUME, tmp_path)


def test_refinding_ignores_the_workspace_filter(home: Path, tmp_path: Path) -> None:
    write_fake_session(home, "abc", str(tmp_path / "elsewhere"), T0)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "here").mkdir()
    registry = registry_with(("fake-agent", FakeSessions()))
    found = select(home, registry, "fake-agent:abc", SessionOperation.RESUME, tmp_path / "here")
    assert found.launch_cwd == str((tmp_path / "elsewhere").resolve())  # type: ignore[attr-defined]


def test_a_partial_scan_is_not_complete(home: Path, tmp_path: Path) -> None:
    class OneProject(FakeSessions):
        async def discover(self, context: SessionsContext) -> SessionScan:
            scan = await super().discover(context)
            return SessionScan(sessions=scan.sessions, partial="lists one project at a time")

    write_fake_session(home, "abc", str(tmp_path), T0)
    registry = registry_with(("fake-agent", OneProject()))
    listing = asyncio.run(service(home).discover([provider(registry)], workspace=None))
    assert [s.native_id for s in listing.sessions] == ["abc"]
    assert not listing.complete


def test_context_wants_applies_the_services_rule(tmp_path: Path) -> None:
    from clanker.sessions.cache import SummaryCache

    (tmp_path / "w" / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "w")

    def context(**fields: object) -> SessionsContext:
        return SessionsContext(files=LocalFiles(),
                               harness=HarnessId("fake-agent"), executor=LocalTransport(),
                               environ={}, cache=SummaryCache(HarnessId("fake-agent"), None),
                               **fields)  # type: ignore[arg-type]

    scoped = context(scopes=(str((tmp_path / "w").resolve()),))
    assert scoped.wants(str(tmp_path / "w" / "sub"))
    assert scoped.wants(str(tmp_path / "link" / "sub"))
    assert scoped.wants(None)
    assert not scoped.wants(str(tmp_path / "elsewhere"))
    assert context().wants(str(tmp_path / "elsewhere"))
    refinding = context(scopes=scoped.scopes, native_id="abc")
    assert refinding.wants(str(tmp_path / "elsewhere"))


def test_hidden_sessions_are_neither_listed_nor_skipped_but_can_be_refound(
    home: Path, tmp_path: Path
) -> None:
    from attrs import evolve

    class Hiding(FakeSessions):
        def summarize(self, sample):  # type: ignore[no-untyped-def]
            session = super().summarize(sample)
            if session is not None and session.native_id.startswith("sub"):
                return evolve(session, hidden=True)
            return session

    (tmp_path / "w").mkdir()
    write_fake_session(home, "main", str(tmp_path / "w"), T0)
    write_fake_session(home, "sub1", str(tmp_path / "w"), T0)
    cache = tmp_path / "cache"
    for _ in range(2):  # the second run answers from the cache, hidden flag included
        registry = registry_with(("fake-agent", Hiding()))
        listing = asyncio.run(service(home, cache).discover([provider(registry)],
                                                           workspace=None))
        assert [s.native_id for s in listing.sessions] == ["main"]
        assert listing.scans[0].scan.skipped == 0
        found = select(home, registry, "fake-agent:sub1", SessionOperation.RESUME, tmp_path)
        assert found.session.hidden  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad_row", [
    ["/p", True, 1, 1],  # a boolean is not a size
    ["/p", 1, 1, 1, "id", "2026-11-30", None, None, None, None, None, None, False],  # text time
    ["/p", 1, 1, 1, "id", 1.0, None, None, None, None, 1.5, None, False],  # fractional count
    ["/p", 1, 1, 1, "id", 1.0, None, None, None, None, None, None, 0],  # 0 is not False
    ["/p", 1, 1, 1, "id", 1.0, None, "relative", None, None, None, None, False],  # bad cwd
    ["/p", 1, 1],  # too short
])
def test_a_cache_row_of_the_wrong_shape_discards_the_cache(
    home: Path, tmp_path: Path, bad_row: list[object]
) -> None:
    import json as _json

    cache = tmp_path / "cache"
    write_fake_session(home, "s", str(tmp_path), T0)
    fake = FakeSessions()
    registry = registry_with(("fake-agent", fake))
    asyncio.run(service(home, cache).discover([provider(registry)], workspace=None))
    path = cache / "sessions" / "fake-agent.json"
    document = _json.loads(path.read_text())
    document["rows"].append(bad_row)
    path.write_text(_json.dumps(document))
    again = FakeSessions()
    listing = asyncio.run(service(home, cache).discover(
        [provider(registry_with(("fake-agent", again)))], workspace=None))
    assert [s.native_id for s in listing.sessions] == ["s"]
    assert again.parsed == 1  # nothing was trusted: the file was parsed again


def test_one_unreadable_project_hides_nothing_else(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_fake_session(home, "seen", str(tmp_path), T0, project="p")
    write_fake_session(home, "hidden", str(tmp_path), T0, project="q")
    refused = {str(home / "sessions" / "q")}
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        # Root reads any directory, so the refusal (EACCES, as for mode 000) is injected.
        if os.fspath(path) in refused:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    registry = registry_with(("fake-agent", FakeSessions()))
    listing = asyncio.run(service(home).discover([provider(registry)], workspace=None))
    assert [s.native_id for s in listing.sessions] == ["seen"]
    [result] = listing.scans
    assert result.scan.error is None and result.scan.skipped == 1
    refused.add(str(home / "sessions"))  # now the store itself
    listing = asyncio.run(service(home).discover([provider(registry)], workspace=None))
    error = listing.scans[0].scan.error
    assert error is not None and error.kind is ErrorKind.NOT_CONFIGURED
    assert "cannot be read" in error.message


_CELLS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                   st.text(max_size=3), st.lists(st.integers(), max_size=1))
_OF_TYPE = {str: st.text(min_size=1, max_size=3), int: st.integers(0, 10),
            float: st.floats(0, 2e9), bool: st.booleans(), type(None): st.none()}


@given(st.data())
@settings(max_examples=400)
def test_a_cached_row_is_accepted_exactly_by_its_field_types(data: st.DataObject) -> None:
    from clanker.sessions import cache

    kinds = cache._SESSION_TYPES
    # Mostly a value of an allowed type per field (so that whole rows pass), sometimes not.
    fields: list[object] = [
        data.draw(st.one_of(st.sampled_from(allowed).flatmap(_OF_TYPE.__getitem__), _CELLS))
        for allowed in kinds]
    fields += data.draw(st.lists(_CELLS, max_size=1))
    if data.draw(st.booleans()) and len(fields) > 1:
        fields.pop()
    by_field = len(fields) == len(kinds) and all(
        type(value) in allowed for value, allowed in zip(fields, kinds, strict=False))
    try:
        cache._session(HarnessId("fake-agent"), "/s/a.jsonl", fields)
    except ValueError as exc:
        accepted = "unexpected shape" not in str(exc)  # a value its validator refused
    except (TypeError, OverflowError, OSError):
        accepted = True  # the shape passed; a value was out of range
    else:
        accepted = True
    assert accepted == by_field
