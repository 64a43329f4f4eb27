"""Scaffolding for a file-backed sessions capability's tests.

A summarizer sees a :class:`~clanker.environment.files.FileSample`, the bounded
head and tail of one file. :func:`sample_of_bytes` makes the sample a file of
given bytes would give, without the file, so property tests can feed a
summarizer anything; :func:`check_session_types` is what they assert of each
session it makes::

    @given(st.binary(), st.integers(16, 4096), st.integers(16, 4096))
    def test_arbitrary_bytes_never_raise(data, head, tail):
        found = summarize(sample_of_bytes(data, head_bytes=head, tail_bytes=tail))
        check_session_types(found, "zed")

:func:`check_unchanged_store_is_remembered` checks that a provider answers a
second listing of an unchanged store from its memo and notices a change.

:class:`SessionsContract` is the sessions part of the provider contract: it runs
all of these, and more, on what a plugin supplies (see the class).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Final, cast

import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st

from clanker.capabilities import Capability
from clanker.environment.files import DEFAULT_HEAD_BYTES, DEFAULT_TAIL_BYTES, FileSample, confined
from clanker.environment.local import LocalFiles, host_environ
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandExecutor
from clanker.ids import HarnessId
from clanker.sessions.cache import SummaryCache
from clanker.sessions.capability import SessionsCapability, SessionsContext
from clanker.sessions.service import SessionService
from clanker.sessions.types import HarnessSession, NoSession, SessionScan
from clanker.sessions.witness import ScanMemo
from clanker.testing.base import PROPERTY, STORE_PROPERTY, ContractBase
from clanker.testing.doubles import EnvironmentDouble, FailingExecutor
from clanker.testing.strategies import prefixes

__all__ = [
    "SAMPLE_MTIME",
    "SessionsContract",
    "check_session_types",
    "check_unchanged_store_is_remembered",
    "sample_of_bytes",
    "session_service",
    "sessions_context",
]

_SETTLE_NS: Final = 10_000_000
_PAUSE: Final = 0.03
"""Longer than the settling time and than the timestamp tick of the file systems tests
run on (ext4, tmpfs, btrfs, xfs: nanoseconds, at worst a 10 ms clock tick). A file
system with one- or two-second times (FAT, HFS+) would need longer pauses."""

SAMPLE_MTIME = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
"""The modification time a sample gets unless told otherwise: later than any record."""


def sessions_context(
    harness: str, environ: Mapping[str, str], *, executor: CommandExecutor | None = None,
    **fields: Any,
) -> SessionsContext:
    """A discovery request of ``harness`` over this machine's files, with a summary cache
    that keeps nothing on disk; ``executor`` runs commands (by default this machine's).
    ``fields`` are the request's own (``scopes``, ``native_id``, ``limit``, ``memo``...)."""
    from clanker.execution import LocalTransport

    harness_id = HarnessId(harness)
    fields.setdefault("cache", SummaryCache(harness_id, None))
    return SessionsContext(harness=harness_id, executor=executor or LocalTransport(),
                           files=LocalFiles(), environ=environ, **fields)


def session_service(environ: Mapping[str, str]) -> SessionService:
    """The sessions service over this machine with ``environ``, keeping nothing on disk."""
    from clanker.environment.local import LocalEnvironment

    return SessionService(environment=LocalEnvironment(environ), cache_dir=None)


def sample_of_bytes(
    data: bytes,
    *,
    head_bytes: int = DEFAULT_HEAD_BYTES,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
    path: Path = Path("/x.jsonl"),
    mtime: datetime = SAMPLE_MTIME,
) -> FileSample:
    """What :func:`~clanker.environment.files.read_sample` would see of a file at
    ``path`` holding ``data``, with the same bounds, without a file."""
    tail = b""
    if len(data) > head_bytes:
        tail = data[max(len(data) - tail_bytes, head_bytes):]
    return FileSample(path=path, size=len(data), mtime=mtime, head=data[:head_bytes], tail=tail)


def check_session_types(
    found: HarnessSession | NoSession | None, harness: str, *, require_cwd: bool = True
) -> None:
    """Assert that what a summarizer returned is what the types promise and survives
    the service: ``None`` (a skip), :data:`~clanker.stores.EMPTY` (no conversation
    yet), :data:`~clanker.stores.FOREIGN` (another harness's), or a session of
    ``harness`` with a non-blank id, aware times, non-empty texts, a printable title
    of at most 200 characters, an absolute ``cwd`` without NUL (``None`` too unless
    ``require_cwd``), a count that is not negative, and texts that encode as UTF-8
    (the disk cache and the terminal can hold them)."""
    if found is None or isinstance(found, NoSession):
        return
    assert isinstance(found, HarnessSession)
    assert found.harness == harness
    assert isinstance(found.native_id, str) and found.native_id.strip()
    assert isinstance(found.updated_at, datetime) and found.updated_at.tzinfo is not None
    assert found.created_at is None or (
        isinstance(found.created_at, datetime) and found.created_at.tzinfo is not None)
    for text in (found.title, found.model, found.parent_id):
        assert text is None or (isinstance(text, str) and text)
    assert found.title is None or (len(found.title) <= 200 and found.title.isprintable())
    if found.cwd is None:
        assert not require_cwd, "a session file names its directory"
    else:
        assert found.cwd.startswith("/") and "\x00" not in found.cwd
    assert found.message_count is None or (
        isinstance(found.message_count, int) and found.message_count >= 0)
    for text in (found.native_id, found.cwd, found.title, found.model, found.parent_id):
        if text is not None:
            text.encode("utf-8")
    if found.cwd is not None:
        os.path.realpath(found.cwd)  # what the service does with it


def check_unchanged_store_is_remembered(
    capability: SessionsCapability,
    context: Callable[[ScanMemo | None], SessionsContext],
    change: Callable[[], None],
) -> None:
    """Assert that listing an unchanged store again returns the remembered answer
    itself (nothing walked or parsed), and that after ``change()`` (an edit of
    anything the provider reads) it no longer does: the new answer shows the
    change and equals what a provider without a memo finds.

    ``context(memo)`` makes a fresh request context over the store; the store
    must be fully written before the call.
    """
    memo = ScanMemo(settle_ns=_SETTLE_NS)  # the real two seconds would make tests wait
    time.sleep(_PAUSE)
    first = asyncio.run(capability.discover(context(memo)))
    assert first.error is None
    assert asyncio.run(capability.discover(context(memo))) is first
    time.sleep(_PAUSE)
    change()
    time.sleep(_PAUSE)
    after = asyncio.run(capability.discover(context(memo)))
    assert after is not first
    assert after.sessions != first.sessions, "the change did not show in the listing"
    assert after.sessions == asyncio.run(capability.discover(context(None))).sessions


# -- the sessions part of the provider contract --------------------------------------------

JUNK_SESSION_FILES: Final = (
    b"\x00garbage",
    b"not json at all\n",
    b"[1, 2, 3]\n",
    b'{"type": "session", "id": ',
    b"\xff\xfe\xfd\n" * 3,
)
"""What a malformed session file holds in :class:`SessionsContract`'s skip test."""

_DEEP_AND_HUGE: Final = (
    b"[" * 100_000 + b"\n",
    b'{"type":"message","message":' * 50_000,
    b"z" * 1_000_000 + b"\n",
    b'{"id":"' + b"h" * 300_000 + b'","cwd":"/x"}\n',
    b'{"timestamp":"' + b"9" * 60 + b'"}\n',
)


def _unordered(scan: SessionScan) -> set[HarnessSession]:
    """The sessions of ``scan`` without their discovery order (which other files move)."""
    return {evolve(session, order=0) for session in scan.sessions}


class SessionsContract(ContractBase):
    """Sessions: a missing store is empty, malformed files are counted skips, a damaged
    store fails typed, nothing is offered from outside the store, and a file summarizer
    never raises, whatever the bytes.

    A plugin supplies what it has of these (each test needs only its own):

    * :meth:`sessions_environ`, where the store lives under a home directory;
    * :meth:`write_sessions`, a captured store laid out there;
    * :meth:`session_paths`, where the store would read one session file;
    * :meth:`summarize` with :attr:`session_samples` and :attr:`session_read_bounds`,
      for a store of files summarized from a bounded sample;
    * :attr:`sessions_remembered`, for a file store that answers an unchanged
      second listing from its memo.
    """

    session_samples: ClassVar[Sequence[Path]] = ()
    """Session files captured from the harness: :meth:`summarize` must make a session of
    each whole one, and a session or a skip of every prefix."""
    session_expected: ClassVar[Sequence[tuple[Path, Sequence[object]]]] = ()
    """Captured session files and what :meth:`summarize` must make of each: the values
    of :attr:`session_expected_fields`, in that order."""
    session_expected_fields: ClassVar[Sequence[str]] = (
        "native_id", "title", "cwd", "updated_at", "created_at", "model", "message_count",
        "parent_id")
    """The :class:`~clanker.sessions.types.HarnessSession` fields :attr:`session_expected`
    lists."""
    session_read_bounds: ClassVar[tuple[int, int]] = (DEFAULT_HEAD_BYTES, DEFAULT_TAIL_BYTES)
    """The head and tail bytes the provider reads of each file."""
    session_cut_everywhere: ClassVar[Path | None] = None
    """One (small) captured file that is cut at every byte, not only at its lines."""
    session_min_bytes: ClassVar[int] = 0
    """No cut of :attr:`session_cut_everywhere` this short is a session (a fixed-size
    first line, say)."""
    session_sample_path: ClassVar[Path] = Path("/x.jsonl")
    """The path made-up bytes are summarized as (a name the store would read)."""
    session_documents: ClassVar[st.SearchStrategy[bytes] | None] = None
    """Whole files in the harness's format with values of any type where its fields are
    (:func:`~clanker.testing.strategies.json_line_records` builds them for JSON lines)."""
    huge_session_files: ClassVar[Sequence[bytes]] = ()
    """Whole files of the harness's format with a huge or deeply nested value in a place
    the summarizer reads (besides the contract's own shapes)."""
    sessions_written_skips: ClassVar[int] = 0
    """How many entries of the store :meth:`write_sessions` lays out are unreadable on
    purpose (and counted as skips)."""
    sessions_remembered: ClassVar[bool] = False
    """The provider wraps its scan in ``context.remember`` (a store of files should)."""
    sessions_under_home: ClassVar[bool] = True
    """The store found from ``HOME`` alone lies under that home (as every bundled
    harness's does)."""
    damaged_store_kinds: ClassVar[frozenset[ErrorKind]] = frozenset({ErrorKind.STORAGE_CHANGED})
    """How discovery may fail over a store whose files are cut short or replaced."""

    # -- what a plugin supplies ----------------------------------------------------------

    def sessions_environ(self, home: Path) -> dict[str, str]:
        """The host environment in which the harness keeps its history under ``home``
        (which may not exist). By default ``HOME`` alone."""
        return {"HOME": str(home)}

    def sessions_executor(self, environ: Mapping[str, str]) -> CommandExecutor:
        """What discovery runs commands on. By default it refuses every command (a
        store of files or a database runs none); a harness listed by its own command
        answers with a double."""
        return FailingExecutor(HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE,
                                                      harness=self.harness_id))

    def write_sessions(self, environ: Mapping[str, str]) -> None:
        """Lay out a store captured from the harness where ``environ`` says it is, with
        at least one session a listing shows."""
        raise NotImplementedError

    def session_paths(self, environ: Mapping[str, str], name: str) -> Sequence[Path]:
        """Where the store would read a session file, one path in each kind of place it
        reads (a project directory, a date directory, ...), each a new file named after
        ``name``. Empty for a store that is not a directory of session files."""
        return ()

    def summarize(self, sample: FileSample) -> HarnessSession | NoSession | None:
        """What the provider makes of one file's sample (its summarizer)."""
        raise NotImplementedError

    def check_session(self, session: HarnessSession) -> None:
        """Assert what the harness's sessions always are, beyond the shared types (an id
        syntax, say). Nothing by default."""

    def change_sessions(self, environ: Mapping[str, str], listed: SessionScan) -> None:
        """Change the store :meth:`write_sessions` laid out, as a listing must notice.
        By default the newest listed session's file is removed."""
        newest = next(s for s in listed.sessions if s.store_path is not None)
        assert newest.store_path is not None
        Path(newest.store_path).unlink()

    # -- helpers ---------------------------------------------------------------------------

    def _sessions(self) -> SessionsCapability:
        return cast(SessionsCapability, self._implementation(Capability.SESSIONS))

    def _context(self, environ: Mapping[str, str], **fields: Any) -> SessionsContext:
        return sessions_context(self.harness_id, dict(environ),
                                executor=self.sessions_executor(environ), **fields)

    def _discover(self, environ: Mapping[str, str], **fields: Any) -> SessionScan:
        scan = asyncio.run(self._sessions().discover(self._context(environ, **fields)))
        assert isinstance(scan, SessionScan)
        return scan

    def _written(self, home: Path) -> dict[str, str]:
        """The environ of a store :meth:`write_sessions` laid out under ``home``."""
        self._sessions()
        environ = self.sessions_environ(home)
        try:
            self.write_sessions(environ)
        except NotImplementedError:
            pytest.skip("the plugin's contract lays out no store (write_sessions)")
        return environ

    def _summarize(self, data: bytes, head: int | None = None, tail: int | None = None,
                   path: Path | None = None) -> HarnessSession | None:
        """The session in ``data``, or ``None`` when it holds none (a skip, or
        :data:`~clanker.sessions.types.EMPTY`: a file with no conversation yet)."""
        self._sessions()
        default_head, default_tail = self.session_read_bounds
        sample = sample_of_bytes(data, head_bytes=head or default_head,
                                 tail_bytes=tail or default_tail,
                                 path=path or self.session_sample_path)
        try:
            found = self.summarize(sample)
        except NotImplementedError:
            pytest.skip("the plugin's contract supplies no summarizer (summarize)")
        self._check(found, require_cwd=True)
        return found if isinstance(found, HarnessSession) else None

    def _check(
        self, found: HarnessSession | NoSession | None, *, require_cwd: bool = False
    ) -> None:
        check_session_types(found, self.harness_id, require_cwd=require_cwd)
        if isinstance(found, HarnessSession):
            self.check_session(found)

    def _check_confined(self, scan: SessionScan, environ: Mapping[str, str]) -> None:
        roots = self._sessions().store_roots(environ, LocalFiles())
        assert all(root.is_absolute() for root in roots)
        real_roots = [root.resolve() for root in roots]
        for found in scan.sessions:
            self._check(found)
            if found.store_path is None:
                continue
            assert roots, "a session has a file, so the store has roots"
            assert any(Path(found.store_path).resolve().is_relative_to(root)
                       for root in real_roots), found.store_path
            assert confined(found.store_path, roots), found.store_path
            assert not Path(found.store_path).is_symlink()

    def _session_samples(self) -> list[tuple[Path, bytes]]:
        self._sessions()
        paths = self._unless(self.session_samples or None, "session_samples")
        return [(path, path.read_bytes()) for path in paths]

    # -- the store -------------------------------------------------------------------------

    def test_a_missing_store_is_an_empty_scan(self, tmp_path: Path) -> None:
        self._sessions()
        (tmp_path / "empty").mkdir()
        for home in (tmp_path / "absent", tmp_path / "empty"):
            scan = self._discover(self.sessions_environ(home))
            assert scan.sessions == ()
            assert scan.skipped == 0
            assert scan.error is None
            assert not scan.truncated

    def test_without_home_the_password_databases_home_holds_the_store(self) -> None:
        import pwd

        home = Path(pwd.getpwuid(os.getuid()).pw_dir)
        sessions = self._sessions()
        roots = sessions.store_roots({"HOME": str(home)}, LocalFiles())
        if self.sessions_under_home:
            assert all(root.is_relative_to(home) for root in roots), roots
        for environ in ({}, {"HOME": ""}):
            assert sessions.store_roots(host_environ(environ), LocalFiles()) == roots

    def test_malformed_session_files_are_counted_skips(self, tmp_path: Path) -> None:
        self._sessions()
        home = tmp_path / "home"
        environ = self.sessions_environ(home)
        with contextlib.suppress(NotImplementedError):  # then junk stands in an empty store
            self.write_sessions(environ)
        before = self._discover(environ)
        written = 0
        for index, junk in enumerate(JUNK_SESSION_FILES):
            for path in self.session_paths(environ, f"junk{index}"):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(junk)
                written += 1
        self._unless(written or None, "session_paths")
        after = self._discover(environ)
        assert _unordered(after) == _unordered(before)
        assert after.skipped == before.skipped + written
        assert after.error is None

    def test_a_rescan_through_the_cache_lists_and_counts_the_same(self, tmp_path: Path) -> None:
        environ = self._written(tmp_path / "home")
        for index, junk in enumerate(JUNK_SESSION_FILES):
            for path in self.session_paths(environ, f"junk{index}"):
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(junk)
        cache = SummaryCache(HarnessId(self.harness_id), None)
        first, second = (self._discover(environ, cache=cache) for _ in range(2))
        assert (second.sessions, second.skipped) == (first.sessions, first.skipped)

    def test_a_written_store_lists_valid_sessions_from_inside_it(self, tmp_path: Path) -> None:
        environ = self._written(tmp_path / "home")
        scan = self._discover(environ)
        assert scan.error is None
        assert [s for s in scan.sessions if not s.hidden], "write_sessions: nothing is listed"
        assert scan.skipped == self.sessions_written_skips  # and a hidden session is no skip
        self._check_confined(scan, environ)

    def test_every_listed_session_is_refound_by_its_id(self, tmp_path: Path) -> None:
        environ = self._written(tmp_path / "home")
        for session in self._discover(environ).sessions:
            refound = self._discover(environ, native_id=session.native_id,
                                     scopes=("/clanker-contract/elsewhere",))
            matches = [s for s in refound.sessions if s.native_id == session.native_id]
            assert matches, f"{session.native_id} is listed but not re-found"
            assert matches[0].store_path == session.store_path
        # Through the service, from another workspace: where the caller is never filters.
        service = SessionService(environment=EnvironmentDouble(
            executor=self.sessions_executor(environ), environ=dict(environ)), cache_dir=None)
        for session in self._discover(environ).sessions:
            found = asyncio.run(service.find(self.provider(), session.native_id,
                                             workspace="/clanker-contract/elsewhere"))
            assert found is not None, f"{session.native_id} is listed but not found"
            assert (found.store_path, found.cwd) == (session.store_path, session.cwd)

    @STORE_PROPERTY
    @given(data=st.data())
    def test_a_damaged_store_fails_typed_and_lists_only_what_it_can(
        self, data: st.DataObject
    ) -> None:
        with tempfile.TemporaryDirectory() as raw:
            environ = self._written(Path(raw) / "home")
            store = sorted(p for p in Path(raw).rglob("*") if p.is_file() and not p.is_symlink())
            self._unless(store or None, "store files (write_sessions)")
            target = data.draw(st.sampled_from(store))
            whole = target.read_bytes()
            damage = data.draw(st.one_of(prefixes([whole]), st.binary(max_size=256)))
            for suffix in ("-wal", "-shm", "-journal"):  # what a database would recover from
                Path(f"{target}{suffix}").unlink(missing_ok=True)
            target.write_bytes(damage)
            try:
                scan = self._discover(environ)
            except HarnessCapabilityError as error:
                assert error.kind in self.damaged_store_kinds, error
                return
            self._check_confined(scan, environ)

    @STORE_PROPERTY
    @given(data=st.data())
    def test_nothing_is_listed_through_a_link_out_of_the_store(
        self, data: st.DataObject
    ) -> None:
        with tempfile.TemporaryDirectory() as raw:
            environ = self._written(Path(raw) / "home")
            outside = Path(raw) / "outside"
            outside.mkdir()
            files = sorted({Path(s.store_path) for s in self._discover(environ).sessions
                            if s.store_path is not None})
            self._unless(files or None, "sessions stored in files")
            for index, path in enumerate(data.draw(
                    st.lists(st.sampled_from(files), min_size=1, max_size=4, unique=True))):
                away = outside / str(index)
                if data.draw(st.booleans()) and path.parent.is_dir() and not (
                        path.parent.is_symlink()):
                    shutil.move(path.parent, away)  # the whole directory, linked back
                    path.parent.symlink_to(away, target_is_directory=True)
                elif path.is_file() and not path.is_symlink():
                    away.mkdir()
                    shutil.move(path, away / path.name)
                    path.symlink_to(away / path.name)
            self._check_confined(self._discover(environ), environ)

    def test_an_unchanged_store_is_remembered_and_a_change_is_not(self, tmp_path: Path) -> None:
        if not self.sessions_remembered:
            pytest.skip("the provider does not remember listings (sessions_remembered)")
        environ = self._written(tmp_path / "home")
        listed = self._discover(environ)
        check_unchanged_store_is_remembered(
            self._sessions(), lambda memo: self._context(environ, memo=memo),
            lambda: self.change_sessions(environ, listed))

    # -- the summarizer --------------------------------------------------------------------

    @PROPERTY
    @given(data=st.binary(max_size=4096), head=st.integers(16, 4096), tail=st.integers(16, 4096))
    def test_arbitrary_bytes_never_raise_from_the_summarizer(
        self, data: bytes, head: int, tail: int
    ) -> None:
        self._summarize(data, head, tail)

    def test_every_captured_session_file_is_a_session(self) -> None:
        for path, raw in self._session_samples():
            assert self._summarize(raw, path=path) is not None, path.name

    def test_each_captured_session_file_is_summarized_as_expected(self) -> None:
        self._sessions()
        rows = self._unless(self.session_expected or None, "session_expected")
        for path, values in rows:
            found = self._summarize(path.read_bytes(), path=path)
            assert found is not None, path.name
            got = tuple(getattr(found, field) for field in self.session_expected_fields)
            assert got == tuple(values), path.name

    @PROPERTY
    @given(data=st.data())
    def test_every_prefix_of_a_captured_session_is_a_session_or_a_skip(
        self, data: st.DataObject
    ) -> None:
        path, raw = data.draw(st.sampled_from(self._session_samples()))
        head, tail = self.session_read_bounds
        self._summarize(data.draw(prefixes([raw])),
                        data.draw(st.sampled_from([64, 300, 1024, 30_000, head])),
                        data.draw(st.sampled_from([64, 700, 2000, tail])), path)

    def test_a_session_cut_at_any_line_is_the_same_session_or_a_skip(self) -> None:
        samples = self._session_samples()
        assert self.session_cut_everywhere in (None, *(path for path, _ in samples))
        for path, raw in samples:
            whole = self._summarize(raw, path=path)
            assert whole is not None
            ends = [i + 1 for i, byte in enumerate(raw) if byte == 0x0A]
            everywhere = path == self.session_cut_everywhere
            for cut in range(len(raw) + 1) if everywhere else {*ends, *(e - 7 for e in ends)}:
                found = self._summarize(raw[:max(cut, 0)], path=path)
                if found is not None:
                    assert found.native_id == whole.native_id
                    assert not everywhere or cut > self.session_min_bytes

    @PROPERTY
    @given(data=st.data())
    def test_records_of_any_type_never_raise_from_the_summarizer(
        self, data: st.DataObject
    ) -> None:
        self._sessions()
        documents = self._unless(self.session_documents, "session_documents")
        out = data.draw(documents)
        self._summarize(out)
        self._summarize(out, len(out) // 2 or 1, len(out) // 3 or 1)

    def test_huge_and_deep_lines_never_raise_from_the_summarizer(self) -> None:
        firsts = {raw.split(b"\n", 1)[0] + b"\n" for _, raw in self._session_samples()}
        for first in sorted(firsts):
            for junk in _DEEP_AND_HUGE:
                self._summarize(first + junk)
                self._summarize(junk)
        for whole in self.huge_session_files:
            self._summarize(whole)
