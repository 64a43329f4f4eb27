"""The launcher's side of taking a terminal up with the next grid
(:mod:`clanker.launch.readopt`), against the real grid daemon a launch starts."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket as socketlib
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from attrs import evolve

from clanker import hookimpl
from clanker.grid.client import GridClient
from clanker.grid.daemon import (
    ensure_running,
    grid_location,
    status,
    stop,
    stopped_on_request,
)
from clanker.grid.errors import GridError
from clanker.grid.protocol import ProtocolError, Registration
from clanker.launch.readopt import Readopter, Readoption, ReadoptionHandle
from clanker.paths import clanker_paths
from tests.core.grid.conftest import root
from tests.helpers import kill_grid


def readoption(registration: Registration, socket: Path, *, cwd: str = "/tmp",
               bridge: str | None = None) -> Readoption:
    return Readoption(paths=clanker_paths(), socket=socket, harness="fake-agent",
                      workspace=cwd, cwd=cwd, launcher_pid=os.getpid(),
                      registration=registration, bridge_token=bridge,
                      grants=("clanker_agents",) if bridge else ())


def test_the_next_grid_is_started_and_takes_the_terminal_and_its_bridge_up(
    grid_home: Path,
) -> None:
    socket = ensure_running(clanker_paths())
    client = GridClient(socket)
    registration = client.register(harness="fake-agent", workspace="/tmp", cwd="/tmp",
                                   launcher_pid=os.getpid())
    bridge = client.grant_bridge(registration.terminal, registration.token,
                                 ["clanker_agents"])
    old = client.hello().pid
    kill_grid(socket)
    taken, notice = Readopter(readoption(registration, socket, bridge=bridge),
                              ended=threading.Event()).run()
    assert taken, notice
    assert notice.startswith("attention restored")
    assert client.hello().pid != old
    [entry] = client.list_terminals()
    assert (entry.terminal, entry.harness, entry.cwd) == (registration.terminal,
                                                          "fake-agent", "/tmp")
    assert entry.bridge
    assert client.deliver(registration.terminal, registration.token,
                          [root("session_started")]) == ["accepted"]


def _bridged_then_killed() -> tuple[Readoption, GridClient, str]:
    """A terminal with a bridge and its MCP endpoint, on a grid then killed."""
    socket = ensure_running(clanker_paths())
    client = GridClient(socket)
    registration = client.register(harness="fake-agent", workspace="/tmp", cwd="/tmp",
                                   launcher_pid=os.getpid())
    granted = client.grant_bridge_endpoint(registration.terminal, registration.token,
                                           ["clanker_agents"])
    assert granted.mcp_url is not None
    kill_grid(socket)
    held = evolve(readoption(registration, socket, bridge=granted.bridge_token),
                  mcp_url=granted.mcp_url)
    return held, client, granted.mcp_url


def _endpoint_now(client: GridClient, held: Readoption) -> str | None:
    """The MCP URL the grid answers a fresh grant with now (the endpoint runs once)."""
    return client.grant_bridge_endpoint(held.registration.terminal, held.registration.token,
                                        ["clanker_agents"]).mcp_url


def test_the_next_grid_starts_its_mcp_endpoint_on_the_port_the_agent_holds(
    grid_home: Path,
) -> None:
    held, client, url = _bridged_then_killed()
    taken, notice = Readopter(held, ended=threading.Event()).run()
    assert taken, notice
    assert notice == "attention restored: the grid restarted and has this agent again"
    assert _endpoint_now(client, held) == url


def test_an_earlier_port_taken_meanwhile_is_said_and_the_endpoint_listens_elsewhere(
    grid_home: Path,
) -> None:
    held, client, url = _bridged_then_killed()
    port = urlsplit(url).port
    assert port is not None
    with socketlib.socket() as squatter:  # another program has the port now
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        taken, notice = Readopter(held, ended=threading.Event()).run()
        assert taken, notice
        assert "not at the MCP endpoint the agent holds" in notice
        now = _endpoint_now(client, held)
    assert now is not None and now != url
    assert urlsplit(now).hostname == "127.0.0.1"


def test_a_port_is_sent_only_with_a_carried_credential_and_only_a_port() -> None:
    from clanker.grid.protocol import BridgeGrantRequest, encode_request, parse_request

    base = {"terminal": "t-" + "0" * 16, "token": "0" * 64, "capabilities": ["clanker_agents"]}
    fresh = json.loads(encode_request(BridgeGrantRequest(**base)))
    assert "mcpPort" not in fresh
    carried = BridgeGrantRequest(**base, bridge_token="ckb_" + "1" * 64, mcp_port=4321)
    assert parse_request(encode_request(carried)) == carried
    for wrong in (0, 65_536, "4321", True, 4321.0):
        line = json.dumps({**json.loads(encode_request(carried)), "mcpPort": wrong})
        with pytest.raises(ProtocolError):
            parse_request(line.encode())


def test_a_terminal_listed_without_attention_is_listed_so_again(grid_home: Path) -> None:
    socket = ensure_running(clanker_paths())
    client = GridClient(socket)
    registration = client.register(harness="fake-agent", workspace="/tmp", cwd="/tmp",
                                   launcher_pid=os.getpid())
    client.decline(registration.terminal, registration.token, "your own setup owns it")
    kill_grid(socket)
    handle = ReadoptionHandle()
    handle.terminal(readoption(registration, socket))
    handle.decline("your own setup owns it")
    assert handle.value is not None
    taken, notice = Readopter(handle.value, ended=threading.Event()).run()
    assert taken, notice
    [entry] = client.list_terminals()
    assert (entry.terminal, entry.attention) == (registration.terminal, "unavailable")


def test_a_grid_that_refuses_the_terminal_is_given_up_at_once(grid_home: Path) -> None:
    socket = ensure_running(clanker_paths())
    client = GridClient(socket)
    registration = client.register(harness="fake-agent", workspace="/tmp", cwd="/tmp",
                                   launcher_pid=os.getpid())
    # The grid running holds this terminal: no attempt could change its answer.
    taken, notice = Readopter(readoption(registration, socket), ended=threading.Event(),
                              attempts=100, first_delay=0.01).run()
    assert not taken
    assert notice == ("attention is unavailable from now on: the grid refused the terminal "
                      "(unauthorized) (launch the agent again to get it back)")


def test_a_grid_that_cannot_start_is_tried_a_bounded_number_of_times(
    grid_home: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="clanker.launch.readopt")
    socket = ensure_running(clanker_paths())
    registration = GridClient(socket).register(harness="fake-agent", workspace="/tmp",
                                               cwd="/tmp", launcher_pid=os.getpid())
    kill_grid(socket)
    directory = socket.parent
    directory.chmod(0o755)  # not 0700 any more: no grid starts there
    try:
        taken, notice = Readopter(readoption(registration, socket), ended=threading.Event(),
                                  attempts=3, first_delay=0.01).run()
    finally:
        directory.chmod(0o700)
    assert not taken
    assert notice.startswith("attention is unavailable from now on: the grid did not start")
    tried = [r.getMessage() for r in caplog.records if "attempt" in r.getMessage()]
    assert [m.split(" failed")[0] for m in tried] == [
        "readopt: attempt 1 of 3", "readopt: attempt 2 of 3", "readopt: attempt 3 of 3"]


def test_a_grid_stopped_on_request_stays_stopped_until_one_is_started(grid_home: Path) -> None:
    paths = clanker_paths()
    socket = ensure_running(paths)
    registration = GridClient(socket).register(harness="fake-agent", workspace="/tmp",
                                               cwd="/tmp", launcher_pid=os.getpid())
    assert stop(paths)
    taken, notice = Readopter(readoption(registration, socket), ended=threading.Event(),
                              attempts=100, first_delay=0.01).run()
    assert not taken
    assert notice.startswith("attention is unavailable from now on: the grid was stopped "
                             "with `clanker grid stop`")
    assert not status(paths).running  # nothing started one
    # A grid started on purpose clears the mark: a grid killed after it is replaced.
    ensure_running(paths)
    assert not stopped_on_request(paths)
    kill_grid(socket)
    taken, notice = Readopter(readoption(registration, socket), ended=threading.Event(),
                              first_delay=0.01).run()
    assert taken, notice


def test_a_launch_that_ends_stops_the_attempts(grid_home: Path) -> None:
    ended = threading.Event()
    ended.set()
    registration = Registration(terminal="t-" + "0" * 16, token="0" * 64)
    taken, _ = Readopter(readoption(registration, grid_location().socket), ended=ended,
                         first_delay=3600).run()
    assert not taken  # at once, though the first wait is an hour
    assert not grid_location().socket.exists()  # and no grid was started


def test_the_handle_carries_only_the_bridge_of_its_own_terminal() -> None:
    handle = ReadoptionHandle()
    mine = Registration(terminal="t-" + "1" * 16, token="1" * 64)
    other = Registration(terminal="t-" + "2" * 16, token="2" * 64)
    handle.terminal(readoption(mine, Path("/tmp/g.sock")))
    handle.bridge(other, "ckb_x", ["clanker_agents"])
    assert handle.value is not None and handle.value.bridge_token is None
    handle.bridge(mine, "ckb_y", ["clanker_agents"])
    assert handle.value.bridge_token == "ckb_y"
    assert handle.value.grants == ("clanker_agents",)
    assert "ckb_y" not in repr(handle.value) and mine.token not in repr(handle.value)


# `fake-agent`: writes the attention variables it was launched with to $FAKE_SEEN, then
# waits (bounded) for $FAKE_GO before exiting 0, as a harness whose hooks hold them does.
AGENT = """
    import json, os, pathlib, time
    names = ("CLANKER_ATTENTION_SOCKET", "CLANKER_ATTENTION_TERMINAL", "CLANKER_ATTENTION_TOKEN")
    seen = pathlib.Path(os.environ["FAKE_SEEN"])
    seen.with_suffix(".tmp").write_text(json.dumps({n: os.environ.get(n) for n in names}))
    seen.with_suffix(".tmp").rename(seen)
    for _ in range(1200):
        if pathlib.Path(os.environ["FAKE_GO"]).exists():
            break
        time.sleep(0.05)
