"""The session state is upserts by id; rendering is a pure function of it."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from clanker.acp.render import MAX_BODY, render_state, replay
from clanker.acp.state import SessionState

texts = st.text(alphabet="ab \n", max_size=5)
chunks = st.builds(lambda kind, text: {"sessionUpdate": kind,
                                       "content": {"type": "text", "text": text}},
                   st.sampled_from(["agent_message_chunk", "agent_thought_chunk",
                                    "user_message_chunk"]), texts)
tools = st.builds(lambda kind, call, status: {"sessionUpdate": kind, "toolCallId": call,
                                              "title": f"t{call}", "status": status},
                  st.sampled_from(["tool_call", "tool_call_update"]),
                  st.sampled_from(["1", "2", "3"]),
                  st.sampled_from(["pending", "in_progress", "completed", None]))
others = st.sampled_from([{"sessionUpdate": "future_kind"}, {"sessionUpdate": "plan",
                                                              "entries": []},
                          {"sessionUpdate": "current_mode_update", "currentModeId": "plan"},
                          {"sessionUpdate": "usage_update", "used": 5, "size": 100}, "junk"])
updates = st.lists(st.one_of(chunks, tools, others), max_size=30)


def _records(sequence: list[Any]) -> list[dict[str, Any]]:
    return [{"dir": "in", "frame": {"method": "session/update",
                                    "params": {"sessionId": "s", "update": u}}}
            for u in sequence]


@given(updates)
def test_replaying_a_transcript_gives_the_same_state(sequence: list[Any]) -> None:
    state = SessionState()
    for update in sequence:
        state.apply(update)
    assert render_state(replay(_records(sequence))) == render_state(state)


@given(updates)
def test_every_chunk_lands_once_in_order(sequence: list[Any]) -> None:
    state = SessionState()
    for update in sequence:
        state.apply(update)
    sent = "".join(u["content"]["text"] for u in sequence
                   if isinstance(u, dict) and "content" in u)
    kept = "".join(b.text for b in state.blocks.values() if b.kind in ("agent", "thought", "user"))
    assert sorted(kept) == sorted(sent)


@given(updates)
def test_one_block_per_tool_call(sequence: list[Any]) -> None:
    state = SessionState()
    for update in sequence:
        state.apply(update)
    calls = {u["toolCallId"] for u in sequence if isinstance(u, dict) and "toolCallId" in u}
    assert {b.key for b in state.blocks.values() if b.kind == "tool"} == {f"tool:{c}"
                                                                           for c in calls}


def test_a_tool_call_update_patches_and_a_message_id_keys_its_chunks() -> None:
    state = SessionState()
    state.apply({"sessionUpdate": "tool_call", "toolCallId": "c", "title": "ls", "kind":
                 "execute", "status": "pending"})
    state.apply({"sessionUpdate": "agent_message_chunk", "messageId": "m",
                 "content": {"type": "text", "text": "Hel"}})
    state.apply({"sessionUpdate": "tool_call_update", "toolCallId": "c", "status": "completed"})
    state.apply({"sessionUpdate": "agent_message_chunk", "messageId": "m",
                 "content": {"type": "text", "text": "lo"}})
    state.apply({"sessionUpdate": "future_kind"})
    assert render_state(state) == "▸ ls [execute] completed\nHello\nunsupported update: future_kind"


def test_a_long_body_is_cut_and_says_so() -> None:
    state = SessionState()
    state.apply({"sessionUpdate": "agent_message_chunk",
                 "content": {"type": "text", "text": "x" * (MAX_BODY + 10)}})
    assert render_state(state).endswith("… [truncated]")
