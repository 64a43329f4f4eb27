"""The MCP endpoint's protocol: what one authenticated POST is answered with.

No I/O here: :class:`McpEndpoint` takes the bearer credential the listener
(:mod:`~clanker.bridge.mcp_server`) already checked, the routing headers and
the body, and returns a :class:`Reply` (an HTTP status and a JSON body, or no
body). Every answer goes through :class:`~clanker.bridge.service.BridgeService`:
``tools/list`` is ``entries`` (exactly the grant), ``tools/call`` is ``call``
(the declarations' own parser, rate, bounds and cancellation: the same path as
``clanker cmd``), and each request re-derives the caller, so a terminal that
has exited has no authority (``401``) even between the listener's check and
the call.

Two eras of the protocol, told apart by the ``MCP-Protocol-Version`` header
(as the official SDK does):

* **Handshake revisions** (2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25;
  the header absent or naming one of them): ``initialize`` echoes the
  client's revision when it is one of these, else offers the newest;
  ``notifications/initialized`` and every other notification is ``202`` with
  no body; ``ping``, ``tools/list``, ``tools/call``. Stateless: no session id
  is ever issued, so a request needs no earlier ``initialize``. JSON-RPC
  errors are answered ``200`` (parse errors and malformed envelopes ``400``).
* **2026-07-28** (the stateless revision; the header names it): no
  handshake; ``server/discover``, ``tools/list``, ``tools/call``, each
  carrying ``params._meta`` with the protocol version and the client's
  capabilities. The header must equal ``_meta``'s version, ``Mcp-Method`` the
  method and, for ``tools/call``, ``Mcp-Name`` the tool (``-32020`` header
  mismatch otherwise). Results carry ``resultType: "complete"`` (lists also
  ``ttlMs: 0`` and ``cacheScope: "private"``: a listing is one credential's).
  Errors take the revision's statuses (``400``, ``404`` for an unknown method).

A header naming a revision neither era knows is ``400`` with ``-32022`` and
the revisions served, which is how a client picks one. A JSON-RPC batch of 1
to 16 messages is answered under the revisions that have batches (2024-11-05
and 2025-03-26, or no header): each message as if it came alone, all at once,
the answers as one array (``202`` when all were notifications); under later
revisions, which removed batching, and beyond 16 messages it is refused
(``400``, ``-32600``). A notification is never
acted on: ``notifications/cancelled`` names a request the client can cancel
by closing its connection instead.

What an agent sees of a refusal is generic and safe: an unknown or ungranted
tool is ``-32602`` "Unknown tool" (the same answer for both), arguments the
declaration refuses, a rate limit, a timeout or a failure are a tool result
with ``isError: true`` and the capability plane's one safe sentence (so the
model can correct itself), anything unexpected ``-32603`` "Internal error".
A result is the capability's JSON object as one text content block; there is
no ``structuredContent``, since no declaration has an output schema.

``instructions`` is the hook for the launch's guidance: a function of the
caller, whose text (at most :data:`MAX_INSTRUCTIONS` characters) goes into
``initialize`` and ``server/discover``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from attrs import frozen

from clanker import strictjson
from clanker._logging import get_logger
from clanker.bridge import wire
from clanker.bridge.declaration import Caller
from clanker.bridge.service import BridgeRefusal, BridgeService

__all__ = [
    "BATCH_VERSIONS",
    "HANDSHAKE_VERSIONS",
    "KNOWN_VERSIONS",
    "MAX_BATCH",
    "MAX_INSTRUCTIONS",
    "MODERN_VERSIONS",
    "SERVER_NAME",
    "Instructions",
    "McpEndpoint",
    "Reply",
]

log = get_logger(__name__)

SERVER_NAME: Final = "clanker"
HANDSHAKE_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The revisions negotiated by ``initialize``, oldest first."""
MODERN_VERSIONS: Final = ("2026-07-28",)
"""The stateless revisions (a per-request ``_meta``, no handshake)."""
KNOWN_VERSIONS: Final = (*HANDSHAKE_VERSIONS, *MODERN_VERSIONS)
BATCH_VERSIONS: Final = ("2024-11-05", "2025-03-26")
"""The revisions that have JSON-RPC batches (2025-06-18 removed them); a batch that
names no revision is taken as one of these."""
MAX_BATCH: Final = 16
"""The most messages one batch may hold."""
MAX_INSTRUCTIONS: Final = 16_384

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
HEADER_MISMATCH: Final = -32020
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

