"""Run a harness on a pseudo-terminal clanker owns, and relay it to the user's.

:mod:`clanker.environment.foreground` hands the child the user's terminal
itself; that cannot survive a child being replaced, because two TUIs cannot
share one terminal. Here each child gets its own PTY and a session led by
itself (so its PTY is its controlling terminal and Ctrl+C typed by the user,
relayed as a byte, becomes its own SIGINT), and the launcher copies bytes both
ways. The user's terminal is put in raw mode while relaying, so every key
(including the signal keys) reaches the child unchanged; its size follows the
user's (SIGWINCH). SIGTERM and SIGHUP aimed at the launcher are forwarded to
the child being relayed.

:meth:`PtyRelay.replace` swaps the child being relayed without stopping the
relay: the caller starts and proves the replacement on its own PTY first,
then hands it over and retires the one it gets back.

A harness that cannot run beside its successor is handed over the other way
round: :meth:`PtyRelay.detach` takes the child out of the relay first (a
handover is pending: that child's exit no longer ends the relay), the caller
retires it, and then either hands the relay a successor (:meth:`PtyRelay.replace`)
or ends it (:meth:`PtyRelay.finish`).

What the user types while no child is relayed is held (at most
:data:`TYPED_LIMIT` bytes) and not echoed. The caller says what becomes of it
when it hands over the successor (:class:`Typed`): delivered to it exactly as
typed, once it is relayed (the conversation continues where the user expected
it to), or discarded with a one-line notice on the user's terminal (the
successor runs somewhere the user did not expect, so a prompt typed for the
other place must not run there unread). Bytes beyond the limit are discarded
and said so; a relay that ends without a successor discards what it held.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import fcntl
import os
import selectors
import signal
import struct
import subprocess
import sys
import termios
import threading
import tty
from collections.abc import Callable, Iterator, Mapping
from types import FrameType

from clanker.environment.foreground import exit_status
from clanker.execution.process import resolve_executable

__all__ = ["TYPED_LIMIT", "PtyChild", "PtyRelay", "Typed", "raw_mode", "run_in_pty",
           "terminal_size"]

_CHUNK = 65536
TYPED_LIMIT = 64 * 1024
"""How much of what the user types during a handover is held for the successor (bytes)."""


class Typed(enum.Enum):
    """What becomes of the input held during a handover when the successor takes over."""

    DELIVER = "deliver"
    """Written to the successor, exactly as typed, before anything typed later."""
    DISCARD = "discard"
    """Dropped, and the user told so on their terminal."""
_FORWARDED = (signal.SIGTERM, signal.SIGHUP)


def terminal_size(fd: int) -> tuple[int, int] | None:
    """``(rows, columns)`` of the terminal on ``fd``, or ``None`` if it is none."""
    try:
        size = os.get_terminal_size(fd)
    except OSError:
        return None
    return size.lines, size.columns


# The child is started in a new session (setsid) through this trampoline, which
# makes its stdin, the PTY's slave end, the session's controlling terminal and
# then becomes the harness. A preexec_fn would do the same in the forked child,
# but is unsafe once threads run (a replacement is spawned while the relay's
# thread is busy). -I -S: no user site, no site import, no PYTHON* variables.
_CONTROLLING_TERMINAL = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


class PtyChild:
    """One process whose stdin, stdout and stderr are the slave end of its own PTY."""

    def __init__(self, process: subprocess.Popen[bytes], master: int) -> None:
        self.process = process
        self.master = master

    @classmethod
    def spawn(cls, argv: tuple[str, ...], env: Mapping[str, str], cwd: str | None,
              size: tuple[int, int] | None = None) -> PtyChild:
        """Start ``argv`` on a fresh PTY of ``size`` (rows, columns).

        Raises ``binary-unavailable`` when ``argv[0]`` is not on the child's PATH.
        """
        executable = resolve_executable(argv[0], env)
        master, slave = os.openpty()
        try:
            if size is not None:
                _set_size(master, size)
            os.set_inheritable(slave, False)
            process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _CONTROLLING_TERMINAL,
                 executable, *argv[1:]], env=dict(env), cwd=cwd,
                stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                start_new_session=True,
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            # Only the child keeps the slave open: its exit then reads as EOF.
            os.close(slave)
        return cls(process, master)

    def resize(self, size: tuple[int, int]) -> None:
        """Give the PTY ``size``; the kernel tells the child with SIGWINCH."""
        _set_size(self.master, size)

    def read(self) -> bytes:
        """What the child wrote (blocks until something is there); ``b""`` at its end."""
        try:
            return os.read(self.master, _CHUNK)
        except OSError as error:
            if error.errno == errno.EIO:  # Linux: every slave end is closed
                return b""
            raise

    def write(self, data: bytes) -> None:
        """Type ``data`` into the child's terminal."""
        view = memoryview(data)
        while view:
            view = view[os.write(self.master, view):]

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signum)

    def wait(self) -> int:
        """Wait for the child to exit; return its shell-style exit status."""
        return exit_status(self.process.wait())

    def close(self) -> None:
        """Release the PTY (the child, if still running, then reads EOF/EIO)."""
        with contextlib.suppress(OSError):
            os.close(self.master)


