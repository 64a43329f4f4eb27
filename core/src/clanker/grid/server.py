"""The grid server: an asyncio Unix-socket server around one attention broker.

A library user can run it in-process::

    async with Grid(socket_path) as grid:
        ...                      # serve until the block ends
    # or: await grid.start(); ...; await grid.wait_stopped(); await grid.stop()

The grid owns the terminal table (terminal id, harness, workspace, launch cwd,
launcher pid, registration time), the terminals' credentials (digests only, see
:mod:`~clanker.grid.credentials`) and the :class:`~clanker.attention.broker.Broker`.
It retires a terminal when its launcher dies (a pidfd where the platform has
one, else a poll with ``kill(pid, 0)`` every ``poll_interval`` seconds), when
the launcher asks with the terminal's credential, or when the broker
tombstones it (``agent_exited``); retirement revokes the credential at once.

The grid also owns the capability plane's authority
(:class:`~clanker.bridge.service.BridgeService`): a launcher asks for its
terminal's bridge credential (``bridge-grant``, with the terminal's own
credential) and revokes it (``bridge-revoke``; retirement revokes it first
too), and an agent presents it to ``cmd-list``, ``cmd-describe`` and
``cmd-run``, or to the loopback MCP endpoint
(:mod:`~clanker.bridge.mcp_server`), which the first grant starts (never
start-up: nothing of it is imported before) and :meth:`Grid.stop` stops; the
grant's reply carries its URL. Each of those re-derives the caller from this table: a terminal
that is retired, or whose launcher is gone, has no authority. A ``cmd-run``
holds a slot while it runs (at most its declared time, 60 s at most), and a
client that closes its side (or sends anything more: a connection carries one
request) cancels it.

Every refusal is an ``ok:false`` reply with a fixed error word and a log line
with a safe reason (never a payload, never a token); it changes nothing.
Subscribers get revisions through a bounded queue each: one that falls behind
is disconnected, it never slows the broker.

A connection carries one request (``subscribe`` then streams). It must start
sending within ``idle_timeout`` seconds and finish its line within
``request_timeout``; :mod:`~clanker.grid.connections` says how idle
connections make room and why a delivery is never refused for it. A
``register`` over the socket names a launcher the caller may claim (itself or
an ancestor, see :mod:`~clanker.grid.peers`), and one launcher has at most
``max_terminals_per_launcher`` live terminals.

All methods run on the event loop's thread; the grid is not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import socket
import stat
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from attrs import define, frozen

from clanker import __version__
from clanker._logging import get_logger
from clanker.attention.broker import Broker, Decision, Revision
from clanker.attention.envelope import EnvelopeError, parse_envelope
from clanker.attention.presentation import derive_attention
from clanker.bridge.credentials import Binding
from clanker.bridge.declaration import BridgeHost, HostCapability, PeerAgent
from clanker.bridge.service import BridgeRefusal, BridgeService
from clanker.checkouts.types import TRANSACTION_TIMEOUT
from clanker.grid.completion import Completion
from clanker.grid.connections import ConnectionCounts, ConnectionTable, RequestReader
from clanker.grid.credentials import TOKEN_PATTERN, CredentialStore
from clanker.grid.errors import GridAlreadyRunningError, GridPathError, GridRequestError
from clanker.grid.isolation import Isolation
from clanker.grid.moves import Movers
from clanker.grid.peers import Peer, peer_of, process_alive, vouches_for
from clanker.grid.pending import PENDING_DIRECTORY
from clanker.grid.protocol import (
    MAX_LINE,
    MAX_SOCKET_PATH,
    AwaitMoveRequest,
    BridgeGrantReply,
    BridgeGrantRequest,
    BridgeRevokeRequest,
    CmdDescribeReply,
    CmdDescribeRequest,
    CmdListReply,
    CmdListRequest,
    CmdRunReply,
    CmdRunRequest,
    DeclineRequest,
    DeliverReply,
    DeliverRequest,
    EmptyReply,
    ErrorWord,
    ExplainReply,
    ExplainRequest,
    HelloReply,
    HelloRequest,
    ListReply,
    ListRequest,
    MoveOutcome,
    Notification,
    PendingMoveEntry,
    ProtocolError,
    RegisterRequest,
    Registration,
    Request,
    RetireRequest,
    SessionsRequest,
    ShutdownRequest,
    StreamEvent,
    StreamKind,
    SubscribeRequest,
    TerminalEntry,
    check_socket_path,
    encode_error,
    encode_reply,
    parse_request,
)

if TYPE_CHECKING:
    from clanker.bridge.declaration import Caller
    from clanker.bridge.mcp_protocol import Instructions
    from clanker.bridge.mcp_server import Limits, McpListener
    from clanker.environment import HostFiles
    from clanker.execution import CommandExecutor, CommandRequest, CommandResult
    from clanker.grid.index import SessionIndex

__all__ = [
    "MAX_SOCKET_PATH",
    "SERVER_NAME",
    "ConnectionCounts",
    "Grid",
    "TerminalInfo",
    "check_socket_path",
]

log = get_logger(__name__)

SERVER_NAME: Final = "clanker-grid"
MAX_TERMINALS: Final = 1024
MAX_TERMINALS_PER_LAUNCHER: Final = 32
MAX_CONNECTIONS: Final = 256
"""Connections that may wait for their request at once (idle ones make room, see above)."""
MAX_OPEN: Final = 2048
"""Every open connection together: past it a newcomer is refused ``capacity``."""
BACKLOG: Final = max(2 * MAX_TERMINALS, socket.SOMAXCONN)
"""The listen queue. A hook delivers under its terminal's lock, so a burst is about one
connection per live terminal; asyncio's default (100) refused such bursts. The
kernel caps it (``net.core.somaxconn`` on Linux)."""
SUBSCRIBER_QUEUE: Final = 256
IDLE_TIMEOUT: Final = 2.0
"""A connection that sends nothing for this long is closed."""
REQUEST_TIMEOUT: Final = 5.0
"""The whole request line, and writing one answer, each take at most this long."""
POLL_INTERVAL: Final = 1.0
STOP_GRACE: Final = 1.0
"""How long a stopping grid lets subscribers take what is queued for them."""


_HOLDING: Final = (SubscribeRequest, ListRequest, ExplainRequest, CmdRunRequest,
                   AwaitMoveRequest, SessionsRequest)
"""The requests that can keep a connection busy: a stream, an answer that may be
large enough to wait on the reader, or a capability that runs for a while. Only
these count against the held slots."""

ENVIRONMENT: Final = "local"
"""Where the grid's terminals run (the grid serves this machine's launches)."""


_GRID_TERMINAL: Final = re.compile(r"t-[0-9a-f]{16}")
"""A terminal id as a grid names it (what a launcher may re-present)."""


def _now() -> datetime:
    return datetime.now(UTC)


@frozen(kw_only=True)
class TerminalInfo:
    """What the grid knows about a terminal from its registration."""

    terminal: str
    harness: str
    workspace: str | None
    cwd: str
    """The launch cwd (the agent may report another location later)."""
    launcher_pid: int
    registered_at: datetime
    account: str | None = None
    """The managed account the launch runs under (its name), or ``None``."""
    tmux_pane: str | None = None
    """The tmux pane the launcher runs in, or ``None``."""


UNAVAILABLE: Final = "unavailable"
"""The attention of a terminal whose launch runs without it."""


@define
class _Terminal:
    info: TerminalInfo
    revision: Revision | None = None
    attention: str = ""
    since: datetime | None = None
    pidfd: int | None = None
    retiring: bool = False
    unavailable: str | None = None  # the launch runs without attention: why
    represented: bool = False  # its launcher re-presented it: its bridge may be carried once


class _Subscriber:
    """One ``subscribe`` connection's bounded backlog."""

    def __init__(self, writer: asyncio.StreamWriter, limit: int, *,
                 notifications: bool = False) -> None:
        self.writer = writer
        self.limit = limit
        self.notifications = notifications
        self.pending: deque[bytes] = deque()
        self.wake = asyncio.Event()
        self.dropped = False
        self.closed = False
        self.task = asyncio.current_task()

    def offer(self, line: bytes) -> bool:
        if self.dropped or self.closed:
            return True
        if len(self.pending) >= self.limit:
            self.dropped = True
            self.wake.set()
            return False
        self.pending.append(line)
        self.wake.set()
        return True

    def close(self) -> None:
        self.closed = True
        self.wake.set()


