"""The MCP endpoint's listener: loopback HTTP/1.1 on h11, bounded, authenticated first.

The grid starts one on the first bridge grant (never at start-up, never on a
CLI path: this module and h11 are imported then) and stops it with itself::

    listener = McpListener(endpoint, service)
    await listener.start()          # 127.0.0.1, an ephemeral port, verified
    listener.url                    # http://127.0.0.1:<port>/mcp
    await listener.stop()

It binds the literal ``127.0.0.1`` (never a wildcard or another interface) on
a port the kernel picks, and refuses to serve unless the bound address is
exactly that. Each request is checked in this order, on its head alone, before
a byte of its body is read; the first rule it breaks answers it, with a short
generic text and ``Connection: close``:

=====================================================  ==================
rule                                                   refusal
=====================================================  ==================
a well-formed HTTP/1.x head of at most 8 KiB           ``400`` / ``431``
``Host`` is ``127.0.0.1:<port>`` or ``localhost:<port>``  ``421``
  (the DNS-rebinding guard)
no ``Origin`` header at all (agents are not browsers)  ``403``
the target is exactly ``/mcp``                         ``404``
the method is ``POST``                                 ``405`` (``Allow: POST``)
one ``Authorization: Bearer <credential>`` that        ``401`` (plain: no
  :meth:`BridgeService.caller` resolves now              ``WWW-Authenticate``,
                                                         no OAuth metadata)
``Content-Type: application/json``                     ``415``
``Accept`` (if sent) admits JSON                       ``406``
``Content-Length`` (if sent) at most 64 KiB            ``413``
at most 32 requests in flight                          ``503``
=====================================================  ==================

Then the body is read, at most 64 KiB (counted while reading too, for a
chunked one: ``413``), and the whole request (from the moment the connection
waits for it) within 15 s (``408``; an idle connection is closed then). A
routing header sent twice is ``400``. The body goes to the
:class:`~clanker.bridge.mcp_protocol.McpEndpoint`; a client that closes its
side while its request runs cancels it (a ``tools/call`` is cut off like one
that ran out of time: its signal is aborted and its task cancelled). An
answer that the client does not take within 15 s closes the connection.

At most 64 connections are open at once. A newcomer beyond that closes the
connection that has waited longest for its next request, or, when every one
is busy, is closed at once: idle holders never lock an agent out.

Refusals are logged with a safe reason (never a header value, a body or a
credential) and change nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import socket
from collections import OrderedDict
from typing import Final

import h11
from attrs import frozen

from clanker._logging import get_logger
from clanker.bridge import wire
from clanker.bridge.mcp_protocol import ROUTING_HEADERS, McpEndpoint, Reply
from clanker.bridge.service import BridgeRefusal, BridgeService

__all__ = ["HOST", "PATH", "Limits", "ListenerCounts", "McpListener"]

log = get_logger(__name__)

HOST: Final = "127.0.0.1"
PATH: Final = "/mcp"
_READ: Final = 65_536
_LINGER_BYTES: Final = 1 << 20
_LINGER_SECONDS: Final = 1.0
_SINGLE: Final = frozenset({"host", "authorization", "content-type", "content-length",
                            "accept", *ROUTING_HEADERS})
"""Headers that must not be sent twice (two readers could disagree on which counts)."""


@frozen(kw_only=True)
class Limits:
    """The listener's bounds (the defaults are the documented ones)."""

    max_body: int = 65_536
    max_head: int = 8_192
    max_requests: int = 32
    max_connections: int = 64
    receive_timeout: float = 15.0
    send_timeout: float = 15.0


@frozen(kw_only=True)
class ListenerCounts:
    """What the listener holds right now."""

    connections: int
    requests: int


class _Refusal(Exception):
    """Answer the request with ``status`` and close the connection."""

    def __init__(self, status: int, reason: str, *, allow: bool = False) -> None:
        self.status = status
        self.reason = reason
        self.allow = allow
        super().__init__(reason)


class _Gone(Exception):
    """The client went away (or broke HTTP past answering)."""


