"""The worktree round trip with the Claude plugin itself (its launch, attention and
bridge attachments), against a double of Claude Code whose binding comes from
attention, not from a trusted resume: Claude's provider never seeds a resumed
session id, so the grid knows the conversation only once the double's
SessionStart hook has reported it.

The double speaks the hook protocol captured from Claude Code 2.1.197
(tests/fixtures/claude/attention: it runs the command the ``--settings`` file
registers for SessionStart, with the captured payload's fields, ``source``
``startup`` or ``resume`` and the same ``session_id`` on a resume), answers
``--version`` as 2.1.197 does, and otherwise draws a line naming where it runs
and echoes what is typed until ``/exit``, when it fires SessionEnd.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from clanker.api import Clanker
from clanker.launch import attention
from clanker.launch.request import LaunchRequest
from clanker.launch.service import LaunchOptions
from tests.core.bridge.test_complete_checkout import COMPLETE, call, wait_for
from tests.helpers import committed_repository, install_double

SESSION = "2bd84788-1866-4763-ad83-f2741628502f"  # the fixtures' fake id

CLAUDE = f"""
    import json, os, subprocess, sys
    if sys.argv[1:] == ["--version"]:
        print("2.1.197 (Claude Code)")
        raise SystemExit(0)
    args = sys.argv[1:]
    def option(name):
        return args[args.index(name) + 1] if name in args else None
    session = option("--resume") or "{SESSION}"
    with open(option("--settings")) as file:
        hooks = json.load(file)["hooks"]
    def fire(event, **fields):
        payload = {{"session_id": session, "cwd": os.getcwd(),
                    "transcript_path": "/home/u/.claude/projects/p/" + session + ".jsonl",
                    "hook_event_name": event, **fields}}
        for group in hooks.get(event, ()):
            for hook in group["hooks"]:
                subprocess.run(hook["command"], shell=True, input=json.dumps(payload),
                               text=True, timeout=hook.get("timeout", 60), check=False)
    fire("SessionStart", source="resume" if "--resume" in args else "startup")
    print(f"running {{session}} in {{os.getcwd()}}", flush=True)
    for line in sys.stdin:
        if line.strip() == "/exit":
            break
        print(f"echo {{line.strip()}} in {{os.getcwd()}}", flush=True)
    fire("SessionEnd", reason="prompt_input_exit")
"""


@pytest.fixture
def repository(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    user_home = tmp_path / "home"
    (user_home / ".local" / "share").mkdir(parents=True)
    for name, value in (("HOME", str(user_home)),
                        ("XDG_DATA_HOME", str(user_home / ".local" / "share")),
                        ("GIT_CONFIG_GLOBAL", str(user_home / ".gitconfig")),
                        ("GIT_CONFIG_NOSYSTEM", "1"),
                        ("GIT_AUTHOR_NAME", "Fake Person"),
                        ("GIT_AUTHOR_EMAIL", "fake@example.invalid"),
                        ("GIT_COMMITTER_NAME", "Fake Person"),
                        ("GIT_COMMITTER_EMAIL", "fake@example.invalid")):
        monkeypatch.setenv(name, value)
    install_double(tmp_path, monkeypatch, "claude", CLAUDE)
    return committed_repository(tmp_path / "repo")


def test_a_claude_conversation_goes_into_a_worktree_and_back(repository: Path) -> None:
    clanker = Clanker()
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    relayed = clanker.relay_launch("claude", LaunchRequest(cwd=str(repository)),
                                   LaunchOptions(bridge=True), stdin_fd=stdin_r,
                                   stdout_fd=stdout_w)
    status: list[int] = []
    relay = threading.Thread(target=lambda: status.append(relayed.run()))
    relay.start()
    seen = b""

    def read_until(text: str) -> None:
        nonlocal seen
        while text.encode() not in seen:
            chunk = os.read(stdout_r, 65536)
            assert chunk, f"the relay ended before {text!r}: {seen!r}"
            seen += chunk

    def bound() -> bool:
        """The grid binds the session to the terminal relayed now (its own hook said so)."""
        terminal = relayed.launch.env[attention.TERMINAL_VARIABLE]
        return any(a.terminal == terminal and (a.revision.get("snapshot") or {})
                   .get("rootSessionId") == SESSION for a in clanker.agents())

    try:
        read_until(f"running {SESSION} in {repository}")
        assert relayed.listening.wait(60)
        [agent] = clanker.agents()
        assert {"clanker_create_isolated_checkout", COMPLETE} <= set(agent.bridge)
        # Bound by the SessionStart hook: nothing was trusted in advance.
        wait_for(bound, "attention to bind the session")
        code, created = call(dict(relayed.launch.env), "clanker_create_isolated_checkout",
                             "--arg", "branch=feature/x")
        assert code == 0, created
        worktree = str(created["path"])
        read_until(f"running {SESSION} in {worktree}")
        assert relayed.listening.wait(60)
        wait_for(bound, "the resume's SessionStart to bind it again")
        code, completed = call(dict(relayed.launch.env), COMPLETE,
                               "--arg", "deleteBranch=true")
        assert code == 0, completed
        assert completed["status"] == "completed" and completed["branch_deleted"] is True
        read_until(f"running {SESSION} in {repository}")
        assert [a.cwd for a in clanker.agents()] == [str(repository)]
        assert not Path(worktree).exists()
    finally:
        os.write(stdin_w, b"/exit\n")
        relay.join()
        for fd in (stdin_r, stdin_w, stdout_r, stdout_w):
            os.close(fd)
    assert status == [0]
    assert clanker.agents() == []
