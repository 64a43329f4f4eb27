"""A running launch whose grid went away takes its terminal up again with the next grid.

The grid keeps its terminals in memory: when it dies while a launch runs, the
launch's harness keeps running with hooks that hold the terminal's id and
credential, and its agent with a bridge credential, in their environments, which
nothing can change from outside. So the launcher does not ask the next grid for new
ones: it *re-presents* the terminal (``register`` with the same id and credential,
which a grid accepts only from that launcher's own connection, and only for an id it
never held), with the same conversation facts as the first registration (harness,
workspace, launch directory, account, tmux pane, a trusted resumed session), and
carries the bridge credential over the same way (``bridge-grant`` with
``bridgeToken``, once). The hooks' next delivery then reaches the new grid as the
old, and a pending move the old grid persisted re-arms on the terminal as soon as
the harness reports its conversation (:mod:`clanker.grid.pending`).

The next grid is found running, or started as a launch starts it
(:func:`~clanker.grid.daemon.ensure_running`), and must listen on the same socket
(the hooks know only that one). :class:`Readopter` tries at most
:data:`ATTEMPTS` times, :data:`FIRST_DELAY` seconds apart at first and twice as
long after each failure, never from the thread that relays the person's terminal,
and ends at once when the launch does.

A grid that ``clanker grid stop`` ended is left stopped
(:func:`~clanker.grid.daemon.stopped_on_request`): the person asked for it.

A relayed launch notices its grid went away when its move channel ends
(:mod:`clanker.launch.relayed`); a launch in the foreground holds no grid
connection, so :class:`GridWatch` watches the grid's process instead (a pidfd on
Linux, else ``kill(pid, 0)`` every :data:`POLL_INTERVAL` seconds) and says the
outcome on stderr.

The agent's loopback MCP endpoint URL names the old grid's port, which nothing can
change either: the launcher sends that port with the credential it carries, and a
next grid whose endpoint is not running yet starts it there when the port is free.
When it is not (another program took it, or the endpoint already runs elsewhere for
another launch), the harness loses the bridge over MCP until it is launched again,
and the notice says so (``clanker cmd`` keeps working: it uses the socket).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from attrs import evolve, field, frozen

from clanker._logging import get_logger
from clanker.paths import ClankerPaths

if TYPE_CHECKING:
    from clanker.grid.client import GridClient, Registration

__all__ = ["ATTEMPTS", "FIRST_DELAY", "POLL_INTERVAL", "FinalReadoptError", "GridWatch",
           "ReadoptError", "Readopter", "Readoption", "ReadoptionHandle", "readopt"]

log = get_logger(__name__)

ATTEMPTS: Final = 6
"""How many times a launch tries to re-present its terminal before it gives up."""
FIRST_DELAY: Final = 0.25
"""Seconds before the first attempt; each failed attempt doubles it (about 16 s in all)."""
POLL_INTERVAL: Final = 1.0
"""How often :class:`GridWatch` looks for the grid's process where there is no pidfd."""


@frozen(kw_only=True)
class Readoption:
    """What a launcher re-presents to the next grid: its terminal and why it is that one."""

    paths: ClankerPaths
    socket: Path
    """The socket the harness's hooks deliver to (the next grid must listen there)."""
    harness: str
    workspace: str | None
    cwd: str
    launcher_pid: int
    registration: Registration = field(repr=False)
    trusted_root_session_id: str | None = None
    account: str | None = None
    tmux_pane: str | None = None
    bridge_token: str | None = field(default=None, repr=False)
    """The agent's bridge credential, carried with ``grants`` (``None``: no bridge)."""
    grants: tuple[str, ...] = ()
    mcp_url: str | None = None
    """The MCP endpoint URL the agent was given with its credential (``None``: none)."""
    declined: str | None = None
    """Why the launch runs without attention, when it does (listed so again)."""


class ReadoptionHandle:
    """Collects a launch's :class:`Readoption` from the steps that register its terminal
    (attention) and grant its bridge credential (the bridge step)."""

    def __init__(self) -> None:
        self._value: Readoption | None = None

    def terminal(self, readoption: Readoption) -> None:
        self._value = readoption

    def bridge(self, registration: Registration, token: str, grants: Sequence[str],
               mcp_url: str | None = None) -> None:
        """The bridge credential granted to ``registration``'s terminal, and the MCP
        endpoint URL given with it (ignored for another terminal: one the bridge step
        registered itself is not re-presented)."""
        if self._value is not None and self._value.registration == registration:
            self._value = evolve(self._value, bridge_token=token, grants=tuple(grants),
                                 mcp_url=mcp_url)

    def decline(self, reason: str) -> None:
        """The terminal is listed as running without attention, for ``reason``."""
        if self._value is not None:
            self._value = evolve(self._value, declined=reason)

    @property
    def value(self) -> Readoption | None:
        return self._value


class ReadoptError(Exception):
    """This attempt to re-present the terminal failed (a one-line, safe reason)."""


class FinalReadoptError(ReadoptError):
    """An attempt whose answer another attempt would not change."""


