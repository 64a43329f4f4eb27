"""A small synchronous grid client: one request per connection, bounded in time.

::

    client = GridClient(socket_path)
    registration = client.register(harness="my-agent", workspace=cwd, cwd=cwd,
                                   launcher_pid=os.getpid())
    ...
    client.retire(registration.terminal, registration.token)

Every call connects, sends one line, reads one reply and closes, within
``timeout`` seconds. A grid that is not running (no socket, nobody listening,
no answer in time) raises :class:`~clanker.grid.errors.GridUnavailableError`;
a refusal raises :class:`~clanker.grid.errors.GridRequestError` carrying the
protocol's error word. :meth:`GridClient.subscribe` keeps its connection open
and yields stream events until the grid closes it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

from clanker.grid.errors import GridError, GridProtocolError, GridUnavailableError
from clanker.grid.protocol import (
    MAX_LINE,
    MAX_REPLY,
    PROTOCOL_VERSION,
    AwaitMoveRequest,
    BridgeGrantReply,
    BridgeGrantRequest,
    BridgeRevokeRequest,
    DeclineRequest,
    DeliverReply,
    DeliverRequest,
    EmptyReply,
    ExplainReply,
    ExplainRequest,
    HelloReply,
    HelloRequest,
    ListReply,
    ListRequest,
    MoveInstruction,
    MoveOutcome,
    RegisterRequest,
    Registration,
    Request,
    RetireRequest,
    SessionsReply,
    SessionsRequest,
    ShutdownRequest,
    StreamEvent,
    SubscribeRequest,
    TerminalEntry,
    check_socket_path,
    decode_line,
    encode_reply,
    encode_request,
    parse_reply,
)

if TYPE_CHECKING:
    from clanker.sessions.types import HarnessSession

__all__ = ["DEFAULT_TIMEOUT", "GridClient", "MoveChannel", "Registration"]

T = TypeVar("T")

DEFAULT_TIMEOUT: Final = 2.0
_CHUNK: Final = 65_536


class _Lines:
    """Read ``\\n``-terminated lines from a socket, each at most ``limit`` bytes."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = bytearray()

    def read(self, limit: int, deadline: float | None) -> bytes | None:
        """One line without its newline, or ``None`` at a clean end of stream."""
        while True:
            end = self._buffer.find(b"\n")
            if end != -1:
                if end > limit:
                    raise GridError("the grid sent a line over the size limit")
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return line
            if len(self._buffer) > limit:
                raise GridError("the grid sent a line over the size limit")
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise GridUnavailableError("the grid did not answer in time")
                self._sock.settimeout(remaining)
            try:
                chunk = self._sock.recv(_CHUNK)
            except TimeoutError:
                raise GridUnavailableError("the grid did not answer in time") from None
            except OSError as exc:
                raise GridUnavailableError(
                    f"the connection to the grid failed ({type(exc).__name__})"
                ) from None
            if not chunk:
                if self._buffer:
                    raise GridUnavailableError("the grid closed the connection mid-line")
                return None
            self._buffer += chunk


