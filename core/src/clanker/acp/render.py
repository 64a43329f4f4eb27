"""Plain-text rendering of a coder session: a pure function of its state.

Used by line mode and by ``clanker coder --show`` (which rebuilds the state
from the transcript offline). Every body is bounded and says when it was cut.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from clanker.acp.state import Block, SessionState

__all__ = ["MAX_BODY", "render_block", "render_state", "replay"]

MAX_BODY: Final = 16 * 1024
_TRUNCATED: Final = "… [truncated]"


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_BODY else text[:MAX_BODY] + _TRUNCATED


_PREFIX: Final = {"agent": "", "user": "you: ", "thought": "(thinking) "}


def _tool(fields: dict[str, Any]) -> str:
    title = str(fields.get("title") or fields.get("toolCallId") or "tool call")
    status = fields.get("status")
    return f"▸ {title} [{fields.get('kind') or 'no kind'}]" + (f" {status}" if status else "")


def _plan(fields: dict[str, Any]) -> str:
    entries = fields.get("entries") or []
    lines = [f"  - {e.get('content', '')} ({e.get('status', '')})"
             for e in entries if isinstance(e, dict)]
    return "plan:\n" + _bounded("\n".join(lines))


def render_block(block: Block) -> str:
    """One block as text lines (no trailing newline)."""
    if block.kind in _PREFIX:
        return _PREFIX[block.kind] + _bounded(block.text)
    if block.kind == "tool":
        return _tool(block.fields)
    if block.kind == "plan":
        return _plan(block.fields)
    if block.kind == "approval":
        return f"approval: {block.fields.get('verdict')} ({block.fields.get('rule')})"
    return f"unsupported update: {block.text}"


def render_state(state: SessionState) -> str:
    """The whole session, block after block, in the order they first appeared."""
    return "\n".join(render_block(block) for block in state.blocks.values())


def replay(records: Iterable[dict[str, Any]]) -> SessionState:
    """The state a transcript's records describe: the agent's updates, and
    clanker's approval decisions where they were made."""
    state = SessionState()
    for record in records:
        frame = record.get("frame")
        if not isinstance(frame, dict):
            continue
        if record.get("dir") == "out" and frame.get("method") == "session/prompt":
            state.new_turn()
        elif record.get("dir") == "in" and frame.get("method") == "session/update":
            params = frame.get("params")
            if isinstance(params, dict):
                state.apply(params.get("update"))
        elif record.get("dir") == "clanker" and frame.get("event") == "approval":
            state.note("approval", {"verdict": frame.get("verdict"), "rule": frame.get("rule")})
    return state
