"""A launch whose child runs under the PTY relay, so it can be moved while it runs.

Only a launch that can use it gets it (:func:`relays`): its harness declares a
rehome strategy, and its bridge and native attention are both actually attached
(their credentials are in the child's environment). Every other launch keeps
:mod:`clanker.environment.foreground`.

:meth:`RelayedLaunch.move` continues the same conversation in another
checkout, as the provider's strategy says:

- ``hot-replace``: it prepares the provider's resume for the target as a launch
  of its own (new attachments: a new attention registration and a new bridge
  credential), proves it beside the running child
  (:func:`~clanker.launch.replacement.hot_replace`) and only then, past the
  commit point, releases the old attachments (revoking the old credential). A
  refused move releases the new attachments and changes nothing else.
- ``after-turn`` (the grid asks only once the root turn has completed): the
  child is taken out of the relay (a pending handover, so its exit does not end
  the launch), retired with its whole process group and its exit proven; then
  the provider's native relocation runs, if it declares one, and the resume is
  started in the target and proven as a hot replacement is, retried as the
  provider's writer-lock contention retry declares. It takes the child's place
  on the same terminal. If the target fails, the same conversation is resumed
  back where it was (relocated back first); if that fails too, nothing runs it,
  the launch ends, and the answer is ``unrecovered``: resume it from history.
  What the person types while no child runs is held (64 KiB at most) and given
  to the resume in the target once it is proven and relayed; a recovery where it
  was discards it and says so on the terminal (a prompt typed for the target must
  not run, unread, in the checkout the move left).
  The old attachments (attention's registration, the bridge credential) are
  released as soon as the source's exit is proven, before the resume registers,
  so the conversation never has two authoritative roots; the outcome is then
  answered over the old terminal's channel, which the grid keeps for that one
  answer (:mod:`clanker.grid.moves`). The order is the spec's: source retired,
  replacement proven, terminal replaced.

While it runs, the launch listens for the grid's move instructions over its
terminal's own registration (``await-move``, authenticated with attention's
credential; :mod:`clanker.grid.moves`), answers each with its outcome, and
listens again as the new terminal after a move. When the grid that held the
terminal goes away (the connection ends without a move, and that grid no
longer answers), the terminal is taken up by the next grid
(:mod:`clanker.launch.readopt`) and the launch listens again.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

import attrs

from clanker._logging import get_logger
from clanker.bridge import wire
from clanker.checkouts.capability import (
    CheckoutRehomeCapability,
    RehomeStrategy,
    contention_retry_of,
    first_output_within_of,
    observation_window_of,
    relocation_of,
)
from clanker.checkouts.rehome import rehome_request
from clanker.environment.pty_relay import (
    PtyChild,
    PtyRelay,
    Typed,
    run_in_pty,
    terminal_size,
)
from clanker.launch import attention
from clanker.launch.replacement import (
    Proof,
    ReplacementRefused,
    SourceAlive,
    Why,
    hot_replace,
    retire_group,
    start_proven,
)
from clanker.launch.request import LaunchRequest, SessionTarget
from clanker.registry import HarnessProvider

if TYPE_CHECKING:
    from clanker.grid.client import GridClient, MoveChannel
    from clanker.grid.protocol import MoveOutcome

__all__ = ["Launch", "MoveBusy", "MoveFailed", "RelayedLaunch", "hot_replaced", "movable",
           "relays"]

UNRECOVERED = "unrecovered"
"""The answer of a move after which nothing runs the conversation (resume it from history)."""

RELOCATION_READY_WITHIN = 30.0
"""How long a native relocation's transient server has to answer (seconds); the
whole after-turn move stays inside the grid's bound (:data:`clanker.grid.moves.ANSWER_WITHIN`)."""

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


def movable(provider: HarnessProvider) -> bool:
    """Whether ``provider``'s running conversations can be moved to another checkout
    (it declares a rehome strategy, whichever)."""
    return provider.checkout_rehome is not None


