"""An after-turn harness's launch runs under the PTY relay and its conversation moves
once its root turn has completed: real grid daemon, real git, real PTYs, and a double
of ``codex resume <id> --cd <dir>`` that speaks what docs/harnesses/codex.md records
of codex 0.171.0 (the header names the ``--cd`` directory whatever the process's own;
an unknown id prints ``ERROR: No saved session found with ID <id>`` and exits 1) plus
the two writer-lock contentions the binary carries, printed before exiting 1.

The launch is registered as ``codex`` so the grid daemon (its own process, its own
registry) finds the bundled Codex plugin's ``after-turn`` strategy; this process's
provider is a test plugin with that same rehome declaration and the double as its
executable. The broker is fed the root turn's lifecycle as a harness's attention
adapter delivers it, over the terminal's own credential."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from clanker import hookimpl
from clanker.api import Clanker
from clanker.bridge import wire
from clanker.bridge.cmd import CommandError
from clanker.bridge.isolated import CHECKOUT_NAMES
from clanker.grid.client import GridClient
from clanker.grid.protocol import StreamKind
from clanker.launch import attention
from clanker.registry import Registry
from clanker_codex.rehome import CodexRehome
from tests.core.bridge.test_relayed_launch import Binding, User, ask
from tests.helpers import committed_repository, git, install_double, kill_grid, make_plugin

SESSION = "abc"

# `fake-codex [resume ID [--cd DIR]]`: draws a header naming its working root (the --cd
# directory when given, as codex does), then echoes what is typed until `/exit`.
# FAKE_REFUSE=worktrees|late|all: a resume with --cd into a worktree (or any) answers as
# for an unknown id (late: after drawing its header first). FAKE_GATE=<dir>: a resume
# with --cd that gets that far touches <dir>/started and waits for <dir>/go to draw.
# FAKE_CONTENTION=<file holding N>: the next N resumes with --cd print the writer-lock
# contention and exit 1.
CODEX = """
    import os, sys
    args = sys.argv[1:]
    root = args[args.index("--cd") + 1] if "--cd" in args else os.getcwd()
    moved = "--cd" in args
    refuse = os.environ.get("FAKE_REFUSE", "")
    if moved and (refuse == "all" or (refuse in ("worktrees", "late") and "-worktrees" in root)):
        if refuse == "late":  # as codex draws first, then gives up (1.9-2.4 s measured)
            print(">_ OpenAI Codex (v0.171.0)  Resuming session...", flush=True)
            import time; time.sleep(2.5)
        print(f"ERROR: No saved session found with ID {args[1]}. Run `codex resume` "
              "without an ID to choose from existing sessions.", flush=True)
        raise SystemExit(1)
    counter = os.environ.get("FAKE_CONTENTION")
    if moved and counter and int(open(counter).read()) > 0:
        left = int(open(counter).read())
        open(counter, "w").write(str(left - 1))
        print(f"Error: failed to acquire thread writer lock {root}/x.lock", flush=True)
        raise SystemExit(1)
    gate = os.environ.get("FAKE_GATE")
    if moved and gate:  # says it started, then waits (bounded) to be let go on
        import pathlib, time
        pathlib.Path(gate, "started").touch()
        for _ in range(600):
            if pathlib.Path(gate, "go").exists():
                break
            time.sleep(0.05)
    live = ""
    if moved:  # how many terminals the grid lists while this resume starts
        from clanker.grid.client import GridClient
        listed = GridClient(os.environ["CLANKER_ATTENTION_SOCKET"]).list_terminals()
        live = f" beside {len(listed) - 1}"
    print(f"codex {' '.join(args[:2]) or 'fresh'} in {root}{live}", flush=True)
    for line in sys.stdin:
        if line.strip() == "/exit":
            break
        print(f"echo {line.strip()} in {root}", flush=True)
