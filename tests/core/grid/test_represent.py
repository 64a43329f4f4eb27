"""A launcher re-presents its terminal to the grid that replaced the one it registered
with: real in-process grids, one after the other on one real Unix socket."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from clanker.grid.client import GridClient
from clanker.grid.errors import GridRequestError
from clanker.grid.protocol import Registration
from clanker.grid.server import Grid
from tests.core.grid.conftest import root
from tests.core.grid.test_server import call, raw_exchange, register

GRANTS = ("clanker_agents",)


def one_grid_then_another(
    sock: Path, first: Callable[[Grid, GridClient], Awaitable[object]],
    then: Callable[[Grid, GridClient, object], Awaitable[None]],
) -> None:
    """Run ``first`` against a grid, stop it, then ``then`` against a new grid on the same
    socket with what ``first`` returned (what a launcher kept)."""

    async def main() -> None:
        client = GridClient(sock, timeout=10)
        async with Grid(sock) as grid:
            kept = await first(grid, client)
        async with Grid(sock) as grid:
            await then(grid, client, kept)

    asyncio.run(main())


def again(client: GridClient, registration: Registration, *, pid: int | None = None,
          cwd: str = "/tmp") -> Registration:
    return client.register(harness="fake-agent", workspace=cwd, cwd=cwd,
                           launcher_pid=os.getpid() if pid is None else pid,
                           represent=registration)


def cmd_list(sock: Path, token: str) -> dict[str, object]:
    [line] = raw_exchange(sock, json.dumps({"v": 1, "op": "cmd-list", "token": token})
                          .encode() + b"\n")
    answer: dict[str, object] = json.loads(line)
    return answer


def test_the_next_grid_takes_up_a_terminal_with_its_id_and_credential(short_dir: Path) -> None:
    sock = short_dir / "g.sock"

    async def first(grid: Grid, client: GridClient) -> object:
        return await call(register, client, os.getpid(), "/work/here")

    async def then(grid: Grid, client: GridClient, kept: object) -> None:
        assert isinstance(kept, Registration)
        taken = await call(again, client, kept, cwd="/work/here")
        assert taken == kept
        [entry] = await call(client.list_terminals)
        assert (entry.terminal, entry.cwd) == (kept.terminal, "/work/here")
        # The hooks' credential works as it did on the first grid.
        decisions = await call(client.deliver, kept.terminal, kept.token,
                               [root("session_started")])
        assert decisions == ["accepted"]
        # Once held, never again: not while it lives, nor once it is retired.
        for retire in (True, False):
            with pytest.raises(GridRequestError) as caught:
                await call(again, client, kept)
            assert caught.value.word == "unauthorized"
            if retire:
                await call(client.retire, kept.terminal, kept.token)
        assert grid.entries() == []

    one_grid_then_another(sock, first, then)


def test_only_the_launcher_itself_may_re_present_a_terminal(short_dir: Path) -> None:
    sock = short_dir / "g.sock"

    async def first(grid: Grid, client: GridClient) -> object:
        return await call(register, client, os.getpid())

    async def then(grid: Grid, client: GridClient, kept: object) -> None:
        assert isinstance(kept, Registration)
        # This process's parent is a launcher it may register for, not one whose
        # terminal it may re-present (a harness's hook holds the credential too).
        with pytest.raises(GridRequestError) as caught:
            await call(again, client, kept, pid=os.getppid())
        assert caught.value.word == "unauthorized"
        for terminal, token in (("t-not-a-grids-id", kept.token),
                                (kept.terminal, "f" * 63 + "g"),
                                (kept.terminal, "A" * 64)):
            with pytest.raises(GridRequestError) as caught:
                await call(again, client, Registration(terminal=terminal, token=token))
            assert caught.value.word == "bad-request"
        assert grid.entries() == []

    one_grid_then_another(sock, first, then)


def test_the_bridge_credential_is_carried_once_by_the_re_presenting_launcher(
    short_dir: Path,
) -> None:
    sock = short_dir / "g.sock"

    async def first(grid: Grid, client: GridClient) -> object:
        kept = await call(register, client, os.getpid())
        plain = await call(register, client, os.getpid())
        bridge = await call(client.grant_bridge, kept.terminal, kept.token, GRANTS)
        return kept, bridge, plain

    async def then(grid: Grid, client: GridClient, kept: object) -> None:
        assert isinstance(kept, tuple)
        registration, bridge, plain = kept
        assert (await call(cmd_list, sock, bridge))["ok"] is False  # this grid does not know it yet
        # A terminal that was not re-presented cannot have a credential carried to it.
        fresh = await call(register, client, os.getpid())
        with pytest.raises(GridRequestError) as caught:
            await call(client.grant_bridge_endpoint, fresh.terminal, fresh.token, GRANTS,
                       carry=bridge)
        assert caught.value.word == "unauthorized"
        await call(again, client, registration)
        granted = await call(client.grant_bridge_endpoint, registration.terminal,
                             registration.token, GRANTS, carry=bridge)
        assert granted.bridge_token == bridge
        listed = await call(cmd_list, sock, bridge)
        assert listed["ok"] is True, listed
        assert [c["name"] for c in listed["capabilities"]] == list(GRANTS)  # type: ignore[union-attr]
        # Once: a second carry (of any credential) is refused and changes nothing.
        await call(again, client, plain)
        with pytest.raises(GridRequestError) as caught:
            await call(client.grant_bridge_endpoint, registration.terminal,
                       registration.token, GRANTS, carry=bridge)
        assert caught.value.word == "unauthorized"
        # The credential of another live terminal is never taken for this one.
        with pytest.raises(GridRequestError) as caught:
            await call(client.grant_bridge_endpoint, plain.terminal, plain.token, GRANTS,
                       carry=bridge)
        assert caught.value.word == "unauthorized"
        assert (await call(cmd_list, sock, bridge))["ok"] is True

    one_grid_then_another(sock, first, then)


def test_a_terminal_without_its_credential_or_the_reverse_is_a_bad_request(
    short_dir: Path,
) -> None:
    sock = short_dir / "g.sock"
    base = {"v": 1, "op": "register", "harness": "fake-agent", "cwd": "/tmp",
            "launcherPid": os.getpid()}

    async def body(grid: Grid, client: GridClient) -> None:
        for extra in ({"terminal": "t-" + "0" * 16}, {"token": "0" * 64}):
            [line] = await call(raw_exchange, sock,
                                json.dumps({**base, **extra}).encode() + b"\n")
            assert json.loads(line) == {"v": 1, "ok": False, "error": "bad-request"}
        assert grid.entries() == []

    async def main() -> None:
        async with Grid(sock) as grid:
            await body(grid, GridClient(sock, timeout=10))

    asyncio.run(main())


def test_only_a_carry_the_grid_takes_chooses_where_the_mcp_endpoint_listens(
    short_dir: Path,
) -> None:
    sock = short_dir / "g.sock"
    with socket.socket() as probe:  # a port free a moment ago, as an old grid's was
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def first(grid: Grid, client: GridClient) -> object:
        kept = await call(register, client, os.getpid())
        return kept, await call(client.grant_bridge, kept.terminal, kept.token, GRANTS)

    async def then(grid: Grid, client: GridClient, kept: object) -> None:
        assert isinstance(kept, tuple)
        _, bridge = kept
        # A terminal that was not re-presented (its agent could send this) is refused,
        # and the endpoint its grant started listens where the grid chose, not there.
        fresh = await call(register, client, os.getpid())
        with pytest.raises(GridRequestError) as caught:
            await call(client.grant_bridge_endpoint, fresh.terminal, fresh.token, GRANTS,
                       carry=bridge, mcp_port=port)
        assert caught.value.word == "unauthorized"
        assert grid.mcp_url is not None and f":{port}/" not in grid.mcp_url

    one_grid_then_another(sock, first, then)