def readopt(readoption: Readoption) -> tuple[GridClient, bool]:
    """Re-present ``readoption``'s terminal (and carry its bridge credential) to the
    grid running now, starting one if none runs; return the client that reaches it,
    and whether the agent's MCP endpoint URL reaches that grid's endpoint (``True``
    when the agent was given none).

    Raises :class:`ReadoptError`, :class:`FinalReadoptError` when another attempt
    would be refused the same (the grid held this terminal, say).
    """
    from clanker.grid.client import GridClient
    from clanker.grid.daemon import ensure_running, stopped_on_request
    from clanker.grid.errors import GridError, GridRequestError

    if stopped_on_request(readoption.paths):
        raise FinalReadoptError("the grid was stopped with `clanker grid stop`")
    try:
        socket = ensure_running(readoption.paths)
    except (GridError, OSError) as error:
        raise ReadoptError(f"the grid did not start ({type(error).__name__})") from None
    if os.path.realpath(socket) != os.path.realpath(readoption.socket):
        raise FinalReadoptError("the grid listens elsewhere now; the agent's hooks cannot "
                                "reach it")
    client = GridClient(socket)
    registration = readoption.registration
    try:
        client.register(harness=readoption.harness, workspace=readoption.workspace,
                        cwd=readoption.cwd, launcher_pid=readoption.launcher_pid,
                        trusted_root_session_id=readoption.trusted_root_session_id,
                        account=readoption.account, tmux_pane=readoption.tmux_pane,
                        represent=registration)
        if readoption.declined is not None:
            client.decline(registration.terminal, registration.token, readoption.declined)
        endpoint_kept = True
        if readoption.bridge_token is not None:
            granted = client.grant_bridge_endpoint(
                registration.terminal, registration.token, readoption.grants,
                carry=readoption.bridge_token, mcp_port=_port(readoption.mcp_url))
            endpoint_kept = readoption.mcp_url in (None, granted.mcp_url)
    except GridRequestError as error:
        if error.word in ("unauthorized", "bad-request"):
            raise FinalReadoptError(f"the grid refused the terminal ({error.word})") from None
        raise ReadoptError(f"the grid refused the terminal ({error.word})") from None
    except GridError as error:
        raise ReadoptError(f"the grid did not answer ({type(error).__name__})") from None
    return client, endpoint_kept


def _port(url: str | None) -> int | None:
    """The port ``url`` names, or ``None`` (no URL, or none a grid could bind)."""
    from urllib.parse import urlsplit

    if url is None:
        return None
    try:
        port = urlsplit(url).port
    except ValueError:
        return None
    return port if port else None


class Readopter:
    """Re-presents one launch's terminal, in bounded attempts with backoff."""

    def __init__(self, readoption: Readoption, *, ended: threading.Event,
                 attempts: int = ATTEMPTS, first_delay: float = FIRST_DELAY) -> None:
        """``ended`` is set when the launch ends (every wait ends with it)."""
        self._readoption = readoption
        self._ended = ended
        self._attempts = attempts
        self._first_delay = first_delay

    def run(self) -> tuple[bool, str]:
        """Try until the terminal is taken up, a refusal is final, the attempts are
        spent or the launch ends; return whether it was taken up and the one-line
        notice for the person."""
        delay = self._first_delay
        reason = "the launch ended"
        for attempt in range(1, self._attempts + 1):
            if self._ended.wait(delay):
                return False, reason
            try:
                _, endpoint_kept = readopt(self._readoption)
            except FinalReadoptError as error:
                reason = str(error)
                break
            except ReadoptError as error:
                reason = str(error)
                log.info("readopt: attempt %d of %d failed: %s", attempt, self._attempts,
                         reason)
                delay *= 2
                continue
            log.info("readopt: terminal %s taken up by the next grid",
                     self._readoption.registration.terminal)
            if not endpoint_kept:
                return True, ("attention restored: the grid restarted and has this agent "
                              "again, but not at the MCP endpoint the agent holds (`clanker "
                              "cmd` still reaches the bridge; launch the agent again for MCP)")
            return True, "attention restored: the grid restarted and has this agent again"
        return False, f"attention is unavailable from now on: {reason} (launch the agent " \
                      f"again to get it back)"


class GridWatch:
    """For a launch in the foreground: watch the grid its terminal is registered with,
    and when that grid's process ends, take the terminal up with the next
    (:class:`Readopter`), on a thread of its own; ``say`` hears the one-line notice.

    Use it as a context manager around the launch: leaving it ends the watch (and
    any attempt under way) at once.
    """

    def __init__(self, readoption: Readoption, say: Callable[[str], None]) -> None:
        self._readoption = readoption
        self._say = say
        self._ended = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="clanker-grid-watch",
                                        daemon=True)

    def __enter__(self) -> GridWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._ended.set()
        os.write(self._wake_w, b"x")
        self._thread.join()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _run(self) -> None:
        from clanker.grid.client import GridClient
        from clanker.grid.errors import GridError

        while not self._ended.is_set():
            try:
                pid = GridClient(self._readoption.socket).hello().pid
            except GridError:
                pid = None  # gone already: take the terminal up at once
            if pid is not None and not self._wait_exit(pid):
                return
            try:
                taken, notice = Readopter(self._readoption, ended=self._ended).run()
            except Exception as error:  # never the watch's end unsaid
                log.warning("readopt: re-presenting the terminal failed: %s",
                            type(error).__name__)
                taken, notice = False, "attention is unavailable from now on: the grid " \
                                       "could not take this agent up again"
            if self._ended.is_set():
                return
            self._say(notice)
            if not taken:
                return

    def _wait_exit(self, pid: int) -> bool:
        """Wait until process ``pid`` has ended (``True``) or the watch ends (``False``)."""
        import select

        from clanker.grid.peers import process_alive

        try:
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pidfd = None
        if pidfd is None:
            while process_alive(pid):
                if self._ended.wait(POLL_INTERVAL):
                    return False
            return not self._ended.is_set()
        try:
            select.select([pidfd, self._wake_r], [], [])
        finally:
            os.close(pidfd)
        return not self._ended.is_set()
