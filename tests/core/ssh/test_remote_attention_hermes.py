"""Hermes's attention over SSH, end to end against the test sshd.

``clanker launch --host box hermes`` runs under a pseudo-terminal here. On the
host, Hermes is a double (:data:`_HERMES`) installed in a virtual environment
of its own, as pip installs hermes-agent: ``hermes_cli`` and the bundled
``plugins/`` directory in its ``site-packages``, the ``hermes`` script naming
that environment's Python in its shebang. clanker asks that interpreter where
the bundled directory is, and installs in its private launch directory on the
host a mirror of it (one link per entry) with its observer added as a bundled
backend plugin; ``HERMES_BUNDLED_PLUGINS`` points the double at the mirror. The
double loads the observer as Hermes does and fires Hermes's hooks at it; the
observer writes OSC frames to its terminal and the local launcher hands them to
this machine's grid. The host's Hermes home is never written.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clanker.api import Clanker
from clanker.environment.remote_resources import HOST_ROOT
from clanker_hermes.attention import PLUGIN_NAME
from tests.helpers import cli_on_terminal
from tests.sshd import Sshd, chown_to

_HERMES = '''#!@PYTHON@
"""A Hermes Agent double: it loads bundled plugins as hermes-agent 0.19.0 does.

Reproduced (hermes_cli/plugins.py of 0.19.0, read; and live, see
docs/harnesses/hermes.md, "How the plugin gets loaded" and "On an SSH host"):
the bundled directory is ``HERMES_BUNDLED_PLUGINS`` when set, otherwise
``<site-packages>/plugins`` beside ``hermes_cli``; each entry that is a
directory with a ``plugin.yaml`` (links followed) is a plugin; a bundled plugin
of ``kind: backend`` loads without the user's ``plugins.enabled``; loading
imports its ``__init__.py`` as a package and calls ``register(ctx)``, whose
``ctx.register_hook(name, callback)`` records a hook; a hook is called with
keyword arguments. Not reproduced: ``config.yaml`` (``plugins.disabled``),
user, project and entry-point plugins, any model.

It prints the plugins it loaded, the ``CLANKER_ATTENTION_*`` variables it was
given and its bundled directory, then ``fired ready``, and for each step of
``$HOME/hermes-steps.json`` ({label, fire: [[hook, kwargs], ...]}) fires the
hooks, prints ``fired <label>`` and waits for one line on its terminal.
"""
import importlib.util, json, os, sys

import hermes_cli

site = os.path.dirname(os.path.dirname(os.path.realpath(hermes_cli.__file__)))
bundled = os.environ.get("HERMES_BUNDLED_PLUGINS") or os.path.join(site, "plugins")
hooks = {}


class Context:
    def register_hook(self, name, callback):
        hooks.setdefault(name, []).append(callback)


loaded = []
for name in sorted(os.listdir(bundled)):
    path = os.path.join(bundled, name)
    manifest = os.path.join(path, "plugin.yaml")
    if not os.path.isfile(manifest):
        continue
    with open(manifest) as source:
        fields = dict(line.split(":", 1) for line in source.read().splitlines() if ":" in line)
    if fields.get("kind", "").strip() != "backend":
        continue  # a standalone plugin needs plugins.enabled
    key = "hermes_plugins." + name.replace("-", "_")
    spec = importlib.util.spec_from_file_location(
        key, os.path.join(path, "__init__.py"), submodule_search_locations=[path])
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    module.register(Context())
    loaded.append(name)
print("loaded:" + ",".join(loaded))
print("variables:" + ",".join(sorted(n for n in os.environ if n.startswith("CLANKER_ATTENTION_"))))
print("bundled:" + bundled, flush=True)
with open(os.path.expanduser("~/hermes-steps.json")) as source:
    steps = json.load(source)
print("fired ready", flush=True)
sys.stdin.readline()
for step in steps:
    for hook, kwargs in step["fire"]:
        for callback in hooks.get(hook, []):
            assert callback(**kwargs) is None
    print("fired " + step["label"], flush=True)
    sys.stdin.readline()
'''

_MEMORY = '''"""A bundled backend plugin of the host's Hermes (reached through a link)."""