VERSION_HEADER: Final = "mcp-protocol-version"
METHOD_HEADER: Final = "mcp-method"
NAME_HEADER: Final = "mcp-name"
ROUTING_HEADERS: Final = (VERSION_HEADER, METHOD_HEADER, NAME_HEADER)
"""The headers the endpoint reads (the listener refuses any of them given twice)."""

META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"

_MODERN_STATUS: Final = {PARSE_ERROR: 400, INVALID_REQUEST: 400, INVALID_PARAMS: 400,
                         HEADER_MISMATCH: 400, UNSUPPORTED_PROTOCOL_VERSION: 400,
                         METHOD_NOT_FOUND: 404}
"""2026-07-28's HTTP status for a JSON-RPC error (anything else: 200)."""
_ENVELOPE: Final = frozenset({"jsonrpc", "id", "method", "params"})
_TOOL_ENTRY: Final = ("name", "description", "inputSchema", "annotations")
"""What ``tools/list`` shows of a declaration's entry (MCP's fields only)."""

Instructions = Callable[[Caller], str | None]
"""The guidance for a caller (``None``: none)."""


@frozen
class Reply:
    """One HTTP answer: a status and a JSON body (``None``: no body at all)."""

    status: int
    body: bytes | None = None


UNAUTHORIZED: Final = Reply(401)


