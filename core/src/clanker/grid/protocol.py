"""The grid protocol, version 1: JSON lines over a Unix socket.

A connection carries one request: the grid answers and closes it, except for
``subscribe``, which streams. Every line is one UTF-8 JSON object terminated by
``\\n``. A request line is at most :data:`MAX_LINE` bytes (a longer one is
answered with ``too-large`` and the connection is closed), carries ``"v": 1``
and an ``"op"``, and nothing else but that op's fields. Every reply carries
``"v": 1`` and ``"ok"``; a refusal carries ``"error"``, one of the fixed
:class:`ErrorWord` values, and nothing was changed.

Parsing goes through one strict cattrs converter: unknown keys, wrong types
(``"1"`` is not a number, ``1`` is not a boolean), ``NaN``, duplicate keys and
out-of-range values are refused. Reasons name fields, never values, so they can
be logged. The same classes parse replies on the client side.

Ops (request fields -> reply fields; ``docs/guide/attention.md`` has examples):

========== ================================================ =============================
op          request                                          reply
========== ================================================ =============================
hello       (none)                                           server, version, pid,
                                                             startedAt, terminals
register    harness, cwd, launcherPid, workspace?,           terminal, token
            trustedRootSessionId?
retire      terminal, token                                  (none)
deliver     terminal, token, envelopes (0..16),              decisions
            failedClosed? (required when envelopes is empty)
list        (none)                                           terminals: [entry]
subscribe   (none)                                           a stream of events (below)
explain     terminal                                         entry, explanation
shutdown    (none)                                           (none)
await-move  terminal, token                                  (none), then instructions
sessions    environ, workspace?, harnesses?, limit           scans, count, then rows
========== ================================================ =============================

``sessions`` is a session listing answered from the grid's watched index
(:mod:`clanker.grid.index`): ``environ`` is the asking process's environment
(where the stores are), the rest what ``Clanker.sessions`` takes. The first
reply line carries the per-store ``scans`` and the ``count`` of sessions; then
come ``{"v":1,"ok":true,"rows":[...]}`` lines of at most :data:`SESSION_ROWS`
rows each (:func:`clanker.sessions.index.session_row`), each line at most
:data:`MAX_REPLY` bytes, until ``count`` rows were sent.

``await-move`` is a launcher offering to move its terminal's conversation to
another checkout (a relayed launch, :mod:`clanker.launch.relayed`). The grid
acknowledges it and keeps the connection; each move it asks for is one line
``{"v":1,"ok":true,"target":T,"session":S}`` sent down it, answered by the
launcher with one ``{"v":1,"ok":true,"moved":B,"why":W}`` line (``why`` names
the refusal, ``null`` when moved). The grid ends the connection when the
terminal is retired.

The capability plane adds ``bridge-grant``, ``bridge-revoke``, ``cmd-list``,
``cmd-describe`` and ``cmd-run``; their one definition is
:mod:`clanker.bridge.wire`, which this module checks each such request against
before structuring it (so the lean ``clanker cmd`` client and this parser agree).
A refusal of one of them may carry ``message``, one safe sentence.

``subscribe`` answers with lines ``{"v":1,"ok":true,"kind":K,"entry":E}``: first
``snapshot`` for every live terminal, then one ``synced`` (no entry), then one
``revision`` per published revision (tombstones included: their
``entry.revision.snapshot`` is ``null``) until either side closes; a
``subscribe`` with ``"notifications": true`` is also sent ``notification``
events (``{"kind":"notification","notification":N}``, from ``clanker_notify``)
as they happen. A subscriber
that falls behind gets ``{"v":1,"ok":false,"error":"overflow"}`` (when the line
can still be written) and is disconnected.
"""

from __future__ import annotations

import enum
import functools
import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar

import attrs
from attrs import field, frozen

from clanker import strictjson
from clanker.bridge import wire as bridge_wire
from clanker.converters import BoundaryError, make_boundary_converter, structure
from clanker.grid.errors import GridProtocolError, GridRequestError
from clanker.grid.socketpath import MAX_SOCKET_PATH, check_socket_path
from clanker.ids import is_harness_id

if TYPE_CHECKING:
    from cattrs.preconf.json import JsonConverter

