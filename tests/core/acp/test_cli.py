"""``clanker coder`` as a real process: line mode, NDJSON, exit codes, ``--show``,
``--list``, ``--model``, signals, and a person answering on a terminal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import FAKE_AGENT, Coder


def _run(coder: Coder, *args: str, attention: bool = False) -> subprocess.CompletedProcess[str]:
    flags = () if attention or "--show" in args else ("--no-attention",)
    return subprocess.run([sys.executable, "-m", "clanker", "coder", *flags, *args],
                          cwd=coder.workspace, env=coder.environ, capture_output=True, text=True,
                          timeout=120, check=False)


AGENT = f"python3 {FAKE_AGENT}"


def test_one_turn_in_line_mode(coder: Coder) -> None:
    result = _run(coder, "--agent-command", AGENT, "hello")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Hello world\n"
    assert "[end_turn] session fake-1" in result.stderr


@pytest.mark.parametrize(("prompt", "approve", "code"), [
    ("permission edit standard", (), 36),            # refused: nobody to ask
    ("permission edit standard", ("--approve", "edit"), 0),
    ("refuse", (), 32),
    ("die", (), 33),
    ("usage-limit", (), 34),
    ("auth-required", (), 6),
])
def test_exit_codes_come_from_the_turn(coder: Coder, prompt: str, approve: tuple[str, ...],
                                       code: int) -> None:
    result = _run(coder, "--agent-command", AGENT, *approve, prompt)
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr


def test_json_prints_one_event_per_line(coder: Coder) -> None:
    result = _run(coder, "--json", "--agent-command", AGENT, "hello")
    events = [json.loads(line) for line in result.stdout.splitlines()]
    # the agent's start (its first frame written), then its session
    assert events[0]["event"] == "agent-started" and isinstance(events[0]["pid"], int)
    assert events[1]["event"] == "session"
    assert events[-1] == {"event": "turn-ended", "stopReason": "end_turn"}


def test_a_failed_resume_exits_35(coder: Coder) -> None:
    result = _run(coder, "--agent-command", AGENT, "--resume", "missing", "hello")
    assert result.returncode == 35
    assert "could not be continued" in result.stderr


def test_bad_usage(coder: Coder) -> None:
    assert _run(coder, "hello").returncode == 2
    assert _run(coder, "--agent-command", AGENT).returncode == 2
    assert _run(coder, "--agent-command", AGENT, "--approve", "everything", "x").returncode == 2
    assert _run(coder, "--agent-command", "/bin/agent", "x").returncode == 2
    assert _run(coder, "--agent-command", "no-such-acp-agent", "x").returncode == 4


def test_show_renders_a_transcript_offline(coder: Coder) -> None:
    assert _run(coder, "--agent-command", AGENT, "permission edit standard").returncode == 36
    shown = _run(coder, "--show", "fake-1")
    assert shown.returncode == 0
    assert "approval: reject (refuse: ask-once (edit) and nobody to ask)" in shown.stdout
    assert "outcome:reject-once" in shown.stdout
    assert _run(coder, "--show", "nothing-here").returncode == 37


def test_a_torn_last_line_is_tolerated(coder: Coder) -> None:
    assert _run(coder, "--agent-command", AGENT, "hello").returncode == 0
    path = Path(os.environ["CLANKER_HOME"]) / "state" / "coder" / "fake-1.jsonl"
    with path.open("a") as handle:
        handle.write('{"t": 1, "dir": "in", "frame": {"jsonrpc"')
    shown = _run(coder, "--show", "fake-1")
    assert shown.returncode == 0
    assert "Hello world" in shown.stdout


def test_list_asks_the_agent(coder: Coder) -> None:
    result = _run(coder, "--list", "--json", "--agent-command", AGENT)
    assert result.returncode == 0, result.stderr
    assert [s["sessionId"] for s in json.loads(result.stdout)["sessions"]] == ["known"]
    plain = _run(coder, "--list", "--agent-command", AGENT)
    assert plain.stdout.startswith("known")


def test_a_bad_configuration_is_a_usage_error(coder: Coder) -> None:
    config = Path(os.environ["CLANKER_HOME"]) / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('[coder.approvals]\nexecute = "yes please"\n')
    result = _run(coder, "--agent-command", AGENT, "hello")
    assert result.returncode == 2
    assert "coder.approvals.execute" in result.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_agent_and_exits_130(coder: Coder, tmp_path: Path,
                                                signum: int) -> None:
    pidfile = tmp_path / "agent.pid"
    environ = {**coder.environ, "FAKE_AGENT_PIDFILE": str(pidfile)}
    with subprocess.Popen([sys.executable, "-m", "clanker", "coder", "--json", "--no-attention",
                           "--agent-command", AGENT, "silent"], cwd=coder.workspace,
                          env=environ, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            for line in process.stdout:  # the turn has started: the agent runs
                if json.loads(line)["event"] == "turn-started":
                    break
            process.send_signal(signum)
            assert process.wait(timeout=60) == 130
        finally:
            process.kill()  # a failure above fails the test instead of waiting on it
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_attention_is_on_by_default(coder: Coder) -> None:
    result = _run(coder, "--agent-command", AGENT, "hello", attention=True)
    assert result.returncode == 0, result.stderr
    assert "attention:" not in result.stderr  # the grid started and took the session


@pytest.mark.parametrize(("answer", "outcome", "code"), [("y", "allow-once", 0),
                                                         ("n", "reject-once", 0),
                                                         ("a", "allow-once", 0)])
def test_on_a_terminal_the_person_answers(coder: Coder, answer: str, outcome: str,
                                          code: int) -> None:
    import pty

    main, child = pty.openpty()
    environ = coder.environ
    with subprocess.Popen([sys.executable, "-m", "clanker", "coder", "--no-attention",
                           "--agent-command", AGENT, "permission edit standard"],
                          cwd=coder.workspace, env=environ, stdin=child, stdout=child,
                          stderr=subprocess.PIPE, text=True) as process:
        os.close(child)
        assert process.stderr is not None
        lines = []
        for line in process.stderr:  # the question, then its choices
            lines.append(line)
            if "[n] refuse" in line:
                break
        assert lines[0].startswith("approve edit: edit something")
        assert "[a] approve edit for this session" in lines[-1]
        os.write(main, f"{answer}\n".encode())
        assert process.wait(timeout=60) == code
    output = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    os.close(main)
    assert f"outcome:{outcome}".encode() in output


def test_model_is_chosen_or_refused(coder: Coder) -> None:
    chosen = _run(coder, "--agent-command", AGENT, "--model", "m2", "model")
    assert (chosen.returncode, chosen.stdout) == (0, "model:m2\n")
    refused = _run(coder, "--agent-command", AGENT, "--model", "m9", "model")
    assert refused.returncode == 2
    assert "offered: m1, m2" in refused.stderr


def test_other_commands_never_import_the_coder() -> None:
    code = ("import sys; from clanker.cli import cli; import clanker.api; "
            "cli.main(['--help'], standalone_mode=False); "
            "print(sorted(m for m in sys.modules if m.startswith(('clanker.acp', 'acp'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip().splitlines()[-1] == "[]"


_AT_SPAWN = """
import json, os, sys
seen = []
agent = os.environ["SPAWN_MARK"]  # in the agent's argv

