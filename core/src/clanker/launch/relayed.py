"""A launch whose child runs under the PTY relay, so it can be moved while it runs.

Only a launch that can use it gets it (:func:`relays`): its harness declares
the ``hot-replace`` rehome strategy, and its bridge and native attention are
both actually attached (their credentials are in the child's environment).
Every other launch keeps :mod:`clanker.environment.foreground`.

:meth:`RelayedLaunch.move` continues the same conversation in another
checkout: it prepares the provider's resume for the target as a launch of its
own (new attachments: a new attention registration and a new bridge
credential), proves it beside the running child
(:func:`~clanker.launch.replacement.hot_replace`) and only then, past the
commit point, releases the old attachments (revoking the old credential). A
refused move releases the new attachments and changes nothing else.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Protocol

from clanker.bridge import wire
from clanker.checkouts.capability import RehomeStrategy
from clanker.checkouts.rehome import rehome_request
from clanker.environment.pty_relay import PtyChild, PtyRelay, run_in_pty, terminal_size
from clanker.launch import attention
from clanker.launch.replacement import Proof, ReplacementRefused, Why, hot_replace
from clanker.launch.request import LaunchRequest, SessionTarget
from clanker.registry import HarnessProvider

__all__ = ["Launch", "MoveBusy", "RelayedLaunch", "relays"]


class Launch(Protocol):
    """A launch with its attachments acquired
    (:class:`~clanker.launch.service.PreparedLaunch`)."""

    @property
    def argv(self) -> tuple[str, ...]: ...
    @property
    def env(self) -> Mapping[str, str]: ...
    @property
    def cwd(self) -> str: ...
    def dispose(self) -> None: ...


def relays(provider: HarnessProvider, launch: Launch) -> bool:
    """Whether ``launch`` of ``provider`` runs under the relay: a harness that is
    hot-replaced, with its bridge and attention both attached."""
    rehome = provider.checkout_rehome
    env = launch.env
    return (rehome is not None and rehome.strategy is RehomeStrategy.HOT_REPLACE
            and wire.TOKEN_VARIABLE in env and attention.TOKEN_VARIABLE in env)


class MoveBusy(Exception):
    """Another move of this launch is under way (this one changed nothing)."""


class RelayedLaunch:
    """One relayed launch: the child the user sees, and the attachments it runs with.

    :meth:`run` relays from the main thread until the child relayed ends;
    :meth:`move` is called from any other thread, one move at a time.
    """

    def __init__(self, provider: HarnessProvider, launch: Launch,
                 prepare: Callable[[LaunchRequest], Launch], *,
                 stdin_fd: int = 0, stdout_fd: int = 1) -> None:
        """``prepare`` acquires the attachments of a resume (its launch options are
        the original's, with the resumed session trusted)."""
        self._provider = provider
        self._prepare = prepare
        self._launch = launch
        self._moving = threading.Lock()
        child = PtyChild.spawn(launch.argv, launch.env, launch.cwd, terminal_size(stdin_fd))
        self._relay = PtyRelay(child, stdin_fd=stdin_fd, stdout_fd=stdout_fd)

    @property
    def launch(self) -> Launch:
        """The launch whose child is relayed now (its directory is where it runs)."""
        return self._launch

    def run(self, *, tty_fd: int | None = None) -> int:
        """Relay until the child relayed ends; return its exit status and release
        the attachments. ``tty_fd`` is the user's terminal (raw mode, size, signals:
        main thread only); ``None`` relays without touching a terminal."""
        try:
            if tty_fd is None:
                return self._relay.run()
            return run_in_pty(self._relay, tty_fd=tty_fd)
        finally:
            with self._moving:  # a move in progress settles first
                self._relay.close()
                self._launch.dispose()

    def move(self, session: SessionTarget, target: str, *,
             user_flags: tuple[str, ...] = (), proof: Proof | None = None) -> Launch:
        """Continue ``session`` in ``target`` (absolute, clanker's own) in place of the
        child relayed now; return the launch that runs there.

        Raises :class:`MoveBusy` (another move is under way), :class:`ReplacementRefused`
        (not proven, or the resume lacks its attachments: the original runs on,
        untouched), and whatever preparing the resume raises.
        """
        rehome = self._provider.checkout_rehome
        if rehome is None or rehome.strategy is not RehomeStrategy.HOT_REPLACE:
            raise ValueError("this harness is not hot-replaced")
        if not self._moving.acquire(blocking=False):
            raise MoveBusy("another move of this launch is under way")
        try:
            moved = self._prepare(rehome_request(rehome, session, target, user_flags))
            try:
                if not relays(self._provider, moved):
                    raise ReplacementRefused(
                        Why.UNCONFIRMED, "the resume could not attach its bridge and attention")
                hot_replace(self._relay, moved.argv, moved.env, moved.cwd, proof)
            except BaseException:
                moved.dispose()
                raise
            # Past the commit point: the old child is retired; its credentials go now.
            previous, self._launch = self._launch, moved
            previous.dispose()
            return moved
        finally:
            self._moving.release()
