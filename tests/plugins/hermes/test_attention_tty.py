"""Hermes attention on an SSH host: the real observer file delivering frames on a terminal.

Each test runs the plugin in a child Python process of its own session (no
controlling terminal, as in the tests of the hook bridge's tty transport), with
its standard output on the slave side of a real pseudo-terminal. The child
loads the plugin by path as Hermes loads ``__init__.py``, registers it with a
context that records callbacks as Hermes's ``PluginContext.register_hook``
does, fires hermes-agent 0.19.0's hook keywords and waits for the observer to
drain. The parent reads the master side and takes the frames out with
clanker's own :class:`~clanker.attention.frames.FrameExtractor`, as the local
launcher does.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clanker.attention.envelope import parse_envelope
from clanker.attention.frames import FrameExtractor
from clanker_hermes.attention import OBSERVER_SOURCE

ROOT = "20261130_120000_aaaaaa"
TASK = "00000000-0000-4000-8000-000000000001"
TURN = f"{ROOT}:{TASK}:0000aaa1"
TOKEN = "cd" * 32
SECRET = "do-not-forward-this-text"
CHILD_SECONDS = 60

CHILD = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("hermes_plugins.clanker_attention", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
hooks = {}
class Context:
    def register_hook(self, name, callback):
        hooks.setdefault(name, []).append(callback)
module.register(Context())
sys.stdout.write("registered=%d\\n" % len(hooks))
sys.stdout.flush()
for name, kwargs in json.loads(sys.argv[2]):
    for callback in hooks.get(name, []):
        assert callback(**kwargs) is None
observer = module.loaded_observer()
if observer is not None:
    assert observer.drain(20.0)
    sys.stdout.write("stopped=%s\\n" % observer._stopped)
sys.stdout.write("done\\n")
sys.stdout.flush()
"""


def calls() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("pre_llm_call", {"session_id": ROOT, "task_id": TASK, "turn_id": TURN,
                          "user_message": SECRET, "conversation_history": [],
                          "is_first_turn": True, "model": "probe-model", "platform": "tui",
                          "sender_id": "", "telemetry_schema_version": "hermes.observer.v1"}),
        ("pre_approval_request", {"command": SECRET, "description": SECRET,
                                  "pattern_key": "recursive delete", "surface": "cli",
                                  "turn_id": TURN, "tool_call_id": "call_1"}),
        ("post_approval_response", {"command": SECRET, "pattern_key": "recursive delete",
                                    "surface": "cli", "turn_id": TURN,
                                    "tool_call_id": "call_1", "choice": "once"}),
        ("post_llm_call", {"session_id": ROOT, "task_id": TASK, "turn_id": TURN,
                           "user_message": SECRET, "assistant_response": SECRET,
                           "conversation_history": [], "model": "probe-model",
                           "platform": "tui"}),
    ]


def write_credential(path: Path, value: object, mode: int = 0o600) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    path.chmod(mode)
    return path


def run_on_terminal(env: dict[str, str]) -> tuple[bytes, list[dict[str, Any]], int]:
    """Run the child on a fresh pseudo-terminal; its shown output, the frames' requests,
    and how many frames were dropped."""
    master, slave = pty.openpty()
    base = {key: value for key, value in os.environ.items()
            if not key.startswith(("CLANKER_ATTENTION_", "HERMES_"))}
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", "-c", CHILD, str(OBSERVER_SOURCE), json.dumps(calls())],
            stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE,
            env={**base, **env}, start_new_session=True,
        )
    finally:
        os.close(slave)
    requests: list[dict[str, Any]] = []
    extractor = FrameExtractor(lambda payload: requests.append(json.loads(payload)) is None)
    shown = bytearray()
    try:
        while True:
            try:
                chunk = os.read(master, 65_536)
            except OSError:  # EIO: every slave descriptor is closed
                break
            if not chunk:
                break
            shown += extractor.feed(chunk)
        shown += extractor.flush()
        _, stderr = process.communicate(timeout=CHILD_SECONDS)
    finally:
        os.close(master)
    assert process.returncode == 0, stderr.decode()
    return bytes(shown), requests, extractor.dropped


