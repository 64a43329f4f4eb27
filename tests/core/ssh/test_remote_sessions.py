"""Session history read on an SSH host: the providers unchanged, the host's files
read in a bounded number of executions of one program sent on stdin."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from clanker.api import Clanker
from clanker.environment.local import LocalEnvironment
from clanker.environment.ssh import SshEnvironment
from clanker.environment.ssh_scan import MAX_PARTS, MAX_ROUNDS
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.sessions.service import SessionListing, SessionService
from tests.sshd import Sshd

_FIXTURES = Path(__file__).parents[2] / "fixtures"
# Each harness's store as the fixtures hold it, and where it lives in a home.
_STORES = {
    ".claude": _FIXTURES / "claude" / "sessions" / "claude-config",
    ".codex": _FIXTURES / "codex" / "sessions" / "codex-home",
    ".omp/agent": _FIXTURES / "omp" / "sessions" / "omp-agent",
}


def _chown_tree(top: Path, uid: int, gid: int) -> None:
    os.chown(top, uid, gid, follow_symlinks=False)
    for directory, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            os.chown(os.path.join(directory, name), uid, gid, follow_symlinks=False)


@pytest.fixture
def remote_home(sshd: Sshd) -> Iterator[Path]:
    """The test user's home holding the fixture stores; removed afterwards. Only with
    the dedicated test user (as root), whose home this process can write."""
    if os.geteuid() != 0:
        pytest.skip("placing stores in the remote home needs the dedicated test user (root)")
    entry = pwd.getpwnam(sshd.user)
    placed = []
    for where, source in _STORES.items():
        target = sshd.home / where
        shutil.copytree(source, target, symlinks=True)
        placed.append(sshd.home / where.split("/")[0])
    for top in placed:
        _chown_tree(top, entry.pw_uid, entry.pw_gid)
    try:
        yield sshd.home
    finally:
        for top in placed:
            shutil.rmtree(top, ignore_errors=True)
        (sshd.home / ".bash_profile").unlink(missing_ok=True)
        shutil.rmtree(sshd.home / "nopy", ignore_errors=True)


@pytest.fixture
def store_home(sshd: Sshd) -> Iterator[Path]:
    """A home of its own inside the test user's, holding the fixture stores (a
    listing reads it through the service's ``homes`` seam: see
    :func:`_remote_listing`), so that other tests placing files in the test
    user's home change nothing here; removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("placing stores in the remote home needs the dedicated test user (root)")
    home = Path(tempfile.mkdtemp(prefix="stores-", dir=sshd.home))
    for where, source in _STORES.items():
        shutil.copytree(source, home / where, symlinks=True)
    # OpenCode's data directory, as where it was used: its listing's failure (OpenCode
    # is not installed there) is the scan's, on the host as here.
    (home / ".local" / "share" / "opencode").mkdir(parents=True)
    entry = pwd.getpwnam(sshd.user)
    _chown_tree(home, entry.pw_uid, entry.pw_gid)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _tree(top: Path) -> dict[str, tuple[int, int]]:
    found = {}
    for directory, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            info = os.lstat(os.path.join(directory, name))
            found[os.path.join(directory, name)] = (info.st_size, info.st_mtime_ns)
    return found


async def _remote_listing(sshd: Sshd, home: Path | None = None, *,
                          path: str = "/usr/bin:/bin") -> tuple[SessionListing, int, int]:
    """The host's listing, the file rounds it took and the executions (``ssh``
    commands, reading the login environment included) it cost. With ``home``,
    every harness's home is that directory of the host and its PATH ``path``
    (by default the system's alone: what other tests put on the test user's
    is not seen)."""
    clanker = Clanker(ssh_config_file=sshd.config_file)
    clanker.add_host("box", sshd.alias)
    environment = await clanker.connect_host("box")
    try:
        env = {} if home is None else {"HOME": str(home), "PATH": path}
        service = SessionService(environment=environment, cache_dir=None,
                                 homes=lambda provider: ((None, env),))
        providers = list(clanker.harnesses())
        listing = await environment.gather(
            lambda: service.discover(providers, workspace=None))
        return listing, environment.files.rounds, environment.session_executor.executions
    finally:
        environment.close()


