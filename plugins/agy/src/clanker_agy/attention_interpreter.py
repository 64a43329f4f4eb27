"""Antigravity hook payloads -> canonical lifecycle envelopes (standard library only).

**Never run against a real agy**: agy cannot be installed on this machine. Built
from the spec (agy 1.2.12/1.2.14: "Authoritative events per provider", the Agy
notes) and public descriptions of agy's hooks (docs/harnesses/agy.md,
"Attention"; synthetic fixtures in tests/fixtures/agy/attention/).

The hook bridge loads this file by path and calls :func:`interpret` once per
hook run, under the terminal's lock. agy's payload names no event, so clanker's
guard (``attention_guard.sh``) wraps it: ``{"agyHookEvent": <the event the hook
was declared for>, "payload": <agy's payload, unparsed>}``. agy's fields are
camelCase: ``conversationId`` on every event, ``invocationNum`` and
``workspacePaths`` on ``PreInvocation``, ``stepIdx`` and ``toolCall.name`` on
tool events, ``fullyIdle`` on ``Stop``.

==========================================  ===========================================
native event                                envelope
==========================================  ===========================================
PreInvocation, ``invocationNum == 0``       ``turn_started`` (binds the first
                                            conversation as the root; the turn id is
                                            a fresh epoch kept in the state)
PreToolUse of ask_question, ask_permission  ``input_requested`` (first open wait)
or notify_user
PostToolUse of the same step                ``input_resolved`` (once none is open)
Stop, ``fullyIdle is True``                 ``turn_completed``
==========================================  ===========================================

Once a conversation is bound, every other conversation (a subagent's, or one
the user switched to inside the TUI: agy has no end event) reports nothing.
``PreInvocation`` past the first model call, ``Stop`` without ``fullyIdle:
true`` (background work still running), and events with no open turn report
nothing either. The location is the root's ``workspacePaths`` when it holds
exactly one local directory. Only the conversation id, a random epoch and
step numbers are kept; prompts, tool arguments, results and error text never
leave this function.
"""

from __future__ import annotations

import os

__all__ = ["ASK_TOOLS", "EVENT_KEY", "HOOK_STDOUT", "PAYLOAD_KEY", "interpret"]

HOOK_STDOUT = "{}"
"""agy's neutral answer: an empty decision, as if no hook had run. (The guard prints
it itself and discards the bridge's stdout; this is for a hook wired without it.)"""

EVENT_KEY = "agyHookEvent"
PAYLOAD_KEY = "payload"

ASK_TOOLS = frozenset({"ask_question", "ask_permission", "notify_user"})
"""The tools that wait for the user (the spec's list). Every other tool keeps agy's
own permission handling, and the plugin's matcher never runs a hook for it."""

STATE_VERSION = 1
MAX_WAITS = 16
"""Open waits remembered; past this only a turn boundary ends the wait (fail closed)."""
MAX_ID = 256
MAX_CWD_BYTES = 1024
MAX_STEP = 1 << 31
UNKEYED = "ask"
"""The input id of a wait whose step agy did not number: only a boundary ends it."""

Envelope = dict[str, object]
State = dict[str, object]


def interpret(payload: object, state: dict[str, object]) -> tuple[list[Envelope], State]:
    """Return the envelopes for one wrapped hook payload and the terminal's new state.

    Never raises: what cannot be read reports nothing and leaves the state as it
    was (less anything in it that is not well formed).
    """
    clean = _clean(state)
    try:
        return _interpret(payload, clean)
    except Exception:  # never raise into the bridge
        return [], clean


def _interpret(wrapped: object, state: State) -> tuple[list[Envelope], State]:
    event, payload = _unwrap(wrapped)
    conversation = None if payload is None else _identifier(payload.get("conversationId"))
    if payload is None or conversation is None:
        return [], state
    if event == "PreInvocation":
        return _pre_invocation(payload, conversation, state)
    handler = _ROOT_HANDLERS.get(event) if isinstance(event, str) else None
    if handler is None or state.get("c") != conversation:
        return [], state  # unknown, not the root conversation, or none bound yet
    return handler(payload, conversation, state)


def _unwrap(wrapped: object) -> tuple[object, dict[str, object] | None]:
    """The event name the guard added, and agy's own payload (``None`` if not an object)."""
    if not isinstance(wrapped, dict):
        return None, None
    payload = wrapped.get(PAYLOAD_KEY)
    return wrapped.get(EVENT_KEY), payload if isinstance(payload, dict) else None


def _pre_invocation(payload: dict[str, object], conversation: str, state: State
                    ) -> tuple[list[Envelope], State]:
    number = payload.get("invocationNum")
    if type(number) is not int or number != 0:
        return [], state  # a later model call of the same turn (or no number at all)
    bound = state.get("c")
    if bound is not None and bound != conversation:
        return [], state  # another conversation: the root stays bound
    turn = _new_turn()
    envelope = _envelope("turn_started", conversation, "PreInvocation", turn=turn,
                         cwd=_location(payload.get("workspacePaths")))
    return [envelope], {"v": STATE_VERSION, "c": conversation, "t": turn}


