"""The PTY relay with real processes on real pseudo-terminals: what a child sees
(a terminal of its own, of the user's size, controlling it), input and output
relayed, the exit status, and a child swapped while the relay runs."""

from __future__ import annotations

import os
import signal
import sys
import termios
import threading
from collections.abc import Iterator

import pytest

from clanker.environment.pty_relay import (
    TYPED_LIMIT,
    PtyChild,
    PtyRelay,
    Typed,
    raw_mode,
    run_in_pty,
    terminal_size,
)
from clanker.errors import ErrorKind, HarnessCapabilityError

ENV = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.defpath}


def python(code: str, size: tuple[int, int] | None = None) -> PtyChild:
    return PtyChild.spawn((sys.executable, "-c", code), ENV, None, size)


_OPEN: set[int] = set()


def close(fd: int) -> None:
    """Close one of the fixture's ends early (the fixture then leaves it alone,
    so it never closes a number the system has since reused)."""
    _OPEN.discard(fd)
    os.close(fd)


@pytest.fixture
def user() -> Iterator[tuple[int, int, int, int]]:
    """The user's side: (stdin read end, its write end, stdout read end, its write end)."""
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    _OPEN.update((stdin_r, stdin_w, stdout_r, stdout_w))
    yield stdin_r, stdin_w, stdout_r, stdout_w
    for fd in (stdin_r, stdin_w, stdout_r, stdout_w):
        if fd in _OPEN:
            close(fd)


def relay_all(child: PtyChild, user: tuple[int, int, int, int]) -> tuple[int, bytes]:
    stdin_r, _, stdout_r, stdout_w = user
    relay = PtyRelay(child, stdin_fd=stdin_r, stdout_fd=stdout_w)
    try:
        status = relay.run()
    finally:
        relay.close()
    close(stdout_w)
    return status, read_all(stdout_r)


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_output_and_exit_status_are_relayed(user: tuple[int, int, int, int]) -> None:
    status, output = relay_all(python("print('hello from the child'); raise SystemExit(3)"), user)
    assert status == 3
    assert b"hello from the child" in output


def test_the_child_has_a_controlling_terminal_of_the_given_size(
    user: tuple[int, int, int, int],
) -> None:
    code = ("import os; s = os.get_terminal_size(0); "
            "print('tty', os.isatty(1), os.tcgetpgrp(0) == os.getpgrp(), s.lines, s.columns)")
    status, output = relay_all(python(code, (33, 101)), user)
    assert status == 0
    assert b"tty True True 33 101" in output


def test_input_reaches_the_child(user: tuple[int, int, int, int]) -> None:
    child = python("import sys; print('got', sys.stdin.readline().strip().upper())")
    os.write(user[1], b"hello\n")
    close(user[1])
    status, output = relay_all(child, user)
    assert status == 0
    assert b"got HELLO" in output


def test_a_resize_reaches_the_child(user: tuple[int, int, int, int]) -> None:
    child = python("import os, sys; sys.stdin.readline(); s = os.get_terminal_size(0); "
                   "print('size', s.lines, s.columns)", (24, 80))
    child.resize((40, 120))
    os.write(user[1], b"\n")
    status, output = relay_all(child, user)
    assert status == 0
    assert b"size 40 120" in output


def test_a_typed_ctrl_c_interrupts_the_child_not_the_launcher(
    user: tuple[int, int, int, int],
) -> None:
    child = python("import sys; print('ready', flush=True); sys.stdin.readline()")
    seen = b""
    while b"ready" not in seen:  # by then the trampoline has made the PTY its terminal
        seen += child.read()
    os.write(user[1], b"\x03")
    status, _ = relay_all(child, user)
    assert status == 128 + signal.SIGINT


def _started(child: PtyChild, stdin_fd: int, stdout_fd: int
             ) -> tuple[PtyRelay, list[int], threading.Thread]:
    """A relay of ``child`` between the user's pipes, running in a thread: the relay,
    the list its status is appended to once it ends, and the thread."""
    relay = PtyRelay(child, stdin_fd=stdin_fd, stdout_fd=stdout_fd)
    outcome: list[int] = []
    runner = threading.Thread(target=lambda: outcome.append(relay.run()))
    runner.start()
    return relay, outcome, runner