def spawned(event, args):  # observes only: the audit event of each Popen
    if event == "subprocess.Popen" and not seen and agent in repr(args[1]):
        seen.append(sorted(sys.modules))

sys.addaudithook(spawned)
from clanker.__main__ import main
sys.argv = ["clanker", *sys.argv[1:]]
try:
    main()
except SystemExit as exited:
    code = exited.code
print(json.dumps({"exit": code, "spawn": seen[0] if seen else None,
                  "end": sorted(sys.modules)}), file=sys.stderr)
"""

# Loaded after the agent is started and sent ``initialize`` (while it starts): the
# CLI (click) and asyncio (the agent is started early, clanker/acp/early.py), the
# configuration's parser, the registry with every plugin, the launch path and
# accounts, the grid's client, the ACP client itself and the interface.
_NOT_BEFORE_THE_SPAWN = ("click", "asyncio", "clanker.cli", "cattrs", "tomllib", "pluggy",
                         "clanker.config", "clanker.registry", "clanker.launch.service",
                         "clanker.accounts.service", "clanker.grid.client",
                         "clanker.acp.client", "clanker.acp.ui", "rich", "prompt_toolkit")


@pytest.mark.parametrize("agent", ["--agent-command", "--harness"])
def test_the_agent_is_spawned_before_what_it_does_not_need_is_imported(
        coder: Coder, tmp_path: Path, agent: str) -> None:
    if agent == "--harness":  # opencode's ACP server, here the fake agent
        opencode = tmp_path / "bin" / "opencode"
        opencode.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_AGENT}"\n')
        opencode.chmod(0o755)
    choice = ["--agent-command", AGENT] if agent == "--agent-command" else ["--harness",
                                                                             "opencode"]
    done = subprocess.run([sys.executable, "-c", _AT_SPAWN, "coder", "--no-attention", *choice,
                           "hello"], cwd=coder.workspace,
                          env={**coder.environ, "SPAWN_MARK": ("fake_agent.py" if agent ==
                                                               "--agent-command" else "opencode")},
                          capture_output=True, text=True, timeout=120, check=False)
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert (report["exit"], done.stdout) == (0, "Hello world\n")
    at_spawn = set(report["spawn"])
    # A harness needs the registry (with its plugins) and the launch path for its
    # server's argv and environment; an --agent-command needs neither.
    harness = agent == "--harness"
    needed = {"pluggy", "clanker.registry", "clanker.launch.service",
              "clanker.accounts.service"} if harness else set()

    def early(module: str) -> bool:
        if module.split(".")[0] in needed or module in needed:
            return False
        if module.startswith("clanker_"):  # a plugin
            return not harness
        return module.split(".")[0] in _NOT_BEFORE_THE_SPAWN or module.startswith(
            _NOT_BEFORE_THE_SPAWN)

    assert sorted(filter(early, at_spawn)) == []
    # ... and then they were: the ladder was read from the configuration.
    assert {"clanker.config", "clanker.acp.client"} <= set(report["end"])


def _drain(main: int) -> bytes:
    output = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:
            return output
        if not chunk:
            return output
        output += chunk


class _Conversation:
    """``clanker coder`` without a prompt on a real terminal (a pty) where the
    full-screen interface cannot start (``TERM=dumb``), so the conversation is in
    line mode: what is typed goes to its stdin, its stderr is read line by line
    (and prompt by prompt)."""

    def __init__(self, coder: Coder, *flags: str, **environ: str) -> None:
        import pty

        self.main, child = pty.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "clanker", "coder", "--no-attention", *flags,
             "--agent-command", AGENT], cwd=coder.workspace,
            env={**coder.environ, "TERM": "dumb", **environ}, stdin=child,
            stdout=child, stderr=subprocess.PIPE, text=True)
        os.close(child)

    def __enter__(self) -> _Conversation:
        return self

    def __exit__(self, *_: object) -> None:
        with self.process:
            if self.process.poll() is None:
                self.process.kill()
        os.close(self.main)

    def type(self, text: str) -> None:
        os.write(self.main, text.encode())

    def until(self, *marks: str) -> list[str]:
        """stderr's lines up to the first holding one of ``marks`` (a question or
        ``you>`` ends a line without a newline)."""
        assert self.process.stderr is not None
        lines, line = [], ""
        while True:
            char = self.process.stderr.read(1)
            assert char, f"stderr ended before {marks}: {lines}"
            line += char
            if char == "\n" or line.endswith(("[y/N] ", "you> ")):
                lines.append(line)
                if any(mark in line for mark in marks):
                    return lines
                line = ""


def test_on_a_terminal_without_a_prompt_it_is_a_conversation(coder: Coder) -> None:
    with _Conversation(coder) as talk:
        notice = talk.until("you> ")
        assert notice[0] == ("clanker: the full-screen interface cannot start (TERM is dumb: no "
                             "cursor control); continuing in line mode\n")
        for turn, mark in (("hello", "] session fake-1"), ("usage-limit", "[y/N] "),
                           ("", "you> "),  # no to sending it again
                           ("refuse", "] session fake-1")):
            talk.type(f"{turn}\n")
            talk.until(mark)
        talk.type("\x04")  # Ctrl+D on an empty line
        assert talk.process.wait(timeout=60) == 0  # a usage limit or a refusal ends nothing
        assert b"Hello world" in _drain(talk.main)


@pytest.mark.parametrize("answer", ["y", "n"])
def test_after_the_agent_dies_the_person_may_restart_it_on_the_same_session(
        coder: Coder, tmp_path: Path, answer: str) -> None:
    with _Conversation(coder, FAKE_AGENT_STORE=str(tmp_path / "sessions")) as talk:
        talk.until("you> ")
        talk.type("die\n")
        lines = talk.until("[y/N] ")
        assert "clanker: the agent exited during the turn" in "".join(lines)
        assert lines[-1].startswith("start the agent again and continue session fake-1?")
        talk.type(f"{answer}\n")
        if answer == "n":
            assert talk.process.wait(timeout=60) == 33
            return
        assert "[resumed] session/resume" in "".join(talk.until("you> "))
        talk.type("hello\n")
        assert "[end_turn] session fake-1" in talk.until("] session ")[-1]
        talk.type("\x04")
        assert talk.process.wait(timeout=60) == 0


def test_after_a_usage_limit_the_same_prompt_goes_again_only_when_asked(coder: Coder) -> None:
    with _Conversation(coder) as talk:
        talk.until("you> ")
        talk.type("usage-limit\n")
        lines = talk.until("[y/N] ")
        assert "usage limit, resets 3:10am" in "".join(lines)
        assert lines[-1].startswith("send the same prompt again?")
        talk.type("y\n")  # the same prompt, so the same limit, and the same offer
        assert talk.until("[y/N] ")[-1].startswith("send the same prompt again?")
        talk.type("\n")  # declined: back at the prompt, the conversation goes on
        talk.until("you> ")
        talk.type("\x04")
        assert talk.process.wait(timeout=60) == 0


def test_plain_on_a_terminal_is_a_line_mode_conversation_that_asks_nobody(coder: Coder) -> None:
    with _Conversation(coder, "--plain", TERM="xterm") as talk:
        assert talk.until("you> ") == ["you> "]  # no interface, so no notice either
        talk.type("permission edit standard\n")
        lines = talk.until("] session fake-1")
        assert any("[reject] edit something (edit): refuse: ask-once (edit) and nobody to ask"
                   in line for line in lines)
        talk.type("\x04")
        assert talk.process.wait(timeout=60) == 0