__all__ = [
    "BRIDGE_OPS",
    "MAX_ENVELOPES",
    "MAX_LINE",
    "MAX_REPLY",
    "MAX_SOCKET_PATH",
    "PROTOCOL_VERSION",
    "SESSION_ROWS",
    "TERMINAL_PATTERN",
    "AwaitMoveRequest",
    "BridgeGrantReply",
    "BridgeGrantRequest",
    "BridgeRevokeRequest",
    "CmdDescribeReply",
    "CmdDescribeRequest",
    "CmdListReply",
    "CmdListRequest",
    "CmdRunReply",
    "CmdRunRequest",
    "DeliverReply",
    "DeliverRequest",
    "EmptyReply",
    "ErrorWord",
    "ExplainReply",
    "ExplainRequest",
    "HelloReply",
    "HelloRequest",
    "ListReply",
    "ListRequest",
    "MoveInstruction",
    "MoveOutcome",
    "Notification",
    "Op",
    "PendingMoveEntry",
    "ProtocolError",
    "RegisterRequest",
    "Registration",
    "Request",
    "RetireRequest",
    "ScanReport",
    "SessionsReply",
    "SessionsRequest",
    "ShutdownRequest",
    "StreamEvent",
    "StreamKind",
    "SubscribeRequest",
    "TerminalEntry",
    "check_socket_path",
    "decode_line",
    "encode_error",
    "encode_reply",
    "encode_request",
    "is_tmux_pane",
    "parse_reply",
    "parse_request",
]

PROTOCOL_VERSION: Final = 1
MAX_LINE: Final = 65_536
"""The most bytes of one request or stream line, not counting its ``\\n``."""
MAX_REPLY: Final = 8 * 1024 * 1024
"""The most bytes a client reads for one reply (a ``list`` of many terminals)."""
MAX_ENVELOPES: Final = 16
MAX_PATH_BYTES: Final = 1024
MAX_ID_LENGTH: Final = 256
MAX_TOKEN_LENGTH: Final = 128
TERMINAL_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

T = TypeVar("T")


class ErrorWord(enum.StrEnum):
    """Why a request was refused. Stable: clients and the hook bridge match on them."""

    BAD_REQUEST = "bad-request"  # malformed JSON, wrong shape, wrong types, bad values
    UNSUPPORTED_VERSION = "unsupported-version"  # "v" is a number other than 1
    UNKNOWN_OP = "unknown-op"
    TOO_LARGE = "too-large"  # a line over MAX_LINE bytes, or over MAX_ENVELOPES envelopes
    UNAUTHORIZED = "unauthorized"  # a wrong, revoked or foreign credential; a foreign launcher
    UNKNOWN_TERMINAL = "unknown-terminal"  # explain of a terminal that is not live
    LAUNCHER_GONE = "launcher-gone"  # register with a launcher pid that is not running
    CAPACITY = "capacity"  # too many live terminals, or connections (see grid.connections)
    OVERFLOW = "overflow"  # a subscriber fell behind and is disconnected
    SHUTTING_DOWN = "shutting-down"
    INTERNAL = "internal"  # a bug in the grid; the request changed nothing
    # The capability plane's (clanker.bridge.wire holds the same words):
    UNKNOWN_CAPABILITY = "unknown-capability"  # unknown, or not granted to this credential
    INVALID_ARGUMENTS = "invalid-arguments"  # the declaration refused the arguments
    RATE_LIMITED = "rate-limited"  # the capability's per-credential rate is spent
    TIMEOUT = "timeout"  # the capability ran past its declared time
    CAPABILITY_FAILED = "capability-failed"  # it refused or failed (a safe message says which)
    RESULT_TOO_LARGE = "result-too-large"  # its result was over 64 KiB (refused, not cut)


MAX_REASON: Final = 300
MAX_ACCOUNT: Final = 64
"""The longest reason a ``decline`` may give (one sentence for a person)."""


SESSION_ROWS: Final = 512
"""Rows per line of a ``sessions`` answer."""
MAX_SESSION_LIMIT: Final = 100_000
MAX_ENVIRON: Final = 512
"""The most variables a ``sessions`` request carries."""


