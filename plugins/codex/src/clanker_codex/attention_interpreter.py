"""Codex hook payloads -> canonical lifecycle envelopes (standard library only).

The hook bridge loads this file by path and calls :func:`interpret` once per
hook run, with the parsed stdin payload and this terminal's private state. It
never raises, never puts a prompt, tool input, tool output or message text in
an envelope or in the state (ids are kept as short digests, tool inputs only as
fingerprints), and reports a ``cwd`` only on root turn and session events.

Checked against Codex CLI 0.171.0 (docs/harnesses/codex.md, "Attention"):

- ``SessionStart`` -> ``session_started`` (identity only; also fired for
  ``resume``, ``clear``, ``compact`` and ``fork``).
- ``UserPromptSubmit`` -> ``turn_started`` (``session_id`` / ``turn_id``, ``cwd``).
- ``PermissionRequest`` carries ``turn_id``, ``tool_name`` and ``tool_input`` but
  no ``tool_use_id``; ``PreToolUse`` / ``PostToolUse`` carry ``tool_use_id``. A
  request binds to every unfinished call with the same fingerprint (identical
  parallel calls form one group); the wait resolves once all of them have a
  ``PostToolUse``. The broker sees one ``input_requested`` for the first wait and
  one ``input_resolved`` once none remain. A request that matches no started
  call, or a call that never finishes (the user declined it: Codex sends no
  ``PostToolUse``), fails closed: the wait lasts until the turn or session ends.
- ``Stop`` -> ``turn_completed``; ``Interrupt`` -> ``turn_interrupted``;
  ``SessionEnd`` -> ``session_ended``.
- Children: Codex runs ``Stop``/``Interrupt`` only for the root; thread-spawned
  subagents report ``SubagentStart``/``SubagentStop`` and put ``agent_id`` on
  their prompt, tool and permission events. All of those are ignored here.

Fingerprint: the first 16 hex digits of SHA-256 over ``tool_name``, a newline
and the canonical JSON (sorted keys, compact, ASCII) of ``tool_input`` without a
top-level ``description``. Live, a ``PermissionRequest`` for ``Bash`` carried
``{"command", "description"}`` (the model's justification) where ``PreToolUse``
carried ``{"command"}``; dropping the key on both sides can only group more
calls together, which delays a resolution and never invents one.

No ``HOOK_STDOUT``: an empty stdout with exit status 0 is "no decision" for every
Codex hook (``PermissionRequest`` falls through to the normal approval prompt,
``PreToolUse`` lets the call run, ``Stop`` lets the turn end).
"""

from __future__ import annotations

import hashlib
import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    Handler = Callable[[Mapping[str, object], str, "_Turn"], list[dict[str, object]]]

STATE_VERSION = 1
MAX_CALLS = 32
"""Started calls remembered for binding a later request (oldest trimmed: fail closed)."""
MAX_DONE = 64
"""Finished call ids remembered to ignore a repeated hook run (oldest trimmed)."""
MAX_WAITS = 16
"""Live waits; past this the turn is in overflow and only a boundary ends the wait."""
MAX_WAIT_CALLS = 64
"""Call digests held by all live waits together; past this, overflow as well."""
MAX_ID = 256
MAX_CWD_BYTES = 1024
INPUT_PREFIX = "permission-"
MAX_COUNTER = 1 << 31

Envelope = dict[str, object]
State = dict[str, object]

_ROOT = "root"


# -- validation -------------------------------------------------------------------------------


def _ident(value: object) -> str | None:
    """``value`` if it can travel as an id (non-empty, printable, at most 256 chars)."""
    if isinstance(value, str) and 0 < len(value) <= MAX_ID and value.isprintable():
        return value
    return None


def _cwd(value: object) -> str | None:
    if not isinstance(value, str) or not value.startswith("/") or not value.isprintable():
        return None
    try:
        size = len(value.encode("utf-8"))
    except UnicodeError:
        return None
    return value if size <= MAX_CWD_BYTES else None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def fingerprint(tool_name: object, tool_input: object) -> str | None:
    """The 16-hex fingerprint of one tool call, or ``None`` when it cannot be formed."""
    if not isinstance(tool_name, str) or not tool_name:
        return None
    if isinstance(tool_input, dict) and "description" in tool_input:
        tool_input = {k: v for k, v in tool_input.items() if k != "description"}
    try:
        canonical = json.dumps(tool_input, sort_keys=True, separators=(",", ":"),
                               ensure_ascii=True)
    except (TypeError, ValueError, RecursionError):
        return None
    return _digest(tool_name + "\n" + canonical)


# -- state ------------------------------------------------------------------------------------


def _hex16(value: object) -> bool:
    return (isinstance(value, str) and len(value) == 16
            and all(c in "0123456789abcdef" for c in value))


