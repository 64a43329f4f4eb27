"""An odd file where clanker keeps its own never hangs or crashes a command.

Every file clanker reads of its own (the models cache, a usage reading, the
sessions summary cache, ``config.toml``) is replaced in turn by a FIFO, a
socket, a link to itself, a link to a valid-looking file elsewhere, a
directory, a file over the bound, a deeply nested document and an unreadable
file. A cache is then ignored and rebuilt (and the link's target left alone);
the configuration is a typed error naming the file. Each read runs in a
thread joined with a timeout: a hang is a failure, not a stuck suite.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest

from clanker.config import CONFIG_FILE, ConfigError, load_settings
from clanker.environment.local import LocalEnvironment
from clanker.ids import HarnessId
from clanker.models.service import ModelService
from clanker.models.types import CatalogSource
from clanker.registry import Registry
from clanker.sessions.service import SessionService
from clanker.storage import UnusableFileError, read_own_file
from clanker.testing import EnvironmentDouble, ScriptedExecutor
from clanker.usage.store import Remembered, UsageStore
from tests.helpers import FakeSessions, make_plugin, make_sessions_plugin, write_fake_session

T = TypeVar("T")
HANG_GUARD = 20.0
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DECOY = '{"decoy": true}'

KINDS = ["fifo", "socket", "self-link", "link-elsewhere", "directory", "huge", "nested",
         "unreadable"]


def _within(call: Callable[[], T]) -> T:
    """Run ``call`` in a thread; fail (instead of hanging) when it does not return."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(HANG_GUARD)
    if thread.is_alive():
        pytest.fail(f"still blocked after {HANG_GUARD:g}s")
    if failure:
        raise failure[0]
    return outcome[0]


@pytest.fixture
def cleanup() -> Iterator[list[Callable[[], None]]]:
    undo: list[Callable[[], None]] = []
    yield undo
    for step in reversed(undo):
        step()


def _bind(server: socket.socket, path: Path) -> None:
    """Bind ``server`` at ``path``, which may be longer than a socket address holds
    (107 bytes; a worker's ``tmp_path`` often is): then through the short name of
    its directory's descriptor (Linux's ``/proc/self/fd``)."""
    if len(os.fsencode(path)) < 100:
        server.bind(str(path))
        return
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("the path is too long for a Unix socket")
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        server.bind(f"/proc/self/fd/{directory}/{path.name}")
    finally:
        os.close(directory)


def plant(path: Path, kind: str, *, bound: int, nested: str,
          cleanup: list[Callable[[], None]], decoy: str = DECOY) -> Path | None:
    """Put an odd ``kind`` of file at ``path``; return a link's target, if any.

    A link elsewhere points at ``decoy``: a file that would be believed if the
    link were followed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "unreadable" and os.geteuid() == 0:
        pytest.skip("root reads a file whatever its mode")
    if kind == "fifo":
        os.mkfifo(path)
        cleanup.append(lambda: _release(path))
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        cleanup.append(server.close)
        _bind(server, path)
    elif kind == "self-link":
        path.symlink_to(path.name)
    elif kind == "link-elsewhere":
        target = path.parent.parent / f"elsewhere-{path.name}"
        target.write_text(decoy)
        path.symlink_to(target)
        return target
    elif kind == "directory":
        path.mkdir()
    elif kind == "huge":
        with open(path, "wb") as handle:
            handle.truncate(bound + 1)
    elif kind == "nested":
        path.write_text(nested)
    elif kind == "unreadable":
        path.write_text(DECOY)
        path.chmod(0)
    return None


def _release(path: Path) -> None:
    """Let go of a reader blocked opening the FIFO ``path`` (the bug): a writer comes and goes."""
    with contextlib.suppress(OSError):  # no reader waits, or it is no longer a FIFO
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


DEEP_JSON = "[" * 100_000 + "]" * 100_000
DEEP_TOML = "a = " + "[" * 100_000 + "]" * 100_000 + "\n"


def _assert_rebuilt(path: Path, kind: str, target: Path | None, decoy: str = DECOY) -> None:
    """The cache was written afresh as a regular file, except over a directory,
    which is left alone; a link's target is never written through."""
    if target is not None:
        assert target.read_text() == decoy
    if kind == "directory":
        assert path.is_dir()
        return
    assert stat.S_ISREG(path.lstat().st_mode)
    assert isinstance(json.loads(path.read_bytes()), dict)


