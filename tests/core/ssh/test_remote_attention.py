"""Attention over SSH, end to end against the test sshd.

``clanker launch --host box claude`` (or ``codex``) runs under a
pseudo-terminal here; on the host a double (:data:`_HOOKED`) fires captured
hook payloads through the hooks clanker installed there; the hook bridge on the host writes
OSC frames to its terminal, and the local launcher takes them out of the
stream and hands them to this machine's grid. After each event the double
waits for a line typed on the terminal, so the test reads the grid's state
for each event in turn.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clanker.api import Clanker
from clanker.attention import wire
from clanker.environment.remote_resources import HOST_ROOT
from tests.helpers import CODEX_LIVE_APP_SERVER_ATTENTION, cli_on_terminal
from tests.sshd import Sshd, chown_to

_FIXTURES = Path(__file__).parents[2] / "fixtures"

_HOOKED = '''#!/usr/bin/env python3
"""A Claude Code or Codex double: it speaks their command-hook protocols.

It finds its hooks as each harness does: in each `--settings FILE` (Claude
Code's settings schema: hooks.<Event>[i].hooks[j] with type "command"), and in
each `-c hooks.<Event>=<TOML>` override (Codex's session-flag hooks, the same
shape in TOML). First it writes a
forged attention frame (another terminal's, with a made-up credential) to its
terminal, as any program on the host could. Then, for each payload in
$HOME/payloads.json, it runs that event's commands as Claude Code does
(`sh -c COMMAND`, the payload's JSON on stdin), prints `fired <Event>` and
waits for one line on its terminal. It exits 0 after the last payload.
"""
import base64, json, os, subprocess, sys, tomllib

argv = sys.argv[1:]
hooks = {}
for flag, value in zip(argv, argv[1:]):
    if flag == "--settings":
        with open(value) as f:
            for event, groups in json.load(f)["hooks"].items():
                hooks[event] = [h["command"] for g in groups for h in g["hooks"]
                                if h["type"] == "command"]
    if flag == "-c" and value.startswith("hooks."):
        key, _, toml = value.partition("=")
        groups = tomllib.loads("v = " + toml)["v"]
        hooks[key.removeprefix("hooks.")] = [h["command"] for g in groups for h in g["hooks"]
                                             if h["type"] == "command"]
forged = {"v": 1, "op": "deliver", "terminal": "t-forged", "token": "0" * 64,
          "envelopes": [{"event": "turn_started", "sessionId": "x", "turnId": "y"}]}
sys.stdout.write("\\x1b]7717;clanker-attention;"
                 + base64.b64encode(json.dumps(forged).encode()).decode() + "\\x07")
print("hooks:" + ",".join(sorted(hooks)), flush=True)
with open(os.path.expanduser("~/payloads.json")) as f:
    payloads = json.load(f)
for payload in payloads:
    event = payload["hook_event_name"]
    for command in hooks.get(event, []):
        subprocess.run(["sh", "-c", command], input=json.dumps(payload).encode(), timeout=20)
    print("fired " + event, flush=True)
    sys.stdin.readline()
'''


@pytest.fixture
def remote_claude(sshd: Sshd, remote_bin: Path) -> Iterator[Path]:
    """The double as ``claude`` and ``codex`` on the host's PATH; the host's payloads
    and Claude settings are removed afterwards (clanker's directory with ``remote_bin``'s
    ``~/.local``)."""
    for name in ("claude", "codex"):
        double = remote_bin / name
        double.write_text(_HOOKED)
        double.chmod(0o755)
    try:
        yield sshd.home
    finally:
        (sshd.home / "payloads.json").unlink(missing_ok=True)
        shutil.rmtree(sshd.home / ".claude", ignore_errors=True)


def _place_payloads(home: Path, user: str, *names: str) -> None:
    fixtures = _FIXTURES / "claude" / "attention"
    _place(home, user, [json.loads((fixtures / f"{name}.json").read_text()) for name in names])


def _place(home: Path, user: str, payloads: list[object]) -> None:
    path = home / "payloads.json"
    path.write_text(json.dumps(payloads))
    chown_to(path, user)


# The name the host tests of other harnesses import.
_drive = cli_on_terminal


def test_a_host_s_hook_events_reach_this_machine_s_grid(
    sshd: Sshd, remote_claude: Path
) -> None:
    clanker = Clanker(ssh_config_file=sshd.config_file)
    clanker.add_host("box", sshd.alias)
    _place_payloads(remote_claude, sshd.user, "session-start.startup", "user-prompt-submit",
                    "permission-request", "post-tool-batch", "stop")
    clanker.add_host("other", "nobody@127.0.0.1")
    observed: list[tuple[str, str, int]] = []
    installed: list[list[str]] = []
    shown: list[dict[str, object]] = []

    def on_event(event: str) -> None:
        agents = [a for a in Clanker().agents() if a.harness == "claude"]
        assert len(agents) == 1, "the forged frame registered nothing"
        observed.append((event, agents[0].attention, len(Clanker().agents(host="box"))))
        installed.append(sorted(p.name for p in (remote_claude / HOST_ROOT).iterdir()))
        if event == "Stop":
            shown.extend(_status("--host", "box", "--json"))
            shown.extend(_status("--host", "other", "--json"))

    status, out = _drive(sshd.config_file, ["launch", "--host", "box", "claude", "--cwd",
                                             "/tmp"], on_event)
    assert status == 0, out
    assert observed == [
        ("SessionStart", "idle", 1),
        ("UserPromptSubmit", "working", 1),
        ("PermissionRequest", "needs-input", 1),
        ("PostToolBatch", "working", 1),
        ("Stop", "done", 1),
    ], out
    assert "hooks:" + ",".join(sorted(["SessionStart", "UserPromptSubmit",
                                       "PermissionRequest", "PostToolBatch", "Stop",
                                       "StopFailure", "SessionEnd", "CwdChanged"])) in out
    assert "\x1b]7717" not in out and "clanker-attention" not in out, "no frame is shown"
    assert "attention:" not in out, out
    assert len(installed[0]) == 2 and "lock" in installed[0], "one launch directory"
    # `status --host box` lists it, with the host's directory; another host's lists nothing.
    assert [(row["harness"], row["attention"], row["cwd"]) for row in shown] == [
        ("claude", "done", "/tmp")]
    # Gone from the host, and retired here, once the launch ended.
    assert [p.name for p in (remote_claude / HOST_ROOT).iterdir()] == ["lock"]
    assert [a for a in Clanker().agents() if a.harness == "claude"] == []


def test_codex_on_a_host_reports_through_the_same_transport(
    sshd: Sshd, remote_claude: Path
) -> None:
    """No central list of harnesses: Codex's hooks are arguments naming
    ``$CLANKER_ATTENTION_COMMAND``, which on the host is the hook installed there."""
    clanker = Clanker(ssh_config_file=sshd.config_file)
    clanker.add_host("box", sshd.alias)
    _place(remote_claude, sshd.user, json.loads(
        (_FIXTURES / "codex" / "attention" / "live-app-server.json").read_text()))
    observed: list[tuple[str, str]] = []

    def on_event(event: str) -> None:
        agents = [a for a in Clanker().agents(host="box") if a.harness == "codex"]
        observed.append((event, agents[0].attention))

    status, out = _drive(sshd.config_file, ["launch", "--host", "box", "codex"], on_event)
    assert status == 0, out
    assert observed == CODEX_LIVE_APP_SERVER_ATTENTION, out
    notices = [line for line in out.split("\n") if line.startswith("clanker: ")]
    assert len(notices) == 1 and "trust" in notices[0], out  # the host's Codex asks first
    assert [p.name for p in (remote_claude / HOST_ROOT).iterdir()] == ["lock"]


def _status(*args: str) -> list[dict[str, object]]:
    done = subprocess.run([sys.executable, "-m", "clanker.cli", "status", *args],
                          capture_output=True, text=True, timeout=60, check=True)
    return list(json.loads(done.stdout))


def test_status_of_an_unknown_host_is_a_host_error() -> None:
    done = subprocess.run([sys.executable, "-m", "clanker.cli", "status", "--host", "nowhere"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 40, done.stderr
    assert "nowhere" in done.stderr


def test_the_user_s_own_settings_on_the_host_leave_attention_out_not_the_launch(
    sshd: Sshd, remote_claude: Path
) -> None:
    clanker = Clanker(ssh_config_file=sshd.config_file)
    clanker.add_host("box", sshd.alias)
    _place_payloads(remote_claude, sshd.user, "session-start.startup")
    settings = remote_claude / ".claude"
    settings.mkdir()
    (settings / "settings.json").write_text(json.dumps({"disableAllHooks": True}))
    for path in (settings, settings / "settings.json"):
        chown_to(path, sshd.user)
    seen: list[str] = []

    def on_event(event: str) -> None:
        seen.extend(a.attention for a in Clanker().agents() if a.harness == "claude")

    status, out = _drive(sshd.config_file, ["launch", "--host", "box", "claude"], on_event)
    assert status == 0, out
    notices = [line for line in out.split("\n") if line.startswith("clanker: ")]
    assert len(notices) == 1 and "disableAllHooks" in notices[0], out
    assert "hooks:\n" in out, "no hook of clanker's was handed to the harness"
    assert seen == ["unavailable"]
    root = remote_claude / HOST_ROOT
    assert not root.exists() or [p.name for p in root.iterdir()] == ["lock"]


def test_a_frame_written_without_the_launch_s_credential_changes_nothing() -> None:
    """The forged frame of the double, judged alone: another terminal's, refused."""
    from clanker.grid.remote import RemoteDelivery

    class Grid:
        def deliver(self, *args: object, **kwargs: object) -> list[str]:
            raise AssertionError("nothing reaches the grid")

    delivery = RemoteDelivery(Grid(), "t-mine", "a" * 64)  # type: ignore[arg-type]
    forged = {"v": 1, "op": "deliver", "terminal": "t-forged", "token": "a" * 64,
              "envelopes": []}
    assert not delivery(json.dumps(forged).encode())
    assert not delivery(json.dumps({**forged, "terminal": "t-mine", "token": "b" * 64})
                        .encode())
    assert not delivery(json.dumps({**forged, "terminal": "t-mine", "extra": 1}).encode())
    assert not delivery(base64.b64encode(b"not json"))
    assert delivery.refused == 4
    assert wire.FRAME_START.startswith("\x1b]")


def test_a_grid_that_keeps_failing_is_given_no_more_deliveries() -> None:
    """Each delivery holds the terminal's output up: a grid that is gone costs three."""
    from clanker.grid.remote import MAX_FAILURES, RemoteDelivery

    class Gone:
        calls = 0

        def deliver(self, *args: object, **kwargs: object) -> list[str]:
            self.calls += 1
            raise OSError("no grid")

    grid = Gone()
    delivery = RemoteDelivery(grid, "t-mine", "a" * 64)  # type: ignore[arg-type]
    frame = json.dumps({"v": 1, "op": "deliver", "terminal": "t-mine", "token": "a" * 64,
                        "envelopes": [{"event": "turn_started"}]}).encode()
    assert not any(delivery(frame) for _ in range(10))
    assert grid.calls == MAX_FAILURES and delivery.failed == 10
