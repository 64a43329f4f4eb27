"""The lifecycle envelope's wire schema: its one definition.

An envelope is one JSON object whose keys are :data:`FIELDS`. Two programs
read this table and nothing else: the hook bridge
(:mod:`~clanker.attention.hook`), which sanitizes what an interpreter returns
before sending it, and :mod:`~clanker.attention.envelope`, the grid's strict
parser. So the bridge never sends what the grid refuses, and a test holds
them to accepting exactly the same envelopes.

This module imports nothing at all: the bridge runs as ``python -I -S`` and
loads this file by path, next to the one interpreter it is told to use.

The rules, field by field (:func:`problem` says why a value breaks one):

- ``event`` is one of :data:`EVENTS`; a source (a provider's interpreter,
  plugin or extension) may report only :data:`SOURCE_EVENTS`, because
  ``agent_exited`` is clanker's launcher's alone.
- ``scope`` is ``"root"`` or ``"child"`` when present (absent: unknown subject).
- ``sessionId``, ``turnId``, ``inputId`` and ``continuesSessionId`` are
  non-empty printable text of at most :data:`MAX_ID_CHARS` characters, and
  ``continuesSessionId`` appears only on ``session_continued``.
- ``cwd`` is a printable absolute path of at most :data:`MAX_CWD_BYTES` UTF-8
  bytes, and ``nativeEvent`` (diagnostic only) non-empty printable text of at
  most :data:`MAX_NATIVE_EVENT_CHARS` characters. These two are *droppable*:
  a sender leaves a bad one out and still sends the event (a location is
  presentation only), while the grid refuses an envelope that carries one.
- ``null`` is the same as absent; only ``event`` and ``sessionId`` are required.

Whether an event carries what it needs to be *applied* (a ``turnId`` on a turn
event, a ``cwd`` on ``location_changed``) is the broker's decision, not the
wire's. Messages name fields, never values.
"""

SOURCE = "source"
LAUNCHER = "launcher"

EVENTS = {
    "session_started": SOURCE,  # identity only: binds an unbound registration
    "turn_started": SOURCE,
    "turn_completed": SOURCE,
    "turn_interrupted": SOURCE,
    "turn_failed": SOURCE,
    "input_requested": SOURCE,
    "input_resolved": SOURCE,
    "session_continued": SOURCE,  # sessionId = the new root, continuesSessionId = the old
    "session_ended": SOURCE,  # an in-process boundary: the registration stays
    "location_changed": SOURCE,  # sessionId + cwd, no turn
    "agent_exited": LAUNCHER,  # the harness process itself exited
}
"""Every lifecycle event on the wire, and who may report it."""

SOURCE_EVENTS = frozenset(event for event, who in EVENTS.items() if who == SOURCE)
"""What a provider's source (an interpreter, plugin or extension) may report."""

BOUNDARIES = frozenset({
    "turn_started", "turn_completed", "turn_interrupted", "turn_failed", "session_ended",
})
"""Turn boundaries: only one of these, delivered by a healthy transaction, ends poisoning."""

SCOPES = ("root", "child")

MAX_ID_CHARS = 256
MAX_CWD_BYTES = 1024
MAX_NATIVE_EVENT_CHARS = 64
MAX_ENVELOPES = 16
"""The most envelopes one ``deliver`` request carries."""

# -- the tty observer transport ---------------------------------------------------------
# On an SSH host the hook cannot reach this machine's grid socket, so it writes its
# ``deliver`` request to its controlling terminal as one OSC frame, which the local
# launcher (it owns the PTY the host's terminal stream arrives on) takes out of the
# stream before anything reaches the person's terminal. A frame is
# ``ESC ] 7717 ; clanker-attention ; <base64 of the request's JSON> BEL``: base64 holds
# no control byte, so nothing in it can end the frame or reach the terminal early.

FRAME_START = "\x1b]7717;clanker-attention;"
"""What opens a frame (an OSC sequence with a number no terminal assigns a meaning)."""
FRAME_END = "\x07"
"""What closes one (BEL; ``ESC \\``, the other OSC terminator, is accepted too)."""
MAX_FRAME_BYTES = 32_768
"""The most bytes one frame holds, start and end included; a longer one is dropped."""

ID = "id"
PATH = "path"
LABEL = "label"

FIELDS: dict[str, tuple[str, bool, frozenset[str] | None, bool]] = {
    # wire key:           (kind,    required, only on these events,               droppable)
    "event":              ("event", True,     None,                               False),
    "scope":              ("scope", False,    None,                               False),
    "sessionId":          (ID,      True,     None,                               False),
    "turnId":             (ID,      False,    None,                               False),
    "inputId":            (ID,      False,    None,                               False),
    "continuesSessionId": (ID,      False,    frozenset({"session_continued"}),   False),
    "cwd":                (PATH,    False,    None,                               True),
    "nativeEvent":        (LABEL,   False,    None,                               True),
}  # fmt: skip
"""Every wire key, in the order senders write them."""

KEYS = tuple(FIELDS)
REQUIRED = frozenset(key for key, (_, required, _, _) in FIELDS.items() if required)
DROPPABLE = frozenset(key for key, (_, _, _, droppable) in FIELDS.items() if droppable)


def _event(key: str, value: str) -> str | None:
    return None if value in EVENTS else "event must be a lifecycle event"


def _scope(key: str, value: str) -> str | None:
    return None if value in SCOPES else "scope must be root or child"


def _text(key: str, value: str, limit: int) -> str | None:
    if 0 < len(value) <= limit and value.isprintable():
        return None
    return f"{key} must be non-empty printable text of at most {limit} characters"


def identifier_problem(key: str, value: str) -> str | None:
    """Why ``value`` cannot be an identifier named ``key`` (any id, not only a wire key)."""
    return _text(key, value, MAX_ID_CHARS)


def _label(key: str, value: str) -> str | None:
    return _text(key, value, MAX_NATIVE_EVENT_CHARS)


def _path(key: str, value: str) -> str | None:
    if not value.startswith("/"):
        return f"{key} must be an absolute path"
    # surrogatepass: a lone surrogate is not printable, so it is refused above all the same.
    if not value.isprintable() or len(value.encode("utf-8", "surrogatepass")) > MAX_CWD_BYTES:
        return f"{key} must be printable and at most {MAX_CWD_BYTES} bytes"
    return None


_CHECKS = {"event": _event, "scope": _scope, ID: identifier_problem, PATH: _path, LABEL: _label}


def problem(key: str, value: object) -> str | None:
    """Why ``value`` (not ``None``) cannot be the value of ``key``, or ``None``."""
    if not isinstance(value, str):
        return f"{key} must be a string"
    return _CHECKS[FIELDS[key][0]](key, value)


def misplaced(key: str, event: object) -> str | None:
    """Why ``key`` cannot appear on an ``event`` envelope at all, or ``None``."""
    only_on = FIELDS[key][2]
    if only_on is None or event in only_on:
        return None
    return f"{key} belongs only on {', '.join(sorted(only_on))}"
