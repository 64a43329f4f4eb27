"""The stream contract: replaying a subscription always reproduces ``list``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clanker.grid.client import GridClient
from clanker.grid.errors import GridRequestError
from clanker.grid.protocol import StreamEvent, StreamKind, TerminalEntry
from clanker.grid.server import Grid

SESSIONS = ("s1", "s2")
TURNS = ("u1", "u2")

envelopes = st.builds(
    lambda event, scope, session, turn, cwd: {
        k: v for k, v in {"event": event, "scope": scope, "sessionId": session,
                          "turnId": turn, "cwd": cwd}.items() if v is not None
    },
    st.sampled_from(["session_started", "turn_started", "turn_completed", "turn_failed",
                     "input_requested", "input_resolved", "location_changed", "agent_exited"]),
    st.sampled_from(["root", "root", "root", "child", None]),
    st.sampled_from(SESSIONS),
    st.sampled_from((*TURNS, None)),
    st.sampled_from(["/a", "/b", None]),
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("register"), st.just(0)),
        st.tuples(st.just("retire"), st.integers(0, 3)),
        st.tuples(st.just("deliver"), st.integers(0, 3), st.lists(envelopes, min_size=1,
                                                                   max_size=4)),
    ),
    min_size=1, max_size=12,
)


def replay(events: list[StreamEvent]) -> dict[str, TerminalEntry]:
    latest: dict[str, TerminalEntry] = {}
    for event in events:
        if event.entry is None:
            continue
        previous = latest.get(event.entry.terminal)
        if previous is not None:
            assert event.entry.revision["revision"] > previous.revision["revision"]
        latest[event.entry.terminal] = event.entry
    return {t: e for t, e in latest.items() if e.revision["snapshot"] is not None}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, subscribe_after=st.integers(0, 4))
def test_a_subscription_replays_to_the_listed_state(
    ops: list[tuple[Any, ...]], subscribe_after: int
) -> None:
    directory = Path(tempfile.mkdtemp(prefix="cg-", dir="/tmp"))
    path = directory / "g.sock"
    events: list[StreamEvent] = []
    try:
        asyncio.run(_scenario(path, ops, subscribe_after, events))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


async def _scenario(
    path: Path, ops: list[tuple[Any, ...]], subscribe_after: int, events: list[StreamEvent]
) -> None:
    async with Grid(path) as grid:
        client = GridClient(path, timeout=10)
        registered: list[tuple[str, str]] = []
        ready = threading.Event()
        done = threading.Event()
        reader: asyncio.Future[None] | None = None

        def collect() -> None:
            with contextlib.closing(client.subscribe(timeout=30)) as stream:
                for event in stream:
                    events.append(event)
                    if event.kind is StreamKind.SYNCED:
                        ready.set()
                    if done.is_set() and event.kind is StreamKind.REVISION and \
                            event.entry and event.entry.harness == "end-marker":
                        return

        for index, op in enumerate(ops):
            if index == subscribe_after:
                reader = asyncio.ensure_future(asyncio.to_thread(collect))
                await asyncio.to_thread(ready.wait, 30)
            if op[0] == "register":
                reg = await asyncio.to_thread(client.register, harness="fake-agent",
                                              workspace=None, cwd="/w",
                                              launcher_pid=os.getpid())
                registered.append((reg.terminal, reg.token))
            elif registered:
                terminal, token = registered[op[1] % len(registered)]
                with contextlib.suppress(GridRequestError):  # retired already: unauthorized
                    if op[0] == "retire":
                        await asyncio.to_thread(client.retire, terminal, token)
                    else:
                        await asyncio.to_thread(client.deliver, terminal, token, op[2])
        if reader is None:
            reader = asyncio.ensure_future(asyncio.to_thread(collect))
            await asyncio.to_thread(ready.wait, 30)
        done.set()
        await asyncio.sleep(0)
        listed = await asyncio.to_thread(client.list_terminals)
        # A last registration marks the end of the stream for the reader.
        grid.register(harness="end-marker", cwd="/w", launcher_pid=os.getpid())
        await asyncio.wait_for(reader, 30)
    marker = {e.entry.terminal for e in events if e.entry and e.entry.harness == "end-marker"}
    replayed = {t: e for t, e in replay(events).items() if t not in marker}
    assert replayed == {e.terminal: e for e in listed}
