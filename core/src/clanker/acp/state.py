"""A coder session's state: blocks upserted by id, in the order they first appeared.

Messages are keyed by their ``messageId`` when the agent sends one, else by a
run of chunks of one kind; tool calls by ``toolCallId`` (``tool_call`` creates
or replaces, ``tool_call_update`` patches or creates). Keying everything by id
is what ACP v2's upserts need, so moving to it changes the transport only.
An update kind this client does not know is kept as an unsupported block.
"""

from __future__ import annotations

from typing import Any

from attrs import define, field

__all__ = ["Block", "SessionState"]

_MESSAGE_KINDS = {"user_message_chunk": "user", "agent_message_chunk": "agent",
                  "agent_thought_chunk": "thought"}


@define
class Block:
    """One rendered unit: a message, a tool call, a plan or an unsupported update."""

    key: str
    kind: str
    """``user``, ``agent``, ``thought``, ``tool``, ``plan``, ``approval`` or ``unsupported``."""
    fields: dict[str, Any] = field(factory=dict)
    _parts: list[str] = field(factory=list, alias="parts")
    """Streamed text, joined when read: appending to one string would copy it
    whole for every chunk (quadratic over a long answer)."""

    @property
    def text(self) -> str:
        if len(self._parts) > 1:
            self._parts[:] = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    @text.setter
    def text(self, value: str) -> None:
        self._parts[:] = [value]

    def append(self, text: str) -> None:
        self._parts.append(text)

    def tail(self, count: int) -> str:
        """The last ``count`` characters, without joining the whole text (a live
        view of a long answer reads it many times a second)."""
        taken: list[str] = []
        size = 0
        for part in reversed(self._parts):
            taken.append(part)
            size += len(part)
            if size >= count:
                break
        return "".join(reversed(taken))[-count:] if count > 0 else ""

    @property
    def size(self) -> int:
        """The text's length in characters."""
        return sum(map(len, self._parts))


def _text(content: object) -> str:
    if isinstance(content, dict):
        if content.get("type") == "text" and isinstance(content.get("text"), str):
            return str(content["text"])
        return f"[{content.get('type', 'content')}]"
    return ""


@define
class SessionState:
    """Everything the renderer needs, rebuilt from the updates alone."""

    blocks: dict[str, Block] = field(factory=dict)
    mode: str | None = None
    title: str | None = None
    usage: dict[str, Any] = field(factory=dict)
    commands: list[Any] = field(factory=list)
    config_options: list[Any] = field(factory=list)
    _last: str | None = None
    _runs: int = 0

    def apply(self, update: object) -> Block | None:
        """Apply one ``session/update`` payload; return the block it touched."""
        if not isinstance(update, dict):
            return self._unsupported(update)
        kind = update.get("sessionUpdate")
        if kind in _MESSAGE_KINDS:
            return self._chunk(_MESSAGE_KINDS[str(kind)], update)
        if kind in ("tool_call", "tool_call_update"):
            return self._tool(update, replace=kind == "tool_call")
        if kind == "plan":
            block = self._upsert("plan", "plan")
            block.fields = {"entries": update.get("entries", [])}
            return block
        if kind == "current_mode_update":
            self.mode = _string(update.get("currentModeId"))
        elif kind == "session_info_update":
            self.title = _string(update.get("title")) or self.title
        elif kind == "usage_update":
            self.usage = {k: v for k, v in update.items() if k != "sessionUpdate"}
        elif kind == "available_commands_update":
            self.commands = list(update.get("availableCommands") or [])
        elif kind == "config_option_update":
            self.config_options = list(update.get("configOptions") or [])
        else:
            return self._unsupported(update)
        return None

    def new_turn(self) -> None:
        """A prompt was sent: chunks from here on start new blocks (a message
        without an id never continues the previous turn's)."""
        self._last = None

    def note(self, kind: str, fields: dict[str, Any]) -> Block:
        """Add a block of clanker's own (an approval decision) after the others."""
        self._runs += 1
        block = self.blocks[f"{kind}:{self._runs}"] = Block(f"{kind}:{self._runs}", kind,
                                                            fields=fields)
        self._last = block.key
        return block

    def _upsert(self, key: str, kind: str) -> Block:
        block = self.blocks.get(key)
        if block is None:
            block = self.blocks[key] = Block(key, kind)
        return block

    def _chunk(self, kind: str, update: dict[str, Any]) -> Block:
        message_id = update.get("messageId")
        if isinstance(message_id, str) and message_id:
            key = f"message:{message_id}"
        elif self._last is not None and self.blocks[self._last].kind == kind:
            key = self._last
        else:
            self._runs += 1
            key = f"run:{self._runs}"
        block = self._upsert(key, kind)
        block.append(_text(update.get("content")))
        self._last = key
        return block

    def _tool(self, update: dict[str, Any], *, replace: bool) -> Block:
        call_id = update.get("toolCallId")
        key = f"tool:{call_id}" if isinstance(call_id, str) else f"tool:?{len(self.blocks)}"
        block = self._upsert(key, "tool")
        values = {k: v for k, v in update.items() if k != "sessionUpdate" and v is not None}
        block.fields = values if replace else {**block.fields, **values}
        self._last = key
        return block

    def _unsupported(self, update: object) -> Block:
        self._runs += 1
        block = self._upsert(f"unsupported:{self._runs}", "unsupported")
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        block.text = str(kind) if isinstance(kind, str) else "?"
        block.fields = {"update": update}
        self._last = block.key
        return block


def _string(value: object) -> str | None:
    return value if isinstance(value, str) else None