def test_host_route_writes_the_turn_as_frames(tmp_path: Path) -> None:
    credential = write_credential(tmp_path / "credential.json",
                                  {"v": 1, "terminal": "t-host", "token": TOKEN})
    shown, requests, dropped = run_on_terminal({
        "CLANKER_ATTENTION_TRANSPORT": "tty",
        "CLANKER_ATTENTION_CREDENTIAL": str(credential),
        "HERMES_HOME": str(tmp_path / "no-hermes-home"),
    })
    assert dropped == 0
    assert b"registered=8" in shown and b"stopped=False" in shown and b"done" in shown
    assert b"\x1b]7717" not in shown  # every frame was taken out before display
    envelopes = []
    for request in requests:
        assert request["v"] == 1 and request["op"] == "deliver"
        assert request["terminal"] == "t-host" and request["token"] == TOKEN
        envelopes += request["envelopes"]
    for envelope in envelopes:
        parse_envelope(envelope)
    assert [(e["event"], e["sessionId"], e["turnId"]) for e in envelopes] == [
        ("turn_started", ROOT, TURN),
        ("input_requested", ROOT, TURN),
        ("input_resolved", ROOT, TURN),
        ("turn_completed", ROOT, TURN),
    ]
    assert SECRET not in json.dumps(requests)


@pytest.mark.parametrize("case", ["group-readable", "wrong-version", "not-json", "link",
                                  "missing", "relative", "spaces-in-token"])
def test_a_bad_credential_file_leaves_the_plugin_inert(tmp_path: Path, case: str) -> None:
    good = {"v": 1, "terminal": "t-host", "token": TOKEN}
    path = tmp_path / "credential.json"
    if case == "group-readable":
        write_credential(path, good, 0o640)
    elif case == "wrong-version":
        write_credential(path, {**good, "v": 2})
    elif case == "not-json":
        path.write_text("{", encoding="utf-8")
        path.chmod(0o600)
    elif case == "link":
        (tmp_path / "real.json").symlink_to(write_credential(tmp_path / "target.json", good))
        path = tmp_path / "real.json"
    elif case == "spaces-in-token":
        write_credential(path, {**good, "token": "a b" * 10})
    name = "credential.json" if case == "relative" else str(path)
    shown, requests, _ = run_on_terminal({
        "CLANKER_ATTENTION_TRANSPORT": "tty",
        "CLANKER_ATTENTION_CREDENTIAL": name,
        # The local route's variables do not stand in for a missing credential file.
        "CLANKER_ATTENTION_SOCKET": str(tmp_path / "g.sock"),
        "CLANKER_ATTENTION_TERMINAL": "t-local",
        "CLANKER_ATTENTION_TOKEN": TOKEN,
    })
    assert b"registered=0" in shown and b"done" in shown
    assert requests == []


def test_without_a_terminal_delivery_stops_and_hermes_goes_on(tmp_path: Path) -> None:
    credential = write_credential(tmp_path / "credential.json",
                                  {"v": 1, "terminal": "t-host", "token": TOKEN})
    base = {key: value for key, value in os.environ.items()
            if not key.startswith(("CLANKER_ATTENTION_", "HERMES_"))}
    done = subprocess.run(
        [sys.executable, "-I", "-c", CHILD, str(OBSERVER_SOURCE), json.dumps(calls())],
        stdin=subprocess.DEVNULL, capture_output=True, start_new_session=True,
        env={**base, "CLANKER_ATTENTION_TRANSPORT": "tty",
             "CLANKER_ATTENTION_CREDENTIAL": str(credential)},
        timeout=CHILD_SECONDS, check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.splitlines() == [b"registered=8", b"stopped=True", b"done"]


def test_the_plugin_frames_as_the_wire_schema_says() -> None:
    """The plugin repeats the frame's constants (it imports no clanker): they must agree."""
    import importlib.util

    from clanker.attention import wire

    spec = importlib.util.spec_from_file_location("hermes_plugins.frame_check", OBSERVER_SOURCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    start, end = module.FRAME_START, module.FRAME_END
    assert start == wire.FRAME_START.encode("ascii")
    assert end == wire.FRAME_END.encode("ascii")
    assert module.MAX_FRAME_BYTES == wire.MAX_FRAME_BYTES
    assert module.frame(b"x" * wire.MAX_FRAME_BYTES) is None