class _Connection:
    __slots__ = ("busy", "writer")

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.busy = False


class McpListener:
    """The loopback HTTP listener of one grid's MCP endpoint (event-loop thread only)."""

    def __init__(self, endpoint: McpEndpoint, service: BridgeService, *,
                 limits: Limits | None = None) -> None:
        self._endpoint = endpoint
        self._service = service
        self._limits = limits or Limits()
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._hosts: frozenset[str] = frozenset()
        self._tasks: dict[asyncio.Task[None], _Connection] = {}
        self._idle: OrderedDict[asyncio.Task[None], None] = OrderedDict()
        self._requests = 0

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the listener is not started")
        return self._port

    @property
    def url(self) -> str:
        """The endpoint's URL, with the port actually bound."""
        return f"http://{HOST}:{self.port}{PATH}"

    @property
    def address(self) -> tuple[str, int]:
        """The address the listening socket is bound to, as the kernel reports it."""
        if self._server is None:
            raise RuntimeError("the listener is not started")
        host, port = self._server.sockets[0].getsockname()[:2]
        return host, port

    @property
    def counts(self) -> ListenerCounts:
        return ListenerCounts(connections=len(self._tasks), requests=self._requests)

    async def start(self, port: int = 0) -> None:
        """Bind ``127.0.0.1`` on ``port`` (``0``: an ephemeral one) and serve; raise
        :class:`OSError` when that cannot be done or the bound address is anything else.

        A given port is bound with ``SO_REUSEADDR``, so that the connections an earlier
        listener there closed (in ``TIME_WAIT``) do not hold it; on Linux that never
        shares a port some other socket listens on."""
        if self._server is not None:
            raise RuntimeError("the listener was already started")
        wanted = port
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if wanted:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((HOST, wanted))
            host, port = sock.getsockname()[:2]
            if host != HOST or not 0 < port < 65_536 or wanted not in (0, port):
                raise OSError(f"the endpoint bound {host}:{port}, not {HOST}")
            backlog = max(128, self._limits.max_connections)
            sock.listen(backlog)
            sock.setblocking(False)
            self._server = await asyncio.start_server(self._accept, sock=sock, backlog=backlog)
        except BaseException:
            sock.close()
            raise
        self._port = port
        self._hosts = frozenset({f"{HOST}:{port}", f"localhost:{port}"})
        log.info("mcp endpoint listening on %s:%d", HOST, port)

    async def stop(self) -> None:
        """Stop listening and end every connection (a request in flight is cancelled)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5.0)
        log.info("mcp endpoint stopped")

    # ------------------------------------------------------------ connections

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self._server is None:
            writer.transport.abort()
            return
        if len(self._tasks) >= self._limits.max_connections and not self._make_room():
            log.info("mcp: closed a connection: every connection is busy")
            writer.transport.abort()
            return
        connection = _Connection(writer)
        self._tasks[task] = connection
        self._idle[task] = None
        try:
            await self._converse(task, connection, reader, writer)
        except (_Gone, ConnectionError):
            pass
        except asyncio.CancelledError:
            pass  # the listener stops; not re-raised (asyncio would log the task)
        except Exception as exc:
            log.error("mcp connection failed: %s", type(exc).__name__)
        finally:
            self._tasks.pop(task, None)
            self._idle.pop(task, None)
            writer.close()

    def _make_room(self) -> bool:
        """Close the connection that has waited longest for a request; say if there was one."""
        if not self._idle:
            return False
        oldest, _ = self._idle.popitem(last=False)
        log.info("mcp: closed an idle connection to make room")
        self._tasks[oldest].writer.transport.abort()
        oldest.cancel()
        return True

    async def _converse(self, task: asyncio.Task[None], connection: _Connection,
                        reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self._limits.max_head)
        while await self._cycle(task, connection, conn, reader, writer):
            conn.start_next_cycle()
            connection.busy = False
            self._idle[task] = None

    async def _cycle(self, task: asyncio.Task[None], connection: _Connection,
                     conn: h11.Connection, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> bool:
        """Serve one request; say whether the connection takes another. (Its own frame:
        nothing of a request, its credential least of all, outlives answering it.)"""
        refusal: _Refusal | None
        try:
            async with asyncio.timeout(self._limits.receive_timeout) as deadline:
                request = await self._head(conn, reader)
                if request is None:
                    return False
                self._idle.pop(task, None)
                connection.busy = True
                self._requests += 1
                try:
                    token, routing = self._check(request)
                    del request
                    if conn.they_are_waiting_for_100_continue:
                        await self._write(writer, conn.send(
                            h11.InformationalResponse(status_code=100, headers=[])))
                    body = await self._body(conn, reader)
                    deadline.reschedule(None)
                    reply = await self._answer(conn, reader, token, routing, body)
                finally:
                    self._requests -= 1
        except TimeoutError:
            if conn.their_state is h11.IDLE and not conn.trailing_data[0]:
                return False  # an idle connection, closed quietly
            refusal = _Refusal(408, "the request took too long")
        except _Refusal as refused:
            refusal = refused
        except h11.RemoteProtocolError as exc:
            refusal = _Refusal(exc.error_status_hint, "the request is not well-formed HTTP")
        else:
            refusal = None
        if refusal is not None:
            await self._refuse(writer, reader, refusal)
            return False
        if reply is None:
            return False  # the client left; its request was cancelled
        await self._respond(conn, writer, reply)
        return conn.our_state is h11.DONE and conn.their_state is h11.DONE

    async def _head(self, conn: h11.Connection, reader: asyncio.StreamReader
                    ) -> h11.Request | None:
        """The next request's head, or ``None`` when the client closed between requests."""
        event = await self._event(conn, reader)
        if isinstance(event, h11.ConnectionClosed):
            return None
        assert isinstance(event, h11.Request)
        return event

    @staticmethod
    async def _event(conn: h11.Connection, reader: asyncio.StreamReader) -> h11.Event:
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await reader.read(_READ))
                continue
            if event is h11.PAUSED:  # pragma: no cover - one request at a time
                raise _Gone
            assert not isinstance(event, type)
            return event

    def _check(self, request: h11.Request) -> tuple[str, dict[str, str]]:
        """The credential and the routing headers of an acceptable head; else refuse."""
        limits = self._limits
        size = len(request.method) + len(request.target) + 12 + sum(
            len(name) + len(value) + 4 for name, value in request.headers)
        if size > limits.max_head:
            raise _Refusal(431, "the request head is too large")
        headers: dict[str, str] = {}
        for raw_name, raw_value in request.headers:
            name = raw_name.decode("ascii", "replace")
            if name in headers and name in _SINGLE:
                raise _Refusal(400, f"the {name} header was sent twice")
            headers[name] = raw_value.decode("latin-1")
        if headers.get("host", "").lower() not in self._hosts:
            raise _Refusal(421, "the Host is not this endpoint")
        if "origin" in headers:
            raise _Refusal(403, "a request with an Origin is refused")
        if request.target != PATH.encode():
            raise _Refusal(404, "there is nothing else here")
        if request.method != b"POST":
            raise _Refusal(405, "only POST is answered", allow=True)
        token = _bearer(headers.get("authorization"))
        try:
            self._service.caller(token)
        except BridgeRefusal:
            raise _Refusal(401, "no live bridge credential") from None
        if headers.get("content-type", "").split(";", 1)[0].strip().lower() \
                != "application/json":
            raise _Refusal(415, "the body must be application/json")
        if not _admits_json(headers.get("accept")):
            raise _Refusal(406, "the client does not accept application/json")
        length = headers.get("content-length")
        if length is not None and (len(length) > 12 or int(length) > limits.max_body):
            raise _Refusal(413, "the body is too large")
        if self._requests > limits.max_requests:
            raise _Refusal(503, "too many requests at once")
        assert token is not None
        return token, {name: headers[name] for name in ROUTING_HEADERS if name in headers}

    async def _body(self, conn: h11.Connection, reader: asyncio.StreamReader) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            event = await self._event(conn, reader)
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > self._limits.max_body:
                    raise _Refusal(413, "the body is too large")
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return b"".join(chunks)
            else:
                raise _Gone

    async def _answer(self, conn: h11.Connection, reader: asyncio.StreamReader, token: str,
                      routing: dict[str, str], body: bytes) -> Reply | None:
        """The endpoint's reply; ``None`` when the client closed its side first (the
        request is cancelled then)."""
        answer = asyncio.ensure_future(self._endpoint.answer(token, routing, body))
        buffered = 0
        try:
            while True:
                hangup = asyncio.ensure_future(reader.read(_READ))
                try:
                    await asyncio.wait({answer, hangup}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if not hangup.done():
                        hangup.cancel()
                        with contextlib.suppress(BaseException):
                            await hangup
                if answer.done():
                    if hangup.done() and not hangup.cancelled() and hangup.exception() is None:
                        conn.receive_data(hangup.result())  # the next request, early
                    return answer.result()
                data = b"" if hangup.exception() is not None else hangup.result()
                if not data:
                    log.info("mcp: the client left; its request was cancelled")
                    return None
                buffered += len(data)
                if buffered > self._limits.max_head + self._limits.max_body:
                    return None
                conn.receive_data(data)
        finally:
            if not answer.done():
                answer.cancel()
                with contextlib.suppress(BaseException):
                    await answer

    async def _respond(self, conn: h11.Connection, writer: asyncio.StreamWriter,
                       reply: Reply) -> None:
        body = reply.body or b""
        headers = [(b"content-length", str(len(body)).encode()), (b"cache-control", b"no-store")]
        if reply.body is not None:
            headers.insert(0, (b"content-type", b"application/json"))
        elif reply.status == 401:
            body = b"unauthorized\n"
            headers = [(b"content-type", b"text/plain; charset=utf-8"),
                       (b"content-length", str(len(body)).encode())]
        data = conn.send(h11.Response(status_code=reply.status, headers=headers,
                                      reason=_phrase(reply.status)))
        data += conn.send(h11.Data(data=body)) if body else b""
        data += conn.send(h11.EndOfMessage())
        await self._write(writer, data)

    async def _write(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        try:
            await asyncio.wait_for(writer.drain(), self._limits.send_timeout)
        except TimeoutError:
            raise _Gone from None

    async def _refuse(self, writer: asyncio.StreamWriter, reader: asyncio.StreamReader,
                      refusal: _Refusal) -> None:
        """Answer ``refusal`` and close, letting the client read the answer first."""
        log.info("mcp: refused a request: %d (%s)", refusal.status, refusal.reason)
        text = (refusal.reason + "\n").encode()
        head = [f"HTTP/1.1 {refusal.status} {_phrase(refusal.status).decode()}",
                "content-type: text/plain; charset=utf-8", f"content-length: {len(text)}",
                "connection: close"]
        if refusal.allow:
            head.append("allow: POST")
        if refusal.status == 503:
            head.append("retry-after: 1")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + text)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.drain(), self._limits.send_timeout)
            if writer.can_write_eof():
                writer.write_eof()
            # Read what the client is still sending, so closing does not reset the
            # connection before it has read the answer (bounded).
            async with asyncio.timeout(_LINGER_SECONDS):
                discarded = 0
                while discarded < _LINGER_BYTES:
                    chunk = await reader.read(_READ)
                    if not chunk:
                        break
                    discarded += len(chunk)


def _bearer(value: str | None) -> str | None:
    if value is None:
        return None
    scheme, _, token = value.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not wire.is_bridge_token(token):
        return None
    return token


def _admits_json(accept: str | None) -> bool:
    if accept is None or not accept.strip():
        return True
    for item in accept.split(","):
        kind = item.split(";", 1)[0].strip().lower()
        if kind in ("application/json", "application/*", "*/*"):
            return True
    return False


def _phrase(status: int) -> bytes:
    try:
        return http.HTTPStatus(status).phrase.encode()
    except ValueError:
        return b"Error"