class _Turn:
    """The correlation state of the one root turn being tracked (plain, JSON-able)."""

    __slots__ = ("calls", "counter", "done", "overflow", "request", "session", "stuck",
                 "turn", "waits")

    def __init__(self) -> None:
        self.counter = 0
        self.session: str | None = None
        self.turn: str | None = None
        self.reset()

    def reset(self) -> None:
        self.calls: list[tuple[str, str]] = []     # (call digest, fingerprint), unfinished
        self.done: list[str] = []                  # call digests that finished
        self.waits: dict[str, list[str]] = {}      # fingerprint -> unfinished call digests
        self.stuck = False                         # a wait only a boundary can end
        self.overflow = False
        self.request: str | None = None            # the open inputId, if any

    @classmethod
    def load(cls, state: Mapping[str, object]) -> _Turn:
        """Read ``state``; anything unexpected starts afresh (which fails closed)."""
        turn = cls()
        try:
            if state.get("v") != STATE_VERSION:
                return turn
            counter = state.get("n", 0)
            if isinstance(counter, int) and not isinstance(counter, bool) and (
                    0 <= counter < MAX_COUNTER):
                turn.counter = counter
            turn.session = _ident(state.get("s"))
            turn.turn = _ident(state.get("t")) if turn.session else None
            calls = state.get("calls", [])
            done = state.get("done", [])
            waits = state.get("waits", {})
            if not (isinstance(calls, list) and isinstance(done, list)
                    and isinstance(waits, dict)):
                raise ValueError
            for item in calls[-MAX_CALLS:]:
                if not (isinstance(item, list) and len(item) == 2
                        and _hex16(item[0]) and _hex16(item[1])):
                    raise ValueError
                turn.calls.append((item[0], item[1]))
            turn.done = [d for d in done[-MAX_DONE:] if _hex16(d)]
            if len(waits) > MAX_WAITS:
                raise ValueError
            for key, members in waits.items():
                if not (_hex16(key) and isinstance(members, list)
                        and all(_hex16(m) for m in members)):
                    raise ValueError
                turn.waits[key] = list(members)
            if sum(len(m) for m in turn.waits.values()) > MAX_WAIT_CALLS:
                raise ValueError
            turn.stuck = state.get("stuck") is True
            turn.overflow = state.get("over") is True
            request = state.get("req")
            turn.request = request if isinstance(request, str) and _ident(request) else None
        except ValueError:
            counter = turn.counter
            turn = cls()
            turn.counter = counter
        return turn

    def dump(self) -> State:
        state: State = {"v": STATE_VERSION, "n": self.counter}
        if self.session is not None:
            state["s"] = self.session
            if self.turn is not None:
                state["t"] = self.turn
        if self.calls:
            state["calls"] = [[call, fp] for call, fp in self.calls]
        if self.done:
            state["done"] = list(self.done)
        if self.waits:
            state["waits"] = {fp: list(members) for fp, members in self.waits.items()}
        if self.stuck:
            state["stuck"] = True
        if self.overflow:
            state["over"] = True
        if self.request is not None:
            state["req"] = self.request
        return state

    def begin(self, session: str, turn: str | None) -> None:
        self.session = session
        self.turn = turn
        self.reset()

    def tracks(self, session: str, turn: str) -> bool:
        return self.session == session and self.turn == turn

    def next_input(self) -> str:
        self.counter = self.counter + 1 if self.counter + 1 < MAX_COUNTER else 1
        return f"{INPUT_PREFIX}{self.counter}"


# -- events -----------------------------------------------------------------------------------


def _envelope(event: str, native: str, session: str, *, turn: str | None = None,
              input_id: str | None = None, cwd: str | None = None) -> Envelope:
    envelope: Envelope = {"event": event, "scope": _ROOT, "sessionId": session,
                          "nativeEvent": native}
    if turn is not None:
        envelope["turnId"] = turn
    if input_id is not None:
        envelope["inputId"] = input_id
    if cwd is not None:
        envelope["cwd"] = cwd
    return envelope


def _session_start(payload: Mapping[str, object], session: str, st: _Turn) -> list[Envelope]:
    if st.session != session:
        # A different conversation (new, resumed, forked): nothing of the old turn applies.
        st.begin(session, None)
    return [_envelope("session_started", "SessionStart", session)]


def _prompt(payload: Mapping[str, object], session: str, st: _Turn) -> list[Envelope]:
    turn = _ident(payload.get("turn_id"))
    if turn is None:
        return []
    st.begin(session, turn)
    return [_envelope("turn_started", "UserPromptSubmit", session, turn=turn,
                      cwd=_cwd(payload.get("cwd")))]