class Op(enum.StrEnum):
    HELLO = "hello"
    REGISTER = "register"
    RETIRE = "retire"
    DECLINE = "decline"
    DELIVER = "deliver"
    LIST = "list"
    SUBSCRIBE = "subscribe"
    EXPLAIN = "explain"
    SHUTDOWN = "shutdown"
    BRIDGE_GRANT = "bridge-grant"
    BRIDGE_REVOKE = "bridge-revoke"
    CMD_LIST = "cmd-list"
    CMD_DESCRIBE = "cmd-describe"
    CMD_RUN = "cmd-run"
    AWAIT_MOVE = "await-move"
    SESSIONS = "sessions"


class StreamKind(enum.StrEnum):
    SNAPSHOT = "snapshot"  # hydration: the current revision of one live terminal
    SYNCED = "synced"  # every live terminal has been sent
    REVISION = "revision"  # a newly published revision (tombstones included)
    NOTIFICATION = "notification"  # a message for the person (subscribers that asked)


class ProtocolError(Exception):
    """A request was refused: ``word`` goes on the wire, ``reason`` (safe) to the log,
    and ``message`` (safe, for the capability plane's ops only) on the wire with the word."""

    def __init__(self, word: ErrorWord, reason: str, *, message: str | None = None) -> None:
        self.word = word
        self.reason = reason
        self.message = message
        super().__init__(f"{word}: {reason}")


# ------------------------------------------------------------------ validators


def _printable(name: str, *, absolute: bool = False) -> Callable[[Any, Any, Any], None]:
    def validate(_: Any, __: Any, value: str | None) -> None:
        if value is None:
            return
        if not value or not value.isprintable():
            raise ValueError(f"{name} must be non-empty printable text")
        if len(value.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
            raise ValueError(f"{name} must be at most {MAX_PATH_BYTES} bytes")
        if absolute and not value.startswith("/"):
            raise ValueError(f"{name} must be an absolute path")

    return validate


def _terminal(_: Any, __: Any, value: str) -> None:
    if TERMINAL_PATTERN.fullmatch(value) is None:
        raise ValueError("terminal must be 1-64 characters of letters, digits, '.', '_', '-'")


def _token(_: Any, __: Any, value: str) -> None:
    if len(value) > MAX_TOKEN_LENGTH:
        raise ValueError(f"token must be at most {MAX_TOKEN_LENGTH} characters")


def _harness(_: Any, __: Any, value: str) -> None:
    if not is_harness_id(value):
        raise ValueError("harness must be a harness id")


def _session(_: Any, __: Any, value: str | None) -> None:
    if value is not None and (
        not value or len(value) > MAX_ID_LENGTH or not value.isprintable()
    ):
        raise ValueError(
            f"trustedRootSessionId must be non-empty printable text of at most "
            f"{MAX_ID_LENGTH} characters"
        )


def _pid(_: Any, __: Any, value: int) -> None:
    if not 1 <= value <= 2**31 - 1:
        raise ValueError("launcherPid must be a positive process id")


def _failed_closed(_: Any, __: Any, value: int | None) -> None:
    if value is not None and not 0 <= value <= 2**31 - 1:
        raise ValueError("failedClosed must be a count")


# -------------------------------------------------------------------- requests


@frozen(kw_only=True)
class HelloRequest:
    op: ClassVar[Op] = Op.HELLO


def _account(_: object, __: object, value: str | None) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()
                              or len(value) > MAX_ACCOUNT or not value.isprintable()):
        raise ValueError(f"account: printable text of at most {MAX_ACCOUNT} characters")


_TMUX_PANE: Final = re.compile(r"%[0-9]{1,9}")


def is_tmux_pane(value: object) -> bool:
    """Whether ``value`` is a tmux pane id as ``$TMUX_PANE`` holds it (``%`` and digits)."""
    return isinstance(value, str) and _TMUX_PANE.fullmatch(value) is not None


def _tmux_pane(_: object, __: object, value: str | None) -> None:
    if value is not None and not is_tmux_pane(value):
        raise ValueError("tmuxPane: a tmux pane id (%N)")


def _optional_terminal(_: Any, attribute: Any, value: str | None) -> None:
    if value is not None:
        _terminal(_, attribute, value)


def _optional_token(_: Any, attribute: Any, value: str | None) -> None:
    if value is not None:
        _token(_, attribute, value)