"""


def library() -> Clanker:
    made = make_plugin("codex", executable="fake-codex")
    type(made).clanker_attention = hookimpl(lambda self: Binding())  # type: ignore[attr-defined]
    type(made).clanker_checkout_rehome = hookimpl(  # type: ignore[attr-defined]
        lambda self: CodexRehome())
    return Clanker(registry=Registry.from_plugins({"codex": made}, environ={}))


@pytest.fixture
def repository(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    install_double(tmp_path, monkeypatch, "fake-codex", CODEX)
    return committed_repository(tmp_path / "repo")


class Agent:
    """The running launch as its harness's attention adapter reports it."""

    def __init__(self, clanker: Clanker, repo: Path, *, harness: str = "codex",
                 drawn: str = f"codex resume {SESSION}") -> None:
        self.clanker = clanker
        self.user = User(clanker, repo, SESSION, harness)
        self.user.read_until(f"{drawn} in {repo}")
        assert self.user.relayed.listening.wait(60)

    @property
    def env(self) -> dict[str, str]:
        return dict(self.user.relayed.launch.env)

    def report(self, *events: tuple[str, dict[str, object]]) -> None:
        env = self.env
        GridClient(env[attention.SOCKET_VARIABLE]).deliver(
            env[attention.TERMINAL_VARIABLE], env[attention.TOKEN_VARIABLE],
            [{"event": event, "scope": "root", "sessionId": SESSION, **fields}
             for event, fields in events])


@contextlib.contextmanager
def notices(agent: Agent) -> Iterator[list[str]]:
    """The grid's notices while the block runs (what ``watch --notify`` reads)."""
    heard: list[str] = []
    synced = threading.Event()
    client = GridClient(agent.env[attention.SOCKET_VARIABLE])
    stream = client.subscribe(notifications=True, timeout=120)

    def read() -> None:
        with contextlib.suppress(Exception):
            for event in stream:
                if event.kind is StreamKind.SYNCED:
                    synced.set()
                elif event.kind is StreamKind.NOTIFICATION and event.notification:
                    heard.append(event.notification.message)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert synced.wait(60)
    yield heard


def wait_for(heard: list[str], text: str) -> str:
    for _ in range(1200):
        found = next((message for message in heard if text in message), None)
        if found is not None:
            return found
        threading.Event().wait(0.1)
    raise AssertionError(f"no notice with {text!r}: {heard!r}")


def schedule(agent: Agent) -> str:
    """The agent asks for a checkout mid-turn; the path scheduled."""
    agent.report(("session_started", {}), ("turn_started", {"turnId": "turn-1"}))
    code, answer = ask(agent.env, "--arg", "branch=feature/x")
    assert code == 0, answer
    assert answer["status"] == "scheduled", answer
    return str(answer["path"])


def test_the_completed_turn_moves_the_conversation_into_the_checkout(repository: Path) -> None:
    agent = Agent(library(), repository)
    [before] = agent.clanker.agents()
    assert set(CHECKOUT_NAMES) <= set(before.bridge)  # granted: the move can be made
    old = agent.env
    with notices(agent) as heard:
        path = schedule(agent)
        agent.user.type("still here\n")
        agent.user.read_until(f"echo still here in {repository}")  # nothing moved yet
        agent.report(("turn_completed", {"turnId": "turn-1"}))
        # The source's registration was released before the resume registered: the
        # resume starts as the only terminal the grid lists (never two roots).
        agent.user.read_until(f"codex resume {SESSION} in {path} beside 0")
        wait_for(heard, f"isolated checkout ready: the agent continues in {path}")
    assert agent.user.relayed.listening.wait(60)
    agent.user.type("hello\n")
    agent.user.read_until(f"echo hello in {path}")
    [after] = agent.clanker.agents()  # the same terminal the person watches, moved
    assert after.cwd == path and after.terminal != before.terminal
    new = agent.env
    assert new[wire.TOKEN_VARIABLE] != old[wire.TOKEN_VARIABLE]  # rotated
    assert agent.clanker.host_commands(new).capabilities()
    with pytest.raises(CommandError):
        agent.clanker.host_commands(old).capabilities()
    assert git(Path(path), "rev-parse", "--abbrev-ref", "HEAD") == "feature/x"
    code, again = ask(new, "--arg", "branch=feature/y")
    assert (code, again["status"]) == (0, "already-isolated")
    assert agent.user.finish() == 0