def _local_listing(home: Path, *, path: str = os.defpath) -> SessionListing:
    clanker = Clanker()
    environment = LocalEnvironment({"HOME": str(home), "PATH": path})
    service = SessionService(environment=environment, cache_dir=None)
    return asyncio.run(service.discover(list(clanker.harnesses()), workspace=None))


def test_a_hosts_stores_give_the_sessions_a_local_scan_of_them_gives(
    sshd: Sshd, store_home: Path
) -> None:
    before = _tree(store_home)
    remote, rounds, executions = asyncio.run(_remote_listing(sshd, store_home))
    assert _tree(store_home) == before, "nothing is written on the host"
    local = _local_listing(store_home)
    assert remote.sessions, "the fixtures hold sessions"
    assert {s.harness for s in remote.sessions} >= {"claude", "codex", "omp"}
    assert remote.sessions == local.sessions
    errors = {scan.harness: scan.scan.error for scan in remote.scans}
    local_errors = {scan.harness: scan.scan.error for scan in local.scans}
    assert {h for h, e in errors.items() if e is not None} \
        == {h for h, e in local_errors.items() if e is not None}
    # One execution reads the login environment. The scan of every provider is
    # at most three (MAX_ROUNDS rounds of file reads and OpenCode's own listing, run
    # once however many times the rounds run the providers); here one round holds
    # every read, since a walk's samples are as large as any provider asks for.
    assert MAX_ROUNDS == 2
    assert rounds == 1
    assert executions == 1 + 2


def test_a_malicious_store_is_read_as_the_local_scanner_reads_it(
    sshd: Sshd, store_home: Path, tmp_path: Path
) -> None:
    project = store_home / ".claude" / "projects" / "-home-dev-src-app"
    secret = tmp_path / "outside.jsonl"
    good = next(project.glob("*.jsonl"))
    secret.write_bytes(good.read_bytes())
    os.symlink(secret, project / "11111111-1111-4111-8111-111111111111.jsonl")
    os.mkfifo(project / "22222222-2222-4222-8222-222222222222.jsonl")
    huge = project / "33333333-3333-4333-8333-333333333333.jsonl"
    huge.write_bytes(good.read_bytes() + b'{"type":"user","x":"' + b"y" * (4 << 20) + b'"}\n')
    entry = pwd.getpwnam(sshd.user)
    _chown_tree(project, entry.pw_uid, entry.pw_gid)
    before = _tree(store_home / ".claude")
    remote, rounds, executions = asyncio.run(_remote_listing(sshd, store_home))
    assert _tree(store_home / ".claude") == before, "nothing is written on the host"
    assert rounds <= MAX_ROUNDS and executions <= 1 + 3  # no round past the bound, no hang
    local = _local_listing(store_home)
    assert remote.sessions == local.sessions
    claude = next(scan.scan for scan in remote.scans if scan.harness == "claude")
    assert claude.error is None
    paths = {s.store_path for s in remote.sessions}
    assert str(project / "11111111-1111-4111-8111-111111111111.jsonl") not in paths
    assert str(project / "22222222-2222-4222-8222-222222222222.jsonl") not in paths


def test_a_host_without_python3_says_what_is_needed(sshd: Sshd, remote_home: Path) -> None:
    # A login PATH with a shell and env (which reading the login environment runs).
    tools = remote_home / "nopy"
    tools.mkdir()
    os.symlink("/bin/sh", tools / "sh")
    os.symlink(shutil.which("env") or "/usr/bin/env", tools / "env")
    (remote_home / ".bash_profile").write_text(f"PATH={tools}\nexport PATH\n")

    async def scan() -> None:
        clanker = Clanker(ssh_config_file=sshd.config_file)
        clanker.add_host("box", sshd.alias)
        environment = await clanker.connect_host("box")
        try:
            service = SessionService(environment=environment, cache_dir=None)
            await environment.gather(
                lambda: service.discover(list(clanker.harnesses()), workspace=None))
        finally:
            environment.close()

    with pytest.raises(HarnessCapabilityError) as caught:
        asyncio.run(scan())
    assert caught.value.kind is ErrorKind.NOT_CONFIGURED
    assert "needs python3" in str(caught.value)