@frozen(kw_only=True)
class RegisterRequest:
    op: ClassVar[Op] = Op.REGISTER
    harness: str = field(validator=_harness)
    cwd: str = field(validator=_printable("cwd", absolute=True))
    launcher_pid: int = field(validator=_pid)
    workspace: str | None = field(default=None, validator=_printable("workspace"))
    trusted_root_session_id: str | None = field(default=None, validator=_session)
    account: str | None = field(default=None, validator=_account)
    """The name of the managed account the launch runs under (``None``: the default)."""
    tmux_pane: str | None = field(default=None, validator=_tmux_pane)
    """The tmux pane the launcher runs in (``$TMUX_PANE``), or ``None`` outside tmux."""
    terminal: str | None = field(default=None, validator=_optional_terminal)
    """A terminal id to take up again (with ``token``, its credential): a launcher whose
    grid went away re-presents what its harness already holds (see the grid's
    ``register``); ``None``: the grid names a new terminal."""
    token: str | None = field(default=None, validator=_optional_token, repr=False)

    @token.validator
    def _check_pair(self, _: object, value: str | None) -> None:
        if (value is None) != (self.terminal is None):
            raise ValueError("terminal and token: both or neither")


@frozen(kw_only=True, repr=False)
class RetireRequest:
    op: ClassVar[Op] = Op.RETIRE
    terminal: str = field(validator=_terminal)
    token: str = field(validator=_token)


def _reason(_: object, __: object, value: str) -> None:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_REASON \
            or any(not c.isprintable() for c in value):
        raise ValueError(f"reason: one printable line of at most {MAX_REASON} characters")


@frozen(kw_only=True)
class DeclineRequest:
    """The launch runs without attention (the harness's own setup owns what it needs):
    the terminal stays listed, as ``unavailable``, with the launcher's one-line reason."""

    op: ClassVar[Op] = Op.DECLINE
    terminal: str = field(validator=_terminal)
    token: str = field(validator=_token)
    reason: str = field(validator=_reason)


@frozen(kw_only=True, repr=False)
class DeliverRequest:
    """Envelopes to apply in order, and the hook bridge's running count of this terminal's
    failed-closed transactions (``failedClosed``), which may come alone."""

    op: ClassVar[Op] = Op.DELIVER
    terminal: str = field(validator=_terminal)
    token: str = field(validator=_token)
    envelopes: list[Any]
    failed_closed: int | None = field(default=None, validator=_failed_closed)

    def __attrs_post_init__(self) -> None:
        if not self.envelopes and self.failed_closed is None:
            raise ValueError("envelopes must not be empty")


@frozen(kw_only=True)
class ListRequest:
    op: ClassVar[Op] = Op.LIST


@frozen(kw_only=True)
class SubscribeRequest:
    op: ClassVar[Op] = Op.SUBSCRIBE
    notifications: bool = False
    """Also stream ``notification`` events (``clanker watch --notify``)."""


@frozen(kw_only=True)
class ExplainRequest:
    op: ClassVar[Op] = Op.EXPLAIN
    terminal: str = field(validator=_terminal)


@frozen(kw_only=True)
class ShutdownRequest:
    op: ClassVar[Op] = Op.SHUTDOWN


def _wire(op: str, key: str) -> Callable[[Any, Any, Any], None]:
    """The capability plane's rule for ``op``'s ``key`` (:mod:`clanker.bridge.wire`)."""

    def validate(_: Any, __: Any, value: object) -> None:
        if value is None and not bridge_wire.FIELDS[op][key][1]:
            return
        problem = bridge_wire.field_problem(op, key, value)
        if problem is not None:
            raise ValueError(problem)

    return validate


@frozen(kw_only=True, repr=False)
class BridgeGrantRequest:
    """The launcher asks for its terminal's bridge credential, carrying ``capabilities``."""

    op: ClassVar[Op] = Op.BRIDGE_GRANT
    terminal: str = field(validator=_wire("bridge-grant", "terminal"))
    token: str = field(validator=_wire("bridge-grant", "token"))
    capabilities: list[str] = field(validator=_wire("bridge-grant", "capabilities"))
    bridge_token: str | None = field(default=None,
                                     validator=_wire("bridge-grant", "bridgeToken"))
    """The bridge credential a re-presented terminal's agent already holds, to be
    carried again (``None``: the grid mints a new one)."""
    mcp_port: int | None = field(default=None, validator=_wire("bridge-grant", "mcpPort"))
    """With ``bridge_token``: the port of the MCP endpoint URL that agent holds, which
    a grid starting its endpoint for this request binds again if it can."""