def test_a_replacement_takes_over_the_same_relay(user: tuple[int, int, int, int]) -> None:
    stdin_r, stdin_w, stdout_r, stdout_w = user
    first = python("import sys; sys.stdin.readline(); print('first answered')")
    relay, outcome, runner = _started(first, stdin_r, stdout_w)
    second = python("import sys; print('second got', sys.stdin.readline().strip())")
    try:
        previous = relay.replace(second, prefix=b"[held output]")
        assert previous is first
        assert relay.child is second
        first.signal(signal.SIGTERM)
        assert first.wait() == 128 + signal.SIGTERM
        first.close()
        os.write(stdin_w, b"typed after the move\n")
    finally:
        runner.join()
        relay.close()
    close(stdout_w)
    output = read_all(stdout_r)
    assert outcome == [0]
    assert b"[held output]" in output
    assert b"second got typed after the move" in output
    assert b"first answered" not in output


def test_a_replacement_after_the_relay_ended_is_refused(user: tuple[int, int, int, int]) -> None:
    stdin_r, _, _, stdout_w = user
    relay = PtyRelay(python("pass"), stdin_fd=stdin_r, stdout_fd=stdout_w)
    assert relay.run() == 0
    late = python("import sys; sys.stdin.readline()")
    try:
        with pytest.raises(RuntimeError, match="ended"):
            relay.replace(late)
        assert relay.child is not late
    finally:
        late.close()
        late.wait()
        relay.close()


def test_an_unknown_executable_is_a_typed_error() -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        PtyChild.spawn(("clanker-no-such-harness",), ENV, None)
    assert caught.value.kind is ErrorKind.BINARY_UNAVAILABLE


def test_raw_mode_applies_to_a_terminal_and_is_restored() -> None:
    master, slave = os.openpty()
    try:
        before = termios.tcgetattr(slave)
        assert terminal_size(slave) is not None
        with raw_mode(slave):
            assert not termios.tcgetattr(slave)[3] & termios.ICANON
        assert termios.tcgetattr(slave) == before
    finally:
        os.close(slave)
        os.close(master)


def test_raw_mode_and_size_leave_a_pipe_alone() -> None:
    read_end, write_end = os.pipe()
    try:
        with raw_mode(read_end):
            pass
        assert terminal_size(read_end) is None
    finally:
        os.close(read_end)
        os.close(write_end)


def test_run_in_pty_relays_and_restores_the_signal_handlers(
    user: tuple[int, int, int, int],
) -> None:
    stdin_r, _, stdout_r, stdout_w = user
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGWINCH, signal.SIGTERM)}
    relay = PtyRelay(python("print('via run_in_pty'); raise SystemExit(4)"),
                     stdin_fd=stdin_r, stdout_fd=stdout_w)
    try:
        assert run_in_pty(relay, tty_fd=stdin_r) == 4  # a pipe: no raw mode, no size
    finally:
        relay.close()
    close(stdout_w)
    assert b"via run_in_pty" in read_all(stdout_r)
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_a_detached_child_exits_without_ending_the_relay_and_a_successor_takes_over(
    user: tuple[int, int, int, int],
) -> None:
    stdin_r, stdin_w, stdout_r, stdout_w = user
    first = python("import sys; print('first ready', flush=True); sys.stdin.readline()")
    relay, outcome, runner = _started(first, stdin_r, stdout_w)
    try:
        detached = relay.detach()
        assert detached is first and relay.child is None
        with pytest.raises(RuntimeError, match="pending"):
            relay.detach()
        first.signal(signal.SIGTERM)  # the handover's source retired, its exit proven
        assert first.wait() == 128 + signal.SIGTERM
        first.close()
        assert runner.is_alive()  # the exit did not end the relay
        second = python("import sys; print('second got', sys.stdin.readline().strip())")
        assert relay.replace(second, prefix=b"[held]") is None
        os.write(stdin_w, b"typed after the handover\n")
    finally:
        runner.join()
        relay.close()
    close(stdout_w)
    output = read_all(stdout_r)
    assert outcome == [0]
    assert b"[held]" in output and b"second got typed after the handover" in output


# A successor that reports every line it reads, until it reads "end".
_ECHO = ("import sys\nfor line in sys.stdin:\n"
         "    print('got', repr(line.strip()), flush=True)\n"
         "    if line.strip() == 'end': break\n")


