"""Failed-closed transactions are counted where a person looks: the real bridge, the real
daemon, ``clanker status`` and ``clanker attention explain``; and the ``deliver``
request that carries the count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from clanker.attention import hook
from clanker.cli import cli
from clanker.grid import daemon
from clanker.grid.client import GridClient
from clanker.grid.protocol import (
    DeliverRequest,
    ErrorWord,
    ProtocolError,
    encode_request,
    parse_request,
)

TOKEN = "ab" * 32
COUNTER = """
HOOK_STDOUT = ""

def interpret(payload, state):
    n = state.get("n", 0)
    return ([{"event": "turn_started", "scope": "root", "sessionId": "s", "turnId": "t%d" % n}],
            {"n": n + 1})
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def home(grid_home: Path) -> Path:
    return grid_home


def _hook(env: dict[str, str], stdin: bytes) -> None:
    done = subprocess.run([sys.executable, "-I", "-S", str(Path(hook.__file__))], input=stdin,
                          env=env, capture_output=True, timeout=30, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_status_and_explain_show_how_many_transactions_failed_closed(
    home: Path, tmp_path: Path,
) -> None:
    socket = daemon.ensure_running()
    client = GridClient(socket)
    registration = client.register(harness="fake-agent", workspace="/tmp", cwd="/tmp",
                                   launcher_pid=os.getpid())
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    interpreter = tmp_path / "counter.py"
    interpreter.write_text(COUNTER)
    env = {"CLANKER_ATTENTION_INTERPRETER": str(interpreter),
           "CLANKER_ATTENTION_SOCKET": str(socket),
           "CLANKER_ATTENTION_TERMINAL": registration.terminal,
           "CLANKER_ATTENTION_TOKEN": registration.token,
           "CLANKER_ATTENTION_STATE": str(state)}
    [registered] = client.list_terminals()

    _hook(env, b"not json")  # the event cannot be read: counted, reported alone
    _hook(env, b"{" + b" " * (hook.MAX_PAYLOAD + 1) + b"}")  # past the payload bound
    [entry] = client.list_terminals()
    assert entry.failed_closed == 2
    assert entry.revision == registered.revision  # a count is not lifecycle: no revision
    _hook(env, b"{}")  # healthy: the count goes along and is not counted again
    [entry] = client.list_terminals()
    assert (entry.failed_closed, entry.attention) == (2, "working")

    status = invoke("status", "--json")
    assert status.exit_code == 0
    assert json.loads(status.output)[0]["failed_closed"] == 2
    table = invoke("status")
    assert f"* {registration.terminal}: 2 hook transactions failed closed" in table.output
    explained = invoke("attention", "explain", registration.terminal, "--json")
    data = json.loads(explained.output)
    assert (data["failed_closed"], data["explanation"]["failedClosed"]) == (2, 2)
    human = invoke("attention", "explain", registration.terminal)
    assert "failedClosed   2" in human.output
    assert registration.token not in status.output + table.output + human.output


def _deliver(**fields: object) -> bytes:
    return json.dumps({"v": 1, "op": "deliver", "terminal": "t-1", "token": TOKEN,
                       **fields}).encode()


def test_a_deliver_may_carry_a_failed_closed_count_alone() -> None:
    request = parse_request(_deliver(envelopes=[], failedClosed=3))
    assert isinstance(request, DeliverRequest)
    assert (request.envelopes, request.failed_closed) == ([], 3)
    with_events = parse_request(_deliver(envelopes=[{"event": "turn_started"}], failedClosed=0))
    assert isinstance(with_events, DeliverRequest)
    assert with_events.failed_closed == 0


@pytest.mark.parametrize("fields", [
    {"envelopes": []},  # nothing to deliver and no count
    {"envelopes": [], "failedClosed": None},
    {"envelopes": [], "failedClosed": -1},
    {"envelopes": [], "failedClosed": 2**31},
    {"envelopes": [], "failedClosed": "3"},
    {"envelopes": [], "failedClosed": True},
    {"envelopes": [], "failedClosed": 1.0},
])
def test_a_bad_failed_closed_count_is_refused(fields: dict[str, object]) -> None:
    with pytest.raises(ProtocolError) as refused:
        parse_request(_deliver(**fields))
    assert refused.value.word is ErrorWord.BAD_REQUEST


def test_a_deliver_without_a_count_leaves_the_key_out() -> None:
    line = encode_request(DeliverRequest(terminal="t-1", token=TOKEN,
                                         envelopes=[{"event": "turn_started"}]))
    assert "failedClosed" not in json.loads(line)
    counted = encode_request(DeliverRequest(terminal="t-1", token=TOKEN, envelopes=[],
                                            failed_closed=1))
    assert json.loads(counted)["failedClosed"] == 1
