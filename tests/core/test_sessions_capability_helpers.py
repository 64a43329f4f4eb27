"""The sessions contract's shared pieces for providers: StoreDirectory and resumable_id."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from clanker.environment.local import LocalFiles
from clanker.execution import LocalTransport
from clanker.ids import HarnessId
from clanker.launch.capability import LOWERCASE_UUID, checked_session_id
from clanker.sessions.cache import SummaryCache
from clanker.sessions.capability import (
    SessionScan,
    SessionsCapability,
    SessionsContext,
    StoreDirectory,
    resumable_id,
)


def _uuid(raw: str) -> str:
    return checked_session_id(raw.lower(), LOWERCASE_UUID, "a lowercase UUID")


@given(st.one_of(st.text(max_size=40), st.uuids().map(str), st.uuids().map(
    lambda u: str(u).upper()), st.integers(), st.none()))
def test_resumable_id_is_the_value_the_check_takes_unchanged(value: object) -> None:
    found = resumable_id(value, _uuid)
    if isinstance(value, str) and LOWERCASE_UUID.fullmatch(value):
        assert found == value
    else:  # not text, refused, or normalized (upper case) into another spelling
        assert found is None


class _Store(StoreDirectory):
    resumes_without_original_directory = False

    def __init__(self) -> None:
        self.scanned: list[Path] = []

    def directory(self, environ: Mapping[str, str]) -> Path | None:
        place = environ.get("STORE")
        return None if place is None else Path(place)

    def scan(self, context: SessionsContext, directory: Path) -> SessionScan:
        self.scanned.append(directory)
        return SessionScan(skipped=1)


def _context(environ: Mapping[str, str]) -> SessionsContext:
    return SessionsContext(files=LocalFiles(), harness=HarnessId("fake-agent"),
                           executor=LocalTransport(), environ=environ,
                           cache=SummaryCache(HarnessId("fake-agent"), None))


def test_a_store_directory_scans_its_one_directory_and_none_is_an_empty_scan(
        tmp_path: Path) -> None:
    store = _Store()
    assert isinstance(store, SessionsCapability)
    assert store.store_roots({}, LocalFiles()) == ()
    assert asyncio.run(store.discover(_context({}))) == SessionScan()
    assert store.scanned == []
    environ = {"STORE": str(tmp_path)}
    assert store.store_roots(environ, LocalFiles()) == (tmp_path,)
    assert asyncio.run(store.discover(_context(environ))) == SessionScan(skipped=1)
    assert store.scanned == [tmp_path]
