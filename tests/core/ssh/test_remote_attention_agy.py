"""Antigravity's attention over SSH, end to end against the test sshd.

``clanker launch --host box agy`` runs under a pseudo-terminal here. The host
step installs clanker's persistent plugin in the host's
``~/.gemini/config/plugins/clanker-grid-attention`` (the real plugin files:
``guard.sh``, ``hooks.json``, ``plugin.json`` and the ownership marker) beside
the launch's hook bridge; on the host a double (:data:`_AGY`) fires agy's
payloads through the plugin's hooks; the bridge there writes OSC frames to its
terminal and the local launcher hands them to this machine's grid.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from clanker.api import Clanker
from clanker.environment.remote_resources import HOST_ROOT
from clanker_agy.attention import MARKER, MARKER_FILE, PLUGIN_PATH
from tests.core.ssh.test_remote_attention import _drive
from tests.sshd import Sshd, chown_to

_FIXTURES = Path(__file__).parents[2] / "fixtures" / "agy" / "attention"

_AGY = '''#!/usr/bin/env python3
"""An Antigravity double: it runs hooks as agy's plugin contract describes.

Every installed plugin's ``~/.gemini/config/plugins/<name>/hooks.json`` maps a
plugin name to events, each a list of handlers (``type`` "command") or of
matcher groups (``matcher``, a regular expression on the tool's name, with
``hooks``); a plugin whose hooks.json is not JSON contributes none. For each
``{"event", "payload"}`` in ``$HOME/payloads.json`` it runs
that event's matching commands (``sh -c COMMAND``, the payload's JSON on
stdin), prints ``fired <Event> <their stdout>`` and waits for one line on its
terminal. It exits 0 after the last payload. (First it prints the clanker variables
it was given, for the test.)
"""
import glob, json, os, re, subprocess, sys

hooks = {}
for path in sorted(glob.glob(os.path.expanduser("~/.gemini/config/plugins/*/hooks.json"))):
    try:
        with open(path) as f:
            document = json.load(f)
    except ValueError:
        continue  # a plugin whose hooks cannot be read contributes none
    if True:
        for plugin, events in document.items():
            for event, entries in events.items():
                for entry in entries:
                    for handler in entry.get("hooks", [entry]):
                        if handler.get("type") == "command":
                            hooks.setdefault(event, []).append(
                                (entry.get("matcher"), handler["command"]))
print("hooks:" + ",".join(sorted(hooks)), flush=True)
print("env:" + json.dumps({k: v for k, v in os.environ.items() if k.startswith("CLANKER_")}))
with open(os.path.expanduser("~/payloads.json")) as f:
    payloads = json.load(f)
for item in payloads:
    event, payload = item["event"], item["payload"]
    tool = (payload.get("toolCall") or {}).get("name") or ""
    answers = []
    for matcher, command in hooks.get(event, []):
        if matcher is not None and not re.search(matcher, tool):
            continue
        done = subprocess.run(["sh", "-c", command], input=json.dumps(payload).encode(),
                              capture_output=True, timeout=20)
        answers.append(done.stdout.decode().strip())
    print("fired " + event + " " + ";".join(answers), flush=True)
    sys.stdin.readline()
'''

_EVENTS = {"pre-invocation": "PreInvocation", "pre-tool-use": "PreToolUse",
           "post-tool-use": "PostToolUse", "stop": "Stop"}


def _mkdirs(path: Path, user: str) -> None:
    """``path`` and its missing parents, the remote user's."""
    missing = [p for p in [path, *path.parents] if not p.exists()]
    path.mkdir(parents=True, exist_ok=True)
    for directory in missing:
        chown_to(directory, user)


@pytest.fixture
def remote_agy(sshd: Sshd, remote_bin: Path) -> Iterator[Path]:
    """The double as ``agy`` on the host's PATH; the host's payloads and ``~/.gemini``
    are removed afterwards."""
    double = remote_bin / "agy"
    double.write_text(_AGY)
    double.chmod(0o755)
    try:
        yield sshd.home
    finally:
        (sshd.home / "payloads.json").unlink(missing_ok=True)
        shutil.rmtree(sshd.home / ".gemini", ignore_errors=True)