@frozen(kw_only=True, repr=False)
class BridgeRevokeRequest:
    """The launcher revokes its terminal's bridge credential (first, when the launch ends)."""

    op: ClassVar[Op] = Op.BRIDGE_REVOKE
    terminal: str = field(validator=_wire("bridge-revoke", "terminal"))
    token: str = field(validator=_wire("bridge-revoke", "token"))


@frozen(kw_only=True, repr=False)
class CmdListRequest:
    """What a bridge credential may run; or, with ``all`` and no token, everything
    (for a person), marked non-invokable."""

    op: ClassVar[Op] = Op.CMD_LIST
    token: str | None = field(default=None, validator=_wire("cmd-list", "token"))
    all_: bool | None = field(default=None, validator=_wire("cmd-list", "all"))


@frozen(kw_only=True, repr=False)
class CmdDescribeRequest:
    op: ClassVar[Op] = Op.CMD_DESCRIBE
    token: str = field(validator=_wire("cmd-describe", "token"))
    name: str = field(validator=_wire("cmd-describe", "name"))


@frozen(kw_only=True, repr=False)
class CmdRunRequest:
    """Run one granted capability: JSON ``arguments`` (never coerced), or command-line
    ``textArguments`` the declaration types."""

    op: ClassVar[Op] = Op.CMD_RUN
    token: str = field(validator=_wire("cmd-run", "token"))
    name: str = field(validator=_wire("cmd-run", "name"))
    arguments: dict[str, Any] | None = field(default=None, validator=_wire("cmd-run",
                                                                          "arguments"))
    text_arguments: dict[str, str] | None = field(
        default=None, validator=_wire("cmd-run", "textArguments"))


@frozen(kw_only=True, repr=False)
class AwaitMoveRequest:
    op: ClassVar[Op] = Op.AWAIT_MOVE
    terminal: str = field(validator=_terminal)
    token: str = field(validator=_token)


def _environ(_: Any, __: Any, value: dict[str, str]) -> None:
    if len(value) > MAX_ENVIRON:
        raise ValueError(f"environ must have at most {MAX_ENVIRON} variables")
    if any(not name or "=" in name or "\0" in name or "\0" in text
           for name, text in value.items()):
        raise ValueError("environ must hold variable names and values")


def _harnesses(_: Any, __: Any, value: list[str] | None) -> None:
    if value is not None and (len(value) > 64 or not all(map(is_harness_id, value))):
        raise ValueError("harnesses must be at most 64 harness ids")


def _limit(_: Any, __: Any, value: int) -> None:
    if not 1 <= value <= MAX_SESSION_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_SESSION_LIMIT}")


@frozen(kw_only=True, repr=False)
class SessionsRequest:
    """A session listing, as ``Clanker.sessions`` asks it, for a process whose
    environment is ``environ``."""

    op: ClassVar[Op] = Op.SESSIONS
    environ: dict[str, str] = field(validator=_environ)
    workspace: str | None = field(default=None, validator=_printable("workspace",
                                                                     absolute=True))
    harnesses: list[str] | None = field(default=None, validator=_harnesses)
    limit: int = field(validator=_limit)


@frozen(kw_only=True)
class ScanReport:
    """One store's part of a ``sessions`` answer (its sessions come as rows)."""

    harness: str = field(validator=_harness)
    account: str | None = None
    skipped: int = 0
    truncated: bool = False
    partial: str | None = None
    error_kind: str | None = None
    error_detail: str | None = None


@frozen(kw_only=True)
class SessionsReply:
    scans: list[ScanReport]
    count: int


Request = (
    HelloRequest | RegisterRequest | RetireRequest | DeclineRequest | DeliverRequest
    | ListRequest | SubscribeRequest | ExplainRequest | ShutdownRequest | BridgeGrantRequest
    | BridgeRevokeRequest | CmdListRequest | CmdDescribeRequest | CmdRunRequest
    | AwaitMoveRequest | SessionsRequest
)