def _after_turn(binding: Binding) -> bool:
    """Whether ``binding``'s harness moves its conversation only after its turn."""
    from clanker.checkouts.capability import RehomeStrategy
    from clanker.registry import find_provider

    provider = find_provider(binding.harness)
    rehome = None if provider is None else provider.checkout_rehome
    return rehome is not None and rehome.strategy is RehomeStrategy.AFTER_TURN


def _answers(path: Path) -> bool:
    """Say whether something accepts connections on the socket at ``path``."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(os.fsencode(path))
    except OSError:
        return False
    else:
        return True
    finally:
        probe.close()


class Grid:
    """The grid: terminal table, credentials and broker behind a Unix socket."""

    def __init__(
        self,
        socket_path: Path | str,
        *,
        clock: Callable[[], datetime] = _now,
        poll_interval: float = POLL_INTERVAL,
        use_pidfd: bool = True,
        subscriber_queue: int = SUBSCRIBER_QUEUE,
        max_terminals: int = MAX_TERMINALS,
        max_terminals_per_launcher: int = MAX_TERMINALS_PER_LAUNCHER,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout: float = IDLE_TIMEOUT,
        request_timeout: float = REQUEST_TIMEOUT,
        capabilities: Iterable[HostCapability] | None = None,
        executor: CommandExecutor | None = None,
        monotonic: Callable[[], float] | None = None,
        bridge_instructions: Instructions | None = None,
        mcp_limits: Limits | None = None,
        state_dir: Path | None = None,
        sessions: SessionIndex | None = None,
    ) -> None:
        """``capabilities`` is what the capability plane offers (default: the shipped
        ones), ``executor`` where they run commands (default: this machine's),
        ``monotonic`` the clock of their rate limits (default: ``time.monotonic``)
        ``bridge_instructions`` the guidance the MCP endpoint gives a caller (default:
        :func:`~clanker.guidance.text.guidance_text` for its grant) and
        ``mcp_limits`` its bounds (default: the documented ones), ``state_dir``
        clanker's state directory, where the checkouts it creates for callers are
        recorded (``None``: it creates none), ``sessions`` the session index the
        ``sessions`` op answers from (default: one built on the first question)."""
        self._path = check_socket_path(socket_path)
        self._clock = clock
        self._poll_interval = poll_interval
        self._use_pidfd = use_pidfd and hasattr(os, "pidfd_open")
        self._subscriber_queue = subscriber_queue
        self._max_terminals = max_terminals
        self._max_per_launcher = max_terminals_per_launcher
        # A quarter of the table stays out of holders' reach; deliveries never hold.
        self._table = ConnectionTable(max_waiting=max_connections,
                                      max_held=max(1, max_connections * 3 // 4),
                                      ceiling=max(MAX_OPEN, 2 * max_connections))
        self._idle_timeout = idle_timeout
        self._request_timeout = request_timeout
        self._broker = Broker(listener=self._publish, clock=clock)
        self._credentials = CredentialStore()
        if capabilities is None:
            from clanker.bridge.shipped import OFFERED

            capabilities = OFFERED
        self._executor = executor
        self._files: HostFiles | None = None
        port = _BridgePort(self)
        self._bridge = (BridgeService(port, capabilities) if monotonic is None
                        else BridgeService(port, capabilities, clock=monotonic))
        self._instructions = bridge_instructions
        self._mcp_limits = mcp_limits
        self._mcp: McpListener | None = None
        self._mcp_starting: asyncio.Task[None] | None = None
        self._terminals: dict[str, _Terminal] = {}
        self._known: set[str] = set()  # every terminal id this grid has held, never re-presentable
        self._published: dict[str, int] = {}
        self._subscribers: set[_Subscriber] = set()
        self._movers = Movers()
        self._isolation = Isolation(state_dir=state_dir, move=self.move,
                                    session_of=self._session_of,
                                    listening=self._movers.listening,
                                    after_turn=_after_turn,
                                    revision_of=self._revision_of, notify=self._notify,
                                    pending_dir=None if state_dir is None
                                    else state_dir / PENDING_DIRECTORY,
                                    binding_of=self._binding)
        self._completion = Completion(
            state_dir=state_dir, move=self.move, session_of=self._session_of,
            listening=self._movers.listening, transactions=self._isolation.transactions,
            locations=lambda: [(e.terminal, e.cwd, e.location) for e in self.entries()],
            notify=self._notify, isolation=self._isolation)
        self._handlers: set[asyncio.Task[None]] = set()
        self._sessions = sessions
        self._server: asyncio.AbstractServer | None = None
        self._identity: tuple[int, int] | None = None
        self._poller: asyncio.Task[None] | None = None
        self._stopper: asyncio.Task[None] | None = None
        self._stopping = False
        self._stopped = asyncio.Event()
        self._started_at = clock()

    # ------------------------------------------------------------------ life

    @property
    def socket_path(self) -> Path:
        return self._path

    @property
    def broker(self) -> Broker:
        """The broker (for in-process sources; the socket requires credentials)."""
        return self._broker

    @property
    def running(self) -> bool:
        return self._server is not None and not self._stopping

    @property
    def bridge(self) -> BridgeService:
        """The capability plane (for in-process transports; the socket requires credentials)."""
        return self._bridge

    @property
    def mcp(self) -> McpListener | None:
        """The MCP endpoint's listener, once a grant (or :meth:`open_mcp`) started it."""
        return self._mcp

    @property
    def mcp_url(self) -> str | None:
        """The MCP endpoint's URL (``None`` until it is started)."""
        return None if self._mcp is None else self._mcp.url

    async def open_mcp(self, *, port: int | None = None) -> str | None:
        """Start the MCP endpoint unless it runs; return its URL (``None`` when it
        cannot start: the reason is logged, and ``clanker cmd`` still works).

        ``port`` is where to start it if that port is free (an agent a re-presented
        terminal carries holds a URL naming the port of the grid before this one);
        else, as without it, on an ephemeral port."""
        if self._mcp is None and not self._stopping:
            if self._mcp_starting is None:
                self._mcp_starting = asyncio.ensure_future(self._start_mcp(port))
            await asyncio.shield(self._mcp_starting)
        return self.mcp_url

    async def _start_mcp(self, port: int | None) -> None:
        try:
            from clanker.bridge.mcp_protocol import McpEndpoint
            from clanker.bridge.mcp_server import McpListener

            endpoint = McpEndpoint(self._bridge, version=__version__,
                                   instructions=self._instructions or self._guidance)
            listener = McpListener(endpoint, self._bridge, limits=self._mcp_limits)
            try:
                await listener.start(port or 0)
            except OSError as exc:
                if not port:
                    raise
                log.warning("the mcp endpoint cannot listen on its earlier port %d (%s): "
                            "it listens elsewhere, and agents holding that URL lose it",
                            port, exc.strerror or type(exc).__name__)
                await listener.start()
        except Exception as exc:
            log.error("the mcp endpoint cannot start: %s (%s)", type(exc).__name__,
                      getattr(exc, "strerror", None) or "no detail")
            return
        finally:
            self._mcp_starting = None
        if self._stopping:
            await listener.stop()
            return
        self._mcp = listener

    def _guidance(self, caller: Caller) -> str | None:
        """The MCP endpoint's instructions: the launch's guidance, for what it was granted."""
        from clanker.guidance.text import guidance_text

        offered = self._bridge.capabilities
        return guidance_text((offered[name] for name in caller.granted if name in offered),
                             mcp=True)

    @property
    def connections(self) -> ConnectionCounts:
        """How many connections are open, waiting for their request, and holding."""
        return self._table.counts()

    async def start(self) -> None:
        """Bind the socket (0600) and start serving.

        Raises :class:`~clanker.grid.errors.GridAlreadyRunningError` when
        another server answers on the path and
        :class:`~clanker.grid.errors.GridPathError` when the path is not a socket.
        """
        if self._server is not None:
            raise RuntimeError("the grid was already started")
        sock = self._bind()

        def connection() -> asyncio.StreamReaderProtocol:
            return asyncio.StreamReaderProtocol(RequestReader(MAX_LINE), self._serve_connection)

        # Not start_unix_server: its reader cannot say whether a request has arrived.
        self._server = await asyncio.get_running_loop().create_unix_server(
            connection, sock=sock, backlog=BACKLOG
        )
        self._started_at = self._clock()
        log.info("grid listening on %s (pid %d)", self._path, os.getpid())
        # The pending moves a previous grid left wait for their conversations, bounded.
        self._isolation.reload(self._started_at, clock=self._clock)

    def _bind(self) -> socket.socket:
        try:
            existing = os.lstat(self._path)
        except FileNotFoundError:
            pass
        else:
            if not stat.S_ISSOCK(existing.st_mode):
                raise GridPathError(f"{self._path} exists and is not a socket")
            if _answers(self._path):
                raise GridAlreadyRunningError(f"a grid already answers on {self._path}")
            os.unlink(self._path)  # a stale socket: its server is gone
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(os.fsencode(self._path))
            os.chmod(self._path, 0o600)
            sock.listen(BACKLOG)
            sock.setblocking(False)
            bound = os.stat(self._path)
        except BaseException:
            sock.close()
            raise
        self._identity = (bound.st_dev, bound.st_ino)
        return sock

    async def stop(self) -> None:
        """Stop serving: close every connection, stop watching launchers, remove the socket."""
        if self._server is None:
            return
        if self._stopping:
            await self._stopped.wait()  # another stop() is at work
            return
        self._stopping = True
        try:
            await self._shut_down(self._server)
        finally:
            self._stopped.set()
        log.info("grid stopped")

    async def _shut_down(self, server: asyncio.AbstractServer) -> None:
        server.close()
        # A checkout transaction under way (a move, then git) is let finish first, for
        # at most its bound: a move cut off halfway is never answered as done, and the
        # launcher it waits on keeps its connection until then. New ones are refused.
        transactions = self._isolation.transactions
        transactions.close()
        # A pending move leaves this grid (kept on disk for the next one, when it has a
        # state directory), and the person is told: the notices reach the watchers
        # before their streams end.
        self._isolation.cancel_all("the grid is stopping")
        if await transactions.settle(TRANSACTION_TIMEOUT):
            # Their callers' answers are on their way out: give those a moment.
            pending = [task for task in self._handlers if task is not asyncio.current_task()]
            if pending:
                await asyncio.wait(pending, timeout=STOP_GRACE)
        if self._mcp_starting is not None:
            await asyncio.gather(self._mcp_starting, return_exceptions=True)
        mcp, self._mcp = self._mcp, None
        if mcp is not None:
            await mcp.stop()  # its calls are cancelled before the grid's state goes
        current = asyncio.current_task()
        # Subscribers get what is queued for them, then end of stream; every
        # other connection is only waiting for a request and is cut at once.
        streaming = {s.task for s in self._subscribers if s.task is not None} - {current}
        for subscriber in list(self._subscribers):
            subscriber.close()
        others = [task for task in self._handlers if task is not current]
        for task in others:
            if task not in streaming:
                task.cancel()
        if streaming:
            _, late = await asyncio.wait(streaming, timeout=STOP_GRACE)
            for task in late:
                task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
        for record in self._terminals.values():
            self._unwatch(record)
        if self._sessions is not None:
            await self._sessions.aclose()
        self._remove_socket()
        await server.wait_closed()

    def _remove_socket(self) -> None:
        try:
            current = os.lstat(self._path)
        except FileNotFoundError:
            return
        if (current.st_dev, current.st_ino) == self._identity:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path)

    async def wait_stopped(self) -> None:
        """Wait until the grid stops (a ``shutdown`` request, or :meth:`stop`)."""
        await self._stopped.wait()

    def request_stop(self) -> None:
        """Stop soon (from a signal handler or a ``shutdown`` request)."""
        if self._stopper is None and self._server is not None:
            self._stopper = asyncio.get_running_loop().create_task(self.stop())

    async def __aenter__(self) -> Grid:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    # ------------------------------------------------------- the terminal table

    def register(
        self,
        *,
        harness: str,
        cwd: str,
        launcher_pid: int,
        workspace: str | None = None,
        trusted_root_session_id: str | None = None,
        account: str | None = None,
        tmux_pane: str | None = None,
    ) -> Registration:
        """Register a terminal in-process; raise :class:`GridRequestError` when refused."""
        try:
            request = RegisterRequest(
                harness=harness, cwd=cwd, launcher_pid=launcher_pid, workspace=workspace,
                trusted_root_session_id=trusted_root_session_id, account=account,
                tmux_pane=tmux_pane,
            )
            return self._register(request)
        except ValueError:
            raise GridRequestError(ErrorWord.BAD_REQUEST.value, "register") from None
        except ProtocolError as exc:
            raise GridRequestError(exc.word.value, "register") from None

    def retire(self, terminal: str, *, reason: str = "retired in-process") -> bool:
        """Retire ``terminal`` (tombstone, credential revoked); say whether it was live."""
        return self._retire(terminal, reason)

    def entries(self) -> list[TerminalEntry]:
        """Every live terminal with its latest revision, oldest registration first."""
        records = sorted(self._terminals.values(), key=lambda r: r.info.registered_at)
        return [self._entry(r) for r in records if self._live(r)]

    def entry(self, terminal: str) -> TerminalEntry | None:
        """The live terminal ``terminal``, or ``None``."""
        record = self._terminals.get(terminal)
        return self._entry(record) if record is not None and self._live(record) else None

    @staticmethod
    def _live(record: _Terminal) -> bool:
        # A broker tombstone (agent_exited) is retired from the table on the next tick.
        return (
            not record.retiring
            and record.revision is not None
            and record.revision.snapshot is not None
        )

    def _entry(self, record: _Terminal) -> TerminalEntry:
        revision = record.revision
        assert revision is not None
        assert record.since is not None
        info = record.info
        reported = revision.snapshot.location if revision.snapshot is not None else None
        return TerminalEntry(
            terminal=info.terminal, harness=info.harness, workspace=info.workspace,
            cwd=info.cwd, launcher_pid=info.launcher_pid, registered_at=info.registered_at,
            location=reported or info.cwd, attention=record.attention, since=record.since,
            revision=dict(revision.to_json()),
            failed_closed=self._broker.failed_closed(info.terminal),
            unavailable=record.unavailable,
            bridge=self._bridge.granted(info.terminal),
            account=info.account,
            tmux_pane=info.tmux_pane,
            pending_move=self._pending_move(info.terminal),
        )

    def _pending_move(self, terminal: str) -> PendingMoveEntry | None:
        found = self._isolation.move_of(terminal)
        if found is None:
            return None
        state, move = found
        return PendingMoveEntry(state=state, kind=move.kind, branch=move.branch,
                                path=move.path, target=move.target,
                                requested_at=move.requested_at)

    def _register(self, request: RegisterRequest, peer: Peer | None = None) -> Registration:
        """Register a new terminal, or take up one a launcher re-presents (``terminal``
        and ``token`` set): only from that launcher's own connection, only a terminal id
        of the grid's own form that this grid never held, with a credential of the
        grid's own form. Its harness's hooks hold that id and credential and cannot be
        handed others, so a launcher whose grid went away keeps them (the new grid
        keeps only the digest, as for one it minted)."""
        if request.terminal is not None:
            self._check_representation(request, peer)
        if self._stopping:
            raise ProtocolError(ErrorWord.SHUTTING_DOWN, "the grid is stopping")
        if len(self._terminals) >= self._max_terminals:
            raise ProtocolError(ErrorWord.CAPACITY, "too many live terminals")
        pid = request.launcher_pid
        if sum(r.info.launcher_pid == pid for r in self._terminals.values()) \
                >= self._max_per_launcher:
            raise ProtocolError(ErrorWord.CAPACITY, "too many terminals for one launcher")
        terminal = request.terminal or "t-" + secrets.token_hex(8)
        while terminal in self._known:  # pragma: no cover - 64 random bits
            terminal = "t-" + secrets.token_hex(8)
        record = _Terminal(TerminalInfo(
            terminal=terminal, harness=request.harness, workspace=request.workspace,
            cwd=request.cwd, launcher_pid=request.launcher_pid, registered_at=self._clock(),
            account=request.account, tmux_pane=request.tmux_pane,
        ), represented=request.token is not None)
        self._watch(record)  # raises launcher-gone
        self._terminals[terminal] = record
        self._known.add(terminal)
        if request.token is None:
            token = self._credentials.mint(terminal)
        else:
            token = request.token
            self._credentials.adopt(terminal, token)
        try:
            self._broker.register(terminal, trusted_root_session_id=request.trusted_root_session_id)
        except BaseException:
            self._credentials.revoke(terminal)
            self._unwatch(record)
            del self._terminals[terminal]
            raise
        log.info("terminal %s %s (%s, launcher pid %d)", terminal,
                 "re-presented by its launcher" if record.represented else "registered",
                 request.harness, request.launcher_pid)
        return Registration(terminal=terminal, token=token)

    def _check_representation(self, request: RegisterRequest, peer: Peer | None) -> None:
        """Refuse a re-presented terminal this grid may not take up (see :meth:`_register`)."""
        if peer is None or peer.pid is None or peer.pid != request.launcher_pid:
            raise ProtocolError(ErrorWord.UNAUTHORIZED,
                                "register: only its launcher may re-present a terminal")
        if _GRID_TERMINAL.fullmatch(request.terminal or "") is None \
                or TOKEN_PATTERN.fullmatch(request.token or "") is None:
            raise ProtocolError(ErrorWord.BAD_REQUEST,
                                "register: not a terminal and credential of a grid's own")
        if request.terminal in self._known:
            raise ProtocolError(ErrorWord.UNAUTHORIZED,
                                "register: this grid held that terminal already")

    def _retire(self, terminal: str, reason: str) -> bool:
        record = self._terminals.get(terminal)
        if record is None or record.retiring:
            return False
        record.retiring = True
        self._bridge.revoke(terminal)  # first: no authority outlives the terminal
        self._credentials.revoke(terminal)
        self._movers.drop(terminal)
        self._unwatch(record)
        try:
            self._broker.retire(terminal)  # the listener publishes the tombstone
        finally:
            del self._terminals[terminal]
            self._published.pop(terminal, None)
            self._isolation.forget(terminal)
        log.info("terminal %s retired (%s)", terminal, reason)
        return True

    def _decline(self, terminal: str, reason: str) -> None:
        """List ``terminal`` as running without attention, and tell every watcher."""
        record = self._terminals[terminal]
        record.unavailable = reason
        if record.revision is None or record.attention == UNAVAILABLE:
            return
        record.attention, record.since = UNAVAILABLE, self._clock()
        line = encode_reply(StreamEvent(kind=StreamKind.REVISION, entry=self._entry(record)))
        for subscriber in list(self._subscribers):
            if not subscriber.offer(line):
                self._drop(subscriber)

    def _publish(self, revision: Revision) -> None:
        """The broker's listener: record ``revision`` and fan it out to subscribers."""
        terminal = revision.terminal
        if revision.revision <= self._published.get(terminal, 0):
            return
        record = self._terminals.get(terminal)
        if record is None:
            return
        self._published[terminal] = revision.revision
        record.revision = revision
        attention = derive_attention(revision, 0).value if record.unavailable is None else (
            UNAVAILABLE)
        if record.since is None or attention != record.attention:
            record.attention = attention
            record.since = self._clock()
        line = encode_reply(StreamEvent(kind=StreamKind.REVISION, entry=self._entry(record)))
        for subscriber in list(self._subscribers):
            if not subscriber.offer(line):
                self._drop(subscriber)
        self._isolation.observe(revision)
        if revision.snapshot is None and not record.retiring:
            # The broker retired it (agent_exited): forget it once apply() returns.
            self._soon(lambda: self._retire(terminal, "the agent exited"))

    def _soon(self, action: Callable[[], object]) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            action()
        else:
            loop.call_soon(action)

    # ------------------------------------------------------------ launchers

    def _watch(self, record: _Terminal) -> None:
        pid = record.info.launcher_pid
        if self._use_pidfd:
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                raise ProtocolError(ErrorWord.LAUNCHER_GONE, "the launcher is not running") \
                    from None
            except OSError:
                pass  # no pidfd here (old kernel, sandbox): poll instead
            else:
                try:
                    asyncio.get_running_loop().add_reader(
                        fd, self._launcher_exited, record.info.terminal
                    )
                except BaseException:
                    os.close(fd)
                    raise
                record.pidfd = fd
                return
        if not process_alive(pid):
            raise ProtocolError(ErrorWord.LAUNCHER_GONE, "the launcher is not running")
        if self._poller is None or self._poller.done():
            self._poller = asyncio.get_running_loop().create_task(self._poll_launchers())

    def _unwatch(self, record: _Terminal) -> None:
        fd, record.pidfd = record.pidfd, None
        if fd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(fd)
            os.close(fd)

    def _launcher_exited(self, terminal: str) -> None:
        self._retire(terminal, "its launcher exited")

    async def _poll_launchers(self) -> None:
        while True:
            await asyncio.sleep(self._poll_interval)
            polled = [(t, r) for t, r in self._terminals.items() if r.pidfd is None]
            if not polled:
                return
            for terminal, record in polled:
                if not process_alive(record.info.launcher_pid):
                    self._retire(terminal, "its launcher exited")

    # ---------------------------------------------------------- connections

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        assert isinstance(reader, RequestReader)
        self._handlers.add(task)
        try:
            await self._converse(task, reader, writer)
        except ConnectionError:
            pass
        except asyncio.CancelledError:
            # The grid is stopping. Not re-raised: asyncio (3.11) would log the
            # cancelled connection task as an error.
            pass
        except Exception as exc:
            log.error("grid connection failed: %s", type(exc).__name__)
        finally:
            self._handlers.discard(task)
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(writer.wait_closed(), STOP_GRACE)

    async def _converse(
        self, key: object, reader: RequestReader, writer: asyncio.StreamWriter
    ) -> None:
        peer = peer_of(writer.get_extra_info("socket"))
        if peer.uid is not None and peer.uid != os.geteuid():
            log.warning("refused a connection from another user (uid %d)", peer.uid)
            return
        evicted: list[asyncio.StreamWriter] = []
        if not self._table.admit(key, reader, writer, evicted=evicted):
            log.warning("refused a connection: too many connections")
            await self._reply(writer, encode_error(ErrorWord.CAPACITY))
            return
        try:
            self._make_room(evicted)
            line = await self._read_request(reader, writer)
            self._table.arrived(key)
            if line is not None:
                await self._serve_request(line, peer, reader, writer)
        finally:
            self._table.close(key)

    @staticmethod
    def _make_room(evicted: list[asyncio.StreamWriter]) -> None:
        for writer in evicted:
            log.warning("closed a connection that sent no request, to make room")
            if not writer.is_closing():
                writer.write(encode_error(ErrorWord.CAPACITY))
            writer.close()  # its handler sees the end of the stream and leaves

    async def _read_request(
        self, reader: RequestReader, writer: asyncio.StreamWriter
    ) -> bytes | None:
        """The one request line, or ``None`` (nothing came in time, or the peer left)."""
        line = b""
        try:
            async with asyncio.timeout(self._idle_timeout) as deadline:
                line = await reader.readexactly(1)
                if line != b"\n":
                    deadline.reschedule(asyncio.get_running_loop().time()
                                        + self._request_timeout)
                    line += await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            # The peer closed its side; a last line without its newline still counts.
            line += exc.partial
            if not line.strip():
                return None
        except asyncio.LimitOverrunError:
            await self._too_large(writer)
            return None
        except TimeoutError:
            log.info("closed a connection that sent no complete request in time")
            return None
        line = line.removesuffix(b"\n")
        if len(line) > MAX_LINE:  # the first byte was read on its own, past the reader's limit
            await self._too_large(writer)
            return None
        return line

    async def _too_large(self, writer: asyncio.StreamWriter) -> None:
        log.warning("refused a request: too-large (a line over %d bytes)", MAX_LINE)
        await self._reply(writer, encode_error(ErrorWord.TOO_LARGE))

    async def _serve_request(
        self, line: bytes, peer: Peer, reader: RequestReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            request = parse_request(line)
        except ProtocolError as exc:
            log.warning("refused a request: %s (%s)", exc.word.value, exc.reason)
            await self._reply(writer, encode_error(exc.word))
            return
        if isinstance(request, ShutdownRequest):
            log.info("shutdown requested")
            await self._reply(writer, encode_reply(EmptyReply()))
            self.request_stop()
            return
        if isinstance(request, BridgeGrantRequest) and self._mcp is None \
                and self._credentials.verify(request.terminal, request.token) \
                and self._binding(request.terminal) is not None:
            # The first grant starts the endpoint (checked again below); the launcher's
            # carrying its agent's credential starts it where that agent's URL points.
            await self.open_mcp(port=request.mcp_port if self._carries(request, peer)
                                else None)
        if not isinstance(request, _HOLDING):
            # A short answer, written at once: nothing to hold, nothing to refuse for room.
            await self._reply(writer, self._answer(request, peer))
            return
        with self._table.hold() as held:
            if not held:
                log.warning("refused %s: capacity (too many connections held)",
                            request.op.value)
                await self._reply(writer, encode_error(ErrorWord.CAPACITY))
            elif isinstance(request, SubscribeRequest):
                await self._stream(reader, writer, notifications=request.notifications)
            elif isinstance(request, AwaitMoveRequest):
                await self._await_moves(request, reader, writer)
            elif isinstance(request, SessionsRequest):
                await self._answer_sessions(request, writer)
            elif isinstance(request, CmdRunRequest):
                answer = await self._run_capability(request, reader)
                if answer:
                    await self._reply(writer, answer)
            else:
                await self._reply(writer, self._answer(request, peer))

    async def _await_moves(self, request: AwaitMoveRequest, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> None:
        if not self._credentials.verify(request.terminal, request.token) \
                or self._binding(request.terminal) is None:
            log.warning("refused await-move: unauthorized (not a live credential)")
            await self._reply(writer, encode_error(ErrorWord.UNAUTHORIZED))
            return
        log.info("terminal %s: its launcher can move it", request.terminal)
        await self._movers.serve(request.terminal, reader, writer)

    @property
    def sessions(self) -> SessionIndex:
        """The session index (built on the first ``sessions`` question)."""
        if self._sessions is None:
            from clanker.grid.index import SessionIndex

            self._sessions = SessionIndex()
        return self._sessions

    async def _answer_sessions(self, request: SessionsRequest,
                               writer: asyncio.StreamWriter) -> None:
        from clanker.grid.protocol import MAX_REPLY, SESSION_ROWS

        try:
            lines = await self.sessions.answer(request, SESSION_ROWS)
        except Exception as exc:  # an unknown harness, say: the asker lists by itself
            log.warning("refused sessions: %s", type(exc).__name__)
            await self._reply(writer, encode_error(ErrorWord.BAD_REQUEST))
            return
        if any(len(line) > MAX_REPLY for line in lines):
            log.warning("refused sessions: too-large (a line over %d bytes)", MAX_REPLY)
            await self._reply(writer, encode_error(ErrorWord.TOO_LARGE))
            return
        for line in lines:
            if writer.is_closing():
                return
            await self._reply(writer, line)

    def _revision_of(self, terminal: str) -> int:
        return self._published.get(terminal, 0)

    def _session_of(self, terminal: str) -> str | None:
        record = self._terminals.get(terminal)
        if record is None or record.revision is None or record.revision.snapshot is None:
            return None
        return record.revision.snapshot.root_session_id

    async def move(self, terminal: str, target: str, session: str) -> MoveOutcome:
        """Ask ``terminal``'s launcher to continue ``session`` in ``target``; its answer.
        Raises :class:`~clanker.grid.moves.MoveUnavailable`."""
        log.info("terminal %s: asked to move", terminal)
        outcome = await self._movers.move(terminal, target, session)
        log.info("terminal %s: %s", terminal,
                 "moved" if outcome.moved else f"not moved ({outcome.why})")
        return outcome

    async def _reply(self, writer: asyncio.StreamWriter, line: bytes) -> None:
        """Write one answer; a peer that does not take it in time is cut off."""
        writer.write(line)
        try:
            await asyncio.wait_for(writer.drain(), self._request_timeout)
        except TimeoutError:
            writer.transport.abort()

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, line: bytes) -> None:
        writer.write(line)
        await writer.drain()

    def _answer(self, request: Request, peer: Peer) -> bytes:
        op = request.op.value
        try:
            reply = self._dispatch(request, peer)
        except ProtocolError as exc:
            level = logging.INFO if exc.word is ErrorWord.UNKNOWN_TERMINAL else logging.WARNING
            log.log(level, "refused %s: %s (%s)", op, exc.word.value, exc.reason)
            return encode_error(exc.word, exc.message)
        except Exception as exc:
            log.error("%s failed inside the grid: %s", op, type(exc).__name__)
            return encode_error(ErrorWord.INTERNAL)
        return encode_reply(reply)

    def _dispatch(self, request: Request, peer: Peer) -> object:
        if isinstance(request, HelloRequest):
            return HelloReply(server=SERVER_NAME, version=__version__, pid=os.getpid(),
                              started_at=self._started_at,
                              terminals=sum(map(self._live, self._terminals.values())))
        if isinstance(request, RegisterRequest):
            self._check_launcher(request.launcher_pid, peer)
            try:
                return self._register(request, peer)
            except ValueError:
                raise ProtocolError(ErrorWord.BAD_REQUEST, "register: invalid values") from None
        if isinstance(request, RetireRequest | DeclineRequest):
            self._authorize(request.terminal, request.token, request.op.value)
            if isinstance(request, RetireRequest):
                self._retire(request.terminal, "its launcher retired it")
            else:
                self._decline(request.terminal, request.reason)
            return EmptyReply()
        if isinstance(request, DeliverRequest):
            return self._deliver(request)
        if isinstance(request, ListRequest | ExplainRequest):
            return self._report(request)
        return self._dispatch_bridge(request, peer)

    def _report(self, request: ListRequest | ExplainRequest) -> ListReply | ExplainReply:
        if isinstance(request, ListRequest):
            return ListReply(terminals=self.entries())
        entry = self.entry(request.terminal)
        explanation = self._broker.explain(request.terminal) if entry else None
        if entry is None or explanation is None:
            raise ProtocolError(ErrorWord.UNKNOWN_TERMINAL, "explain: not a live terminal")
        return ExplainReply(entry=entry, explanation=dict(explanation))

    def _dispatch_bridge(self, request: Request, peer: Peer) -> object:
        """The capability plane's short ops (``cmd-run`` is answered on its own)."""
        if isinstance(request, BridgeGrantRequest | BridgeRevokeRequest):
            self._authorize(request.terminal, request.token, request.op.value)
            if isinstance(request, BridgeRevokeRequest):
                self._bridge.revoke(request.terminal)
                log.info("terminal %s: bridge revoked", request.terminal)
                return EmptyReply()
            return self._grant(request, peer)
        if isinstance(request, CmdListRequest | CmdDescribeRequest):
            with _refusals(request.op.value):
                if isinstance(request, CmdDescribeRequest):
                    return CmdDescribeReply(
                        capability=self._bridge.describe(request.token, request.name))
                if request.all_:
                    return CmdListReply(capabilities=self._bridge.all_entries())
                return CmdListReply(capabilities=self._bridge.entries(request.token))
        raise ProtocolError(ErrorWord.UNKNOWN_OP, f"{request.op.value} is not answered here")

    def _grant(self, request: BridgeGrantRequest, peer: Peer) -> BridgeGrantReply:
        binding = self._binding(request.terminal)
        if binding is None:
            raise ProtocolError(ErrorWord.UNAUTHORIZED, "bridge-grant: not a live terminal")
        if request.bridge_token is not None:
            return self._carry_bridge(request, binding, peer)
        self._terminals[request.terminal].represented = False
        with _refusals("bridge-grant"):
            token = self._bridge.grant(binding, request.capabilities)
        log.info("terminal %s: bridge granted (%s)", request.terminal,
                 ", ".join(sorted(request.capabilities)))
        return BridgeGrantReply(bridge_token=token, mcp_url=self.mcp_url)

    def _carries(self, request: BridgeGrantRequest, peer: Peer) -> bool:
        """Whether ``request`` may carry its agent's bridge credential: it is from a
        re-presented terminal's launcher's own connection, and nothing was granted since."""
        binding = self._binding(request.terminal)
        return (request.bridge_token is not None and binding is not None
                and self._terminals[request.terminal].represented
                and peer.pid is not None and peer.pid == binding.launcher_pid)

    def _carry_bridge(self, request: BridgeGrantRequest, binding: Binding, peer: Peer
                      ) -> BridgeGrantReply:
        """Carry the bridge credential a re-presented terminal's agent holds: once, from
        its launcher's own connection, before anything else was granted to it."""
        record = self._terminals[request.terminal]
        if not self._carries(request, peer):
            raise ProtocolError(ErrorWord.UNAUTHORIZED,
                                "bridge-grant: only a re-presented terminal's launcher may "
                                "carry its bridge credential")
        record.represented = False
        assert request.bridge_token is not None
        with _refusals("bridge-grant"):
            try:
                self._bridge.adopt(binding, request.capabilities, request.bridge_token)
            except ValueError:
                raise ProtocolError(ErrorWord.UNAUTHORIZED,
                                    "bridge-grant: that credential cannot be carried") from None
        log.info("terminal %s: bridge carried over (%s)", request.terminal,
                 ", ".join(sorted(request.capabilities)))
        return BridgeGrantReply(bridge_token=request.bridge_token, mcp_url=self.mcp_url)

    def _binding(self, terminal: str) -> Binding | None:
        """``terminal``'s record as it is now: live, and its launcher running."""
        record = self._terminals.get(terminal)
        if record is None or not self._live(record) \
                or not process_alive(record.info.launcher_pid):
            return None
        info = record.info
        return Binding(terminal=info.terminal, harness=info.harness, workspace=info.workspace,
                       launch_dir=info.cwd, environment=ENVIRONMENT,
                       launcher_pid=info.launcher_pid)

    async def _run_capability(self, request: CmdRunRequest, reader: asyncio.StreamReader
                              ) -> bytes:
        """Answer a ``cmd-run``; the client closing its side (or sending more) cancels it."""
        call = asyncio.ensure_future(self._bridge.call(
            request.token, request.name, arguments=request.arguments,
            text_arguments=request.text_arguments))
        hangup = asyncio.ensure_future(reader.read(1))
        try:
            await asyncio.wait({call, hangup}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not call.done():
                call.cancel()
            hangup.cancel()
            await asyncio.gather(call, hangup, return_exceptions=True)
        if call.cancelled():
            log.info("cmd-run %s: the client left; the call was cancelled", request.name)
            return b""
        try:
            result = call.result()
        except BridgeRefusal as exc:
            log.warning("refused cmd-run %s: %s", request.name, exc.word)
            return encode_error(ErrorWord(exc.word), exc.message)
        except Exception as exc:
            log.error("cmd-run failed inside the grid: %s", type(exc).__name__)
            return encode_error(ErrorWord.INTERNAL)
        log.info("cmd-run %s: answered", request.name)
        return encode_reply(CmdRunReply(result=result))

    # ------------------------------------------------ what the bridge's host does

    def _peers(self, binding: Binding) -> tuple[PeerAgent, ...]:
        records = sorted(self._terminals.values(), key=lambda r: r.info.registered_at)
        peers = []
        for record in records:
            info = record.info
            if info.terminal == binding.terminal or info.workspace != binding.workspace \
                    or not self._live(record):
                continue
            entry = self._entry(record)
            peers.append(PeerAgent(harness=info.harness, attention=entry.attention,
                                   since=entry.since, location=entry.location))
        return tuple(peers)

    def _notify(self, binding: Binding, message: str) -> int:
        """Send ``message`` to every subscriber that asked for notifications."""
        record = self._terminals.get(binding.terminal)
        location = binding.launch_dir
        if record is not None and record.revision is not None and record.revision.snapshot:
            location = record.revision.snapshot.location or location
        line = encode_reply(StreamEvent(kind=StreamKind.NOTIFICATION, notification=Notification(
            terminal=binding.terminal, harness=binding.harness, location=location,
            message=message, at=self._clock())))
        delivered = 0
        for subscriber in list(self._subscribers):
            if not subscriber.notifications:
                continue
            if subscriber.offer(line):
                delivered += 1
            else:
                self._drop(subscriber)
        log.info("terminal %s: notified %d watcher(s)", binding.terminal, delivered)
        return delivered

    async def _run_command(self, request: CommandRequest) -> CommandResult:
        if self._executor is None:
            from clanker.environment.local import LocalEnvironment

            self._executor = LocalEnvironment().executor
        return await self._executor.run(request)

    def _host_files(self) -> HostFiles:
        if self._files is None:
            from clanker.environment.local import LocalFiles

            self._files = LocalFiles()
        return self._files

    @staticmethod
    def _check_launcher(claimed: int, peer: Peer) -> None:
        """Refuse a launcher that is gone, or that the caller may not claim."""
        if not process_alive(claimed):
            raise ProtocolError(ErrorWord.LAUNCHER_GONE, "the launcher is not running")
        # Without the peer's pid (no SO_PEERCRED here) the claim cannot be checked.
        if peer.pid is not None and not vouches_for(peer.pid, claimed):
            raise ProtocolError(ErrorWord.UNAUTHORIZED,
                                "register: the launcher is neither the caller nor its ancestor")

    def _authorize(self, terminal: str, token: str, op: str) -> None:
        if not self._credentials.verify(terminal, token):
            raise ProtocolError(ErrorWord.UNAUTHORIZED, f"{op}: not a live credential")

    def _deliver(self, request: DeliverRequest) -> DeliverReply:
        self._authorize(request.terminal, request.token, "deliver")
        envelopes = []
        for index, raw in enumerate(request.envelopes):
            try:
                envelopes.append(parse_envelope(raw))
            except EnvelopeError as exc:
                raise ProtocolError(
                    ErrorWord.BAD_REQUEST, f"deliver: envelope {index}: {exc}"
                ) from None
        if request.failed_closed is not None:
            self._broker.record_failed_closed(request.terminal, request.failed_closed)
        decisions: list[Decision] = [self._broker.apply(request.terminal, e) for e in envelopes]
        log.debug("deliver %s: %s", request.terminal, ",".join(d.value for d in decisions))
        return DeliverReply(decisions=[d.value for d in decisions])

    # ------------------------------------------------------------ subscribers

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                      notifications: bool = False) -> None:
        subscriber = _Subscriber(writer, self._subscriber_queue, notifications=notifications)
        # Hydrate and subscribe in the same step: nothing can be published in between.
        lines = [encode_reply(StreamEvent(kind=StreamKind.SNAPSHOT, entry=entry))
                 for entry in self.entries()]
        lines.append(encode_reply(StreamEvent(kind=StreamKind.SYNCED)))
        self._subscribers.add(subscriber)
        hangup = asyncio.get_running_loop().create_task(self._await_hangup(reader, subscriber))
        try:
            for line in lines:
                await self._send(writer, line)
            while True:
                while subscriber.pending and not subscriber.dropped:
                    await self._send(writer, subscriber.pending.popleft())
                if subscriber.dropped or subscriber.closed:
                    break
                subscriber.wake.clear()
                await subscriber.wake.wait()
            if subscriber.dropped and not writer.is_closing():
                await self._send(writer, encode_error(ErrorWord.OVERFLOW))
        finally:
            self._subscribers.discard(subscriber)
            hangup.cancel()

    @staticmethod
    async def _await_hangup(reader: asyncio.StreamReader, subscriber: _Subscriber) -> None:
        with contextlib.suppress(ConnectionError):
            await reader.read(1)  # EOF, or anything: a subscriber has nothing more to say
        subscriber.close()

    def _drop(self, subscriber: _Subscriber) -> None:
        log.warning("disconnected a subscriber that fell behind (%d queued)", subscriber.limit)
        self._subscribers.discard(subscriber)
        transport = subscriber.writer.transport
        if transport.get_write_buffer_size() > 0:
            transport.abort()  # it is not reading: nothing more can reach it



@contextlib.contextmanager
def _refusals(op: str) -> Iterator[None]:
    """Turn the bridge's refusals into protocol refusals (the word, and its safe message)."""
    try:
        yield
    except BridgeRefusal as exc:
        raise ProtocolError(ErrorWord(exc.word), f"{op}: {exc.word}", message=exc.message) \
            from None


class _BridgePort:
    """The grid as the bridge service sees it: live records, and a host per caller."""

    def __init__(self, grid: Grid) -> None:
        self._grid = grid

    def binding(self, terminal: str) -> Binding | None:
        return self._grid._binding(terminal)

    def host_for(self, binding: Binding) -> BridgeHost:
        return _Host(self._grid, binding)


class _Host:
    """What the host does for one caller."""

    def __init__(self, grid: Grid, binding: Binding) -> None:
        self._grid = grid
        self._binding = binding

    def peers(self) -> tuple[PeerAgent, ...]:
        return self._grid._peers(self._binding)

    def notify(self, message: str) -> int:
        return self._grid._notify(self._binding, message)

    async def run_command(self, request: CommandRequest) -> CommandResult:
        return await self._grid._run_command(request)

    async def create_isolated_checkout(self, branch: str) -> dict[str, Any]:
        return await self._grid._isolation.create(self._binding, branch)

    async def complete_isolated_checkout(self, *, delete_branch: bool,
                                         discard_ignored: bool) -> dict[str, Any]:
        return await self._grid._completion.complete(
            self._binding, delete_branch=delete_branch, discard_ignored=discard_ignored)

    @property
    def files(self) -> HostFiles:
        return self._grid._host_files()
