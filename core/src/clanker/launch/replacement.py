"""Replace the child a launch relays with another, proven first (hot replacement).

The replacement is started on its own PTY while the original keeps running and
keeps the user's terminal. It must print something within a deadline, still be
running after a short observation window (a resume that cannot find its
conversation prints an error and exits at once) and pass the caller's own check
(:attr:`Proof.confirm`); until then its output is held, not shown. Only a
proven replacement is handed to the relay, which shows the held output
first; then the original is retired. Anything short of that retires the
replacement and leaves the original exactly as it was: a failed
replacement is never followed by cleanup of anything else.
"""

from __future__ import annotations

import contextlib
import enum
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping

from attrs import frozen

from clanker.environment.pty_relay import PtyChild, PtyRelay, terminal_size

__all__ = ["Proof", "ReplacementRefused", "SourceAlive", "Why", "hot_replace", "retire",
           "retire_group", "start_proven"]

_RETIRE_GRACE = 5.0


class Why(enum.StrEnum):
    """Why a replacement was not adopted (stable: it reaches ``--json``)."""

    NO_OUTPUT = "no-output"
    """Nothing was printed before the deadline."""
    EXITED = "exited"
    """The replacement ended during the proof."""
    RELAY_ENDED = "relay-ended"
    """The original ended while the replacement was being proven."""
    UNCONFIRMED = "unconfirmed"
    """It ran, but the caller's own check (its registration) did not confirm it."""
    NOT_RELOCATED = "not-relocated"
    """The harness's own relocation of the conversation failed, so nothing was resumed."""
    NOT_STARTED = "not-started"
    """The resume could not even be prepared or started."""


class ReplacementRefused(Exception):
    """The replacement was not proven; it is retired and the original still runs."""

    def __init__(self, why: Why, message: str, output: str = "") -> None:
        super().__init__(message)
        self.why = why
        self.output = output
        """What the refused replacement printed (to recognize a transient contention)."""


@frozen(kw_only=True)
class Proof:
    """What a replacement must show before it takes over (seconds, bytes)."""

    first_output_within: float = 15.0
    survives: float = 1.5
    held_output_limit: int = 256 * 1024
    """Output beyond this is left unread (the child blocks) until it is adopted."""
    confirm: Callable[[PtyChild], bool] | None = None
    """Asked once the window has passed: whatever else must be true of the
    replacement (registered with attention, bound to the target checkout)."""


def retire(child: PtyChild) -> int:
    """End ``child`` (SIGTERM, SIGKILL after a grace period), release its PTY and
    return its exit status; its exit is waited for, never assumed."""
    child.signal(signal.SIGTERM)
    try:
        child.process.wait(timeout=_RETIRE_GRACE)
    except subprocess.TimeoutExpired:
        child.signal(signal.SIGKILL)
    status = child.wait()
    child.close()
    return status


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs. An orphan that has exited but
    was not yet reaped (a zombie: a container's init may never reap it) runs nothing,
    so where ``/proc`` lists the processes only live members count."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc/self"):
        return True
    with os.scandir("/proc") as entries:
        names = [entry.name for entry in entries if entry.name.isdigit()]
    for name in names:
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it ended meanwhile
        # After the command: state, ppid, pgrp, ...
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def retire_group(child: PtyChild, *, grace: float = _RETIRE_GRACE) -> int:
    """End ``child`` and every process of its group (the child leads a session of its
    own: a wrapper and the binary it starts), SIGTERM then SIGKILL after ``grace``;
    return the child's exit status once the whole group is proven gone.

    Raises :class:`SourceAlive` when a process of the group outlives SIGKILL and a
    second grace period (nothing may then run the conversation beside it).
    """
    pgid = child.process.pid
    status: int | None = None
    for signum in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signum)
        deadline = time.monotonic() + grace
        while True:
            if status is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.process.wait(timeout=max(0.0, min(0.05, deadline - time.monotonic())))
                if child.process.returncode is not None:
                    status = child.wait()
            if status is not None and not _group_alive(pgid):
                child.close()
                return status
            if time.monotonic() >= deadline:
                break
            if status is not None:
                time.sleep(0.05)
    child.close()
    raise SourceAlive(f"process group {pgid} outlived SIGKILL")


class SourceAlive(Exception):
    """The retired child's process group could not be proven gone."""


def _prove(candidate: PtyChild, proof: Proof) -> bytes:
    """The output ``candidate`` printed while proving itself, or a refusal."""
    held = bytearray()
    deadline = time.monotonic() + proof.first_output_within
    window_end = 0.0  # set by the first output: the observation window starts there
    with selectors.DefaultSelector() as selector:
        selector.register(candidate.master, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if held:
                remaining = window_end - now
                if remaining <= 0:
                    break
            else:
                remaining = deadline - now
                if remaining <= 0:
                    raise ReplacementRefused(Why.NO_OUTPUT,
                                             "the replacement printed nothing in time")
            if len(held) >= proof.held_output_limit:
                # Stop reading: the child waits on its full PTY; only its exit matters now.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    candidate.process.wait(timeout=remaining)
                break
            if not selector.select(remaining):
                continue
            data = candidate.read()
            if not data:
                raise ReplacementRefused(Why.EXITED, "the replacement exited while it was proven",
                                         held.decode(errors="replace"))
            if not held:
                window_end = time.monotonic() + proof.survives
            held += data
    if candidate.process.poll() is not None:
        raise ReplacementRefused(Why.EXITED, "the replacement exited while it was proven",
                                 held.decode(errors="replace"))
    if proof.confirm is not None and not proof.confirm(candidate):
        raise ReplacementRefused(Why.UNCONFIRMED, "the replacement was not confirmed")
    return bytes(held)


def start_proven(argv: tuple[str, ...], env: Mapping[str, str], cwd: str,
                 size: tuple[int, int] | None, proof: Proof | None = None
                 ) -> tuple[PtyChild, bytes]:
    """Start ``argv`` in ``cwd`` on a PTY of ``size`` and prove it; return it with the
    output it printed meanwhile (for :meth:`PtyRelay.replace`).

    Raises :class:`ReplacementRefused` (it is retired first) or ``binary-unavailable``.
    """
    candidate = PtyChild.spawn(argv, env, cwd, size)
    try:
        return candidate, _prove(candidate, proof or Proof())
    except BaseException:
        retire(candidate)
        raise


def hot_replace(relay: PtyRelay, argv: tuple[str, ...], env: Mapping[str, str], cwd: str,
                proof: Proof | None = None) -> int:
    """Start ``argv`` in ``cwd`` beside the child ``relay`` shows, prove it, hand
    it to the relay and retire the original; return the original's exit status.

    Raises :class:`ReplacementRefused` (the replacement retired, the original
    untouched and still relayed) or ``binary-unavailable``.
    """
    proof = proof or Proof()
    running = relay.child
    if running is None:
        raise ReplacementRefused(Why.RELAY_ENDED, "no child is relayed (a handover is pending)")
    candidate = PtyChild.spawn(argv, env, cwd, terminal_size(running.master))
    try:
        held = _prove(candidate, proof)
        try:
            original = relay.replace(candidate, prefix=held)
        except RuntimeError as error:
            raise ReplacementRefused(Why.RELAY_ENDED,
                                     "the original ended during the move") from error
    except BaseException:
        retire(candidate)
        raise
    return retire(original) if original is not None else 0