_REQUESTS: Final[dict[Op, type[Any]]] = {
    cls.op: cls
    for cls in (
        HelloRequest, RegisterRequest, RetireRequest, DeclineRequest, DeliverRequest, ListRequest,
        SubscribeRequest, ExplainRequest, ShutdownRequest, BridgeGrantRequest,
        BridgeRevokeRequest, CmdListRequest, CmdDescribeRequest, CmdRunRequest,
        AwaitMoveRequest, SessionsRequest,
    )
}

BRIDGE_OPS: Final = frozenset(Op(op) for op in bridge_wire.OPS)
"""The ops whose fields :mod:`clanker.bridge.wire` defines."""


# --------------------------------------------------------------------- replies


@frozen(kw_only=True)
class PendingMoveEntry:
    """A move of a terminal's conversation into an isolated checkout, asked for and not
    yet settled: ``scheduled`` until its root turn ends, ``moving`` while the launcher
    retires the agent and resumes it there."""

    state: str = field(validator=attrs.validators.in_(("scheduled", "moving")))
    kind: str = field(validator=attrs.validators.in_(("create", "complete")))
    """``create``: into the worktree; ``complete``: back to the main checkout, then the
    worktree is completed."""
    branch: str
    path: str
    """The worktree's root."""
    target: str
    """Where the conversation continues (the worktree, or the same directory inside it)."""
    requested_at: datetime


@frozen(kw_only=True)
class TerminalEntry:
    """One terminal as the grid reports it: who launched it, where, and its latest revision.

    ``revision`` is the broker's ``Revision.to_json()`` (``snapshot`` is ``null``
    for a tombstone). ``attention`` is the derived state with nothing marked
    seen (``unknown`` for a tombstone), ``since`` when it last changed, and
    ``location`` the agent's reported working directory or else the launch cwd.
    ``failed_closed`` is how many of its hook transactions failed closed.
    ``unavailable`` is, for a launch that runs without attention (``attention``
    is then ``unavailable``), the launcher's one-line reason. ``bridge`` is the
    capability names its bridge credential carries (empty: it has none; the key
    is then left out).
    """

    terminal: str
    harness: str
    workspace: str | None
    cwd: str
    launcher_pid: int
    registered_at: datetime
    location: str
    attention: str
    since: datetime
    revision: dict[str, Any]
    failed_closed: int = 0
    unavailable: str | None = None
    bridge: tuple[str, ...] = ()
    account: str | None = None
    """The managed account it runs under (its name), or ``None`` for the default one."""
    tmux_pane: str | None = None
    """The tmux pane its launcher runs in (``%N``), or ``None`` outside tmux."""
    pending_move: PendingMoveEntry | None = None
    """Its move into an isolated checkout, scheduled for the end of its turn or under
    way (``None``: none; the key is then left out)."""


@frozen(kw_only=True)
class Notification:
    """A message an agent sent the person (``clanker_notify``), as watchers see it."""

    terminal: str
    harness: str
    location: str
    message: str
    at: datetime


@frozen(kw_only=True)
class HelloReply:
    server: str
    version: str
    pid: int
    started_at: datetime
    terminals: int


@frozen(kw_only=True)
class Registration:
    """The ``register`` reply: the new terminal id and its raw credential (never shown)."""

    terminal: str
    token: str = field(repr=False)


@frozen(kw_only=True)
class EmptyReply:
    """The reply of ``retire`` and ``shutdown``: nothing but ``v`` and ``ok``."""


@frozen(kw_only=True)
class DeliverReply:
    decisions: list[str]


@frozen(kw_only=True)
class ListReply:
    terminals: list[TerminalEntry]


@frozen(kw_only=True)
class ExplainReply:
    entry: TerminalEntry
    explanation: dict[str, Any]


@frozen(kw_only=True)
class StreamEvent:
    kind: StreamKind
    entry: TerminalEntry | None = None
    notification: Notification | None = None


@frozen(kw_only=True)
class BridgeGrantReply:
    """The ``bridge-grant`` reply: the only copy of the raw bridge credential, and the
    grid's MCP endpoint (absent when it could not start)."""

    bridge_token: str = field(repr=False)
    mcp_url: str | None = None


@frozen(kw_only=True)
class MoveInstruction:
    """What the grid sends down an ``await-move`` connection: continue ``session`` in
    ``target`` (a checkout the grid created)."""

    target: str = field(validator=_printable("target", absolute=True))
    session: str = field(validator=_printable("session"))


