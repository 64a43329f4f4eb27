"""omp and Pi in one store: a file belongs to one harness, and is listed once.

A Pi user's ``PI_CODING_AGENT_DIR`` moves omp's store into Pi's directory, and
both read ``PI_CODING_AGENT_SESSION_DIR`` (docs/harnesses/omp.md, "Where the store
is"). The file's own format decides whose it is: omp 18 opens every file with a
title slot, Pi never writes one; Pi names its project directories ``--<cwd>--``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest
from attrs import evolve

import clanker_omp
import clanker_pi
from clanker.registry import HarnessProvider
from clanker.sessions.types import HarnessSession
from clanker.testing import registered
from clanker.testing.sessions import session_service

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PI_STORE = FIXTURES / "pi" / "sessions"
OMP_STORE = FIXTURES / "omp" / "sessions"
OMP = registered(clanker_omp.plugin, "omp")
PI = registered(clanker_pi.plugin, "pi")


def _copy_into(source: Path, target: Path) -> list[str]:
    """Copy every file below ``source`` into ``target`` (same relative paths)."""
    copied = []
    for path in sorted(source.rglob("*.jsonl")):
        destination = target / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)
        copied.append(str(destination))
    return copied


def _environ(agent: Path, flat: Path) -> dict[str, str]:
    return {"HOME": "/home/dev", "TMPDIR": "/tmp", "PATH": os.environ["PATH"],
            "PI_CODING_AGENT_DIR": str(agent), "PI_CODING_AGENT_SESSION_DIR": str(flat)}


def _listed(environ: dict[str, str],
            providers: list[HarnessProvider]) -> tuple[list[HarnessSession], list[int]]:
    listing = asyncio.run(session_service(environ).discover(providers, workspace=None,
                                                            limit=100_000))
    assert listing.complete
    return list(listing.sessions), [r.scan.skipped for r in listing.scans]


def _placeless(session: HarnessSession) -> HarnessSession:
    return evolve(session, store_path=None, order=0)


@pytest.fixture
def shared(tmp_path: Path) -> tuple[dict[str, str], dict[str, list[str]], Path]:
    """Pi's and omp's captured stores in one agent dir and one flat dir, as a shared
    ``PI_CODING_AGENT_DIR`` and ``PI_CODING_AGENT_SESSION_DIR`` make them."""
    agent, flat = tmp_path / "agent", tmp_path / "flat"
    owners = {
        "pi": _copy_into(PI_STORE / "pi-agent" / "sessions", agent / "sessions")
        + _copy_into(PI_STORE / "custom-session-dir", flat),
        "omp": _copy_into(OMP_STORE / "omp-agent" / "sessions", agent / "sessions")
        + _copy_into(OMP_STORE / "custom-session-dirs" / "envsess", flat),
    }
    return _environ(agent, flat), owners, tmp_path


def _alone(tmp_path: Path, harness: str) -> list[HarnessSession]:
    """What one harness lists from its own captured store, shared with nobody."""
    base = tmp_path / f"alone-{harness}"
    agent, flat = base / "agent", base / "flat"
    if harness == "pi":
        _copy_into(PI_STORE / "pi-agent" / "sessions", agent / "sessions")
        _copy_into(PI_STORE / "custom-session-dir", flat)
    else:
        _copy_into(OMP_STORE / "omp-agent" / "sessions", agent / "sessions")
        _copy_into(OMP_STORE / "custom-session-dirs" / "envsess", flat)
    sessions, skipped = _listed(_environ(agent, flat), [OMP if harness == "omp" else PI])
    assert skipped == [0]
    return sessions


def test_each_file_of_a_shared_store_is_listed_once_by_its_own_harness(
    shared: tuple[dict[str, str], dict[str, list[str]], Path],
) -> None:
    environ, owners, _ = shared
    sessions, skipped = _listed(environ, [OMP, PI])
    paths = [s.store_path for s in sessions]
    assert len(paths) == len(set(paths)), "a file was listed twice"
    for harness in ("omp", "pi"):
        assert sorted(s.store_path for s in sessions if s.harness == harness) == sorted(
            owners[harness])
    # Another harness's file is not a file that could not be read.
    assert skipped == [0, 0]


def test_a_shared_store_summarizes_each_file_as_its_own_store_does(
    shared: tuple[dict[str, str], dict[str, list[str]], Path],
) -> None:
    environ, _, tmp_path = shared
    sessions, _ = _listed(environ, [OMP, PI])
    for harness in ("omp", "pi"):
        mine = sorted((_placeless(s) for s in sessions if s.harness == harness),
                      key=lambda s: (s.native_id, s.updated_at))
        alone = sorted((_placeless(s) for s in _alone(tmp_path, harness)),
                       key=lambda s: (s.native_id, s.updated_at))
        assert mine == alone


def test_a_re_find_does_not_reach_into_the_other_harness(
    shared: tuple[dict[str, str], dict[str, list[str]], Path],
) -> None:
    environ, _, _ = shared
    service = session_service(environ)
    pi_only = "01a22ba6-b0f8-7463-a7ac-a3ee58f0cfde"  # a Pi session, in Pi's format
    assert asyncio.run(service.find(OMP, pi_only)) is None
    found = asyncio.run(service.find(PI, pi_only))
    assert found is not None and found.harness == "pi"
    omp_only = "01a22ba8-453b-71ef-9bd9-0be5f12b2832"
    assert asyncio.run(service.find(PI, omp_only)) is None
    found = asyncio.run(service.find(OMP, omp_only))
    assert found is not None and found.harness == "omp"


def _no_slot_copy(tmp_path: Path, directory: Path) -> Path:
    """An omp session rewritten as an older omp wrote it: no title slot."""
    source = next((OMP_STORE / "omp-agent" / "sessions" / "-src-omprepo").glob("*.jsonl"))
    lines = source.read_bytes().splitlines(keepends=True)
    assert lines[0].startswith(b'{"type":"title"')
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / source.name
    target.write_bytes(b"".join(lines[1:]))
    return target


def test_omp_keeps_its_own_files_without_a_slot_where_pi_does_not_write(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    # omp's own store, shared with nobody: a file in Pi's format there is omp's.
    pi_named = _no_slot_copy(tmp_path, home / ".omp" / "agent" / "sessions" / "--srv-abs--")
    environ = {"HOME": str(home), "TMPDIR": "/tmp", "PATH": os.environ["PATH"]}
    sessions, skipped = _listed(environ, [OMP, PI])
    assert [(s.harness, s.store_path) for s in sessions] == [("omp", str(pi_named))]
    assert skipped == [0, 0]


def test_in_a_shared_store_a_file_without_a_slot_in_an_omp_directory_is_omp_s(
    shared: tuple[dict[str, str], dict[str, list[str]], Path],
) -> None:
    environ, _, tmp_path = shared
    # `-src-…` is omp's name for a directory under the home; Pi never writes one.
    older = _no_slot_copy(tmp_path, Path(environ["PI_CODING_AGENT_DIR"]) / "sessions" / "-old")
    sessions, skipped = _listed(environ, [OMP, PI])
    owners = [s.harness for s in sessions if s.store_path == str(older)]
    assert owners == ["omp"]
    assert skipped == [0, 0]


def test_a_store_that_stops_being_shared_is_read_afresh(tmp_path: Path) -> None:
    from clanker.environment.local import LocalEnvironment
    from clanker.sessions.service import SessionService

    home = tmp_path / "home"
    sessions = home / ".omp" / "agent" / "sessions"
    pi_files = _copy_into(PI_STORE / "pi-agent" / "sessions", sessions)
    _copy_into(OMP_STORE / "omp-agent" / "sessions", sessions)
    # Pi's default store is omp's, through a link: the two share one directory.
    (home / ".pi").symlink_to(home / ".omp")
    environ = {"HOME": str(home), "TMPDIR": "/tmp", "PATH": os.environ["PATH"]}
    cache = tmp_path / "cache"

    def omp_paths() -> set[str]:
        service = SessionService(environment=LocalEnvironment(environ), cache_dir=cache)
        listing = asyncio.run(service.discover([OMP], workspace=None, limit=100_000))
        return {s.store_path for s in listing.sessions if s.store_path}

    assert not omp_paths() & set(pi_files)
    # Pi's store moves away: the files in Pi's format left in omp's directory are
    # omp's now (nobody else lists them). The kept summaries said "Pi's", which no
    # longer holds, so they are not reused.
    (home / ".pi").unlink()
    assert set(pi_files) <= omp_paths()
