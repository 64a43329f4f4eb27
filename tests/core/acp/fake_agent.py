"""A protocol-faithful fake ACP agent, built with the official SDK (``agent-client-protocol``,
a dev dependency only), run by the tests as a real subprocess on stdio.

``python fake_agent.py [--no-resume] [--no-load] [--silent] [--exit-at-once] [--v2]``.
With ``FAKE_AGENT_STORE`` naming a file, the session ids it creates are kept there
(one a line) and a later agent process resumes them, as an agent that keeps its
sessions on disk does.
What a turn does is chosen by the prompt text (``SCENARIOS`` below), so one
agent serves several turns; permission outcomes are reported back as agent
message text (``outcome:<optionId or cancelled>``), which the tests read.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, run_agent
from acp.exceptions import RequestError
from acp.helpers import (
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
)
from acp.schema import (
    AgentCapabilities,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionInfo,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    ToolCallLocation,
    ToolCallUpdate,
)

FLAGS = set(sys.argv[1:])
OPTION_SETS: dict[str, list[tuple[str, str, str]]] = {
    "standard": [("allow-once", "Allow", "allow_once"), ("allow-always", "Always", "allow_always"),
                 ("reject-once", "Reject", "reject_once"),
                 ("reject-always", "Never", "reject_always")],
    "always-only": [("allow-with-updates", "Always allow", "allow_always"),
                    ("reject", "Reject", "reject_once")],
    "bypass": [("exit-plan-bypass", "Yes, and bypass permissions", "allow_once"),
               ("reject", "No", "reject_once")],
    "no-reject": [("allow-once", "Allow", "allow_once")],
}


class FakeAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.sessions: dict[str, list[str]] = {}
        self.cancelled: asyncio.Event = asyncio.Event()
        self.calls = 0
        self.model = "m1"

    def models(self) -> list[SessionConfigOptionSelect]:
        return [SessionConfigOptionSelect(
            id="model", name="Model", category="model", type="select", current_value=self.model,
            options=[SessionConfigSelectOption(value=v, name=v.upper()) for v in ("m1", "m2")])]

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **_: Any) -> InitializeResponse:
        if "--silent" in FLAGS:
            await asyncio.Event().wait()
        caps = AgentCapabilities(
            load_session="--no-load" not in FLAGS,
            session_capabilities=SessionCapabilities(
                resume=None if "--no-resume" in FLAGS else SessionResumeCapabilities(),
                list=SessionListCapabilities(),
                close=None if "--no-close" in FLAGS else SessionCloseCapabilities()))
        version = 2 if "--v2" in FLAGS else PROTOCOL_VERSION
        return InitializeResponse(protocol_version=version, agent_capabilities=caps)

    async def new_session(self, cwd: str, **_: Any) -> NewSessionResponse:
        session_id = f"fake-{len(self.sessions) + 1}"
        self.sessions[session_id] = []
        if store := os.environ.get("FAKE_AGENT_STORE"):
            with open(store, "a") as handle:
                handle.write(session_id + "\n")
        return NewSessionResponse(session_id=session_id, config_options=self.models())

    async def set_config_option(self, config_id: str, session_id: str, value: str | bool,
                                **_: Any) -> SetSessionConfigOptionResponse:
        assert config_id == "model"
        self.model = str(value)
        return SetSessionConfigOptionResponse(config_options=self.models())

    async def resume_session(self, cwd: str, session_id: str, **_: Any) -> ResumeSessionResponse:
        store = os.environ.get("FAKE_AGENT_STORE")
        kept = Path(store).read_text().split() if store and os.path.exists(store) else []
        if session_id not in ("known", *self.sessions, *kept):
            raise RequestError.resource_not_found(session_id)
        self.sessions.setdefault(session_id, [])
        return ResumeSessionResponse()

    async def load_session(self, cwd: str, session_id: str, **_: Any) -> LoadSessionResponse:
        if session_id != "known":
            raise RequestError.resource_not_found(session_id)
        self.sessions[session_id] = []
        await self.say(session_id, "replayed history")
        return LoadSessionResponse()

    async def list_sessions(self, cwd: str | None = None, **_: Any) -> ListSessionsResponse:
        return ListSessionsResponse(sessions=[SessionInfo(session_id="known", cwd=str(cwd),
                                                          title="a past session")])

    async def close_session(self, session_id: str, **_: Any) -> None:
        self.sessions.pop(session_id, None)

    async def cancel(self, session_id: str, **_: Any) -> None:
        self.cancelled.set()

    async def say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(session_id, update_agent_message_text(text))

    async def ask(self, session_id: str, kind: str | None, options: str, path: str | None = None,
                  call: str = "call-1") -> str:
        tool = ToolCallUpdate(tool_call_id=call, title=f"{kind} something", kind=kind,
                              locations=[ToolCallLocation(path=path)] if path else None)
        answer = await self.conn.request_permission(
            session_id=session_id, tool_call=tool,
            options=[PermissionOption(option_id=i, name=n, kind=k)
                     for i, n, k in OPTION_SETS[options]])
        outcome = answer.outcome
        return outcome.option_id if outcome.outcome == "selected" else "cancelled"

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> PromptResponse:
        text = " ".join(getattr(block, "text", "") for block in prompt)
        verb, _, rest = text.partition(" ")
        if verb == "hello":
            await self.say(session_id, "Hello")
            await self.say(session_id, " world")
        elif verb == "permission":  # permission KIND OPTIONSET [PATH]
            kind, options, *path = rest.split()
            outcome = await self.ask(session_id, None if kind == "none" else kind, options,
                                     path[0] if path else None)
            await self.say(session_id, f"outcome:{outcome} ")
        elif verb == "parallel":  # parallel N KIND
            count, kind = rest.split()
            outcomes = await asyncio.gather(*(self.ask(session_id, kind, "standard", call=f"c{i}")
                                              for i in range(int(count))))
            await self.say(session_id, "".join(f"outcome:{o} " for o in outcomes))
        elif verb == "wait-cancel":
            ask = asyncio.ensure_future(self.ask(session_id, "execute", "standard"))
            await self.cancelled.wait()
            await self.say(session_id, f"outcome:{await ask} ")
            return PromptResponse(stop_reason="cancelled")
        elif verb == "large":  # large N: N chunks of 1 KiB
            for _ in range(int(rest)):
                await self.say(session_id, "x" * 1024)
        elif verb == "oversize":
            await self.say(session_id, "y" * (3 * 1024 * 1024))
            await self.say(session_id, "after")
        elif verb == "unknown":
            await self.conn._conn.send_notification("session/update", {
                "sessionId": session_id, "update": {"sessionUpdate": "future_kind", "x": 1}})
            await self.say(session_id, "after")
        elif verb == "garbage":
            os.write(1, b"this is not json\n")
            await self.say(session_id, "after")
        elif verb == "die":
            await self.say(session_id, "partial")
            await asyncio.sleep(0)  # let the chunk reach the pipe
            sys.stdout.flush()
            os._exit(3)
        elif verb == "auth-required":  # the sign-in expired since the session started
            raise RequestError(-32000, "Authentication required")
        elif verb == "usage-limit":
            raise RequestError(-32603, "Internal error",
                               {"details": "You've hit your usage limit · resets 3:10am"})
        elif verb == "stderr":  # stderr N: N KiB of stderr noise
            os.write(2, b"e" * 1024 * int(rest))
            await self.say(session_id, "after")
        elif verb == "silent":  # like opencode with a provider that refuses: quiet until cancel
            await self.cancelled.wait()
        elif verb == "env":  # env NAME: say the variable's value (a secret, in the tests)
            value = os.environ.get(rest, "")
            os.write(2, f"debug: token is {value}\n".encode())
            await self.say(session_id, f"value:{value}")
        elif verb == "ask-env":  # ask-env NAME: the value in a tool call and its permission
            value = os.environ.get(rest, "")
            await self.conn.session_update(session_id, start_tool_call(
                "shown", f"show {value}", kind="read", status="completed"))
            tool = ToolCallUpdate(tool_call_id="env-1", title=f"echo {value}", kind="execute",
                                  raw_input={"command": f"echo {value}"})
            answer = await self.conn.request_permission(
                session_id=session_id, tool_call=tool,
                options=[PermissionOption(option_id=i, name=n, kind=k)
                         for i, n, k in OPTION_SETS["standard"]])
            await self.say(session_id, f"outcome:{answer.outcome.outcome} value:{value}")
        elif verb == "output":  # output N: a finished command whose output is N lines
            lines = "".join(f"line {i}\n" for i in range(1, int(rest) + 1))
            self.calls += 1
            await self.conn.session_update(session_id, start_tool_call(
                f"out-{self.calls}", "seq", kind="execute", status="completed",
                raw_input={"command": f"seq {rest}"},
                content=[tool_content(text_block(lines))]))
            await self.say(session_id, "printed")
        elif verb == "edit":  # edit: a finished edit of work/f.py (one line changed)
            old = "".join(f"x = {i}\n" for i in range(10))
            self.calls += 1
            await self.conn.session_update(session_id, start_tool_call(
                f"edit-{self.calls}", "edit f.py", kind="edit", status="completed",
                content=[tool_diff_content(os.path.join(os.getcwd(), "f.py"),
                                           old.replace("x = 5", "x = 50"), old)]))
            await self.say(session_id, "edited")
        elif verb == "hold":  # hold PATH: a turn that runs until PATH exists, or a cancel
            self.cancelled.clear()
            while not os.path.exists(rest):
                if self.cancelled.is_set():
                    return PromptResponse(stop_reason="cancelled")
                await asyncio.sleep(0.01)
            await self.say(session_id, "released")
        elif verb == "model":
            await self.say(session_id, f"model:{self.model}")
        elif verb == "refuse":
            return PromptResponse(stop_reason="refusal")
        return PromptResponse(stop_reason="end_turn")


async def main() -> None:
    if "--exit-at-once" in FLAGS:
        sys.exit(5)
    if pidfile := os.environ.get("FAKE_AGENT_PIDFILE"):
        with open(pidfile, "w") as handle:
            handle.write(str(os.getpid()))
    await run_agent(FakeAgent(), use_unstable_protocol=True)


if __name__ == "__main__":
    asyncio.run(main())