@frozen(kw_only=True)
class MoveOutcome:
    """The launcher's answer to one :class:`MoveInstruction`."""

    moved: bool
    why: str | None = field(default=None, validator=_printable("why"))


@frozen(kw_only=True)
class CmdListReply:
    capabilities: list[dict[str, Any]]


@frozen(kw_only=True)
class CmdDescribeReply:
    capability: dict[str, Any]


@frozen(kw_only=True, repr=False)
class CmdRunReply:
    result: dict[str, Any]


# ------------------------------------------------------------------- converter


_OMITTED: Final[dict[type[Any], frozenset[str]]] = {
    # Left out at their default, so what older peers never sent or read stays absent.
    TerminalEntry: frozenset({"bridge", "account", "tmux_pane", "pending_move"}),
    RegisterRequest: frozenset({"account", "tmux_pane", "terminal", "token"}),
    BridgeGrantRequest: frozenset({"bridge_token", "mcp_port"}),
    StreamEvent: frozenset({"notification"}),
    SubscribeRequest: frozenset({"notifications"}),
    SessionsRequest: frozenset({"workspace", "harnesses"}),
    CmdListRequest: frozenset({"token", "all_"}),
    CmdRunRequest: frozenset({"arguments", "text_arguments"}),
    BridgeGrantReply: frozenset({"mcp_url"}),
}


def _camel(name: str) -> str:
    head, *rest = name.rstrip("_").split("_")
    return head + "".join(part.capitalize() for part in rest)


def _register(converter: JsonConverter, cls: type[Any]) -> None:
    from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

    renames: dict[str, Any] = {
        a.name: override(rename=_camel(a.name)) for a in attrs.fields(cls)
    }
    converter.register_structure_hook(
        cls, make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True, **renames)
    )
    omitted = _OMITTED.get(cls, frozenset())
    # None: the class's own rule (a deliver omits what is at its default).
    unstructure: dict[str, Any] = {
        a.name: override(rename=_camel(a.name), omit_if_default=True if a.name in omitted
                         else None)
        for a in attrs.fields(cls)}
    # A deliver without a failed-closed count leaves the key out, as sources write it.
    converter.register_unstructure_hook(cls, make_dict_unstructure_fn(
        cls, converter, _cattrs_omit_if_default=cls is DeliverRequest, **unstructure))


@functools.cache
def _converter() -> JsonConverter:
    """The protocol's converter, built on first use: ``clanker status`` with no grid
    running never needs it, and building it costs more than the rest of that command."""
    converter = make_boundary_converter()

    def stream_kind(value: object, _: type[Any]) -> StreamKind:
        if type(value) is not str:
            raise TypeError(f"expected a string, got {type(value).__name__}")
        return StreamKind(value)

    converter.register_structure_hook(StreamKind, stream_kind)
    # A nested record before the one holding it: its hooks are looked up when the
    # holder's are generated.
    for cls in (*_REQUESTS.values(), PendingMoveEntry, TerminalEntry, HelloReply,
                Registration, EmptyReply, DeliverReply, ListReply, ExplainReply,
                Notification, StreamEvent,
                BridgeGrantReply, CmdListReply, CmdDescribeReply, CmdRunReply,
                MoveInstruction, MoveOutcome, ScanReport, SessionsReply):
        _register(converter, cls)
    return converter


_KEY_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")


def _wire_keys(cls: type[Any]) -> frozenset[str]:
    return frozenset(_camel(a.name) for a in attrs.fields(cls))


def _load_object(line: bytes | str) -> dict[str, Any]:
    """Decode one JSON object strictly, or raise ``ValueError`` with a safe reason."""
    try:
        text = line.decode("utf-8") if isinstance(line, bytes) else line
        data = strictjson.loads(text)
    except UnicodeDecodeError:
        raise ValueError("the line is not UTF-8") from None
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None
    except ValueError:
        raise ValueError("the line is not one JSON value") from None
    if not isinstance(data, dict):
        raise ValueError("the line is not a JSON object")
    return data


def decode_line(line: bytes) -> dict[str, Any]:
    """One line as a JSON object, decoded strictly; ``ValueError`` otherwise."""
    return _load_object(line)


def _shown(keys: list[str]) -> str:
    names = sorted(k if _KEY_NAME.fullmatch(k) else "?" for k in keys)
    return ", ".join(names[:4])


