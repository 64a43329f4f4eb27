"""clanker.locking: one exclusive lock for clanker's own files, held across real
processes, bounded, and refused on anything but clanker's own regular file."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clanker.errors import EXIT_CODES, ErrorKind, HarnessCapabilityError
from clanker.locking import LockTimeoutError, UnsafeLockError, exclusive

# Takes the lock (a single try), says so, and holds it until its stdin closes.
_HOLD = """
import sys
from pathlib import Path
from clanker.locking import exclusive
with exclusive(Path(sys.argv[1]), timeout=0):
    print("held", flush=True)
    sys.stdin.read()
"""

# Increments the number in a file N times, each a plain read-then-write under the lock.
_COUNT = """
import sys
from pathlib import Path
from clanker.locking import exclusive
lock, counter, times = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
for _ in range(times):
    with exclusive(lock, timeout=300):
        value = int(counter.read_text() or "0")
        counter.write_text(str(value + 1))
"""

# Waits (bounded) for the lock, then says it has it.
_WAIT = """
import sys
from pathlib import Path
from clanker.locking import exclusive
with exclusive(Path(sys.argv[1]), timeout=300):
    print("taken", flush=True)
"""


def _python(script: str, *args: object, stdin: int | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)], text=True,
                            stdin=stdin, stdout=subprocess.PIPE)


@contextlib.contextmanager
def _held(lock: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding ``lock`` for the ``with`` block (until its stdin closes)."""
    process = _python(_HOLD, lock, stdin=subprocess.PIPE)
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "held\n"
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """Another process holding ``tmp_path/locks/a.lock``."""
    lock = tmp_path / "locks" / "a.lock"
    with _held(lock) as process:
        yield lock, process


def test_a_lock_held_by_another_process_times_out_naming_the_file_and_the_wait(
    holder: tuple[Path, subprocess.Popen[str]],
) -> None:
    lock, _ = holder
    with pytest.raises(LockTimeoutError) as caught, exclusive(lock, timeout=0.3):
        pytest.fail("the lock was taken while another process held it")
    error = caught.value
    assert isinstance(error, HarnessCapabilityError)
    assert error.kind is ErrorKind.TIMEOUT and error.exit_code == EXIT_CODES[ErrorKind.TIMEOUT]
    assert error.path == lock and error.timeout == 0.3
    assert str(lock) in str(error) and "0.3 s" in str(error)


def test_a_single_try_fails_at_once_on_a_held_lock(
    holder: tuple[Path, subprocess.Popen[str]],
) -> None:
    lock, _ = holder
    with pytest.raises(LockTimeoutError, match="already held") as caught, \
            exclusive(lock, timeout=0):
        pytest.fail("the lock was taken while another process held it")
    assert str(lock) in str(caught.value)


def test_a_bounded_wait_takes_the_lock_once_its_holder_lets_go(
    holder: tuple[Path, subprocess.Popen[str]],
) -> None:
    lock, process = holder
    waiter = _python(_WAIT, lock)
    try:
        assert process.stdin is not None
        process.stdin.close()  # the holder leaves its `with`
        assert process.wait() == 0
        assert waiter.communicate()[0] == "taken\n"
        assert waiter.returncode == 0
    finally:
        if waiter.poll() is None:
            waiter.kill()
        waiter.wait()


def test_the_lock_of_a_killed_holder_is_free_at_once(
    holder: tuple[Path, subprocess.Popen[str]],
) -> None:
    lock, process = holder
    process.send_signal(signal.SIGKILL)
    process.wait()
    with exclusive(lock, timeout=0):
        pass


def test_a_failing_body_lets_the_lock_go(tmp_path: Path) -> None:
    lock = tmp_path / "a.lock"
    with pytest.raises(RuntimeError, match="inside"), exclusive(lock, timeout=0):
        raise RuntimeError("inside")
    with exclusive(lock, timeout=0):
        pass


def test_concurrent_writers_under_the_lock_lose_no_increment(tmp_path: Path) -> None:
    lock, counter = tmp_path / "locks" / "count.lock", tmp_path / "count"
    counter.write_text("0")
    writers, times = 4, 150
    processes = [_python(_COUNT, lock, counter, times) for _ in range(writers)]
    try:
        for process in processes:
            process.communicate()
            assert process.returncode == 0
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
    assert int(counter.read_text()) == writers * times


def test_the_file_is_0600_in_a_0700_directory_whatever_the_umask(tmp_path: Path) -> None:
    lock = tmp_path / "state" / "locks" / "a.lock"
    previous = os.umask(0)
    try:
        with exclusive(lock, timeout=0):
            pass
    finally:
        os.umask(previous)
    assert lock.stat().st_mode & 0o7777 == 0o600
    assert lock.parent.stat().st_mode & 0o7777 == 0o700