def _turn_end(event: str, native: str) -> Handler:
    def handle(payload: Mapping[str, object], session: str, st: _Turn) -> list[Envelope]:
        turn = _ident(payload.get("turn_id"))
        if turn is None:
            return []
        if st.session == session:
            st.begin(session, None)
        return [_envelope(event, native, session, turn=turn, cwd=_cwd(payload.get("cwd")))]
    return handle


def _session_end(payload: Mapping[str, object], session: str, st: _Turn) -> list[Envelope]:
    st.begin(session, None)
    st.session = None
    return [_envelope("session_ended", "SessionEnd", session, cwd=_cwd(payload.get("cwd")))]


def _pre_tool(payload: Mapping[str, object], session: str, st: _Turn) -> list[Envelope]:
    turn = _ident(payload.get("turn_id"))
    call = _ident(payload.get("tool_use_id"))
    fp = fingerprint(payload.get("tool_name"), payload.get("tool_input"))
    if turn is None or call is None or fp is None:
        return []
    if st.turn is None:
        st.begin(session, turn)  # fresh state mid-turn: adopt the turn the call belongs to
    if not st.tracks(session, turn):
        return []
    key = _digest(call)
    if key in st.done or any(key == known for known, _ in st.calls):
        return []
    st.calls.append((key, fp))
    del st.calls[:-MAX_CALLS]
    return []


def _permission(payload: Mapping[str, object], session: str, st: _Turn) -> list[Envelope]:
    turn = _ident(payload.get("turn_id"))
    if turn is None:
        return []
    if st.turn is None:
        st.begin(session, turn)
    if not st.tracks(session, turn):
        # Not the turn being tracked (its prompt was missed): still evidence of a
        # possible human wait. Nothing here can resolve it; a boundary will.
        return [_envelope("input_requested", "PermissionRequest", session, turn=turn,
                          input_id=st.next_input())]
    fp = fingerprint(payload.get("tool_name"), payload.get("tool_input"))
    members = [key for key, known in st.calls if known == fp] if fp is not None else []
    if not st.overflow:
        if not members or fp is None:
            st.stuck = True
        else:
            group = st.waits.get(fp, [])
            merged = group + [key for key in members if key not in group]
            total = sum(len(m) for f, m in st.waits.items() if f != fp) + len(merged)
            if (fp not in st.waits and len(st.waits) >= MAX_WAITS) or total > MAX_WAIT_CALLS:
                st.overflow = True
                st.waits.clear()
            else:
                st.waits[fp] = merged
    if st.request is not None:
        return []
    st.request = st.next_input()
    return [_envelope("input_requested", "PermissionRequest", session, turn=turn,
                      input_id=st.request)]


def _post_tool(payload: Mapping[str, object], session: str, st: _Turn) -> list[Envelope]:
    turn = _ident(payload.get("turn_id"))
    call = _ident(payload.get("tool_use_id"))
    if turn is None or call is None or not st.tracks(session, turn):
        return []
    key = _digest(call)
    st.calls = [(known, fp) for known, fp in st.calls if known != key]
    if key not in st.done:
        st.done.append(key)
        del st.done[:-MAX_DONE]
    for fp in list(st.waits):
        members = [m for m in st.waits[fp] if m != key]
        if members:
            st.waits[fp] = members
        else:
            del st.waits[fp]
    if st.request is None or st.waits or st.stuck or st.overflow:
        return []
    request, st.request = st.request, None
    return [_envelope("input_resolved", "PostToolUse", session, turn=turn, input_id=request)]


_HANDLERS: dict[str, Handler] = {
    "SessionStart": _session_start,
    "UserPromptSubmit": _prompt,
    "PreToolUse": _pre_tool,
    "PermissionRequest": _permission,
    "PostToolUse": _post_tool,
    "Stop": _turn_end("turn_completed", "Stop"),
    "Interrupt": _turn_end("turn_interrupted", "Interrupt"),
    "SessionEnd": _session_end,
}
"""``SubagentStart``, ``SubagentStop`` and every other event report nothing."""


def interpret(payload: object, state: dict[str, object]) -> tuple[list[Envelope], State]:
    """Map one Codex hook payload to envelopes, given and returning this terminal's state."""
    try:
        if not isinstance(payload, dict):
            return [], state
        name = payload.get("hook_event_name")
        handler = _HANDLERS.get(name) if isinstance(name, str) else None
        session = _ident(payload.get("session_id"))
        if handler is None or session is None or "agent_id" in payload:
            # A thread-spawned subagent's prompt, tool or permission event: child scope.
            return [], state
        st = _Turn.load(state if isinstance(state, dict) else {})
        envelopes = handler(payload, session, st)
        return envelopes, st.dump()
    except Exception:
        return [], state