def relays(provider: HarnessProvider, launch: Launch) -> bool:
    """Whether ``launch`` of ``provider`` runs under the relay: a harness that can be
    moved (hot-replaced or after its turn), with its bridge and attention both attached."""
    env = launch.env
    return (movable(provider) and wire.TOKEN_VARIABLE in env
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


class MoveFailed(Exception):
    """An after-turn move whose resume in the target failed (``why``). ``recovered``:
    the conversation runs again where it was, on the same terminal; else nothing runs
    it (``why`` is ``unrecovered``) and the launch ends: resume it from history."""

    def __init__(self, why: str, message: str, *, recovered: bool) -> None:
        super().__init__(message)
        self.why = why
        self.recovered = recovered


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
        self.unrecovered: str | None = None
        """Set when a move left nothing running the conversation (said once the relay ends)."""
        child = PtyChild.spawn(launch.argv, launch.env, launch.cwd, terminal_size(stdin_fd))
        self._relay = PtyRelay(child, stdin_fd=stdin_fd, stdout_fd=stdout_fd)

    @property
    def relay(self) -> PtyRelay:
        """The relay (what it holds of the person's typing during a move, say)."""
        return self._relay

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
            if self.unrecovered is not None:
                with contextlib.suppress(OSError, ValueError):
                    print(self.unrecovered, file=sys.stderr, flush=True)

    def _listen(self) -> None:
        """Take the grid's move instructions for the terminal relayed now, then for
        the one each move brings; stop when the relay ends or the grid goes."""
        from clanker.grid.client import GridClient
        from clanker.grid.errors import GridError

        while not self._ended.is_set():
            launch = self._launch
            env = launch.env
            try:
                client = GridClient(env[attention.SOCKET_VARIABLE])
                channel = client.await_moves(
                    env[attention.TERMINAL_VARIABLE], env[attention.TOKEN_VARIABLE])
            except (GridError, KeyError):
                log.info("relay: the grid cannot ask this launch to move")
                return
            grid = _identity(client)
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
            if self._launch is launch and not self._readopted(launch, client, grid):
                return  # the grid retired the terminal, or the next one could not take it

    def _readopted(self, launch: Launch, client: GridClient,
                   grid: tuple[int, object] | None) -> bool:
        """The move channel ended without a move: when the grid that held the terminal
        went away (none answers, or another does), re-present the terminal to the next
        (:mod:`clanker.launch.readopt`) and say on the terminal how that went; say
        whether the launch listens again."""
        from clanker.launch.readopt import Readopter

        if self._ended.is_set() or (grid is not None and _identity(client) == grid):
            return False  # the launch ended, or the same grid retired its terminal
        readoption = getattr(launch, "readoption", None)
        if readoption is None:
            log.info("relay: the grid went away and this launch cannot re-present its terminal")
            return False
        log.info("relay: the grid went away; re-presenting the terminal to the next one")
        try:
            taken, notice = Readopter(readoption, ended=self._ended).run()
        except Exception as error:  # never the listener's end unsaid
            log.warning("relay: re-presenting the terminal failed: %s", type(error).__name__)
            taken, notice = False, "attention is unavailable from now on: the grid could " \
                                   "not take this agent up again"
        if not self._ended.is_set():
            self._relay.say(notice)
        return taken

    def _answer(self, channel: MoveChannel, session: SessionTarget, target: str) -> None:
        from clanker.grid.protocol import MoveOutcome

        answered = False

        def settled(outcome: MoveOutcome) -> None:
            nonlocal answered
            answered = True
            with contextlib.suppress(OSError):
                channel.answer(outcome)

        try:
            self.move(session, target, on_settled=settled)
        except ReplacementRefused as refused:
            why = refused.why.value
        except MoveFailed as failed:
            why = failed.why
        except MoveBusy:
            why = "busy"
        except Exception as error:  # the resume could not even be prepared
            log.info("relay: the move failed before the resume started: %s",
                     type(error).__name__)
            why = Why.NOT_STARTED.value
        if not answered:
            with contextlib.suppress(OSError):
                channel.answer(MoveOutcome(moved=False, why=why))

    def move(self, session: SessionTarget, target: str, *,
             user_flags: tuple[str, ...] = (), proof: Proof | None = None,
             on_settled: Callable[[MoveOutcome], None] | None = None) -> Launch:
        """Continue ``session`` in ``target`` (absolute, clanker's own) in place of the
        child relayed now; return the launch that runs there.

        Raises :class:`MoveBusy` (another move is under way); for a hot-replaced
        harness :class:`ReplacementRefused` (not proven, or the resume lacks its
        attachments: the original runs on, untouched) and whatever preparing the
        resume raises; for an after-turn one :class:`ReplacementRefused` only while the
        original still runs (it had ended), then :class:`MoveFailed` (recovered where it
        was, or not). ``on_settled`` hears the outcome once it is final (a resume has
        taken over, or nothing will): for a hot replacement before the old attachments
        are released, for an after-turn move after (they went with the source).
        """
        rehome = self._provider.checkout_rehome
        if rehome is None:
            raise ValueError("this harness cannot be moved")
        proof = proof or Proof()
        window = observation_window_of(rehome)
        if window is not None and window > proof.survives:
            proof = attrs.evolve(proof, survives=window)
        startup = first_output_within_of(rehome)
        if startup is not None and startup > proof.first_output_within:
            proof = attrs.evolve(proof, first_output_within=startup)
        if not self._moving.acquire(blocking=False):
            raise MoveBusy("another move of this launch is under way")
        try:
            if rehome.strategy is RehomeStrategy.AFTER_TURN:
                return self._after_turn(rehome, session, target, user_flags, proof,
                                        on_settled)
            moved = self._prepare(rehome_request(rehome, session, target, user_flags))
            try:
                if not relays(self._provider, moved):
                    raise ReplacementRefused(
                        Why.UNCONFIRMED, "the resume could not attach its bridge and attention")
                hot_replace(self._relay, moved.argv, moved.env, moved.cwd,
                            _bound(proof, moved, target))
            except BaseException:
                moved.dispose()
                raise
            self._adopt(moved, on_settled, moved=True)
            return moved
        finally:
            self._moving.release()

    def _adopt(self, launch: Launch, on_settled: Callable[[MoveOutcome], None] | None, *,
               moved: bool, why: str | None = None) -> None:
        """``launch`` runs the conversation now: tell ``on_settled``, then release the
        old attachments (revoking the old credential; an after-turn move released them
        already, and releasing is idempotent)."""
        from clanker.grid.protocol import MoveOutcome

        # Whoever sees the new launch must not take the old terminal's channel for its
        # own: listening is set again once the new terminal listens.
        self.listening.clear()
        previous, self._launch = self._launch, launch
        if on_settled is not None:
            on_settled(MoveOutcome(moved=moved, why=why))
        previous.dispose()

    def _after_turn(self, rehome: CheckoutRehomeCapability, session: SessionTarget,
                    target: str, user_flags: tuple[str, ...], proof: Proof,
                    on_settled: Callable[[MoveOutcome], None] | None) -> Launch:
        source = self._launch.cwd
        running = self._relay.child
        size = terminal_size(running.master) if running is not None else None
        try:
            child = self._relay.detach()
        except RuntimeError as error:
            raise ReplacementRefused(Why.RELAY_ENDED,
                                     "the original ended before the move") from error
        try:
            status = retire_group(child)
        except SourceAlive as alive:
            # Nothing may run the conversation beside a survivor: not even where it was.
            self._unrecovered(on_settled, f"the retired agent could not be proven gone "
                                          f"({alive})")
            raise MoveFailed(UNRECOVERED, str(alive), recovered=False) from alive
        log.info("relay: the source was retired (status %d) for the move", status)
        # Its registration and credential go with it, before any resume registers.
        self._launch.dispose()
        try:
            moved = self._resume_in(rehome, session, target, user_flags, proof, size)
        except ReplacementRefused as refused:
            failed = refused
        else:
            self._adopt(moved, on_settled, moved=True)
            return moved
        log.info("relay: the resume in the target failed (%s); resuming where it was",
                 failed.why.value)
        try:
            recovered = self._resume_in(rehome, session, source, (), proof, size,
                                        typed=Typed.DISCARD)
        except ReplacementRefused as again:
            self._unrecovered(on_settled, f"the resume failed in the target "
                                          f"({failed.why.value}) and where it was "
                                          f"({again.why.value})")
            raise MoveFailed(UNRECOVERED, str(again), recovered=False) from failed
        self._adopt(recovered, on_settled, moved=False, why=failed.why.value)
        raise MoveFailed(failed.why.value, str(failed), recovered=True) from failed

    def _unrecovered(self, on_settled: Callable[[MoveOutcome], None] | None,
                     reason: str) -> None:
        from clanker.grid.protocol import MoveOutcome

        self.unrecovered = (f"clanker: the conversation could not be moved and could not "
                            f"be resumed where it was ({reason}); nothing was removed: "
                            f"resume it from history (clanker resume)")
        if on_settled is not None:
            on_settled(MoveOutcome(moved=False, why=UNRECOVERED))
        self._relay.finish(1)

    def _resume_in(self, rehome: CheckoutRehomeCapability, session: SessionTarget,
                   where: str, user_flags: tuple[str, ...], proof: Proof,
                   size: tuple[int, int] | None, *, typed: Typed = Typed.DELIVER) -> Launch:
        """Resume ``session`` in ``where`` on the relay, whose child was retired: the
        provider's relocation first (if it declares one), then its resume, proven and
        retried on a declared transient contention. What the user typed since the
        source was taken out of the relay goes to it as ``typed`` says. Raises
        :class:`ReplacementRefused`."""
        from clanker.checkouts.relocation import RelocationError, relocate

        relocation = relocation_of(rehome, session.native_id, where)
        if relocation is not None:
            try:
                relocate(relocation, cwd=where,
                         environ={**_relocation_env(self._launch), "PWD": where},
                         ready_timeout=RELOCATION_READY_WITHIN)
            except RelocationError as error:
                raise ReplacementRefused(Why.NOT_RELOCATED, str(error)) from error
        retry = contention_retry_of(rehome)
        attempt = 1
        while True:
            try:
                moved = self._prepare(rehome_request(rehome, session, where, user_flags))
            except Exception as error:
                raise ReplacementRefused(Why.NOT_STARTED, "the resume could not be prepared: "
                                         f"{type(error).__name__}") from error
            try:
                if not relays(self._provider, moved):
                    raise ReplacementRefused(
                        Why.UNCONFIRMED, "the resume could not attach its bridge and attention")
                try:
                    candidate, held = start_proven(moved.argv, moved.env, moved.cwd, size,
                                                   _bound(proof, moved, where))
                except ReplacementRefused:
                    raise
                except Exception as error:  # binary-unavailable, say
                    raise ReplacementRefused(Why.NOT_STARTED, str(error)) from error
            except ReplacementRefused as refused:
                moved.dispose()
                if attempt < retry.attempts and rehome.is_transient_contention(refused.output):
                    log.info("relay: the resume met a writer-lock contention; retrying")
                    attempt += 1
                    time.sleep(retry.interval)
                    continue
                raise
            except BaseException:
                moved.dispose()
                raise
            try:
                self._relay.replace(candidate, prefix=held, typed=typed)
            except RuntimeError as error:  # the relay cannot end during a handover
                retire_group(candidate)
                moved.dispose()
                raise ReplacementRefused(Why.RELAY_ENDED, str(error)) from error
            return moved


def _identity(client: GridClient) -> tuple[int, object] | None:
    """Which grid answers on ``client``'s socket (its pid and start time), or ``None``."""
    from clanker.grid.errors import GridError

    try:
        hello = client.hello()
    except GridError:
        return None
    return hello.pid, hello.started_at


def _relocation_env(launch: Launch) -> Mapping[str, str]:
    """The environment a native relocation's server runs with: the launch plan's,
    before its attachments (its PATH, its account's home), where the launch keeps it."""
    base = getattr(launch, "base_env", None)
    return base if isinstance(base, Mapping) else launch.env