def test_a_lock_file_left_readable_by_others_is_made_private(tmp_path: Path) -> None:
    lock = tmp_path / "a.lock"
    lock.write_text("")
    lock.chmod(0o666)
    with exclusive(lock, timeout=0):
        pass
    assert lock.stat().st_mode & 0o7777 == 0o600


@pytest.mark.parametrize("kind", ["link-elsewhere", "dangling-link", "link-to-itself",
                                  "fifo", "directory", "socket"])
def test_anything_but_a_regular_file_is_refused_without_blocking_or_touching_it(
    tmp_path: Path, kind: str,
) -> None:
    lock = tmp_path / "a.lock"
    target = tmp_path / "target"
    held: socket.socket | None = None
    if kind == "link-elsewhere":
        target.write_text("kept")
        lock.symlink_to(target)
    elif kind == "dangling-link":
        lock.symlink_to(target)
    elif kind == "link-to-itself":
        lock.symlink_to(lock)
    elif kind == "fifo":
        os.mkfifo(lock)
    elif kind == "directory":
        lock.mkdir()
    else:
        held = socket.socket(socket.AF_UNIX)
        held.bind(str(lock))
    try:
        with pytest.raises(UnsafeLockError) as caught, exclusive(lock, timeout=5):
            pytest.fail("a lock was taken on something that is not a regular file")
    finally:
        if held is not None:
            held.close()
    assert caught.value.path == lock and str(lock) in str(caught.value)
    expected = "symbolic link" if "link" in kind else "not a regular file"
    assert expected in str(caught.value)
    if kind == "link-elsewhere":
        assert target.read_text() == "kept"
    if kind == "dangling-link":
        assert not target.exists()


def test_a_lock_file_another_user_owns_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another uid needs root")
    lock = tmp_path / "a.lock"
    lock.write_text("")
    os.chown(lock, 65534, 65534)
    with pytest.raises(UnsafeLockError, match="belongs to uid 65534"), \
            exclusive(lock, timeout=5):
        pytest.fail("a lock was taken on another user's file")


def test_a_lock_below_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(UnsafeLockError, match=r"cannot be used|not a directory"), \
            exclusive(tmp_path / "file" / "a.lock", timeout=0):
        pytest.fail("a lock was taken below a file")


@pytest.mark.parametrize("timeout", [-1, float("inf"), float("nan")])
def test_an_unbounded_or_negative_wait_is_refused(tmp_path: Path, timeout: float) -> None:
    with pytest.raises(ValueError, match="timeout"), exclusive(tmp_path / "a.lock",
                                                               timeout=timeout):
        pytest.fail("a lock was taken without a bounded wait")
    assert not (tmp_path / "a.lock").exists()


# -- the callers: a held lock is each one's own answer, after its own bounded wait --


def test_hosts_held_by_another_process_are_a_host_error_naming_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from clanker import hosts

    monkeypatch.setattr(hosts, "_LOCK_WAIT", 0.2)
    lock = tmp_path / f".{hosts.HOSTS_FILE}.lock"
    with _held(lock), pytest.raises(hosts.HostError, match="another clanker") as caught:
        hosts.HostStore(tmp_path).add("box", "user@box")
    assert str(lock) in str(caught.value)
    assert not (tmp_path / hosts.HOSTS_FILE).exists()
    assert [h.name for h in hosts.HostStore(tmp_path).list()] == []


def test_account_settings_held_by_another_process_are_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from clanker.accounts import store

    monkeypatch.setattr(store, "_LOCK_WAIT", 0.2)
    path = tmp_path / "accounts.json"
    with _held(path.with_name("accounts.json.lock")), \
            pytest.raises(store.AccountStoreError, match="busy"):
        store.AccountStore(path).change(
            lambda state: state.with_selection("local", "codex", None))
    assert not path.exists()


def test_a_seen_mark_made_while_another_deck_holds_the_lock_is_kept_and_written_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from clanker.deck import seen

    monkeypatch.setattr(seen, "_LOCK_WAIT", 0.2)
    path = tmp_path / "deck-seen.json"
    marks = seen.SeenMarks(path)
    with _held(path.with_name("deck-seen.json.lock")):
        assert marks.mark("t-1", 3)
        assert not path.exists()
    assert marks.marks == {"t-1": 3}
    assert marks.mark("t-2", 1)
    assert seen.SeenMarks(path).marks == {"t-1": 3, "t-2": 1}


def test_worktree_records_held_by_another_process_are_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from clanker.checkouts import provenance
    from clanker.checkouts.types import CheckoutError, Refusal

    monkeypatch.setattr(provenance, "_FILE_LOCK_WAIT", 0.2)
    main = str(tmp_path / "repo")
    records = provenance.ProvenanceStore(tmp_path, environment="local", main_checkout=main)
    lock = tmp_path / "locks" / f"checkouts-{provenance._key('local', main)}.lock"
    with _held(lock), pytest.raises(CheckoutError) as caught:
        records.update(lambda _: None)
    assert caught.value.reason is Refusal.BUSY
    assert not records.path.exists()