def parse_request(line: bytes) -> Request:
    """Parse one request line (without its ``\\n``) or raise :class:`ProtocolError`."""
    if len(line) > MAX_LINE:
        raise ProtocolError(ErrorWord.TOO_LARGE, f"a line over {MAX_LINE} bytes")
    try:
        data = _load_object(line)
    except ValueError as exc:
        raise ProtocolError(ErrorWord.BAD_REQUEST, str(exc)) from None
    version = data.pop("v", None)
    if type(version) is not int:
        raise ProtocolError(ErrorWord.BAD_REQUEST, "v must be the number 1")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(ErrorWord.UNSUPPORTED_VERSION, "an unsupported protocol version")
    op = data.pop("op", None)
    if type(op) is not str:
        raise ProtocolError(ErrorWord.BAD_REQUEST, "op must be a string")
    if op not in _REQUESTS:
        raise ProtocolError(ErrorWord.UNKNOWN_OP, "an unknown op")
    cls = _REQUESTS[Op(op)]
    if cls.op in BRIDGE_OPS:
        problem = bridge_wire.request_problem(op, data)
        if problem is not None:
            raise ProtocolError(ErrorWord.BAD_REQUEST, problem)
    extra = [key for key in data if key not in _wire_keys(cls)]
    if extra:
        raise ProtocolError(ErrorWord.BAD_REQUEST, f"{op}: unexpected keys: {_shown(extra)}")
    envelopes = data.get("envelopes")
    if isinstance(envelopes, list) and len(envelopes) > MAX_ENVELOPES:
        raise ProtocolError(ErrorWord.TOO_LARGE, f"more than {MAX_ENVELOPES} envelopes")
    try:
        request: Request = structure(_converter(), data, cls)
    except BoundaryError as exc:
        cause = exc.__cause__
        detail = str(exc)
        if isinstance(cause, ValueError) and not isinstance(cause, BoundaryError):
            detail = str(cause)
        raise ProtocolError(ErrorWord.BAD_REQUEST, f"{op}: {detail}") from None
    return request


def encode_request(request: Request) -> bytes:
    """Return ``request`` as one wire line, ``\\n`` included."""
    body = _converter().unstructure(request)
    return _line({"v": PROTOCOL_VERSION, "op": request.op.value, **body})


def encode_reply(reply: object) -> bytes:
    """Return a successful reply (an attrs reply class, or a stream event) as one line."""
    body = _converter().unstructure(reply)
    return _line({"v": PROTOCOL_VERSION, "ok": True, **body})


def encode_error(word: ErrorWord, message: str | None = None) -> bytes:
    """A refusal line; ``message`` (one safe sentence) only for the capability plane's ops."""
    data: dict[str, Any] = {"v": PROTOCOL_VERSION, "ok": False, "error": word.value}
    if message is not None:
        data["message"] = message
    return _line(data)


def _line(data: dict[str, Any]) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode(
        "utf-8", "surrogatepass"
    ) + b"\n"


def parse_reply(line: bytes, cls: type[T], *, op: str | None = None) -> T:
    """Parse one reply line as ``cls``.

    Raises :class:`~clanker.grid.errors.GridRequestError` for a refusal (its
    ``word`` is the error word) and :class:`~clanker.grid.errors.GridProtocolError`
    for anything that is not a valid version-1 reply.
    """
    try:
        data = _load_object(line)
    except ValueError as exc:
        raise GridProtocolError(f"the grid sent a malformed reply ({exc})") from None
    if data.pop("v", None) != PROTOCOL_VERSION:
        raise GridProtocolError("the grid speaks another protocol version")
    ok = data.pop("ok", None)
    if ok is False:
        word = data.get("error")
        message = data.get("message")
        if type(word) is not str or not set(data) <= {"error", "message"} or (
                "message" in data and type(message) is not str):
            raise GridProtocolError("the grid sent a malformed refusal")
        raise GridRequestError(word, op, message=message if isinstance(message, str) else None)
    if ok is not True:
        raise GridProtocolError("the grid sent a reply without ok")
    try:
        return structure(_converter(), data, cls)
    except BoundaryError as exc:
        raise GridProtocolError(f"the grid sent an unexpected reply ({exc})") from None