def _place(home: Path, user: str, *names: str) -> None:
    payloads = [{"event": _EVENTS[name.split(".")[0]],
                 "payload": json.loads((_FIXTURES / f"{name}.json").read_text())}
                for name in names]
    path = home / "payloads.json"
    path.write_text(json.dumps(payloads))
    chown_to(path, user)


def _agents() -> list[str]:
    return [a.attention for a in Clanker().agents() if a.harness == "agy"]


def _notices(out: str) -> list[str]:
    return [line for line in out.split("\n") if line.startswith("clanker: ")]


def test_agy_on_a_host_reports_through_its_persistent_plugin(
    sshd: Sshd, remote_agy: Path
) -> None:
    clanker = Clanker(ssh_config_file=sshd.config_file)
    clanker.add_host("box", sshd.alias)
    # Another plugin's configuration is the user's, and stays as it is.
    other = remote_agy / ".gemini" / "config" / "plugins" / "other"
    _mkdirs(other, sshd.user)
    other_hooks = json.dumps({"other": {"Stop": [{"type": "command", "command": "true"}]}})
    (other / "hooks.json").write_text(other_hooks)
    chown_to(other / "hooks.json", sshd.user)
    _place(remote_agy, sshd.user, "pre-invocation.first", "pre-tool-use.run-command",
           "pre-tool-use.ask-question", "post-tool-use.ask-question", "stop.idle")
    observed: list[tuple[str, list[str]]] = []
    launches: list[list[str]] = []

    def on_event(fired: str) -> None:
        observed.append((fired.split(" ")[0], _agents()))
        launches.append(sorted(p.name for p in (remote_agy / HOST_ROOT).iterdir()))

    status, out = _drive(sshd.config_file, ["launch", "--host", "box", "agy"], on_event)
    assert status == 0, out
    assert observed == [
        ("PreInvocation", ["working"]),
        ("PreToolUse", ["working"]),      # run_command: the matcher ran no hook of clanker's
        ("PreToolUse", ["needs-input"]),  # ask_question
        ("PostToolUse", ["working"]),
        ("Stop", ["done"]),
    ], out
    fired = [line for line in out.split("\n") if line.startswith("fired ")]
    assert fired[1] == "fired PreToolUse ", "no hook for a tool that does not wait"
    assert fired[0] == "fired PreInvocation {}", "the guard answers agy neutrally"
    assert fired[4] == "fired Stop {};", "the other plugin's hook ran too"
    assert "\x1b]7717" not in out and "clanker-attention;" not in out, "no frame is shown"
    assert _notices(out) == [], out
    assert len(launches[0]) == 2 and "lock" in launches[0], "one launch directory"
    # The plugin stays, clanker's, with what a local install writes; the launch is gone.
    plugin = remote_agy / PLUGIN_PATH
    uid = pwd.getpwnam(sshd.user).pw_uid
    modes = {p.name: (stat.S_IMODE(p.lstat().st_mode), p.lstat().st_uid, p.is_symlink())
             for p in plugin.iterdir()}
    assert modes == {MARKER_FILE: (0o644, uid, False), "guard.sh": (0o755, uid, False),
                     "hooks.json": (0o644, uid, False), "plugin.json": (0o644, uid, False)}
    assert (plugin / MARKER_FILE).read_bytes() == MARKER
    hooks = json.loads((plugin / "hooks.json").read_text())
    command = hooks["clanker-grid-attention"]["Stop"][0]["command"]
    assert command == f"/bin/sh {plugin}/guard.sh Stop", "the host's guard, by its path"
    assert (other / "hooks.json").read_text() == other_hooks
    assert [p.name for p in (remote_agy / HOST_ROOT).iterdir()] == ["lock"]
    assert _agents() == []


