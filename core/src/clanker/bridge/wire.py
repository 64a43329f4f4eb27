"""The capability plane's wire schema: its one definition.

Three grid ops carry an agent's requests (``cmd-list``, ``cmd-describe``,
``cmd-run``) and two carry the launcher's (``bridge-grant``,
``bridge-revoke``). Two programs read this table: the grid's strict parser
(:mod:`clanker.grid.protocol` builds its request classes' rules from it) and
``clanker cmd`` (:mod:`clanker.bridge.cmd`), the lean client an agent runs in
a loop. So the client never sends what the grid refuses, and a test holds the
two to accepting exactly the same requests.

This module imports nothing at all (``clanker cmd`` must start in a few
multiples of a bare interpreter), and neither may anything it is built into
on that path.

Requests (every one also carries ``"v": 1`` and its ``"op"``):

============== ====================================================== ==========================
op             fields                                                 reply fields
============== ====================================================== ==========================
bridge-grant   terminal, token (the terminal's credential),           bridgeToken, mcpUrl?
               capabilities (1..32 distinct names), bridgeToken?      (the MCP endpoint)
               (the credential a re-presented terminal's agent holds),
               mcpPort? (with bridgeToken: the port of the MCP
               URL that agent holds)
bridge-revoke  terminal, token                                        (none)
cmd-list       token (a bridge credential) | all (true, no token)     capabilities: [entry]
cmd-describe   token, name                                            capability: entry
cmd-run        token, name, arguments? (object) | textArguments?      result (an object)
               (object of strings, typed by the declaration)
============== ====================================================== ==========================

An *entry* is ``name``, ``description``, ``inputSchema`` (a JSON Schema),
``annotations`` (MCP's ``readOnlyHint``, ``destructiveHint``,
``idempotentHint``, ``openWorldHint``), ``timeout`` (seconds) and
``invokable`` (``false`` only in an ``all`` listing).

A refusal of one of these ops may carry ``message``, one safe sentence (which
field broke which rule, when to try again), never a value the caller sent.
"""

# -- the child environment --------------------------------------------------------

TOKEN_VARIABLE = "CLANKER_BRIDGE_TOKEN"  # noqa: S105 - a variable's name
"""The launch's bridge credential (only in the agent's environment)."""
SOCKET_VARIABLE = "CLANKER_BRIDGE_SOCKET"
"""The grid's socket, where ``clanker cmd`` sends its one request."""
URL_VARIABLE = "CLANKER_BRIDGE_URL"
"""The grid's loopback MCP endpoint (``http://127.0.0.1:<port>/mcp``), where a harness's
MCP client sends the credential as a bearer token."""
MCP_SERVER_NAME = "clanker"
"""The name a harness registers the MCP endpoint under."""

# -- values -----------------------------------------------------------------------

PROTOCOL_VERSION = 1
MAX_LINE = 65_536
"""The most bytes of one request line (the grid's own bound)."""
MAX_RESULT = 65_536
"""The most bytes of a capability's result, encoded as compact JSON: refused, never cut."""
MAX_REPLY = MAX_RESULT + 4096
"""The most bytes a client reads for one reply line."""

TOKEN_PREFIX = "ckb_"  # noqa: S105 - the prefix every credential shows
TOKEN_HEX = 64
"""A bridge credential is ``ckb_`` and 64 lowercase hex digits: 256 random bits."""
MAX_TOKEN_CHARS = 128
"""What the parser takes as a ``token`` at all (a longer one is malformed, not wrong)."""

MAX_NAME_CHARS = 64
MAX_GRANTS = 32
MAX_TERMINAL_CHARS = 64

OPS = ("bridge-grant", "bridge-revoke", "cmd-list", "cmd-describe", "cmd-run")

CREDENTIAL = "credential"
BRIDGE_CREDENTIAL = "bridge-credential"
TERMINAL = "terminal"
NAME = "name"
NAMES = "names"
FLAG = "flag"
OBJECT = "object"
TEXT_OBJECT = "text-object"
PORT = "port"

FIELDS: dict[str, dict[str, tuple[str, bool]]] = {
    # op:            {wire key:      (kind,          required)}
    "bridge-grant":  {"terminal":     (TERMINAL,      True),
                      "token":        (CREDENTIAL,    True),
                      "capabilities": (NAMES,         True),
                      "bridgeToken":  (BRIDGE_CREDENTIAL, False),
                      "mcpPort":      (PORT,          False)},
    "bridge-revoke": {"terminal":     (TERMINAL,      True),
                      "token":        (CREDENTIAL,    True)},
    "cmd-list":      {"token":        (BRIDGE_CREDENTIAL, False),
                      "all":          (FLAG,          False)},
    "cmd-describe":  {"token":        (BRIDGE_CREDENTIAL, True),
                      "name":         (NAME,          True)},
    "cmd-run":       {"token":        (BRIDGE_CREDENTIAL, True),
                      "name":         (NAME,          True),
                      "arguments":    (OBJECT,        False),
                      "textArguments": (TEXT_OBJECT,  False)},
}  # fmt: skip
"""Every op's wire keys: their kind and whether they are required."""