# -- the models cache ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_an_odd_models_cache_is_ignored_and_rebuilt(
    tmp_path: Path, kind: str, cleanup: list[Callable[[], None]]
) -> None:
    provider = Registry.from_plugins({"fake-agent": make_plugin()}, environ={}).get_provider(
        HarnessId("fake-agent"))
    decoy = EnvironmentDouble(executor=ScriptedExecutor.returning("decoy\tDecoy\n"))
    elsewhere = ModelService(environment=decoy, cache_dir=tmp_path / "decoy")
    asyncio.run(elsewhere.catalog(provider))
    decoy = (tmp_path / "decoy" / "models" / "fake-agent.json").read_text()
    path = tmp_path / "cache" / "models" / "fake-agent.json"
    target = plant(path, kind, bound=4 * 1024 * 1024, nested=DEEP_JSON, cleanup=cleanup,
                   decoy=decoy)
    listing = EnvironmentDouble(executor=ScriptedExecutor.returning("m1\tOne\n"))
    models = ModelService(environment=listing, cache_dir=tmp_path / "cache")
    catalog = _within(lambda: asyncio.run(models.catalog(provider)))
    assert catalog.source is CatalogSource.LIVE
    assert [m.id for m in catalog.models] == ["m1"]
    _assert_rebuilt(path, kind, target, decoy)


# -- a usage reading ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_an_odd_usage_reading_is_ignored_and_rebuilt(
    tmp_path: Path, kind: str, cleanup: list[Callable[[], None]]
) -> None:
    key = "local\0fake-agent\0"
    decoy_store = UsageStore(tmp_path / "decoy")
    decoy_store.save(key, Remembered(checked_at=T0 - timedelta(days=1)))
    decoy_path = decoy_store._path(key)
    path = UsageStore(tmp_path)._path(key)
    assert path is not None and decoy_path is not None
    decoy = decoy_path.read_text()
    target = plant(path, kind, bound=1024 * 1024, nested=DEEP_JSON, cleanup=cleanup,
                   decoy=decoy)
    assert _within(lambda: UsageStore(tmp_path).load(key, "fake-agent")) == Remembered()
    reading = Remembered(checked_at=T0)
    UsageStore(tmp_path).save(key, reading)
    _assert_rebuilt(path, kind, target, decoy)
    if kind != "directory":
        assert UsageStore(tmp_path).load(key, "fake-agent") == reading


# -- the sessions summary cache -----------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_an_odd_sessions_cache_is_ignored_and_rebuilt(
    tmp_path: Path, kind: str, cleanup: list[Callable[[], None]]
) -> None:
    home = tmp_path / "agent-home"
    write_fake_session(home, "a1", str(tmp_path), T0)
    registry = Registry.from_plugins({"fake-agent": make_sessions_plugin(FakeSessions())},
                                     environ={})

    def listing(cache: Path) -> list[str]:
        environ = {"FAKE_AGENT_HOME": str(home), "PATH": os.environ["PATH"]}
        service = SessionService(environment=LocalEnvironment(environ), cache_dir=cache)
        provider = registry.get_provider(HarnessId("fake-agent"))
        found = asyncio.run(service.discover([provider], workspace=None))
        assert found.complete
        return [s.native_id for s in found.sessions]

    # A cache that would be believed: the same file, unchanged, summarized as "decoy".
    listing(tmp_path / "decoy")
    decoy_cache = tmp_path / "decoy" / "sessions" / "fake-agent.json"
    document = json.loads(decoy_cache.read_text())
    document["rows"][0][4] = "decoy"
    decoy = json.dumps(document)
    path = tmp_path / "cache" / "sessions" / "fake-agent.json"
    target = plant(path, kind, bound=64 * 1024 * 1024, nested=DEEP_JSON, cleanup=cleanup,
                   decoy=decoy)
    assert _within(lambda: listing(tmp_path / "cache")) == ["a1"]
    _assert_rebuilt(path, kind, target, decoy)


# -- config.toml --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_an_odd_config_file_is_an_error_naming_it(
    tmp_path: Path, kind: str, cleanup: list[Callable[[], None]]
) -> None:
    path = tmp_path / "config" / CONFIG_FILE
    decoy = '[commit]\nharness = "decoy"\n'
    plant(path, kind, bound=256 * 1024, nested=DEEP_TOML, cleanup=cleanup,
          decoy=decoy)
    with pytest.raises(ConfigError) as caught:
        _within(lambda: load_settings(tmp_path / "config"))
    assert str(path) in str(caught.value)