def test_a_hosts_files_are_refused_outside_a_scan(tmp_path: Path) -> None:
    from clanker.hosts import Host

    environment = SshEnvironment(Host("box", "box.invalid"), control_dir=tmp_path)
    with pytest.raises(HarnessCapabilityError) as caught:
        environment.files.stat("/etc/passwd")
    assert caught.value.kind is ErrorKind.UNSUPPORTED


def test_a_hosts_directories_are_its_own_never_resolved_through_this_machine(
    tmp_path: Path,
) -> None:
    from clanker.hosts import Host

    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    host = SshEnvironment(Host("box", "box.invalid"), control_dir=tmp_path)
    here = LocalEnvironment()
    assert host.canonical_path(f"{tmp_path}/link/x/../y") == f"{tmp_path}/link/y"
    assert here.canonical_path(f"{tmp_path}/link/x/../y") == f"{tmp_path.resolve()}/real/y"
    assert host.cache_dir(tmp_path) == tmp_path / "hosts" / "ssh-box"
    assert here.cache_dir(tmp_path) == tmp_path


def test_the_library_lists_a_hosts_sessions_and_keeps_their_summaries_apart(
    sshd: Sshd, remote_home: Path
) -> None:
    local = Clanker(ssh_config_file=sshd.config_file)
    local.add_host("box", sshd.alias)

    async def on_host() -> SessionListing:
        async with await local.on_host("box") as remote:
            return await remote.sessions(workspace=None)

    listing = asyncio.run(on_host())
    assert listing.sessions == _local_listing(remote_home).sessions
    again = asyncio.run(on_host())  # a new connection, summaries from the host's cache
    assert again.sessions == listing.sessions
    assert (local.paths.cache / "hosts" / "ssh-box" / "sessions").is_dir()


def test_sessions_host_option_refuses_unknown_and_unreachable_hosts() -> None:
    from click.testing import CliRunner

    from clanker.cli import cli

    runner = CliRunner()
    assert runner.invoke(cli, ["sessions", "--host", "nope", "--json"]).exit_code == 40
    assert runner.invoke(cli, ["hosts", "add", "box", "ssh://nobody@127.0.0.1:9"]).exit_code == 0
    unreachable = runner.invoke(cli, ["sessions", "--host", "box"])
    assert unreachable.exit_code == 13, unreachable.output
    assert "connection was refused" in unreachable.stderr
    mixed = runner.invoke(cli, ["sessions", "--host", "box", "--workspace", "."])
    assert mixed.exit_code != 0 and "--workspace" in mixed.output


def test_a_huge_transcript_is_summarized_from_its_ends_never_sent_whole(
    sshd: Sshd, store_home: Path
) -> None:
    # A 256 MiB transcript (sparse: its first and last lines are real, between
    # them nothing a reader looks at): one round's 1 MiB answer carries it,
    # since only its first and last 128 KiB leave the host, and it is listed
    # as a local scan of the same file lists it.
    project = store_home / ".claude" / "projects" / "-home-dev-src-app"
    good = next(project.glob("*.jsonl"))
    name = "55555555-5555-4555-8555-555555555555"
    text = good.read_bytes().replace(good.stem.encode(), name.encode())
    huge = project / f"{name}.jsonl"
    with huge.open("wb") as out:
        out.write(text)
        out.seek(256 << 20)
        out.write(b"\n" + text)
    entry = pwd.getpwnam(sshd.user)
    os.chown(huge, entry.pw_uid, entry.pw_gid)
    remote, rounds, executions = asyncio.run(_remote_listing(sshd, store_home))
    local = _local_listing(store_home)
    assert remote.sessions == local.sessions
    assert name in {s.native_id for s in remote.sessions}
    assert rounds == 1 and executions == 1 + 2


