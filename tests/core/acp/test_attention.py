"""A coder session is a grid terminal whose attention comes straight from ACP:
working during a turn, needs input while a permission waits for the person,
done after the stop reason; retired when the session ends."""

from __future__ import annotations

import asyncio
from pathlib import Path

from clanker.acp.policy import Answer, Decision, PermissionRequest
from clanker.api import Clanker
from clanker.environment.local import LocalEnvironment

from .conftest import FAKE_AGENT, python3_on_path


def test_the_grid_sees_working_needs_input_and_done(tmp_path: Path) -> None:
    clanker = Clanker(environment=LocalEnvironment(python3_on_path(tmp_path)))  # its grid
    seen: dict[str, str] = {}

    def state() -> str:
        (entry,) = [e for e in clanker.agents() if e.harness == "coder"]
        return str(entry.attention)

    async def ask(request: PermissionRequest, decision: Decision) -> Answer:
        seen["asking"] = state()
        return Answer.ONCE

    def on_event(event: dict[str, object]) -> None:
        if event["event"] == "turn-started":
            seen["turn-started"] = state()

    async def run() -> None:
        async with clanker.coder(agent_command=("python3", FAKE_AGENT), cwd=tmp_path,
                                 interactive=True, ask=ask, attention=True,
                                 on_event=on_event) as coder:
            await coder.prompt("permission execute standard")
            seen["after"] = state()

    asyncio.run(run())
    assert seen == {"turn-started": "working", "asking": "needs-input", "after": "done"}
    assert not [e for e in clanker.agents() if e.harness == "coder"]
