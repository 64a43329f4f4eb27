"""Attention over SSH for harnesses whose extension reports from inside them.

``clanker launch --host box pi`` (``omp``, ``opencode``) runs under a
pseudo-terminal here; on the host a double (:data:`_DOUBLE`) loads the
extension clanker installed there exactly as the harness does and runs its
real JavaScript under ``node``, firing that harness's native events at it; the
extension writes OSC frames to its terminal, and the local launcher takes them
out of the stream and hands them to this machine's grid. After each step the
double waits for a line typed on the terminal, and the test waits (bounded)
for the grid to have taken that step's event (a new revision of the agent)
before typing it.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clanker.api import Clanker
from clanker.environment.remote_resources import HOST_ROOT
from tests.helpers import cli_on_terminal
from tests.sshd import Sshd, chown_to

pytestmark = pytest.mark.skipif(shutil.which("node") is None,
                                reason="the extensions' JavaScript runs under node")

_DOUBLE = r'''#!/usr/bin/env node
"use strict";
// A Pi, Oh My Pi or OpenCode double: it loads clanker's extension as each does
// and fires that harness's events at it.
//   pi / omp: each `--extension FILE` is imported as an ES module and its default
//     export is called with the extension API (`api.on(event, handler)`); a
//     handler is called as `handler(event, ctx)`.
//   opencode: OPENCODE_CONFIG_CONTENT's `plugin` list names `file://` modules;
//     each exported plugin function is called with `{client, directory}` and the
//     `event` hook of what it returns is called as `event({event})`, OpenCode's
//     bus event shape `{type, properties}`.
// First it writes a forged attention frame (another terminal's, with a made-up
// credential) to its terminal, as any program on the host could, and prints
// which CLANKER_ATTENTION_* variables it was given. Once the extensions are
// loaded it prints `fired ready` and waits for one line. Then, for each step of
// $HOME/steps.json ({label, fire: [[name, event], ...]}), it fires the step's
// events, prints `fired <label>` and waits for one line on its terminal.
const fs = require("node:fs");
const os = require("node:os");
const { pathToFileURL } = require("node:url");

const argv = process.argv.slice(2);
if (argv.includes("--version")) {
  console.log("1.3.0");
  process.exit(0);
}
const names = Object.keys(process.env).filter((n) => n.startsWith("CLANKER_ATTENTION_")).sort();
const handlers = new Map();
const api = {
  on(name, handler) {
    if (!handlers.has(name)) handlers.set(name, []);
    handlers.get(name).push(handler);
  },
};
const ctx = {
  mode: "tui",
  hasUI: true,
  cwd: "/tmp",
  sessionManager: { getSessionId: () => "ses-double-1" },
};

function typedLine() {
  return new Promise((resolve) => {
    const onData = (chunk) => {
      if (!/[\r\n]/.test(String(chunk))) return;
      process.stdin.off("data", onData);
      process.stdin.pause();
      resolve();
    };
    process.stdin.on("data", onData);
    process.stdin.resume();
  });
}

async function main() {
  const forged = { v: 1, op: "deliver", terminal: "t-forged", token: "0".repeat(64),
                   envelopes: [{ event: "turn_started", sessionId: "x", turnId: "y" }] };
  process.stdout.write("\x1b]7717;clanker-attention;"
                       + Buffer.from(JSON.stringify(forged)).toString("base64") + "\x07");
  console.log("variables:" + names.join(","));
  const events = [];
  for (let i = 0; i < argv.length - 1; i++) {
    if (argv[i] !== "--extension") continue;
    (await import(pathToFileURL(argv[i + 1]).href)).default(api);
    console.log("extension:" + argv[i + 1]);
  }
  const config = process.env.OPENCODE_CONFIG_CONTENT;
  if (config) {
    console.log("config:" + config);
    const client = { session: { get: async () => ({ data: null }) } };
    for (const uri of JSON.parse(config).plugin) {
      for (const plugin of Object.values(await import(uri))) {
        const hooks = await plugin({ client, directory: "/tmp" });
        if (hooks.event) events.push(hooks.event);
      }
    }
  }
  const steps = JSON.parse(fs.readFileSync(os.homedir() + "/steps.json", "utf8"));
  console.log("fired ready"); // loaded, and nothing fired yet
  await typedLine();
  for (const step of steps) {
    for (const [name, event] of step.fire) {
      for (const handler of handlers.get(name) ?? []) handler(event, ctx);
      for (const hook of events) await hook({ event: { type: name, properties: event } });
    }
    console.log("fired " + step.label);
    await typedLine();
  }
  process.exit(0);
}

main().catch((error) => {
  console.log("double failed: " + error);
  process.exit(3);
});
'''

_SESSION = {"info": {"id": "ses-double-1", "directory": "/tmp"}}
_STEPS: dict[str, list[dict[str, Any]]] = {
    "pi": [
        {"label": "session_start", "fire": [["session_start", {}]]},
        {"label": "agent_start", "fire": [["agent_start", {}]]},
        {"label": "ui_prompt_start", "fire": [["ui_prompt_start", {}]]},
        {"label": "ui_prompt_end", "fire": [["ui_prompt_end", {}]]},
        {"label": "agent_settled", "fire": [
            ["message_end", {"message": {"role": "assistant", "stopReason": "stop"}}],
            ["agent_settled", {"aborted": False}]]},
    ],
    "omp": [
        {"label": "session_start", "fire": [["session_start", {}]]},
        {"label": "agent_start", "fire": [["agent_start", {}]]},
        {"label": "session_stop", "fire": [
            ["session_stop", {"last_assistant_message": {"stopReason": "stop"}}]]},
    ],
    "opencode": [
        {"label": "busy", "fire": [["session.created", _SESSION],
                                   ["session.status", {"sessionID": "ses-double-1",
                                                       "status": {"type": "busy"}}]]},
        {"label": "permission.asked", "fire": [
            ["permission.asked", {"id": "per-1", "sessionID": "ses-double-1"}]]},
        {"label": "permission.replied", "fire": [
            ["permission.replied", {"sessionID": "ses-double-1", "requestID": "per-1",
                                    "reply": "once"}]]},
        {"label": "idle", "fire": [["session.status", {"sessionID": "ses-double-1",
                                                       "status": {"type": "idle"}}]]},
    ],
}
_EXPECTED = {
    "pi": [("session_start", "idle"), ("agent_start", "working"),
           ("ui_prompt_start", "needs-input"), ("ui_prompt_end", "working"),
           ("agent_settled", "done")],
    "omp": [("session_start", "unknown"), ("agent_start", "working"), ("session_stop", "done")],
    "opencode": [("busy", "working"), ("permission.asked", "needs-input"),
                 ("permission.replied", "working"), ("idle", "done")],
}


@pytest.fixture
def remote_doubles(sshd: Sshd, remote_bin: Path) -> Iterator[Path]:
    """The double as ``pi``, ``omp`` and ``opencode`` on the host's PATH; its steps are
    removed afterwards (clanker's directory with ``remote_bin``'s ``~/.local``)."""
    for name in _STEPS:
        double = remote_bin / name
        double.write_text(_DOUBLE)
        double.chmod(0o755)
    try:
        yield sshd.home
    finally:
        (sshd.home / "steps.json").unlink(missing_ok=True)


def _agent(harness: str) -> Any:
    agents = [a for a in Clanker().agents(host="box") if a.harness == harness]
    return agents[0] if agents else None


def _next_revision(harness: str, before: object) -> Any:
    """The agent once the grid has taken an event past revision ``before`` (a bounded
    wait on the grid's own state: the frame crosses the terminal on its own schedule)."""
    deadline = time.monotonic() + 60
    while True:
        agent = _agent(harness)
        if agent is not None and agent.revision != before:
            return agent
        if time.monotonic() > deadline:
            raise AssertionError(f"the grid took no new event of {harness}: {agent}")
        time.sleep(0.05)


@pytest.mark.parametrize("harness", sorted(_STEPS))
def test_an_extension_on_a_host_reports_through_its_terminal(
    sshd: Sshd, remote_doubles: Path, harness: str
) -> None:
    clanker = Clanker(ssh_config_file=sshd.config_file)
    clanker.add_host("box", sshd.alias)
    steps = remote_doubles / "steps.json"
    steps.write_text(json.dumps(_STEPS[harness]))
    chown_to(steps, sshd.user)
    observed: list[tuple[str, str]] = []
    installed: list[list[str]] = []
    revision: list[object] = [None]

    def on_step(label: str) -> None:
        if label == "ready":  # registered, and nothing delivered yet
            revision[0] = _agent(harness).revision
            return
        agent = _next_revision(harness, revision[0])
        revision[0] = agent.revision
        observed.append((label, agent.attention))
        assert len([a for a in Clanker().agents() if a.harness == harness]) == 1, \
            "the forged frame registered nothing"
        installed.extend(sorted(p.name for p in d.iterdir())
                         for d in (remote_doubles / HOST_ROOT).iterdir() if d.is_dir())

    status, out = cli_on_terminal(sshd.config_file, ["launch", "--host", "box", harness, "--cwd",
                                             "/tmp"], on_step)
    assert status == 0, out
    assert observed == _EXPECTED[harness], out
    # The extension found its route in its environment; the token was in no variable.
    assert "variables:CLANKER_ATTENTION_CREDENTIAL,CLANKER_ATTENTION_TRANSPORT\n" in out, out
    root = f"{remote_doubles}/{HOST_ROOT}/"
    if harness == "opencode":
        config = next(line for line in out.split("\n") if line.startswith("config:"))
        assert json.loads(config[len("config:"):])["plugin"][0].startswith(f"file://{root}")
    else:
        assert f"extension:{root}" in out, out
    assert "\x1b]7717" not in out and "clanker-attention;" not in out, "no frame is shown"
    assert "attention:" not in out, out
    assert installed[0] == sorted(["credential", "manifest.json", "state",
                                   "clanker-attention.js" if harness == "omp"
                                   else "clanker-attention.mjs"]), installed
    # Gone from the host, and retired here, once the launch ended.
    assert [p.name for p in (remote_doubles / HOST_ROOT).iterdir()] == ["lock"]
    assert [a for a in Clanker().agents() if a.harness == harness] == []


def test_a_hermes_whose_bundled_plugins_are_not_found_runs_without_attention(
    sshd: Sshd, remote_bin: Path
) -> None:
    """A ``hermes`` on the host whose launcher names no Python that has Hermes
    (tests/core/ssh/test_remote_attention_hermes.py has one that does): the launch
    goes on with one line, nothing is installed, and Hermes gets no
    ``CLANKER_ATTENTION_*`` variable."""
    double = remote_bin / "hermes"
    double.write_text('#!/bin/sh\necho "variables:$(env | grep -c ^CLANKER_ATTENTION_)"\n')
    double.chmod(0o755)
    Clanker(ssh_config_file=sshd.config_file).add_host("box", sshd.alias)
    status, out = cli_on_terminal(sshd.config_file, ["launch", "--host", "box", "hermes"], print)
    assert status == 0, out
    notices = [line for line in out.split("\n") if line.startswith("clanker: ")]
    assert len(notices) == 1, out
    assert "Hermes's bundled plugin directory was not found on the host" in notices[0], out
    assert "variables:0\n" in out, out
    root = sshd.home / HOST_ROOT
    assert not root.exists() or [p.name for p in root.iterdir()] == ["lock"]
    assert [a for a in Clanker().agents() if a.harness == "hermes"] == []