REPLIES: dict[str, tuple[str, type]] = {
    "bridge-grant": ("bridgeToken", str),
    "bridge-revoke": ("", type(None)),
    "cmd-list": ("capabilities", list),
    "cmd-describe": ("capability", dict),
    "cmd-run": ("result", dict),
}
"""Each op's one reply key and its JSON type (``bridge-revoke`` replies with nothing)."""

# -- refusals ---------------------------------------------------------------------

BAD_REQUEST = "bad-request"
TOO_LARGE = "too-large"
UNAUTHORIZED = "unauthorized"
UNKNOWN_CAPABILITY = "unknown-capability"
INVALID_ARGUMENTS = "invalid-arguments"
RATE_LIMITED = "rate-limited"
TIMEOUT = "timeout"
CAPABILITY_FAILED = "capability-failed"
RESULT_TOO_LARGE = "result-too-large"
CAPACITY = "capacity"
SHUTTING_DOWN = "shutting-down"
INTERNAL = "internal"
UNKNOWN_OP = "unknown-op"
UNSUPPORTED_VERSION = "unsupported-version"

WORDS = (UNKNOWN_CAPABILITY, INVALID_ARGUMENTS, RATE_LIMITED, TIMEOUT, CAPABILITY_FAILED,
         RESULT_TOO_LARGE)
"""The error words the capability plane adds to the grid's."""

MAX_MESSAGE_CHARS = 600

# -- ``clanker cmd`` exit codes (docs/exit-codes.md) ---------------------------------

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2  # bad options, malformed --json, arguments the declaration refuses
EXIT_TIMEOUT = 8  # the capability did not finish within its declared time
EXIT_GRID_UNAVAILABLE = 18  # no grid answers on the socket
EXIT_NO_AUTHORITY = 19  # no bridge credential, or one the grid does not accept
EXIT_UNKNOWN_CAPABILITY = 20  # no such capability, or not granted to this credential
EXIT_CAPABILITY_FAILED = 21  # the capability refused or failed (or its result was too large)
EXIT_BUSY = 22  # rate-limited, or too many requests at once: try again later

EXIT_FOR_WORD = {
    BAD_REQUEST: EXIT_USAGE,
    TOO_LARGE: EXIT_USAGE,
    INVALID_ARGUMENTS: EXIT_USAGE,
    UNAUTHORIZED: EXIT_NO_AUTHORITY,
    UNKNOWN_CAPABILITY: EXIT_UNKNOWN_CAPABILITY,
    TIMEOUT: EXIT_TIMEOUT,
    CAPABILITY_FAILED: EXIT_CAPABILITY_FAILED,
    RESULT_TOO_LARGE: EXIT_CAPABILITY_FAILED,
    RATE_LIMITED: EXIT_BUSY,
    CAPACITY: EXIT_BUSY,
    SHUTTING_DOWN: EXIT_GRID_UNAVAILABLE,
    UNKNOWN_OP: EXIT_GRID_UNAVAILABLE,
    UNSUPPORTED_VERSION: EXIT_GRID_UNAVAILABLE,
    INTERNAL: EXIT_INTERNAL,
}
"""How ``clanker cmd`` exits for each refusal."""

SENTENCES = {
    BAD_REQUEST: "the grid refused the request as malformed",
    TOO_LARGE: "the request is larger than the grid accepts (64 KiB)",
    INVALID_ARGUMENTS: "the arguments do not fit the capability",
    UNAUTHORIZED: "the grid does not accept this process's bridge credential "
                  "(the launch has ended, or it was not started with `clanker launch --bridge`)",
    UNKNOWN_CAPABILITY: "no such capability is available to this agent (see `clanker cmd list`)",
    TIMEOUT: "the capability did not finish in time",
    CAPABILITY_FAILED: "the capability failed",
    RESULT_TOO_LARGE: "the capability's result was larger than allowed (64 KiB)",
    RATE_LIMITED: "too many calls of this capability; try again later",
    CAPACITY: "the grid is busy; try again later",
    SHUTTING_DOWN: "the grid is stopping",
    UNKNOWN_OP: "the running grid does not know the capability plane (restart it: "
                "`clanker grid stop`, then launch again)",
    UNSUPPORTED_VERSION: "the running grid speaks another protocol version",
    INTERNAL: "the grid failed internally; nothing was changed",
}
"""The fixed sentence ``clanker cmd`` prints for each refusal (then the grid's message)."""

# -- the rules --------------------------------------------------------------------