def register(ctx):
    print("memory plugin registered")
'''

_ROOT = "20261206_080000_aaaaaa"
_TASK = "00000000-0000-4000-8000-000000000001"
_TURN = f"{_ROOT}:{_TASK}:0000aaa1"
_COMMON = {"session_id": _ROOT, "task_id": _TASK, "turn_id": _TURN, "model": "probe-model",
           "platform": "tui", "telemetry_schema_version": "hermes.observer.v1"}
_APPROVAL = {"command": "rm -r x", "description": "d", "pattern_key": "recursive delete",
             "pattern_keys": ["recursive delete"], "session_key": "k", "surface": "cli",
             "turn_id": _TURN, "tool_call_id": "call_1",
             "telemetry_schema_version": "hermes.observer.v1"}
_STEPS: list[dict[str, Any]] = [
    {"label": "pre_llm_call", "fire": [["pre_llm_call", {
        **_COMMON, "user_message": "hi", "conversation_history": [], "is_first_turn": True,
        "sender_id": ""}]]},
    {"label": "pre_approval_request", "fire": [["pre_approval_request", _APPROVAL]]},
    {"label": "post_approval_response", "fire": [["post_approval_response", {
        **_APPROVAL, "choice": "once"}]]},
    {"label": "post_llm_call", "fire": [["post_llm_call", {
        **_COMMON, "user_message": "hi", "assistant_response": "hello",
        "conversation_history": []}]]},
]
_CONFIG = "# the user's own comment\nplugins:\n  disabled: [kanban]\n"


def _write(path: Path, text: str, user: str, mode: int = 0o644) -> None:
    missing = [p for p in reversed(path.parents) if not p.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    for directory in missing:
        chown_to(directory, user)
    path.write_text(text)
    path.chmod(mode)
    chown_to(path, user)


def _tree(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"",
                                       p.lstat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def remote_hermes(sshd: Sshd, remote_bin: Path) -> Iterator[Path]:
    """Hermes's double installed on the host (a virtual environment under ``~/.local``,
    removed with ``remote_bin``), a Hermes home with the user's ``config.yaml``, and
    the steps; the home and the steps are removed afterwards. Yields the bundled
    plugin directory."""
    home, user = sshd.home, sshd.user
    venv = home / ".local" / "hermes-venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    _write(venv / "pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = false\n",
           user)
    (venv / "bin").mkdir()
    chown_to(venv / "bin", user)
    (venv / "bin" / "python").symlink_to("/usr/bin/python3")
    _write(site / "hermes_cli" / "__init__.py", "", user)
    bundled = site / "plugins"
    _write(bundled / "__init__.py", "", user)
    _write(bundled / "memory" / "plugin.yaml", "name: memory\nkind: backend\n", user)
    _write(bundled / "memory" / "__init__.py", _MEMORY, user)
    _write(bundled / "kanban" / "plugin.yaml", "name: kanban\n", user)
    _write(remote_bin / "hermes", _HERMES.replace("@PYTHON@", str(venv / "bin" / "python")),
           user, 0o755)
    _write(home / ".hermes" / "config.yaml", _CONFIG, user, 0o600)
    _write(home / "hermes-steps.json", json.dumps(_STEPS), user)
    try:
        yield bundled
    finally:
        (home / "hermes-steps.json").unlink(missing_ok=True)
        shutil.rmtree(home / ".hermes", ignore_errors=True)


def _agent() -> Any:
    agents = [a for a in Clanker().agents(host="box") if a.harness == "hermes"]
    return agents[0] if agents else None


def _next_revision(before: object) -> Any:
    """The agent once the grid has taken an event past revision ``before`` (a bounded
    wait on the grid's own state: the frame crosses the terminal on its own schedule)."""
    import time

    deadline = time.monotonic() + 60
    while True:
        agent = _agent()
        if agent is not None and agent.revision != before:
            return agent
        if time.monotonic() > deadline:
            raise AssertionError(f"the grid took no new event of hermes: {agent}")
        time.sleep(0.05)


def test_hermes_on_a_host_reports_through_a_mirror_of_its_bundled_plugins(
    sshd: Sshd, remote_hermes: Path
) -> None:
    Clanker(ssh_config_file=sshd.config_file).add_host("box", sshd.alias)
    hermes_home = sshd.home / ".hermes"
    before = _tree(hermes_home)
    root = sshd.home / HOST_ROOT
    observed: list[tuple[str, str]] = []
    mirrors: list[dict[str, str]] = []
    revision: list[object] = [None]

    problems: list[str] = []

    def on_step(label: str) -> None:
        # Never raises: the double must get its line and end, whatever went wrong.
        try:
            step(label)
        except Exception as error:
            problems.append(f"{label}: {error!r}")

    def step(label: str) -> None:
        if label == "ready":
            revision[0] = _agent().revision
            launch = next(d for d in root.iterdir() if d.is_dir())
            mirror = launch / "hermes-plugins"
            mirrors.append({p.name: os.readlink(p) if p.is_symlink() else "dir"
                            for p in mirror.iterdir()})
            mirrors.append({p.name: "" for p in launch.iterdir()})
            return
        agent = _next_revision(revision[0])
        revision[0] = agent.revision
        observed.append((label, agent.attention))

    status, out = cli_on_terminal(sshd.config_file, ["launch", "--host", "box", "hermes",
                                                     "--cwd", "/tmp"], on_step)
    assert problems == [], out
    assert status == 0, out
    assert observed == [("pre_llm_call", "working"), ("pre_approval_request", "needs-input"),
                        ("post_approval_response", "working"), ("post_llm_call", "done")], out
    # The host's bundled backends still load (through the links), clanker's is added;
    # the observer found its terminal route, the token in no variable.
    assert f"loaded:{PLUGIN_NAME},memory\n" in out, out
    assert "memory plugin registered" in out, out
    assert "variables:CLANKER_ATTENTION_CREDENTIAL,CLANKER_ATTENTION_TRANSPORT\n" in out, out
    assert f"bundled:{root}/" in out, out
    assert "\x1b]7717" not in out and "clanker-attention;" not in out, "no frame is shown"
    assert "attention:" not in out, out
    links, launch = mirrors
    assert links == {"__init__.py": f"{remote_hermes}/__init__.py",
                     "kanban": f"{remote_hermes}/kanban", "memory": f"{remote_hermes}/memory",
                     PLUGIN_NAME: "dir"}
    assert sorted(launch) == ["credential", "hermes-plugins", "manifest.json", "state"]
    # Nothing of the host's Hermes was written; clanker's launch directory is gone.
    assert _tree(hermes_home) == before
    assert (hermes_home / "config.yaml").read_text() == _CONFIG
    assert sorted(p.name for p in remote_hermes.iterdir()) == [
        "__init__.py", "kanban", "memory"]
    assert [p.name for p in root.iterdir()] == ["lock"]
    assert [a for a in Clanker().agents() if a.harness == "hermes"] == []


def test_a_bundled_entry_of_clanker_s_name_leaves_attention_out_not_the_launch(
    sshd: Sshd, remote_hermes: Path
) -> None:
    _write(remote_hermes / PLUGIN_NAME / "plugin.yaml", "name: theirs\n", sshd.user)
    Clanker(ssh_config_file=sshd.config_file).add_host("box", sshd.alias)
    seen: list[str] = []

    def on_step(_: str) -> None:
        agent = _agent()
        seen.append(agent.attention if agent is not None else "none")

    status, out = cli_on_terminal(sshd.config_file, ["launch", "--host", "box", "hermes"],
                                  on_step)
    assert status == 0, out
    notices = [line for line in out.split("\n") if line.startswith("clanker: ")]
    assert len(notices) == 1 and f"a plugin named {PLUGIN_NAME} is already in" in notices[0], out
    assert "variables:\n" in out, "no CLANKER_ATTENTION_* variable reaches Hermes"
    assert seen[0] == "unavailable", out
    assert (remote_hermes / PLUGIN_NAME / "plugin.yaml").read_text() == "name: theirs\n"
    root = sshd.home / HOST_ROOT
    assert not root.exists() or [p.name for p in root.iterdir()] == ["lock"]