def test_a_store_larger_than_the_answers_bound_is_listed_in_part_never_past_the_bound(
    sshd: Sshd, store_home: Path
) -> None:
    # Transcripts whose bounded reads, together, are several times what the rounds'
    # answers carry (and hardly compress): some are skipped, counted, and the scan
    # still costs no more than its bound.
    project = store_home / ".claude" / "projects" / "-home-dev-src-big"
    project.mkdir()
    good = next((store_home / ".claude" / "projects" / "-home-dev-src-app").glob("*.jsonl"))
    for index in range(24):
        noise = base64.b64encode(os.urandom(300 * 1024)).decode("ascii")
        line = json.dumps({"type": "progress", "data": noise}).encode() + b"\n"
        name = f"{index:08x}-4444-4444-8444-444444444444.jsonl"
        # The transcript's own id is its file's name.
        text = good.read_bytes().replace(good.stem.encode(), name[:-6].encode())
        (project / name).write_bytes(text + line + text)
    entry = pwd.getpwnam(sshd.user)
    _chown_tree(project, entry.pw_uid, entry.pw_gid)
    remote, rounds, executions = asyncio.run(_remote_listing(sshd, store_home))
    local = _local_listing(store_home)
    assert rounds <= MAX_ROUNDS and executions <= 1 + 3
    claude = next(scan.scan for scan in remote.scans if scan.harness == "claude")
    assert claude.error is None and claude.skipped > 0
    assert len(local.sessions) > len(remote.sessions) > 0
    by_key = {s.key: s for s in local.sessions}
    for session in remote.sessions:
        assert session == by_key.get(session.key)
    # What could not be read is counted, never guessed: each big transcript is
    # listed or skipped.
    big = {s.key for s in local.sessions if s.store_path.startswith(str(project))}
    assert len(big) == 24
    listed_big = {s.key for s in remote.sessions if s.key in big}
    assert len(listed_big) + claude.skipped == 24


@pytest.mark.parametrize("ns", [0, 1, 999_999_999, 1_764_748_420_091_923_456,
                                1_764_748_420_999_999_999, 4_102_444_800_123_456_789])
def test_a_time_read_on_a_host_is_the_float_a_local_stat_gives(tmp_path: Path, ns: int) -> None:
    from clanker.environment.ssh_scan import _stat_result

    path = tmp_path / "f"
    path.write_bytes(b"")
    os.utime(path, ns=(ns, ns))
    info = os.stat(path)
    row = [info.st_mode, info.st_ino, info.st_dev, info.st_nlink, info.st_uid, info.st_gid,
           info.st_size, info.st_atime_ns, info.st_mtime_ns, info.st_ctime_ns]
    remote = _stat_result(row)
    assert (remote.st_mtime, remote.st_atime, remote.st_mtime_ns) \
        == (info.st_mtime, info.st_atime, info.st_mtime_ns)


def test_two_listings_of_one_host_at_once_take_turns(sshd: Sshd, remote_home: Path) -> None:
    local = Clanker(ssh_config_file=sshd.config_file)
    local.add_host("box", sshd.alias)

    async def twice() -> tuple[SessionListing, SessionListing, int]:
        async with await local.on_host("box") as remote:
            first, second = await asyncio.gather(remote.sessions(workspace=None),
                                                 remote.sessions(workspace=None))
            assert isinstance(remote.environment, SshEnvironment)
            return first, second, remote.environment.session_executor.executions

    first, second, executions = asyncio.run(twice())
    assert first.sessions == second.sessions == _local_listing(remote_home).sessions
    assert executions == 1 + 2 * 2  # each: one round of file reads, OpenCode's listing


_OLD_CLAUDE = "7f580a28-e36b-442e-8a18-32ece3323a24"


# The bound of one answer from the host, scaled down sixteen times for the crowded
# stores below: 4,000 files are then as much too large for one answer (and as far
# within a search's MAX_PARTS answers) as some 60,000 are for the real bound, for a
# fifteenth of the files to make and to walk in every answer.
_SMALL_ANSWER = 64 * 1024
_CROWD = 4_000