_HEX = frozenset("0123456789abcdef")
_NAME_HEAD = frozenset("abcdefghijklmnopqrstuvwxyz")
_NAME_TAIL = _NAME_HEAD | frozenset("0123456789_")
_TERMINAL_HEAD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_TERMINAL_TAIL = _TERMINAL_HEAD | frozenset("._-")


def is_bridge_token(value: object) -> bool:
    """Say whether ``value`` has the shape of a bridge credential (``ckb_`` + 64 hex)."""
    return (
        type(value) is str
        and len(value) == len(TOKEN_PREFIX) + TOKEN_HEX
        and value.startswith(TOKEN_PREFIX)
        and all(c in _HEX for c in value[len(TOKEN_PREFIX):])
    )


def is_name(value: object) -> bool:
    """Say whether ``value`` can be a capability name: ``[a-z][a-z0-9_]{0,63}``."""
    return (
        type(value) is str
        and 0 < len(value) <= MAX_NAME_CHARS
        and value[0] in _NAME_HEAD
        and all(c in _NAME_TAIL for c in value)
    )


def _terminal(key: str, value: object) -> str | None:
    if (type(value) is str and 0 < len(value) <= MAX_TERMINAL_CHARS
            and value[0] in _TERMINAL_HEAD and all(c in _TERMINAL_TAIL for c in value)):
        return None
    return f"{key} must be a terminal id"


def _token(key: str, value: object) -> str | None:
    if type(value) is not str:
        return f"{key} must be a string"
    return None if len(value) <= MAX_TOKEN_CHARS else (
        f"{key} must be at most {MAX_TOKEN_CHARS} characters")


def _name(key: str, value: object) -> str | None:
    return None if is_name(value) else f"{key} must be a capability name"


def _names(key: str, value: object) -> str | None:
    if type(value) is not list or not 0 < len(value) <= MAX_GRANTS:
        return f"{key} must be a list of 1 to {MAX_GRANTS} capability names"
    if not all(is_name(v) for v in value) or len(set(value)) != len(value):
        return f"{key} must hold distinct capability names"
    return None


def _flag(key: str, value: object) -> str | None:
    return None if type(value) is bool else f"{key} must be true or false"


def _object(key: str, value: object) -> str | None:
    return None if type(value) is dict else f"{key} must be an object"


def _text_object(key: str, value: object) -> str | None:
    if type(value) is not dict or not all(type(v) is str for v in value.values()):
        return f"{key} must be an object of strings"
    return None


def _port(key: str, value: object) -> str | None:
    return None if type(value) is int and 0 < value < 65_536 else (
        f"{key} must be a TCP port (1 to 65535)")


_CHECKS = {TERMINAL: _terminal, CREDENTIAL: _token, BRIDGE_CREDENTIAL: _token, NAME: _name,
           NAMES: _names, FLAG: _flag, OBJECT: _object, TEXT_OBJECT: _text_object,
           PORT: _port}


def field_problem(op: str, key: str, value: object) -> str | None:
    """Why ``value`` cannot be ``op``'s field ``key``, or ``None`` (``null`` never can)."""
    kind = FIELDS[op][key][0]
    return _CHECKS[kind](key, value)


def shape_problem(op: str, data: dict[str, object]) -> str | None:
    """Why the fields of ``op`` in ``data`` (``v`` and ``op`` removed) do not belong
    together, or ``None``: what holds across fields, after each field on its own."""
    if op == "cmd-list":
        listing_all = data.get("all") is True
        if listing_all and "token" in data:
            return "cmd-list: all takes no token"
        if not listing_all and "token" not in data:
            return "cmd-list: a token is required"
    if op == "cmd-run" and "arguments" in data and "textArguments" in data:
        return "cmd-run: arguments and textArguments cannot be combined"
    return None


def request_problem(op: str, data: dict[str, object]) -> str | None:
    """Why ``data`` (the request without ``v`` and ``op``) is not a valid ``op``, or ``None``.

    Messages name fields, never values.
    """
    fields = FIELDS[op]
    for key in data:
        if key not in fields:
            return f"{op}: unexpected keys"
    for key, (_, required) in fields.items():
        if key not in data:
            if required:
                return f"{op}: {key} is required"
            continue
        problem = field_problem(op, key, data[key])
        if problem is not None:
            return f"{op}: {problem}"
    return shape_problem(op, data)


def request(op: str, **fields: object) -> dict[str, object]:
    """A request object (``v`` and ``op`` first); raises ``ValueError`` if the grid would
    refuse it. Fields whose value is ``None`` are left out."""
    data = {key: value for key, value in fields.items() if value is not None}
    problem = request_problem(op, data)
    if problem is not None:
        raise ValueError(problem)
    return {"v": PROTOCOL_VERSION, "op": op, **data}
