"""The tty observer transport: the hook bridge's OSC frames and the launcher's extraction.

No sshd here: the hook bridge runs on this machine under a pseudo-terminal of
its own, exactly as it runs under the host's terminal on a host.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from clanker.attention import wire
from clanker.attention.frames import FrameExtractor
from clanker.attention.hook import frame
from clanker.environment.pty_relay import PtyChild, PtyRelay

HOOK = Path(wire.__file__).with_name("hook.py")
TOKEN = "ab" * 32

# Reports what the payload asks it to: {"emit": [envelope, ...]} (the tests' interpreter).
_INTERPRETER = '''
def interpret(payload, state):
    return list(payload.get("emit", [])), state
'''


class Sink:
    def __init__(self, accept: bool = True) -> None:
        self.payloads: list[bytes] = []
        self.accept = accept

    def __call__(self, payload: bytes) -> bool:
        self.payloads.append(payload)
        return self.accept


def _frame(payload: bytes) -> bytes:
    return wire.FRAME_START.encode() + base64.b64encode(payload) + wire.FRAME_END.encode()


# Output a harness may write: anything, even escape sequences, but never a frame's start.
_output = st.binary(max_size=200).filter(lambda b: wire.FRAME_START.encode() not in b)


@given(pieces=st.lists(st.tuples(_output, st.binary(min_size=1, max_size=300)), max_size=6),
       tail=_output, cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12))
def test_frames_come_out_whole_wherever_the_reads_split_them(
    pieces: list[tuple[bytes, bytes]], tail: bytes, cuts: list[int]
) -> None:
    stream = b"".join(out + _frame(payload) for out, payload in pieces) + tail
    sink = Sink()
    extractor = FrameExtractor(sink)
    shown = b""
    start = 0
    for cut in sorted({c for c in cuts if c < len(stream)}):
        shown += extractor.feed(stream[start:cut])
        start = cut
    shown += extractor.feed(stream[start:]) + extractor.flush()
    assert sink.payloads == [payload for _, payload in pieces]
    assert shown == b"".join(out for out, _ in pieces) + tail
    assert extractor.frames == len(pieces) and extractor.dropped == 0


def test_an_oversized_frame_is_dropped_and_never_shown() -> None:
    sink = Sink()
    extractor = FrameExtractor(sink)
    huge = wire.FRAME_START.encode() + b"A" * wire.MAX_FRAME_BYTES + wire.FRAME_END.encode()
    shown = b""
    for offset in range(0, len(huge), 1000):
        shown += extractor.feed(huge[offset:offset + 1000])
    shown += extractor.feed(b"after" + _frame(b"{}"))
    assert shown == b"after"
    assert sink.payloads == [b"{}"]
    assert extractor.dropped == 1


def test_malformed_frames_are_dropped_and_counted() -> None:
    sink = Sink()
    extractor = FrameExtractor(sink)
    start = wire.FRAME_START.encode()
    shown = extractor.feed(start + b"not base64!" + b"\x07" + b"x")
    assert shown == b" base64!\x07x", "from the byte that broke the frame on, it is output"
    shown = extractor.feed(start + b"QQ=\x07")  # padding that does not decode
    assert shown == b""
    shown = extractor.feed(start + b"QUFB\x1b[0m")  # interrupted by the harness's output
    assert shown == b"\x1b[0m"
    assert extractor.dropped == 3 and sink.payloads == []
    # A frame the sink refuses (another terminal's, say) is counted too.
    refusing = FrameExtractor(Sink(accept=False))
    assert refusing.feed(_frame(b"{}")) == b"" and refusing.dropped == 1
    # ESC \ ends a frame as BEL does.
    assert extractor.feed(start + base64.b64encode(b"ok") + b"\x1b\\") == b""
    assert sink.payloads == [b"ok"]


def _bridge_env(tmp_path: Path) -> dict[str, str]:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    interpreter = tmp_path / "interpreter.py"
    interpreter.write_text(_INTERPRETER)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "CLANKER_ATTENTION_TRANSPORT": "tty",
            "CLANKER_ATTENTION_INTERPRETER": str(interpreter),
            "CLANKER_ATTENTION_TERMINAL": "t-remote",
            "CLANKER_ATTENTION_TOKEN": TOKEN,
            "CLANKER_ATTENTION_STATE": str(state)}


def _relay_frames(child: PtyChild) -> tuple[Sink, bytes]:
    """Relay ``child``'s terminal to completion (it must exit 0) with the frames taken
    out: what they delivered, and the first read of what was left for the person."""
    sink = Sink()
    extractor = FrameExtractor(sink)
    read_end, write_end = os.pipe()
    relay = PtyRelay(child, stdin_fd=os.open(os.devnull, os.O_RDONLY), stdout_fd=write_end,
                     output_filter=extractor.feed)
    try:
        assert relay.run() == 0
    finally:
        relay.close()
        os.close(write_end)
    try:
        return sink, os.read(read_end, 65536)
    finally:
        os.close(read_end)


def test_the_hook_writes_its_delivery_to_its_terminal_as_one_frame(tmp_path: Path) -> None:
    """The bridge run as a harness runs it on a host: its payload on stdin, its
    controlling terminal a PTY; what it writes there is taken out whole."""
    envelope = {"event": "turn_started", "sessionId": "s1", "turnId": "u1", "scope": "root"}
    payload = json.dumps({"emit": [envelope]}).encode()
    script = tmp_path / "run"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S {HOOK} < {tmp_path}/payload\n")
    script.chmod(0o700)
    (tmp_path / "payload").write_bytes(payload)
    sink, shown = _relay_frames(
        PtyChild.spawn((str(script),), _bridge_env(tmp_path), str(tmp_path)))
    assert shown == b"", "nothing of the frame reaches the person's terminal"
    assert len(sink.payloads) == 1
    request = json.loads(sink.payloads[0])
    assert request == {"v": 1, "op": "deliver", "terminal": "t-remote", "token": TOKEN,
                       "envelopes": [envelope]}


# A harness that runs its hooks in a session of their own (without a controlling
# terminal), as Codex 0.171.0 does; its own stdout is its terminal.
_DETACHING_HARNESS = """
import os, subprocess, sys
hook_env = {**os.environ, "CLANKER_ATTENTION_COMMAND": sys.argv[3]}
with open(sys.argv[2], "rb") as payload:
    subprocess.run([sys.executable, "-I", "-S", sys.argv[1]], stdin=payload, env=hook_env,
                   start_new_session=True, check=True)