def complete(env: dict[str, str], *args: str) -> tuple[int, dict[str, object]]:
    """``clanker cmd run clanker_complete_isolated_checkout ARGS`` as the agent runs it."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "clanker", "cmd", "run",
                           "clanker_complete_isolated_checkout", *args, "--json"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, json.loads(done.stdout)


def test_in_and_out_again_each_after_its_turn(repository: Path) -> None:
    agent = Agent(library(), repository)
    with notices(agent) as heard:
        path = schedule(agent)
        agent.report(("turn_completed", {"turnId": "turn-1"}))
        wait_for(heard, "isolated checkout ready")
        assert agent.user.relayed.listening.wait(60)
        agent.report(("turn_started", {"turnId": "turn-2"}))
        agent.user.seen = b""
        code, answer = complete(agent.env, "--arg", "deleteBranch=true")
        assert (code, answer["status"]) == (0, "scheduled"), answer
        assert os.path.isdir(path)  # nothing moves or goes before the turn ends
        agent.report(("turn_completed", {"turnId": "turn-2"}))
        notice = wait_for(heard, "isolated checkout completed")
    assert f"{path} removed, its branch deleted" in notice
    agent.user.read_until(f"codex resume {SESSION} in {repository}")
    assert not os.path.exists(path)
    [after] = agent.clanker.agents()
    assert after.cwd == str(repository)
    assert agent.user.finish() == 0


def test_a_writer_lock_contention_is_retried(repository: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    counter = tmp_path / "contention"
    counter.write_text("2")  # two contentions, the third and last attempt succeeds
    monkeypatch.setenv("FAKE_CONTENTION", str(counter))
    agent = Agent(library(), repository)
    with notices(agent) as heard:
        path = schedule(agent)
        agent.report(("turn_completed", {"turnId": "turn-1"}))
        wait_for(heard, "isolated checkout ready")
    agent.user.read_until(f"codex resume {SESSION} in {path}")
    assert counter.read_text() == "0"
    assert b"writer lock" not in agent.user.seen  # a refused attempt is never shown
    assert agent.user.finish() == 0


@pytest.mark.parametrize("refusal", ["worktrees", "late"])
def test_a_failed_resume_in_the_target_is_recovered_where_it_was(
    repository: Path, monkeypatch: pytest.MonkeyPatch, refusal: str,
) -> None:
    # late: the resume draws its header and gives up seconds later, inside the window
    # Codex declares (CodexRehome.observation_window).
    monkeypatch.setenv("FAKE_REFUSE", refusal)
    agent = Agent(library(), repository)
    [before] = agent.clanker.agents()
    with notices(agent) as heard:
        path = schedule(agent)
        agent.user.seen = b""  # from here on: what the move draws
        agent.report(("turn_completed", {"turnId": "turn-1"}))
        notice = wait_for(heard, "isolated checkout move not made (exited)")
    assert f"the worktree is kept at {path}" in notice
    agent.user.read_until(f"codex resume {SESSION} in {repository}")  # resumed again
    assert agent.user.relayed.listening.wait(60)
    agent.user.type("still\n")
    agent.user.read_until(f"echo still in {repository}")
    [after] = agent.clanker.agents()
    assert after.cwd == str(repository) and after.terminal != before.terminal
    assert git(repository, "worktree", "list", "--porcelain").count("feature/x") == 1
    assert b"No saved session" not in agent.user.seen
    assert agent.user.finish() == 0


def test_when_both_resumes_fail_nothing_is_removed_and_history_is_named(
    repository: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAKE_REFUSE", "all")
    agent = Agent(library(), repository)
    with notices(agent) as heard:
        path = schedule(agent)
        agent.report(("turn_completed", {"turnId": "turn-1"}))
        notice = wait_for(heard, "FAILED")
    assert "resume the conversation from history" in notice and "nothing was removed" in notice
    agent.user.thread.join(120)  # nothing runs the conversation: the launch ends
    assert agent.user.status == [1]
    assert agent.user.relayed.unrecovered is not None
    assert "resume it from history" in agent.user.relayed.unrecovered
    assert os.path.isdir(path)
    assert git(repository, "worktree", "list", "--porcelain").count("feature/x") == 1
    assert agent.clanker.agents() == []
    agent.user.close()


def test_an_interrupted_turn_cancels_the_move_and_keeps_the_checkout(
    repository: Path,
) -> None:
    from click.testing import CliRunner

    from clanker.cli import cli

    agent = Agent(library(), repository)
    [before] = agent.clanker.agents()
    with notices(agent) as heard:
        path = schedule(agent)
        # `clanker status` shows the scheduled move, in text and JSON.
        [shown] = agent.clanker.agents()
        assert shown.pending_move is not None and shown.pending_move.state == "scheduled"
        listed = CliRunner().invoke(cli, ["status", "--json"], catch_exceptions=False)
        [record] = json.loads(listed.output)
        assert record["pending_move"]["path"] == path
        assert record["pending_move"]["branch"] == "feature/x"
        assert record["pending_move"]["state"] == "scheduled"
        table = CliRunner().invoke(cli, ["status"], catch_exceptions=False).output
        assert f"~ {before.terminal}: moves to " in table and "once its turn ends" in table
        agent.report(("turn_interrupted", {"turnId": "turn-1"}))
        wait_for(heard, "isolated checkout move cancelled (the turn was interrupted)")
    agent.user.type("still\n")
    agent.user.read_until(f"echo still in {repository}")
    [after] = agent.clanker.agents()
    assert after.terminal == before.terminal and after.pending_move is None
    assert os.path.isdir(path)
    assert agent.user.finish() == 0


def test_a_launch_whose_grid_was_killed_is_taken_up_by_the_next_and_its_move_made(
    repository: Path,
) -> None:
    agent = Agent(library(), repository)
    [before] = agent.clanker.agents()
    path = schedule(agent)
    old = GridClient(agent.env[attention.SOCKET_VARIABLE]).hello().pid
    kill_grid(agent.env[attention.SOCKET_VARIABLE])  # the next launch starts a new one
    # The launcher starts the next grid, re-presents its terminal (the hooks' credential
    # unchanged) and says so on the person's terminal; the next grid reloads the move
    # and re-arms it on that same terminal.
    agent.user.read_until("clanker: attention restored")
    assert GridClient(agent.env[attention.SOCKET_VARIABLE]).hello().pid != old
    [taken] = agent.clanker.agents()
    assert taken.terminal == before.terminal and taken.cwd == str(repository)
    assert taken.pending_move is not None and taken.pending_move.state == "scheduled"
    assert taken.pending_move.path == path
    # The agent's bridge credential was carried over: it is answered, not refused.
    code, answer = ask(agent.env, "--arg", "branch=feature/x")
    assert code == 0 and answer["status"] == "already-scheduled", answer
    with notices(agent) as heard:
        agent.report(("turn_started", {"turnId": "turn-2"}))  # events flow again
        agent.user.type("still here\n")
        agent.user.read_until(f"echo still here in {repository}")  # nothing moved yet
        agent.report(("turn_completed", {"turnId": "turn-2"}))
        agent.user.read_until(f"codex resume {SESSION} in {path}")
        wait_for(heard, f"isolated checkout ready: the agent continues in {path}")
    [after] = agent.clanker.agents()
    assert after.cwd == path and after.pending_move is None
    assert agent.user.finish() == 0


def _type_during_the_move(agent: Agent, gate: Path, text: str) -> None:
    """Once a resume has started (the source is gone, nothing is relayed), type ``text``,
    wait until the relay holds it, then let the resume draw and be proven."""
    for _ in range(1200):
        if (gate / "started").exists():
            break
        threading.Event().wait(0.05)
    else:
        raise AssertionError("no resume started")
    assert agent.user.relayed.relay.child is None  # a handover is pending
    agent.user.type(text)
    assert agent.user.relayed.relay.wait_held(len(text), timeout=60)
    # The source's terminal is gone; `clanker status` shows the move on the resume's.
    [shown] = agent.clanker.agents()
    assert shown.pending_move is not None and shown.pending_move.state == "moving"
    (gate / "go").touch()


def test_what_is_typed_during_the_move_reaches_the_resumed_agent(
    repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    monkeypatch.setenv("FAKE_GATE", str(gate))
    agent = Agent(library(), repository)
    with notices(agent) as heard:
        path = schedule(agent)
        agent.report(("turn_completed", {"turnId": "turn-1"}))
        _type_during_the_move(agent, gate, "typed ahead\n")
        wait_for(heard, f"isolated checkout ready: the agent continues in {path}")
    agent.user.read_until(f"echo typed ahead in {path}")
    assert b"discarded" not in agent.user.seen
    assert agent.user.finish() == 0


def test_what_is_typed_during_a_move_that_recovers_is_discarded_and_said(
    repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    monkeypatch.setenv("FAKE_GATE", str(gate))
    monkeypatch.setenv("FAKE_REFUSE", "worktrees")  # the target fails before the gate
    agent = Agent(library(), repository)
    with notices(agent) as heard:
        schedule(agent)
        agent.user.seen = b""
        agent.report(("turn_completed", {"turnId": "turn-1"}))
        _type_during_the_move(agent, gate, "rm -rf build\n")  # meant for the worktree
        wait_for(heard, "isolated checkout move not made (exited)")
    agent.user.read_until("clanker: 13 typed bytes were discarded")
    agent.user.read_until(f"codex resume {SESSION} in {repository}")
    assert agent.user.relayed.listening.wait(60)
    agent.user.type("after\n")
    agent.user.read_until(f"echo after in {repository}")
    assert b"echo rm -rf build" not in agent.user.seen
    assert agent.user.finish() == 0