"""


def test_a_launch_in_the_foreground_is_taken_up_by_the_grid_that_replaced_a_killed_one(
    grid_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from clanker.api import Clanker
    from clanker.launch.request import LaunchRequest
    from clanker.launch.service import LaunchOptions
    from clanker.registry import Registry
    from clanker.testing.doubles import prepend_to_path
    from tests.core.bridge.test_launch import Accepting
    from tests.helpers import make_plugin, write_script

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "fake-agent", AGENT)
    prepend_to_path(monkeypatch, bin_dir)
    seen, go = tmp_path / "seen.json", tmp_path / "go"
    monkeypatch.setenv("FAKE_SEEN", str(seen))
    monkeypatch.setenv("FAKE_GO", str(go))
    made = make_plugin()
    type(made).clanker_attention = hookimpl(lambda self: Accepting())  # type: ignore[attr-defined]
    clanker = Clanker(registry=Registry.from_plugins({"fake-agent": made}, environ={}))
    failures: list[BaseException] = []

    def meanwhile() -> None:
        try:
            for _ in range(1200):
                if seen.exists():
                    break
                threading.Event().wait(0.05)
            env = json.loads(seen.read_text())
            socket = Path(env["CLANKER_ATTENTION_SOCKET"])
            terminal, token = env["CLANKER_ATTENTION_TERMINAL"], env["CLANKER_ATTENTION_TOKEN"]
            old = GridClient(socket).hello().pid
            kill_grid(socket)
            for _ in range(1200):  # the launcher starts the next grid and re-presents
                with contextlib.suppress(GridError):
                    client = GridClient(socket)
                    if client.hello().pid != old and \
                            [e.terminal for e in client.list_terminals()] == [terminal]:
                        break
                threading.Event().wait(0.05)
            # The hooks' credential, unchanged, is the terminal's on the next grid.
            assert GridClient(socket).deliver(terminal, token,
                                              [root("session_started")]) == ["accepted"]
        except BaseException as error:
            failures.append(error)
        finally:
            go.touch()

    helper = threading.Thread(target=meanwhile)
    helper.start()
    status = clanker.launch("fake-agent", LaunchRequest(cwd=str(tmp_path)),
                            LaunchOptions(bridge=False))
    helper.join()
    assert not failures, failures
    assert status == 0
    assert "clanker: attention restored" in capsys.readouterr().err
    assert GridClient(grid_location().socket).list_terminals() == []  # retired at the end