"""


def _detached_run(tmp_path: Path, *, harness_command: str, hook_command: str) -> Sink:
    envelope = {"event": "turn_started", "sessionId": "s1", "turnId": "u1", "scope": "root"}
    (tmp_path / "payload").write_bytes(json.dumps({"emit": [envelope]}).encode())
    harness = tmp_path / "harness.py"
    harness.write_text(_DETACHING_HARNESS)
    env = {**_bridge_env(tmp_path), "CLANKER_ATTENTION_COMMAND": harness_command}
    child = PtyChild.spawn((sys.executable, str(harness), str(HOOK), str(tmp_path / "payload"),
                            hook_command), env, str(tmp_path))
    return _relay_frames(child)[0]


def test_a_hook_without_a_controlling_terminal_writes_to_its_launch_s_terminal(
    tmp_path: Path
) -> None:
    sink = _detached_run(tmp_path, harness_command="/launch/hook", hook_command="/launch/hook")
    assert len(sink.payloads) == 1
    assert json.loads(sink.payloads[0])["terminal"] == "t-remote"


def test_a_hook_writes_to_no_terminal_but_its_launch_s(tmp_path: Path) -> None:
    """The ancestor's terminal is used only when that ancestor belongs to this launch."""
    sink = _detached_run(tmp_path, harness_command="/another/hook", hook_command="/launch/hook")
    assert sink.payloads == []
    assert (tmp_path / "state" / "failed").stat().st_size == 1


def test_without_a_terminal_the_hook_delivers_nothing_and_counts_it(tmp_path: Path) -> None:
    env = _bridge_env(tmp_path)
    done = subprocess.run([sys.executable, "-I", "-S", str(HOOK)],
                          input=json.dumps({"emit": [{"event": "turn_started",
                                                      "sessionId": "s", "turnId": "u"}]}).encode(),
                          capture_output=True, env=env, timeout=30, check=False,
                          start_new_session=True)  # no controlling terminal at all
    assert done.returncode == 0 and done.stdout == b""
    assert (tmp_path / "state" / "poison").exists()
    assert (tmp_path / "state" / "failed").stat().st_size == 1


def test_a_frame_is_bounded_by_the_wire_schema() -> None:
    assert frame(b"x" * wire.MAX_FRAME_BYTES) is None
    assert frame(b"{}") == _frame(b"{}")
