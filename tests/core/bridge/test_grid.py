"""The capability plane in a real grid: grants over the socket, live authority,
independence from attention credentials, and hostile requests that change nothing."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import socket
import subprocess
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clanker.bridge import wire
from clanker.bridge.cmd import BridgeClient, CommandError
from clanker.bridge.shipped import SHIPPED_NAMES
from clanker.grid.client import GridClient
from clanker.grid.errors import GridRequestError
from clanker.grid.protocol import Registration
from clanker.grid.server import Grid
from tests.core.grid.conftest import LiveGrid, end, eventually, launcher, register_as

__all__ = ["launcher"]  # a fixture, used by name


@pytest.fixture
def live(short_dir: Path) -> Iterator[LiveGrid]:
    with LiveGrid(short_dir / "g.sock") as grid:
        yield grid


def register(live: LiveGrid, cwd: str = "/tmp", workspace: str | None = None,
             harness: str = "fake-agent") -> Registration:
    return GridClient(live.path).register(harness=harness, workspace=workspace or cwd, cwd=cwd,
                                          launcher_pid=os.getpid())


def grant(live: LiveGrid, registration: Registration,
          names: tuple[str, ...] = SHIPPED_NAMES) -> str:
    return GridClient(live.path).grant_bridge(registration.terminal, registration.token, names)


def raw(path: Path, data: bytes) -> list[dict[str, Any]]:
    """Send ``data`` as it is on one connection; the reply lines, decoded."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(path))
        sock.sendall(data)
        received = b""
        with contextlib.suppress(ConnectionResetError, TimeoutError):
            while b"\n" not in received:
                chunk = sock.recv(65_536)
                if not chunk:
                    break
                received += chunk
    return [json.loads(line) for line in received.splitlines()]


def test_cmd_list_shows_only_the_grant(live: LiveGrid) -> None:
    registration = register(live)
    token = grant(live, registration, ("clanker_context",))
    client = BridgeClient(live.path, token)
    assert [c["name"] for c in client.capabilities()] == ["clanker_context"]
    for name in ("clanker_notify", "clanker_nothing"):
        for call in (lambda n=name: client.describe(n), lambda n=name: client.run(n)):
            with pytest.raises(CommandError) as refused:
                call()
            assert (refused.value.kind, refused.value.exit_code) == (
                wire.UNKNOWN_CAPABILITY, wire.EXIT_UNKNOWN_CAPABILITY)
    [entry] = GridClient(live.path).list_terminals()
    assert entry.bridge == ("clanker_context",)


def test_the_attention_and_bridge_credentials_never_resolve_as_each_other(
    live: LiveGrid,
) -> None:
    registration = register(live)
    token = grant(live, registration)
    grid = GridClient(live.path)
    with pytest.raises(CommandError) as refused:
        BridgeClient(live.path, registration.token).capabilities()  # attention token as bridge
    assert refused.value.exit_code == wire.EXIT_NO_AUTHORITY
    for call in (lambda: grid.deliver(registration.terminal, token, [
                     {"event": "session_started", "sessionId": "s"}]),
                 lambda: grid.retire(registration.terminal, token),
                 lambda: grid.decline(registration.terminal, token, "no"),
                 lambda: grid.grant_bridge(registration.terminal, token, SHIPPED_NAMES),
                 lambda: grid.revoke_bridge(registration.terminal, token)):
        with pytest.raises(GridRequestError) as caught:
            call()
        assert caught.value.word == "unauthorized"
    assert [c["name"] for c in BridgeClient(live.path, token).capabilities()] == \
        sorted(SHIPPED_NAMES)


def test_revoking_or_retiring_ends_the_credential(live: LiveGrid) -> None:
    grid = GridClient(live.path)
    first, second = register(live), register(live)
    one, two = grant(live, first), grant(live, second)
    grid.revoke_bridge(first.terminal, first.token)
    grid.revoke_bridge(first.terminal, first.token)  # idempotent
    grid.retire(second.terminal, second.token)
    for token in (one, two):
        with pytest.raises(CommandError) as refused:
            BridgeClient(live.path, token).run("clanker_context")
        assert refused.value.exit_code == wire.EXIT_NO_AUTHORITY
    [entry] = grid.list_terminals()
    assert entry.bridge == ()
    with pytest.raises(GridRequestError) as caught:  # a retired terminal gets none
        grid.grant_bridge(second.terminal, second.token, SHIPPED_NAMES)
    assert caught.value.word == "unauthorized"