def test_a_missing_config_is_the_default_and_a_good_one_is_read(tmp_path: Path) -> None:
    assert load_settings(tmp_path).commit.harness is None
    (tmp_path / CONFIG_FILE).write_text('[commit]\nharness = "zed"\n')
    assert load_settings(tmp_path).commit.harness == "zed"


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("fifo", "is a FIFO"), ("socket", "socket"), ("self-link", "symbolic link"),
     ("directory", "is a directory"), ("huge", "larger than")],
)
def test_read_own_file_says_what_is_wrong(
    tmp_path: Path, kind: str, reason: str, cleanup: list[Callable[[], None]]
) -> None:
    path = tmp_path / "d" / "own.json"
    plant(path, kind, bound=10, nested="", cleanup=cleanup)
    with pytest.raises(UnusableFileError) as caught:
        _within(lambda: read_own_file(path, max_bytes=10))
    assert reason in str(caught.value)
    assert str(path) in str(caught.value)


# -- end to end -----------------------------------------------------------------------------


def _clanker(home: Path, bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("CLANKER_")}
    env |= {"CLANKER_HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}",
            "HOME": str(home / "user")}
    program = "import sys; from clanker.cli import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", program, *args], env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def test_sessions_with_caches_linked_to_themselves_lists_and_never_hangs(tmp_path: Path) -> None:
    """The reported hang: a cache replaced by a link to itself made one provider
    fail while another was starting its listing command."""
    home = tmp_path / "home"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # Every bundled provider whose listing runs a command finds one that answers.
    for name in ("opencode", "hermes"):
        script = bin_dir / name
        script.write_text(f"#!{sys.executable}\nprint('[]')\n")
        script.chmod(0o755)
    sessions = home / "cache" / "sessions"
    sessions.mkdir(parents=True)
    for harness in ("agy", "claude", "codex", "hermes", "omp", "opencode", "pi"):
        (sessions / f"{harness}.json").symlink_to(f"{harness}.json")
    for _ in range(3):
        done = _clanker(home, bin_dir, "sessions", "--all", "--json")
        assert "internal error" not in done.stderr
        assert "Traceback" not in done.stderr
        assert done.returncode == 0, done.stderr
        assert "sessions" in json.loads(done.stdout)


def test_commit_message_with_a_fifo_config_exits_2_naming_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    os.mkfifo(home / "config" / CONFIG_FILE)
    done = _clanker(home, tmp_path, "commit-message")
    assert done.returncode == 2, done.stderr
    assert str(home / "config" / CONFIG_FILE) in done.stderr
    assert "Traceback" not in done.stderr


def test_a_rebuildable_file_is_written_alike_without_a_disk_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from clanker.storage import read_json, write_json_atomic

    flushed: list[int] = []
    monkeypatch.setattr("clanker.storage.os.fsync", flushed.append)
    data = {"rows": [["/a/ü", 1, 2, 3], ["/b", 4, 5, 6, "empty"]], "version": 5}
    write_json_atomic(tmp_path / "kept.json", data)
    write_json_atomic(tmp_path / "cache.json", data, fsync=False)
    assert len(flushed) == 1  # the first one only
    assert (tmp_path / "kept.json").read_bytes() == (tmp_path / "cache.json").read_bytes()
    assert read_json(tmp_path / "cache.json") == data


def test_a_file_written_in_pieces_replaces_the_old_one_whole_or_not_at_all(
    tmp_path: Path,
) -> None:
    from clanker.storage import write_text_atomic

    target = tmp_path / "state" / "cache.json"
    write_text_atomic(target, ["{", '"a":', "1}"], fsync=False)
    assert target.read_text() == '{"a":1}'
    assert oct(target.stat().st_mode & 0o777) == "0o600"

    def broken() -> Iterator[str]:
        yield "{"
        raise OSError("no space left")

    with pytest.raises(OSError, match="no space left"):
        write_text_atomic(target, broken(), fsync=False)
    assert target.read_text() == '{"a":1}'  # the old file, and no temporary beside it
    assert [p.name for p in target.parent.iterdir()] == ["cache.json"]