class MoveChannel:
    """One ``await-move`` connection: the grid's instructions in, the answers out."""

    def __init__(self, sock: socket.socket, lines: _Lines) -> None:
        self._sock = sock
        self._lines = lines

    def next(self) -> MoveInstruction | None:
        """The next instruction (waits for it); ``None`` once the grid ended the
        connection (the terminal was retired, or the grid stopped)."""
        line = self._lines.read(MAX_LINE, None)
        return None if line is None else parse_reply(line, MoveInstruction, op="await-move")

    def answer(self, outcome: MoveOutcome) -> None:
        self._sock.sendall(encode_reply(outcome))

    def close(self) -> None:
        """End the connection (a :meth:`next` blocked in another thread returns)."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()


class GridClient:
    """Talk to the grid listening on ``socket_path`` (see the module notes)."""

    def __init__(self, socket_path: Path | str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._path = check_socket_path(socket_path)
        self._timeout = timeout

    @property
    def socket_path(self) -> Path:
        return self._path

    def __repr__(self) -> str:
        return f"GridClient({str(self._path)!r})"

    # ------------------------------------------------------------------ ops

    def hello(self) -> HelloReply:
        """Who answers: server name, clanker version, pid, start time, live terminals."""
        return self._call(HelloRequest(), HelloReply)

    def register(
        self,
        *,
        harness: str,
        workspace: str | None,
        cwd: str,
        launcher_pid: int,
        trusted_root_session_id: str | None = None,
        account: str | None = None,
        tmux_pane: str | None = None,
        represent: Registration | None = None,
    ) -> Registration:
        """Register a terminal; the reply holds the only copy of its raw credential.
        ``account`` names the managed account the launch runs under (for ``status``),
        ``tmux_pane`` the tmux pane its launcher runs in (for ``clanker deck``).
        ``represent`` takes up a terminal a grid that went away registered, with the
        same id and credential (the grid accepts it only from ``launcher_pid`` itself).

        Raises ``ValueError`` for arguments the protocol would refuse.
        """
        request = RegisterRequest(
            harness=harness, workspace=workspace, cwd=cwd, launcher_pid=launcher_pid,
            trusted_root_session_id=trusted_root_session_id, account=account,
            tmux_pane=tmux_pane,
            terminal=None if represent is None else represent.terminal,
            token=None if represent is None else represent.token,
        )
        return self._call(request, Registration)

    def retire(self, terminal: str, token: str) -> None:
        """Retire ``terminal`` and revoke its credential."""
        self._call(RetireRequest(terminal=terminal, token=token), EmptyReply)

    def decline(self, terminal: str, token: str, reason: str) -> None:
        """List ``terminal`` as running without attention, for ``reason`` (one line)."""
        self._call(DeclineRequest(terminal=terminal, token=token, reason=reason), EmptyReply)

    def deliver(
        self, terminal: str, token: str, envelopes: Sequence[Mapping[str, object]], *,
        failed_closed: int | None = None,
    ) -> list[str]:
        """Deliver wire envelopes in order; return the broker's decision for each.
        ``failed_closed`` is the hook bridge's count of the terminal's failed-closed
        transactions (with it, ``envelopes`` may be empty)."""
        request = DeliverRequest(
            terminal=terminal, token=token, envelopes=[dict(e) for e in envelopes],
            failed_closed=failed_closed,
        )
        return self._call(request, DeliverReply).decisions

    def grant_bridge(self, terminal: str, token: str, capabilities: Sequence[str]) -> str:
        """Mint ``terminal``'s bridge credential carrying ``capabilities``; return the raw
        value (the only copy: put it in the agent's environment and nowhere else).

        ``token`` is the terminal's own credential. A terminal that had a bridge
        credential has it revoked first.
        """
        return self.grant_bridge_endpoint(terminal, token, capabilities).bridge_token

    def grant_bridge_endpoint(self, terminal: str, token: str, capabilities: Sequence[str],
                              *, carry: str | None = None,
                              mcp_port: int | None = None) -> BridgeGrantReply:
        """:meth:`grant_bridge`, and the URL of the grid's MCP endpoint (``mcp_url``;
        the first grant starts it, ``None`` when it could not start). ``carry`` is the
        bridge credential a re-presented terminal's agent holds, granted again as it is
        (once, by its launcher) instead of a new one; ``mcp_port``, with it, the port of
        the endpoint URL that agent holds, where a grid whose endpoint does not run yet
        starts it if the port is free."""
        request = BridgeGrantRequest(terminal=terminal, token=token,
                                     capabilities=list(capabilities), bridge_token=carry,
                                     mcp_port=mcp_port if carry is not None else None)
        return self._call(request, BridgeGrantReply)

    def revoke_bridge(self, terminal: str, token: str) -> None:
        """Revoke ``terminal``'s bridge credential (harmless when it has none)."""
        self._call(BridgeRevokeRequest(terminal=terminal, token=token), EmptyReply)

    def list_terminals(self) -> list[TerminalEntry]:
        """Every live terminal with its latest revision (the ``list`` op)."""
        return self._call(ListRequest(), ListReply, limit=MAX_REPLY).terminals

    def explain(self, terminal: str) -> ExplainReply:
        """Why ``terminal`` is in its state (safe metadata only)."""
        return self._call(ExplainRequest(terminal=terminal), ExplainReply, limit=MAX_REPLY)

    def sessions(self, request: SessionsRequest) -> tuple[SessionsReply, list[HarnessSession]]:
        """A session listing from the grid's index (the ``sessions`` op): the stores'
        reports and the sessions, in the grid's order. The whole answer comes within
        ``timeout``; a row that is not a valid session is a
        :class:`~clanker.grid.errors.GridProtocolError`."""
        from clanker.sessions.index import session_from_row

        deadline = time.monotonic() + self._timeout
        sock = self._connect()
        try:
            _send(sock, request)
            lines = _Lines(sock)
            header = self._line(lines, deadline)
            reply = parse_reply(header, SessionsReply, op=request.op.value)
            sessions: list[HarnessSession] = []
            while len(sessions) < reply.count:
                try:
                    data = decode_line(self._line(lines, deadline))
                except ValueError:
                    raise GridProtocolError("the grid sent a malformed sessions line") from None
                rows = data.pop("rows", None)
                if data != {"v": PROTOCOL_VERSION, "ok": True} or type(rows) is not list \
                        or not rows or len(sessions) + len(rows) > reply.count:
                    raise GridProtocolError("the grid sent a malformed sessions line")
                try:
                    sessions.extend(map(session_from_row, rows))
                except (ValueError, TypeError):
                    raise GridProtocolError("the grid sent a malformed session") from None
        finally:
            sock.close()
        return reply, sessions

    @staticmethod
    def _line(lines: _Lines, deadline: float) -> bytes:
        line = lines.read(MAX_REPLY, deadline)
        if line is None:
            raise GridUnavailableError("the grid closed the connection mid-answer")
        return line

    def shutdown(self) -> None:
        """Ask the grid to stop (it answers first, then closes every connection)."""
        self._call(ShutdownRequest(), EmptyReply)

    def subscribe(
        self, *, timeout: float | None = None, notifications: bool = False
    ) -> Generator[StreamEvent, None, None]:
        """Yield ``snapshot`` events, one ``synced``, then every ``revision``
        (and, with ``notifications``, every ``notification`` an agent sends).

        The iterator ends when the grid closes the stream (it stopped); a
        subscriber that fell behind gets a ``GridRequestError("overflow")``.
        ``timeout`` bounds the wait for each event (``None``: wait for ever).
        Close the iterator (``contextlib.closing``) to unsubscribe.
        """
        sock = self._connect()
        try:
            sock.sendall(encode_request(SubscribeRequest(notifications=notifications)))
            lines = _Lines(sock)
            while True:
                deadline = None if timeout is None else time.monotonic() + timeout
                if timeout is None:
                    sock.settimeout(None)
                line = lines.read(MAX_LINE, deadline)
                if line is None:
                    return
                yield parse_reply(line, StreamEvent, op="subscribe")
        finally:
            sock.close()

    def await_moves(self, terminal: str, token: str) -> MoveChannel:
        """Offer to move ``terminal``'s conversation (``await-move``): returns once the
        grid has acknowledged, with the connection its instructions come down."""
        sock = self._connect()
        try:
            sock.sendall(encode_request(AwaitMoveRequest(terminal=terminal, token=token)))
            lines = _Lines(sock)
            line = lines.read(MAX_LINE, time.monotonic() + self._timeout)
            if line is None:
                raise GridUnavailableError("the grid closed the connection without answering")
            parse_reply(line, EmptyReply, op="await-move")
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        return MoveChannel(sock, lines)

    # ------------------------------------------------------------- transport

    def _connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self._timeout)
        try:
            sock.connect(os.fsencode(self._path))
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError):
            sock.close()
            raise GridUnavailableError(f"the grid is not running ({self._path})") from None
        except TimeoutError:
            sock.close()
            raise GridUnavailableError("the grid did not answer in time") from None
        except OSError as exc:
            sock.close()
            raise GridUnavailableError(
                f"cannot reach the grid at {self._path} ({type(exc).__name__})"
            ) from None
        return sock

    def _call(self, request: Request, cls: type[T], *, limit: int = MAX_LINE) -> T:
        deadline = time.monotonic() + self._timeout
        sock = self._connect()
        try:
            _send(sock, request)
            line = _Lines(sock).read(limit, deadline)
        finally:
            sock.close()
        if line is None:
            raise GridUnavailableError("the grid closed the connection without answering")
        return parse_reply(line, cls, op=request.op.value)


def _send(sock: socket.socket, request: Request) -> None:
    try:
        sock.sendall(encode_request(request))
    except OSError as exc:
        raise GridUnavailableError(
            f"the connection to the grid failed ({type(exc).__name__})") from None
