"""Run a harness in the user's own terminal and hand back its exit status.

The child inherits stdin/stdout/stderr and stays in our process group, so the
terminal delivers Ctrl+C, Ctrl+\\ and window-size changes to it directly; we
only ignore those ourselves (forwarding would deliver them twice, and a second
Ctrl+C makes several TUIs quit). Signals aimed at the launcher alone (SIGTERM,
SIGHUP, and SIGINT when there is no terminal) are forwarded.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from types import FrameType

from clanker.execution.process import resolve_executable

__all__ = ["exit_status", "run_foreground"]

_ALWAYS_FORWARDED = (signal.SIGTERM, signal.SIGHUP)
_TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGQUIT)


def _terminal_delivers_signals() -> bool:
    """Say whether our process group is the foreground group of a terminal."""
    try:
        return os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def exit_status(returncode: int) -> int:
    """Map a Popen return code to a shell-style exit status (128 + signal)."""
    return 128 - returncode if returncode < 0 else returncode


@contextlib.contextmanager
def _signals_to(process: subprocess.Popen[bytes]) -> Iterator[None]:
    forwarded = list(_ALWAYS_FORWARDED)
    ignored: list[signal.Signals] = []
    if _terminal_delivers_signals():
        ignored.extend(_TERMINAL_SIGNALS)
    else:
        forwarded.extend(_TERMINAL_SIGNALS)

    def forward(signum: int, _: FrameType | None) -> None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signum)

    previous = {}
    for sig in forwarded:
        previous[sig] = signal.signal(sig, forward)
    for sig in ignored:
        previous[sig] = signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_foreground(argv: tuple[str, ...], env: Mapping[str, str], cwd: str | None) -> int:
    """Run ``argv`` with inherited stdio until it exits; return its exit status.

    Raises ``binary-unavailable`` when ``argv[0]`` is not on the child's PATH.
    Must be called from the main thread (it installs signal handlers).
    """
    executable = resolve_executable(argv[0], env)
    # Handlers are installed after the child exists on purpose: an ignored
    # SIGINT would otherwise be inherited by the harness.
    process = subprocess.Popen([executable, *argv[1:]], env=dict(env), cwd=cwd)
    with _signals_to(process):
        while True:
            try:
                return exit_status(process.wait())
            except InterruptedError:  # pragma: no cover - PEP 475 retries for us
                continue