class _Early(Exception):
    """The request is answered before any method runs."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        super().__init__(reply.status)


class _Batch(Exception):
    """The body is a batch that this revision admits: its messages are answered one by one."""

    def __init__(self, messages: list[object]) -> None:
        self.messages = messages
        super().__init__(len(messages))


class _Refused(Exception):
    """A JSON-RPC error for the request being answered."""

    def __init__(self, code: int, message: str, data: object = None) -> None:
        self.code = code
        self.message = message
        self.data = data
        super().__init__(message)


def _decode(body: bytes) -> object:
    """The body as JSON, strictly (UTF-8, no duplicate keys, no NaN), or ``ValueError``."""
    try:
        return strictjson.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, RecursionError):
        raise ValueError("not JSON") from None


def _encode(message: object) -> bytes:
    # ASCII: a string id may hold a lone surrogate, which UTF-8 cannot carry.
    return json.dumps(message, separators=(",", ":")).encode("ascii")


def _valid_id(value: object) -> bool:
    return type(value) is str or (type(value) is int and abs(value) <= 2**53 - 1)


def _well_formed(message: dict[str, Any], without: set[str]) -> bool:
    """A JSON-RPC 2.0 request envelope (without the keys in ``without``), nothing more."""
    return (message.keys() <= _ENVELOPE - without and message.get("jsonrpc") == "2.0"
            and type(message.get("method")) is str
            and type(message.get("params", {})) is dict)


def _text(word: str, message: str | None) -> str:
    sentence = wire.SENTENCES.get(word, wire.SENTENCES[wire.CAPABILITY_FAILED])
    return f"{sentence} ({message})" if message else sentence


def _decode_header_name(value: str | None) -> str | None:
    """``Mcp-Name`` as the client meant it: ``=?base64?...?=`` wraps a value that is
    not plain printable ASCII (tool names here always are)."""
    if value is None or not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    import base64
    import binascii

    payload = value[len("=?base64?"):-2]
    try:
        decoded = base64.b64decode(payload, validate=True)
        if base64.b64encode(decoded).decode("ascii") != payload:
            return None
        return decoded.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


class McpEndpoint:
    """Answers MCP requests for the callers of one :class:`BridgeService`."""

    def __init__(self, service: BridgeService, *, version: str,
                 instructions: Instructions | None = None) -> None:
        """``version`` is what ``serverInfo`` reports; ``instructions`` the guidance hook."""
        self._service = service
        self._info = {"name": SERVER_NAME, "version": version}
        self._instructions = instructions

    async def answer(self, token: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """Answer one POST body. ``headers`` holds the routing headers that were sent
        (lower-case names); ``token`` is the bearer credential."""
        try:
            parsed = self._request(headers, body)
        except _Early as early:
            return early.reply
        except _Batch as batch:
            return await self._batch(token, headers, batch.messages)
        return await self._answer(token, headers, *parsed)

    async def _answer(self, token: str, headers: Mapping[str, str], modern: bool,
                      request_id: str | int, method: str, params: dict[str, Any]) -> Reply:
        try:
            if modern:
                self._check_envelope(method, params, headers)
                result = await self._modern(token, method, params)
            else:
                result = await self._handshake(token, method, params)
        except _Refused as refused:
            status = _MODERN_STATUS.get(refused.code, 200) if modern else 200
            return self._error(request_id, refused.code, refused.message, status=status,
                               data=refused.data)
        except BridgeRefusal as refusal:
            if refusal.word == wire.UNAUTHORIZED:
                return UNAUTHORIZED
            log.warning("mcp %s refused unexpectedly: %s", method, refusal.word)
            return self._error(request_id, INTERNAL_ERROR, "Internal error", status=200)
        except Exception as exc:
            log.error("mcp %s failed: %s", method, type(exc).__name__)
            return self._error(request_id, INTERNAL_ERROR, "Internal error", status=200)
        if modern:
            result.setdefault("resultType", "complete")
            result["_meta"] = {META_SERVER_INFO: self._info}
        return Reply(200, _encode({"jsonrpc": "2.0", "id": request_id, "result": result}))

    async def _batch(self, token: str, headers: Mapping[str, str], messages: list[object]
                     ) -> Reply:
        """Answer each message of a batch as if it came alone (at once, so one slow call
        holds up none of the others), and the answers as one array; ``202`` when every
        message was a notification."""
        replies = await asyncio.gather(*(
            self._alone(token, headers, message) for message in messages))
        if any(reply.status == UNAUTHORIZED.status for reply in replies):
            return UNAUTHORIZED
        answers = [json.loads(reply.body) for reply in replies if reply.body is not None]
        if not answers:
            return Reply(202)
        return Reply(200, b"[" + b",".join(_encode(answer) for answer in answers) + b"]")

    async def _alone(self, token: str, headers: Mapping[str, str], message: object) -> Reply:
        if type(message) is list:  # a batch within a batch is no request
            return self._error(None, INVALID_REQUEST, "Invalid request", status=400)
        return await self.answer(token, headers, _encode(message))

    def _request(self, headers: Mapping[str, str], body: bytes
                 ) -> tuple[bool, str | int, str, dict[str, Any]]:
        """(modern, id, method, params) of one well-formed request; else raise
        :class:`_Early` with the answer (a notification's included)."""
        requested = headers.get(VERSION_HEADER)
        if requested is not None and requested not in KNOWN_VERSIONS:
            raise _Early(self._error(
                None, UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", status=400,
                data={"supported": list(KNOWN_VERSIONS), "requested": requested}))
        try:
            message = _decode(body)
        except ValueError:
            raise _Early(self._error(None, PARSE_ERROR, "Parse error", status=400)) from None
        if type(message) is list:
            if requested is not None and requested not in BATCH_VERSIONS:
                raise _Early(self._error(None, INVALID_REQUEST, "Batches are not accepted",
                                         status=400))
            if not 1 <= len(message) <= MAX_BATCH:
                raise _Early(self._error(None, INVALID_REQUEST,
                                         f"A batch holds 1 to {MAX_BATCH} messages",
                                         status=400))
            raise _Batch(message)
        if type(message) is dict and "id" not in message and _well_formed(message, {"id"}):
            raise _Early(Reply(202))  # a notification: accepted, and nothing more
        if type(message) is not dict or not _valid_id(message.get("id")) \
                or not _well_formed(message, set()):
            shown = message.get("id") if type(message) is dict else None
            raise _Early(self._error(shown if _valid_id(shown) else None, INVALID_REQUEST,
                                     "Invalid request", status=400))
        return (requested in MODERN_VERSIONS, message["id"], message["method"],
                message.get("params", {}))

    # ------------------------------------------------------------ the two eras

    async def _handshake(self, token: str, method: str, params: dict[str, Any]
                         ) -> dict[str, Any]:
        if method == "initialize":
            offered = params.get("protocolVersion")
            if type(offered) is not str:
                raise _Refused(INVALID_PARAMS, "Invalid params")
            version = offered if offered in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
            result: dict[str, Any] = {"protocolVersion": version,
                                      "capabilities": self._capabilities(),
                                      "serverInfo": self._info}
            self._instruct(token, result)
            return result
        if method == "ping":
            self._service.caller(token)
            return {}
        return await self._tools(token, method, params)

    async def _modern(self, token: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "server/discover":
            result: dict[str, Any] = {"supportedVersions": list(MODERN_VERSIONS),
                                      "capabilities": self._capabilities(),
                                      "ttlMs": 0, "cacheScope": "private"}
            self._instruct(token, result)
            return result
        result = await self._tools(token, method, params)
        if method == "tools/list":
            result.update(ttlMs=0, cacheScope="private")
        return result

    @staticmethod
    def _check_envelope(method: str, params: Mapping[str, Any], headers: Mapping[str, str]
                        ) -> None:
        meta = params.get("_meta")
        if type(meta) is not dict or META_VERSION not in meta or META_CAPABILITIES not in meta:
            raise _Refused(INVALID_PARAMS, "params._meta must carry the protocol version and "
                                           "the client capabilities")
        if headers.get(VERSION_HEADER) != meta[META_VERSION]:
            raise _Refused(HEADER_MISMATCH, "mcp-protocol-version header does not match the "
                                            "request's protocol version")
        if headers.get(METHOD_HEADER) != method:
            raise _Refused(HEADER_MISMATCH, "mcp-method header does not match the method")
        if method == "tools/call" and params.get("name") is not None \
                and _decode_header_name(headers.get(NAME_HEADER)) != params.get("name"):
            raise _Refused(HEADER_MISMATCH, "mcp-name header does not match the tool")

    # ------------------------------------------------------------------ tools

    async def _tools(self, token: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "tools/list":
            if params.get("cursor") is not None:
                raise _Refused(INVALID_PARAMS, "Invalid cursor")
            return {"tools": [{key: entry[key] for key in _TOOL_ENTRY}
                              for entry in self._service.entries(token)]}
        if method == "tools/call":
            return await self._call(token, params)
        self._service.caller(token)  # an exited terminal learns nothing, not even this
        raise _Refused(METHOD_NOT_FOUND, "Method not found")

    async def _call(self, token: str, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        if type(name) is not str:
            self._service.caller(token)
            raise _Refused(INVALID_PARAMS, "Invalid params")
        try:
            result = await self._service.call(token, name, arguments=params.get("arguments"))
        except BridgeRefusal as refusal:
            if refusal.word == wire.UNKNOWN_CAPABILITY:
                raise _Refused(INVALID_PARAMS, "Unknown tool") from None
            if refusal.word in (wire.UNAUTHORIZED, wire.INTERNAL):
                raise
            return {"content": [{"type": "text", "text": _text(refusal.word, refusal.message)}],
                    "isError": True}
        text = json.dumps(result, ensure_ascii=False, separators=(",", ":"))
        return {"content": [{"type": "text", "text": text}], "isError": False}

    # ---------------------------------------------------------------- helpers

    @staticmethod
    def _capabilities() -> dict[str, Any]:
        return {"tools": {"listChanged": False}}

    def _instruct(self, token: str, result: dict[str, Any]) -> None:
        caller = self._service.caller(token)
        if self._instructions is None:
            return
        try:
            text = self._instructions(caller)
        except Exception as exc:
            log.error("the bridge's instructions failed: %s", type(exc).__name__)
            return
        if text is None:
            return
        if type(text) is not str or not text.strip() or len(text) > MAX_INSTRUCTIONS:
            log.error("the bridge's instructions are not text of at most %d characters",
                      MAX_INSTRUCTIONS)
            return
        result["instructions"] = text

    @staticmethod
    def _error(request_id: object, code: int, message: str, *, status: int,
               data: object = None) -> Reply:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        return Reply(status, _encode({"jsonrpc": "2.0", "id": request_id, "error": error}))
