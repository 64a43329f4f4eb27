"""Claude Code hook payloads -> canonical lifecycle envelopes (standard library only).

The hook bridge loads this file by path and calls :func:`interpret` once per hook
run, under the terminal's lock, with the parsed stdin payload and the terminal's
private state. Checked against Claude Code 2.1.197 (docs/harnesses/claude.md,
"Attention"): every hook input is built from one common base carrying
``session_id``, ``cwd``, ``prompt_id`` (the current user prompt, once there is
one) and ``agent_id`` (only inside a subagent).

=================  ====================================================
native event       envelope
=================  ====================================================
SessionStart       ``session_started`` (identity), ``location_changed``
UserPromptSubmit   ``turn_started`` (turn = ``prompt_id``)
PermissionRequest  ``input_requested`` ``permission`` (once per wait)
PostToolBatch      ``input_resolved`` ``permission`` (if one is open)
Stop               ``turn_completed``
StopFailure        ``turn_failed`` (the error is never forwarded)
SessionEnd         ``session_ended``
CwdChanged         ``location_changed`` (``new_cwd``)
=================  ====================================================

An event carrying ``agent_id`` belongs to a subagent and reports nothing. An
event that needs a turn but has no ``prompt_id`` reports nothing. Only ids and
one boolean are kept in the state; prompts, tool inputs, tool results, messages
and error text never leave this function.
"""

from __future__ import annotations

__all__ = ["HOOK_STDOUT", "interpret"]

HOOK_STDOUT = ""
"""Nothing. Claude Code adds a UserPromptSubmit or SessionStart hook's stdout to
the model's context, and a PermissionRequest hook decides only through a JSON
``hookSpecificOutput.decision``: empty stdout with exit 0 leaves every event as
it was (the permission dialog is shown as usual)."""

PERMISSION = "permission"
"""The one input id: PermissionRequest carries no tool_use_id to tell waits apart."""

_MAX_ID = 256
_MAX_CWD_BYTES = 1024
_MAX_NATIVE = 64

# state keys: the turn (prompt id) the state describes, and whether a permission
# wait reported for that turn is still open.
_TURN = "turn"
_WAITING = "waiting"

Envelope = dict[str, object]
State = dict[str, object]


def interpret(payload: object, state: dict[str, object]) -> tuple[list[Envelope], State]:
    """Return the envelopes for one hook payload and the terminal's new state.

    Whatever the payload, nothing is raised: what cannot be read reports nothing
    and leaves the state as it was (less anything in it that is not well formed).
    """
    clean = _clean(state)
    try:
        return _interpret(payload, clean)
    except Exception:  # never raise into the bridge
        return [], clean


def _interpret(payload: object, state: State) -> tuple[list[Envelope], State]:
    if not isinstance(payload, dict):
        return [], state
    event = payload.get("hook_event_name")
    session = _identifier(payload.get("session_id"))
    if not isinstance(event, str) or session is None:
        return [], state
    if "agent_id" in payload and payload["agent_id"] is not None:
        return [], state  # a subagent's event never speaks for the root
    handler = _HANDLERS.get(event)
    if handler is None:
        return [], state
    return handler(payload, session, state)


def _session_start(payload: dict[str, object], session: str, state: State
                   ) -> tuple[list[Envelope], State]:
    envelopes = [_envelope("session_started", session, "SessionStart")]
    cwd = _cwd(payload.get("cwd"))
    if cwd is not None:
        envelopes.append(_envelope("location_changed", session, "SessionStart", cwd=cwd))
    return envelopes, state


def _prompt(payload: dict[str, object], session: str, state: State
            ) -> tuple[list[Envelope], State]:
    turn = _identifier(payload.get("prompt_id"))
    if turn is None:
        return [], state
    envelope = _envelope("turn_started", session, "UserPromptSubmit", turn=turn,
                         cwd=_cwd(payload.get("cwd")))
    return [envelope], {_TURN: turn, _WAITING: False}