def _pre_tool(payload: dict[str, object], conversation: str, state: State
              ) -> tuple[list[Envelope], State]:
    turn = state.get("t")
    if not isinstance(turn, str) or _tool_name(payload) not in ASK_TOOLS:
        return [], state
    key = _step_key(payload.get("stepIdx"))
    waits = list(_strings(state.get("w")))
    new = dict(state)
    if key is None:
        new["o"] = True  # a wait no PostToolUse can be matched to
    elif key not in waits:
        if len(waits) >= MAX_WAITS:
            new["o"] = True
        else:
            waits.append(key)
    _set_waits(new, waits)
    if isinstance(state.get("r"), str):
        return [], new  # a wait is already reported: one request at a time
    request = key if key is not None else UNKEYED
    new["r"] = request
    return [_envelope("input_requested", conversation, "PreToolUse", turn=turn,
                      input_id=request)], new


def _post_tool(payload: dict[str, object], conversation: str, state: State
               ) -> tuple[list[Envelope], State]:
    turn, request = state.get("t"), state.get("r")
    key = _step_key(payload.get("stepIdx"))
    waits = list(_strings(state.get("w")))
    if not isinstance(turn, str) or key is None or key not in waits:
        return [], state
    name = _tool_name(payload)
    if name is not None and name not in ASK_TOOLS:
        return [], state  # another tool at that step: not the wait's
    waits.remove(key)
    new = dict(state)
    _set_waits(new, waits)
    if waits or new.get("o") is True or not isinstance(request, str):
        return [], new
    del new["r"]
    return [_envelope("input_resolved", conversation, "PostToolUse", turn=turn,
                      input_id=request)], new


def _stop(payload: dict[str, object], conversation: str, state: State
          ) -> tuple[list[Envelope], State]:
    turn = state.get("t")
    if payload.get("fullyIdle") is not True or not isinstance(turn, str):
        return [], state  # background work still runs, or no turn is open
    envelope = _envelope("turn_completed", conversation, "Stop", turn=turn)
    return [envelope], {"v": STATE_VERSION, "c": conversation}


_ROOT_HANDLERS = {"PreToolUse": _pre_tool, "PostToolUse": _post_tool, "Stop": _stop}


# -- helpers ------------------------------------------------------------------------------


def _new_turn() -> str:
    """A fresh turn epoch: random, so a turn id never repeats even after lost state."""
    return "agy-" + os.urandom(8).hex()


def _envelope(event: str, conversation: str, native: str, *, turn: str,
              input_id: str | None = None, cwd: str | None = None) -> Envelope:
    envelope: Envelope = {"event": event, "scope": "root", "sessionId": conversation,
                          "turnId": turn}
    if input_id is not None:
        envelope["inputId"] = input_id
    if cwd is not None:
        envelope["cwd"] = cwd
    envelope["nativeEvent"] = native
    return envelope


def _set_waits(state: State, waits: list[str]) -> None:
    if waits:
        state["w"] = waits
    else:
        state.pop("w", None)


def _tool_name(payload: dict[str, object]) -> str | None:
    call = payload.get("toolCall")
    if not isinstance(call, dict):
        return None
    name = call.get("name")
    return name if isinstance(name, str) else None


def _step_key(value: object) -> str | None:
    if type(value) is not int or not 0 <= value < MAX_STEP:
        return None
    return f"step-{value}"


def _location(value: object) -> str | None:
    """The one workspace directory, else ``None`` (several, none, or not local)."""
    if not isinstance(value, list) or len(value) != 1:
        return None
    path = value[0]
    if isinstance(path, str) and path.startswith("file://"):
        path = _file_uri_path(path)
    return _cwd(path)


def _file_uri_path(uri: str) -> str | None:
    from urllib.parse import unquote, urlsplit  # only for the URI form

    try:
        parts = urlsplit(uri)
        if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
            return None
        return unquote(parts.path, errors="strict")
    except (ValueError, UnicodeError):
        return None


def _cwd(value: object) -> str | None:
    if not isinstance(value, str) or not value.startswith("/") or not value.isprintable():
        return None
    if len(value) > 1:
        value = value.rstrip("/") or "/"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeError:  # a lone surrogate
        return None
    return value if size <= MAX_CWD_BYTES else None


def _identifier(value: object) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= MAX_ID and value.isprintable():
        return value
    return None


def _strings(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, str) and _step_like(item)]


def _step_like(value: str) -> bool:
    digits = value.removeprefix("step-")
    return digits != value and digits.isdigit() and len(digits) <= 10


def _clean(state: object) -> State:
    """Keep only well-formed fields; anything unexpected is forgotten (fail closed)."""
    if not isinstance(state, dict) or state.get("v") != STATE_VERSION:
        return {}
    conversation = _identifier(state.get("c"))
    if conversation is None:
        return {}
    clean: State = {"v": STATE_VERSION, "c": conversation}
    turn = _identifier(state.get("t"))
    if turn is None:
        return clean
    clean["t"] = turn
    waits = _strings(state.get("w"))[:MAX_WAITS]
    if waits:
        clean["w"] = list(dict.fromkeys(waits))
    request = state.get("r")
    if isinstance(request, str) and (request == UNKEYED or _step_like(request)):
        clean["r"] = request
    if state.get("o") is True:
        clean["o"] = True
    return clean