def test_a_grant_names_only_known_capabilities(live: LiveGrid) -> None:
    registration = register(live)
    with pytest.raises(GridRequestError) as caught:
        grant(live, registration, ("clanker_context", "clanker_delete_everything"))
    assert caught.value.word == "unknown-capability"
    assert GridClient(live.path).list_terminals()[0].bridge == ()


def test_a_terminal_whose_launcher_exited_has_no_authority(
    live: LiveGrid, launcher: subprocess.Popen[bytes]
) -> None:
    registration = register_as(launcher, live.path)
    token = grant(live, registration)
    assert BridgeClient(live.path, token).run("clanker_agents") == {"agents": [], "omitted": 0}
    with live.paused():  # the grid cannot notice the exit before the next request
        end(launcher)
    with pytest.raises(CommandError) as refused:
        BridgeClient(live.path, token).run("clanker_context")
    assert refused.value.exit_code == wire.EXIT_NO_AUTHORITY
    eventually(lambda: GridClient(live.path).list_terminals() == [])


def test_context_and_agents_are_the_callers_own_and_display_safe(
    live: LiveGrid, tmp_path: Path
) -> None:
    workspace = tmp_path / "shop"
    (workspace / "api").mkdir(parents=True)
    me = register(live, cwd=str(workspace / "api"), workspace=str(workspace))
    register(live, cwd=str(workspace), workspace=str(workspace), harness="other-agent")
    register(live, cwd="/tmp", workspace="/tmp", harness="elsewhere-agent")
    token = grant(live, me)
    context = BridgeClient(live.path, token).run("clanker_context")
    assert context == {"workspace": "shop", "environment": "local", "harness": "fake-agent",
                       "checkout": {"kind": "none", "branch": None}, "launchDirectory": "api",
                       "capabilities": sorted(SHIPPED_NAMES)}
    agents = BridgeClient(live.path, token).run("clanker_agents")
    assert [(a["harness"], a["attention"], a["location"]) for a in agents["agents"]] == [
        ("other-agent", "unknown", ".")]
    text = json.dumps([context, agents])
    assert me.terminal not in text and token not in text and str(tmp_path) not in text


def test_a_notification_reaches_watchers_that_asked_for_them(live: LiveGrid) -> None:
    registration = register(live)
    token = grant(live, registration)
    grid = GridClient(live.path)
    events: list[Any] = []
    ready = threading.Event()

    def watch(notifications: bool) -> None:
        with contextlib.closing(grid.subscribe(timeout=30, notifications=notifications)) as stream:
            for event in stream:
                if event.kind.value == "synced":
                    ready.set()
                    if not notifications:
                        return
                if event.kind.value == "notification":
                    events.append(event.notification)
                    return

    watcher = threading.Thread(target=watch, args=(True,))
    watcher.start()
    assert ready.wait(30)
    assert BridgeClient(live.path, token).run_text("clanker_notify", {"message": "review me"}) \
        == {"delivered": 1}
    watcher.join(30)
    [note] = events
    assert (note.terminal, note.harness, note.message, note.location) == (
        registration.terminal, "fake-agent", "review me", "/tmp")


def test_the_raw_credential_is_not_retained_by_the_grid(live: LiveGrid) -> None:
    registration = register(live)
    token = grant(live, registration)
    BridgeClient(live.path, token).run("clanker_context")
    assert live.grid is not None
    gc.collect()
    needle = token[len(wire.TOKEN_PREFIX):]
    assert live.on_loop(lambda grid: _holds(grid, needle)) == []

    # The search does find a copy where there is one.
    def plant(grid: Grid) -> list[str]:
        grid.bridge.__dict__["planted"] = {"deep": [("x", "ckb_" + needle)]}
        try:
            return _holds(grid, needle)
        finally:
            del grid.bridge.__dict__["planted"]

    assert len(live.on_loop(plant)) == 1