def _set_size(fd: int, size: tuple[int, int]) -> None:
    rows, columns = size
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


@contextlib.contextmanager
def raw_mode(fd: int) -> Iterator[None]:
    """Put the terminal on ``fd`` in raw mode for the block (nothing if it is none)."""
    try:
        saved = termios.tcgetattr(fd)
    except termios.error:
        yield
        return
    tty.setraw(fd, termios.TCSANOW)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


class PtyRelay:
    """Copies the user's input to one child's PTY and its output back, until the
    child being relayed ends; that child can be swapped while it runs."""

    def __init__(self, child: PtyChild, *, stdin_fd: int, stdout_fd: int,
                 output_filter: Callable[[bytes], bytes] | None = None) -> None:
        """``output_filter`` sees every read of the child's output first and returns
        what is shown (it may hold bytes back, or take some out)."""
        self._child: PtyChild | None = child
        self._filter = output_filter
        self._stdin = stdin_fd
        self._stdout = stdout_fd
        self._lock = threading.Lock()
        self._pending: PtyChild | None = None
        self._prefix = b""
        self._detaching = False
        self._finish: int | None = None
        self._deferred: int | None = None
        self._ended = False
        self._handed_back = threading.Event()
        self._typed = bytearray()
        self._typed_over = 0
        self._typed_fate = Typed.DELIVER
        self._typed_changed = threading.Condition()
        self._wake_read, self._wake_write = os.pipe()
        for fd in (self._wake_read, self._wake_write):
            os.set_blocking(fd, False)

    @property
    def child(self) -> PtyChild | None:
        """The child relayed now; ``None`` while a handover is pending (:meth:`detach`)."""
        return self._child

    def wake(self) -> None:
        """Make the relay look at its state again (safe from a signal handler)."""
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_write, b"\0")

    def replace(self, replacement: PtyChild, prefix: bytes = b"",
                typed: Typed = Typed.DELIVER) -> PtyChild | None:
        """Relay ``replacement`` from now on; return the child relayed until now.

        ``prefix`` is output of the replacement already read (while it was being
        proven) and is shown first. Call from another thread than :meth:`run`;
        returns once the relay has switched. The caller retires the old child.
        During a pending handover (:meth:`detach`) there is no child relayed and
        ``None`` is returned; ``typed`` says what becomes of the input held
        meanwhile (delivered to ``replacement``, or discarded and said so).
        """
        with self._lock:
            self._check_idle()
            previous = self._child
            self._pending = replacement
            self._prefix = prefix
            self._typed_fate = typed
            self._handed_back.clear()
        self.wake()
        self._handed_back.wait()
        with self._lock:
            if self._child is not replacement:  # the relay ended first
                self._pending = None
                raise RuntimeError("the relay has ended")
        return previous

    def detach(self) -> PtyChild:
        """Stop relaying the child relayed now and return it, the relay running on with
        none: a handover is pending. That child's exit no longer ends the relay (the
        caller retires it) and what the user types until a successor is relayed is
        held (see :meth:`replace`); then :meth:`replace` relays the successor or
        :meth:`finish` ends the relay. Call from another thread than :meth:`run`;
        raises ``RuntimeError`` when the relay has ended (its child exited first) or a
        handover is under way."""
        with self._lock:
            self._check_idle()
            if self._child is None:
                raise RuntimeError("a handover is already pending")
            previous = self._child
            self._detaching = True
            self._handed_back.clear()
        self.wake()
        self._handed_back.wait()
        with self._lock:
            if self._child is not None:  # the relay ended first
                self._detaching = False
                raise RuntimeError("the relay has ended")
        return previous

    def finish(self, status: int) -> None:
        """End a relay whose handover found no successor: :meth:`run` returns
        ``status``. Only while a handover is pending (``RuntimeError`` otherwise)."""
        with self._lock:
            if self._ended:
                return
            if self._child is not None or self._pending is not None:
                raise RuntimeError("finish: only while a handover is pending")
            self._finish = status
        self.wake()

    @property
    def held(self) -> int:
        """How many typed bytes are held for the successor now (within the limit)."""
        with self._typed_changed:
            return len(self._typed)

    def wait_held(self, size: int, timeout: float) -> bool:
        """Wait, at most ``timeout`` seconds, until at least ``size`` typed bytes are
        held; say whether they are (for a caller that must know the relay has them)."""
        with self._typed_changed:
            return self._typed_changed.wait_for(lambda: len(self._typed) >= size, timeout)

    def _hold(self, data: bytes) -> None:
        with self._typed_changed:
            room = TYPED_LIMIT - len(self._typed)
            self._typed += data[:max(0, room)]
            self._typed_over += max(0, len(data) - max(0, room))
            self._typed_changed.notify_all()

    def _take_held(self) -> tuple[bytes, int]:
        with self._typed_changed:
            typed, over = bytes(self._typed), self._typed_over
            self._typed.clear()
            self._typed_over = 0
            self._typed_changed.notify_all()
        return typed, over

    def _settle_held(self, replacement: PtyChild) -> None:
        """Deliver or discard what was typed during the handover (see :class:`Typed`)."""
        typed, over = self._take_held()
        if self._typed_fate is Typed.DISCARD and typed:
            self._notice(f"{len(typed) + over} typed bytes were discarded: the move did "
                         f"not happen and the agent continues where it was")
            return
        if over:
            self._notice(f"{over} typed bytes beyond {TYPED_LIMIT // 1024} KiB were "
                         f"discarded during the move")
        if typed:
            with contextlib.suppress(OSError):  # a successor that exited reads nothing
                replacement.write(typed)

    def say(self, message: str) -> None:
        """Put one line for the person on the relayed terminal (``clanker: message``),
        from any thread."""
        self._notice(message)

    def _notice(self, message: str) -> None:
        with contextlib.suppress(OSError):
            self._output(f"\r\nclanker: {message}\r\n".encode())

    def signal_child(self, signum: int) -> None:
        """Send ``signum`` to the child relayed now; during a handover, to the successor
        as soon as it is relayed (safe from a signal handler: it takes no lock)."""
        child = self._child
        if child is not None:
            child.signal(signum)
            return
        self._deferred = signum
        self.wake()

    def _check_idle(self) -> None:
        if self._ended:
            raise RuntimeError("the relay has ended")
        if self._pending is not None or self._detaching:
            raise RuntimeError("a replacement is already being handed over")

    def _adopt_pending(self, selector: selectors.BaseSelector) -> None:
        with self._lock:
            replacement, self._pending = self._pending, None
            detaching, self._detaching = self._detaching, False
            if replacement is None and not detaching:
                return
            if self._child is not None:
                selector.unregister(self._child.master)
            self._child = replacement
            if replacement is not None:
                selector.register(replacement.master, selectors.EVENT_READ)
            self._handed_back.set()
        if replacement is not None:
            self._settle_held(replacement)
        if replacement is not None and self._prefix:
            self._output(self._prefix)
        deferred, self._deferred = self._deferred, None
        if replacement is not None and deferred is not None:
            replacement.signal(deferred)  # aimed at the launcher while nobody ran

    def _output(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._stdout, view):]

    def run(self) -> int:
        """Relay until the child being relayed ends; return its exit status (or
        the status :meth:`finish` gives)."""
        try:
            return self._relay()
        finally:
            with self._lock:
                self._ended = True
            self._handed_back.set()

    def _relay(self) -> int:
        with selectors.DefaultSelector() as selector:
            if self._child is not None:
                selector.register(self._child.master, selectors.EVENT_READ)
            selector.register(self._wake_read, selectors.EVENT_READ)
            with contextlib.suppress(ValueError, OSError):
                selector.register(self._stdin, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    if key.fd == self._wake_read:
                        with contextlib.suppress(BlockingIOError):
                            os.read(self._wake_read, _CHUNK)
                        self._adopt_pending(selector)
                        if self._finish is not None:
                            self._take_held()  # nothing runs to take it
                            return self._finish
                    elif key.fd == self._stdin:
                        self._typed_in(selector)
                    elif self._child is not None and key.fd == self._child.master:
                        data = self._child.read()
                        if not data:
                            child = self._child
                            child.close()
                            return child.wait()
                        if self._filter is not None:
                            data = self._filter(data)
                        if data:
                            self._output(data)

    def _typed_in(self, selector: selectors.BaseSelector) -> None:
        data = os.read(self._stdin, _CHUNK)
        if not data:  # the user's input ended: nothing more to type
            selector.unregister(self._stdin)
        elif self._child is not None:
            self._child.write(data)
        else:  # a handover is pending: held for the successor
            self._hold(data)

    def close(self) -> None:
        os.close(self._wake_read)
        os.close(self._wake_write)


def run_in_pty(relay: PtyRelay, *, tty_fd: int) -> int:
    """Run ``relay`` with the user's terminal (``tty_fd``) in raw mode, its size
    following the terminal's and SIGTERM/SIGHUP forwarded to the child relayed.

    Must be called from the main thread (it installs signal handlers).
    """

    def follow_size(_: int, __: FrameType | None) -> None:
        size = terminal_size(tty_fd)
        child = relay.child
        if size is not None and child is not None:
            with contextlib.suppress(OSError):
                child.resize(size)

    def forward(signum: int, _: FrameType | None) -> None:
        relay.signal_child(signum)  # during a handover: the successor's, once it runs

    previous = {signal.SIGWINCH: signal.signal(signal.SIGWINCH, follow_size)}
    for sig in _FORWARDED:
        previous[sig] = signal.signal(sig, forward)
    try:
        with raw_mode(tty_fd):
            return relay.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