def test_a_second_launch_refreshes_the_plugin_and_keeps_unknown_files(
    sshd: Sshd, remote_agy: Path
) -> None:
    Clanker(ssh_config_file=sshd.config_file).add_host("box", sshd.alias)
    _place(remote_agy, sshd.user, "pre-invocation.first")
    status, out = _drive(sshd.config_file, ["launch", "--host", "box", "agy"], lambda _: None)
    assert status == 0, out
    plugin = remote_agy / PLUGIN_PATH
    current = (plugin / "hooks.json").read_bytes()
    (plugin / "notes.txt").write_text("the user's")
    (plugin / "hooks.json").write_text("{}")  # stale
    untouched = {name: (plugin / name).stat() for name in (MARKER_FILE, "guard.sh",
                                                            "plugin.json")}
    observed: list[list[str]] = []
    status, out = _drive(sshd.config_file, ["launch", "--host", "box", "agy"],
                         lambda _: observed.append(_agents()))
    assert status == 0, out
    assert observed == [["working"]], out
    assert (plugin / "hooks.json").read_bytes() == current
    for name, before in untouched.items():  # current files are not rewritten
        after = (plugin / name).stat()
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), name
    assert (plugin / "notes.txt").read_text() == "the user's"
    assert sorted(p.name for p in plugin.iterdir()) == sorted(
        [MARKER_FILE, "guard.sh", "hooks.json", "plugin.json", "notes.txt"])


@pytest.mark.parametrize("kind", ["users-directory", "planted-link"])
def test_a_plugin_place_that_is_not_clanker_s_leaves_attention_out_not_the_launch(
    sshd: Sshd, remote_agy: Path, kind: str, tmp_path: Path
) -> None:
    Clanker(ssh_config_file=sshd.config_file).add_host("box", sshd.alias)
    plugin = remote_agy / PLUGIN_PATH
    _mkdirs(plugin, sshd.user)
    if kind == "users-directory":
        (plugin / "hooks.json").write_text('{"mine": {}}')
    else:  # clanker's plugin, with a link planted in place of its hooks.json
        (plugin / MARKER_FILE).write_bytes(MARKER)
        (plugin / MARKER_FILE).chmod(0o644)
        chown_to(plugin / MARKER_FILE, sshd.user)
        (plugin / "hooks.json").symlink_to("/etc/hostname")
    chown_to(plugin / "hooks.json", sshd.user)
    before = {p.name: (p.is_symlink(), os.readlink(p) if p.is_symlink() else p.read_bytes())
              for p in plugin.iterdir()}
    _place(remote_agy, sshd.user, "pre-invocation.first")
    seen: list[list[str]] = []
    status, out = _drive(sshd.config_file, ["launch", "--host", "box", "agy"],
                         lambda _: seen.append(_agents()))
    assert status == 0, out
    notices = _notices(out)
    assert len(notices) == 1 and "is not clanker's" in notices[0], out
    assert seen == [["unavailable"]], out
    after = {p.name: (p.is_symlink(), os.readlink(p) if p.is_symlink() else p.read_bytes())
             for p in plugin.iterdir()}
    assert after == before, "nothing of the user's was touched"
    root = remote_agy / HOST_ROOT
    assert not root.exists() or [p.name for p in root.iterdir()] == ["lock"]


def test_the_host_s_plugin_is_inert_without_a_launch(sshd: Sshd, remote_agy: Path) -> None:
    """After a launch, agy run on the host by itself (or with the variables of a launch
    that has ended) finds the plugin, and its guard forwards nothing."""
    Clanker(ssh_config_file=sshd.config_file).add_host("box", sshd.alias)
    _place(remote_agy, sshd.user, "pre-invocation.first")
    status, out = _drive(sshd.config_file, ["launch", "--host", "box", "agy"], lambda _: None)
    assert status == 0, out
    line = next(line for line in out.split("\n") if line.startswith("env:"))
    env_seen: dict[str, str] = json.loads(line.removeprefix("env:"))
    assert set(env_seen) == {"CLANKER_ATTENTION_COMMAND", "CLANKER_ATTENTION_INTERPRETER"}, (
        "no credential in the harness's environment: it is in the launch's 0700 hook")
    guard = remote_agy / PLUGIN_PATH / "guard.sh"
    payload = (_FIXTURES / "pre-invocation.first.json").read_bytes()
    entry = pwd.getpwnam(sshd.user)
    for env in ({}, env_seen):
        done = subprocess.run(
            ["/bin/sh", str(guard), "PreInvocation"], input=payload, capture_output=True,
            env={"PATH": "/usr/bin:/bin", "HOME": str(remote_agy), **env},
            user=entry.pw_uid, group=entry.pw_gid, extra_groups=[], cwd="/",
            timeout=30, check=False)
        assert (done.returncode, done.stdout, done.stderr) == (0, b"{}\n", b""), done
    assert _agents() == []
