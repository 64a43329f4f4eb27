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

While it runs, the launch listens for the grid's move instructions over its
terminal's own registration (``await-move``, authenticated with attention's
credential; :mod:`clanker.grid.moves`), answers each with its outcome, and
listens again as the new terminal after a move.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

import attrs

from clanker._logging import get_logger
from clanker.bridge import wire
from clanker.checkouts.capability import RehomeStrategy
from clanker.checkouts.rehome import rehome_request
from clanker.environment.pty_relay import PtyChild, PtyRelay, run_in_pty, terminal_size
from clanker.launch import attention
from clanker.launch.replacement import Proof, ReplacementRefused, Why, hot_replace
from clanker.launch.request import LaunchRequest, SessionTarget
from clanker.registry import HarnessProvider

if TYPE_CHECKING:
    from clanker.grid.client import MoveChannel

__all__ = ["Launch", "MoveBusy", "RelayedLaunch", "hot_replaced", "relays"]

log = get_logger(__name__)


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


def hot_replaced(provider: HarnessProvider) -> bool:
    """Whether ``provider``'s launches can be moved while they run (its rehome
    strategy is ``hot-replace``)."""
    rehome = provider.checkout_rehome
    return rehome is not None and rehome.strategy is RehomeStrategy.HOT_REPLACE


def relays(provider: HarnessProvider, launch: Launch) -> bool:
    """Whether ``launch`` of ``provider`` runs under the relay: a harness that is
    hot-replaced, with its bridge and attention both attached."""
    env = launch.env
    return (hot_replaced(provider) and wire.TOKEN_VARIABLE in env
            and attention.TOKEN_VARIABLE in env)


def _bound(proof: Proof, moved: Launch, target: str) -> Proof:
    """``proof``, also asking the grid that the resume's terminal is live and
    registered in ``target`` (attention's registration, bound to the checkout)."""
    from clanker.grid.client import GridClient
    from clanker.grid.errors import GridError

    env = moved.env
    asked = proof.confirm

    def confirm(child: PtyChild) -> bool:
        try:
            entry = GridClient(env[attention.SOCKET_VARIABLE]).explain(
                env[attention.TERMINAL_VARIABLE]).entry
        except GridError:
            return False
        return entry.cwd == target and (asked is None or asked(child))

    return attrs.evolve(proof, confirm=confirm)


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
        self._ended = threading.Event()
        self._channel: MoveChannel | None = None
        self._channel_lock = threading.Lock()
        self.listening = threading.Event()
        """Set while the grid can ask this launch to move (cleared between terminals)."""
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
        listener = threading.Thread(target=self._listen, name="clanker-move-listener",
                                    daemon=True)
        listener.start()
        try:
            if tty_fd is None:
                return self._relay.run()
            return run_in_pty(self._relay, tty_fd=tty_fd)
        finally:
            self._ended.set()
            with self._channel_lock:
                if self._channel is not None:
                    self._channel.close()
            listener.join()
            with self._moving:  # a move in progress settles first
                self._relay.close()
                self._launch.dispose()

    def _listen(self) -> None:
        """Take the grid's move instructions for the terminal relayed now, then for
        the one each move brings; stop when the relay ends or the grid goes."""
        from clanker.grid.client import GridClient
        from clanker.grid.errors import GridError

        while not self._ended.is_set():
            launch = self._launch
            env = launch.env
            try:
                channel = GridClient(env[attention.SOCKET_VARIABLE]).await_moves(
                    env[attention.TERMINAL_VARIABLE], env[attention.TOKEN_VARIABLE])
            except (GridError, KeyError):
                log.info("relay: the grid cannot ask this launch to move")
                return
            with self._channel_lock:
                if self._ended.is_set():
                    channel.close()
                    return
                self._channel = channel
            self.listening.set()
            try:
                while (instruction := channel.next()) is not None:
                    self._answer(channel, SessionTarget(native_id=instruction.session),
                                 instruction.target)
            except GridError:
                log.info("relay: the grid ended the move channel")
            finally:
                self.listening.clear()
                with self._channel_lock:
                    self._channel = None
                channel.close()
            if self._launch is launch:  # the grid ended it, not a move: nothing to renew
                return

    def _answer(self, channel: MoveChannel, session: SessionTarget, target: str) -> None:
        from clanker.grid.protocol import MoveOutcome

        def adopted() -> None:
            with contextlib.suppress(OSError):
                channel.answer(MoveOutcome(moved=True))

        try:
            self.move(session, target, on_adopted=adopted)
        except ReplacementRefused as refused:
            why = refused.why.value
        except MoveBusy:
            why = "busy"
        except Exception as error:  # the resume could not even be prepared
            log.info("relay: the move failed before the resume started: %s",
                     type(error).__name__)
            why = "not-started"
        else:
            return
        with contextlib.suppress(OSError):
            channel.answer(MoveOutcome(moved=False, why=why))

    def move(self, session: SessionTarget, target: str, *,
             user_flags: tuple[str, ...] = (), proof: Proof | None = None,
             on_adopted: Callable[[], None] | None = None) -> Launch:
        """Continue ``session`` in ``target`` (absolute, clanker's own) in place of the
        child relayed now; return the launch that runs there.

        Raises :class:`MoveBusy` (another move is under way), :class:`ReplacementRefused`
        (not proven, or the resume lacks its attachments: the original runs on,
        untouched), and whatever preparing the resume raises. ``on_adopted`` is called
        once the resume has taken over, before the old attachments are released.
        """
        rehome = self._provider.checkout_rehome
        if rehome is None or not hot_replaced(self._provider):
            raise ValueError("this harness is not hot-replaced")
        if not self._moving.acquire(blocking=False):
            raise MoveBusy("another move of this launch is under way")
        try:
            moved = self._prepare(rehome_request(rehome, session, target, user_flags))
            try:
                if not relays(self._provider, moved):
                    raise ReplacementRefused(
                        Why.UNCONFIRMED, "the resume could not attach its bridge and attention")
                hot_replace(self._relay, moved.argv, moved.env, moved.cwd,
                            _bound(proof or Proof(), moved, target))
            except BaseException:
                moved.dispose()
                raise
            # Past the commit point: the old child is retired; its credentials go now.
            # Whoever sees the new launch must not take the old terminal's channel for
            # its own: listening is set again once the new terminal listens.
            self.listening.clear()
            previous, self._launch = self._launch, moved
            if on_adopted is not None:
                on_adopted()
            previous.dispose()
            return moved
        finally:
            self._moving.release()