def _holds(root: Grid, needle: str) -> list[str]:
    """Every string or bytes reachable from ``root`` that contains ``needle`` (modules,
    classes and functions are not followed: they are code, not the grid's state)."""
    found: list[str] = []
    seen: set[int] = set()
    pending: list[object] = [root]
    encoded = needle.encode()
    while pending:
        item = pending.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, str):
            if needle in item:
                found.append(item)
            continue
        if isinstance(item, bytes | bytearray | memoryview):
            if encoded in bytes(item):
                found.append(repr(item)[:40])
            continue
        if isinstance(item, type | types.ModuleType | types.FunctionType | types.CodeType):
            continue
        pending.extend(gc.get_referents(item))
    return found


# -- a fuzz of hostile requests -----------------------------------------------------------

OPS = ["cmd-list", "cmd-describe", "cmd-run", "bridge-grant", "bridge-revoke"]
junk = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
              st.text(max_size=80)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=12)


@st.composite
def hostile(draw: st.DrawFn, tokens: dict[str, Any]) -> bytes:
    """A request line: malformed, oversized, forged, revoked or another terminal's."""
    kind = draw(st.sampled_from(["fields", "bytes", "huge", "nested", "proto"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200)).replace(b"\n", b" ") + b"\n"
    if kind == "huge":
        return b'{"v":1,"op":"cmd-run","token":"' + b"a" * 70_000 + b'"}\n'
    token = draw(st.sampled_from([tokens["live"], tokens["revoked"], tokens["retired"],
                                  tokens["attention"], "ckb_" + "0" * 64, "x" * 129, None, 5]))
    name = draw(st.sampled_from(["clanker_context", "clanker_notify", "clanker_agents",
                                 "nope", "", None, "CLANKER_CONTEXT", 3]))
    request: dict[str, Any] = {"v": draw(st.sampled_from([1, 1, 1, 2, "1", True])),
                               "op": draw(st.sampled_from([*OPS, "cmd-explode"]))}
    for key, value in (("token", token), ("name", name)):
        if value is not None or draw(st.booleans()):
            request[key] = value
    if kind == "nested":
        request["arguments"] = {"message": draw(junk)}
    elif kind == "proto":
        request["arguments"] = {"__proto__": {"admin": True}, "constructor": draw(junk)}
    else:
        for key in draw(st.lists(st.sampled_from(
                ["arguments", "textArguments", "all", "terminal", "capabilities", "extra"]),
                max_size=3)):
            request[key] = draw(junk)
    if draw(st.booleans()):
        request["terminal"] = tokens["other_terminal"]
    return json.dumps(request).encode() + b"\n"


def test_hostile_cmd_requests_never_crash_and_change_nothing(
    live: LiveGrid, launcher: subprocess.Popen[bytes]
) -> None:
    grid = GridClient(live.path)
    mine, other, gone = register(live), register(live), register_as(launcher, live.path)
    tokens = {"live": grant(live, mine, ("clanker_context", "clanker_agents")),
              "revoked": grant(live, other), "retired": grant(live, gone),
              "attention": mine.token, "other_terminal": other.terminal}
    grid.revoke_bridge(other.terminal, other.token)
    end(launcher)
    eventually(lambda: len(grid.list_terminals()) == 2)
    before = [(e.terminal, e.bridge, e.revision) for e in grid.list_terminals()]
    words: dict[str, int] = {}

    @settings(max_examples=600, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(hostile(tokens))
    def probe(line: bytes) -> None:
        for reply in raw(live.path, line):
            assert reply["v"] == 1 and reply["ok"] in (True, False)
            if not reply["ok"]:
                assert reply["error"] != "internal", line
                words[reply["error"]] = words.get(reply["error"], 0) + 1
                assert tokens["live"] not in json.dumps(reply)

    probe()
    assert live.grid is not None and live.grid.running
    assert grid.hello().terminals == 2
    assert [(e.terminal, e.bridge, e.revision) for e in grid.list_terminals()] == before
    assert BridgeClient(live.path, tokens["live"]).run("clanker_context")["harness"] == \
        "fake-agent"
    assert {"bad-request", "unauthorized", "too-large"} <= set(words)