def _crowd(home: Path, user: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Empty Claude transcripts, each newer than the fixture's, in a project of
    their own: more files than one answer of the host lists (under
    :data:`_SMALL_ANSWER`), so a walk of the store is cut to its newest files.
    Returns the project."""
    from clanker.environment import ssh_scan

    monkeypatch.setattr(ssh_scan, "_MAX_ANSWER", _SMALL_ANSWER)
    project = home / ".claude" / "projects" / "-home-dev-src-crowd"
    project.mkdir()
    old = home / ".claude" / "projects" / "-home-dev-src-app" / f"{_OLD_CLAUDE}.jsonl"
    start = 1_700_000_000
    os.utime(old, (start - 1000, start - 1000))
    for index in range(_CROWD):
        path = project / f"{index:08x}-4444-4444-8444-444444444444.jsonl"
        path.touch()
        os.utime(path, ns=((start + index) * 10**9 + index, (start + index) * 10**9 + index))
    entry = pwd.getpwnam(user)
    _chown_tree(project, entry.pw_uid, entry.pw_gid)
    return project


async def _remote_find(sshd: Sshd, native_id: str, *, complete: bool = True
                       ) -> tuple[object, int, int]:
    """``claude:native_id`` re-found on the host (the login user's own home) as
    ``resume --host`` re-finds it, its file rounds and the executions it cost; or,
    without ``complete``, the service's find run in a listing's kind of rounds."""
    clanker = Clanker(ssh_config_file=sshd.config_file)
    clanker.add_host("box", sshd.alias)
    async with await clanker.on_host("box") as remote:
        environment = remote.environment
        assert isinstance(environment, SshEnvironment)
        try:
            if complete:
                found: object = await remote.find_session(f"claude:{native_id}",
                                                          workspace=str(sshd.home))
            else:
                provider = next(p for p in remote.harnesses() if p.id == "claude")
                service = SessionService(environment=environment, cache_dir=None)
                found = await environment.gather(
                    lambda: service.find(provider, native_id), rounds=MAX_ROUNDS + 1)
        except HarnessCapabilityError as exc:
            found = exc
        return found, environment.files.rounds, environment.session_executor.executions


def test_an_old_session_in_a_store_too_large_for_one_answer_is_re_found(
    sshd: Sshd, remote_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # More newer files than one answer carries: a listing's walk keeps the newest;
    # a search goes on over the older ones, in further answers, and finds the
    # oldest transcript as a local search of the same store does.
    _crowd(remote_home, sshd.user, monkeypatch)
    local = asyncio.run(SessionService(
        environment=LocalEnvironment({"HOME": str(remote_home), "PATH": os.defpath}),
        cache_dir=None).find(next(p for p in Clanker().harnesses() if p.id == "claude"),
                             _OLD_CLAUDE))
    assert local is not None
    found, rounds, executions = asyncio.run(_remote_find(sshd, _OLD_CLAUDE))
    assert not isinstance(found, Exception), found
    session = found.session  # type: ignore[attr-defined]
    assert session.native_id == _OLD_CLAUDE
    assert session.updated_at == local.updated_at and session.title == local.title
    # More rounds than a listing's (each further answer is one), never past the bound.
    assert MAX_ROUNDS + 1 < rounds <= MAX_ROUNDS + 1 + MAX_PARTS
    assert executions <= 1 + rounds + 1  # the login environment, the rounds, a listing


def test_a_find_in_a_cut_store_never_says_not_found(
    sshd: Sshd, remote_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In a listing's kind of rounds the walk stays cut: the find says the store was
    # too large to search completely (typed), never that the session is not there.
    _crowd(remote_home, sshd.user, monkeypatch)
    found, _, _ = asyncio.run(_remote_find(sshd, _OLD_CLAUDE, complete=False))
    assert isinstance(found, HarnessCapabilityError), found
    assert found.kind is ErrorKind.OUTPUT_LIMIT and "too large" in str(found)


def test_a_store_too_large_to_search_completely_says_so_typed(
    sshd: Sshd, remote_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With fewer answers a walk may take than the store needs, the search fails
    # typed, after no more executions than its bound.
    from clanker.environment import ssh_scan

    monkeypatch.setattr(ssh_scan, "MAX_PARTS", 1)
    _crowd(remote_home, sshd.user, monkeypatch)
    found, rounds, _ = asyncio.run(_remote_find(sshd, _OLD_CLAUDE))
    assert isinstance(found, HarnessCapabilityError), found
    assert found.kind is ErrorKind.OUTPUT_LIMIT and "too large" in str(found)
    assert rounds <= MAX_ROUNDS + 1 + 1