def _permission(payload: dict[str, object], session: str, state: State
                ) -> tuple[list[Envelope], State]:
    turn = _identifier(payload.get("prompt_id"))
    if turn is None:
        return [], state
    if state.get(_TURN) == turn and state.get(_WAITING) is True:
        return [], state  # one wait per turn until its batch resolves
    envelope = _envelope("input_requested", session, "PermissionRequest", turn=turn,
                         input_id=PERMISSION)
    return [envelope], {_TURN: turn, _WAITING: True}


def _batch(payload: dict[str, object], session: str, state: State
           ) -> tuple[list[Envelope], State]:
    turn = _identifier(payload.get("prompt_id"))
    if turn is None or state.get(_TURN) != turn or state.get(_WAITING) is not True:
        return [], state  # no wait of this turn is known open: nothing to resolve
    envelope = _envelope("input_resolved", session, "PostToolBatch", turn=turn,
                         input_id=PERMISSION)
    return [envelope], {_TURN: turn, _WAITING: False}


def _stop(payload: dict[str, object], session: str, state: State
          ) -> tuple[list[Envelope], State]:
    return _turn_end("turn_completed", "Stop", payload, session, state)


def _stop_failure(payload: dict[str, object], session: str, state: State
                  ) -> tuple[list[Envelope], State]:
    return _turn_end("turn_failed", "StopFailure", payload, session, state)


def _turn_end(event: str, native: str, payload: dict[str, object], session: str,
              state: State) -> tuple[list[Envelope], State]:
    turn = _identifier(payload.get("prompt_id"))
    if turn is None:
        return [], state
    envelope = _envelope(event, session, native, turn=turn, cwd=_cwd(payload.get("cwd")))
    return [envelope], {_TURN: turn, _WAITING: False}


def _session_end(payload: dict[str, object], session: str, state: State
                 ) -> tuple[list[Envelope], State]:
    envelope = _envelope("session_ended", session, "SessionEnd", cwd=_cwd(payload.get("cwd")))
    return [envelope], {}


def _cwd_changed(payload: dict[str, object], session: str, state: State
                 ) -> tuple[list[Envelope], State]:
    cwd = _cwd(payload.get("new_cwd"))
    if cwd is None:
        return [], state
    return [_envelope("location_changed", session, "CwdChanged", cwd=cwd)], state


_HANDLERS = {
    "SessionStart": _session_start,
    "UserPromptSubmit": _prompt,
    "PermissionRequest": _permission,
    "PostToolBatch": _batch,
    "Stop": _stop,
    "StopFailure": _stop_failure,
    "SessionEnd": _session_end,
    "CwdChanged": _cwd_changed,
}


def _envelope(event: str, session: str, native: str, *, turn: str | None = None,
              input_id: str | None = None, cwd: str | None = None) -> Envelope:
    envelope: Envelope = {"event": event, "scope": "root", "sessionId": session}
    if turn is not None:
        envelope["turnId"] = turn
    if input_id is not None:
        envelope["inputId"] = input_id
    if cwd is not None:
        envelope["cwd"] = cwd
    envelope["nativeEvent"] = native[:_MAX_NATIVE]
    return envelope


def _clean(state: object) -> State:
    """Keep only a well-formed turn id and a true wait flag; anything else is forgotten."""
    if not isinstance(state, dict):
        return {}
    turn = _identifier(state.get(_TURN))
    if turn is None:
        return {}
    return {_TURN: turn, _WAITING: state.get(_WAITING) is True}


def _identifier(value: object) -> str | None:
    if (
        isinstance(value, str)
        and 0 < len(value) <= _MAX_ID
        and value.isprintable()
    ):
        return value
    return None


def _cwd(value: object) -> str | None:
    if not isinstance(value, str) or not value.startswith("/") or not value.isprintable():
        return None
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate
        return None
    return value if size <= _MAX_CWD_BYTES else None