def _handover(user: tuple[int, int, int, int], typed_during: bytes, fate: Typed,
              after: bytes) -> tuple[int, bytes, int]:
    """Detach a child, type ``typed_during`` while none runs (held: proven through
    the relay's own count), hand an echoing successor over as ``fate`` says, then
    type ``after``; the status, what the user saw, and what was held at the swap."""
    stdin_r, stdin_w, stdout_r, stdout_w = user
    first = python("import sys; sys.stdin.readline()")
    relay, outcome, runner = _started(first, stdin_r, stdout_w)
    held = -1
    try:
        relay.detach().signal(signal.SIGKILL)
        first.wait()
        first.close()
        writer = threading.Thread(target=os.write, args=(stdin_w, typed_during))
        writer.start()
        assert relay.wait_held(min(len(typed_during), TYPED_LIMIT), timeout=30)
        writer.join()
        held = relay.held
        relay.replace(python(_ECHO), prefix=b"[ready]", typed=fate)
        assert relay.held == 0
        os.write(stdin_w, after)
    finally:
        runner.join()
        relay.close()
    close(stdout_w)
    return outcome[0], read_all(stdout_r).replace(b"\r", b""), held


def test_what_is_typed_during_a_handover_reaches_the_successor_first(
    user: tuple[int, int, int, int],
) -> None:
    status, output, held = _handover(user, b"typed while nobody runs\n", Typed.DELIVER,
                                     b"typed later\nend\n")
    assert status == 0 and held == len(b"typed while nobody runs\n")
    assert output.index(b"got 'typed while nobody runs'") < output.index(b"got 'typed later'")
    assert b"clanker:" not in output  # nothing to tell


def test_what_is_typed_during_a_handover_that_recovered_is_discarded_and_said(
    user: tuple[int, int, int, int],
) -> None:
    status, output, _ = _handover(user, b"rm -rf build\n", Typed.DISCARD, b"end\n")
    assert status == 0
    assert b"got 'rm -rf build'" not in output and b"got 'end'" in output
    assert b"clanker: 13 typed bytes were discarded: the move did not happen" in output


def test_typed_input_beyond_the_limit_is_discarded_and_said(
    user: tuple[int, int, int, int],
) -> None:
    # One line a little over the limit: the successor gets its first TYPED_LIMIT bytes.
    line = b"x" * (TYPED_LIMIT + 100)
    status, output, held = _handover(user, line, Typed.DELIVER, b"\nend\n")
    assert status == 0 and held == TYPED_LIMIT
    assert b"clanker: 100 typed bytes beyond 64 KiB were discarded" in output


def test_a_handover_without_a_successor_ends_with_the_status_given(
    user: tuple[int, int, int, int],
) -> None:
    stdin_r, _, _, stdout_w = user
    child = python("import sys; sys.stdin.readline()")
    relay, outcome, runner = _started(child, stdin_r, stdout_w)
    try:
        with pytest.raises(RuntimeError, match="pending"):
            relay.finish(1)  # only once a handover is pending
        relay.detach().signal(signal.SIGKILL)
        assert child.wait() == 128 + signal.SIGKILL
        child.close()
        relay.finish(7)
    finally:
        runner.join()
        relay.close()
    assert outcome == [7]


def test_a_detach_after_the_child_ended_is_refused(user: tuple[int, int, int, int]) -> None:
    stdin_r, _, _, stdout_w = user
    relay = PtyRelay(python("pass"), stdin_fd=stdin_r, stdout_fd=stdout_w)
    try:
        assert relay.run() == 0
        with pytest.raises(RuntimeError, match="ended"):
            relay.detach()
    finally:
        relay.close()


def test_a_signal_during_a_handover_reaches_the_successor(
    user: tuple[int, int, int, int],
) -> None:
    stdin_r, _, _, stdout_w = user
    first = python("import sys; sys.stdin.readline()")
    relay, outcome, runner = _started(first, stdin_r, stdout_w)
    try:
        relay.detach().signal(signal.SIGKILL)
        first.wait()
        first.close()
        relay.signal_child(signal.SIGTERM)  # the person closed the terminal meanwhile
        relay.replace(python("import sys; sys.stdin.readline()"))  # would wait for ever
    finally:
        runner.join()
        relay.close()
    assert outcome == [128 + signal.SIGTERM]
