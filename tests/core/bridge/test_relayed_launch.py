"""A launch of a hot-replaced harness with its bridge and attention runs under the
PTY relay and can be moved to another checkout: real grid, real PTYs, a double
of the harness. A proven move leaves the grid with the resumed terminal in the
target (the old one retired, its bridge credential revoked); a refused one
leaves the original running and listed where it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from clanker import hookimpl
from clanker.api import Clanker
from clanker.bridge import wire
from clanker.bridge.cmd import CommandError
from clanker.checkouts.capability import RehomeStrategy
from clanker.errors import HarnessCapabilityError
from clanker.launch.relayed import MoveBusy, RelayedLaunch
from clanker.launch.replacement import Proof, ReplacementRefused, Why
from clanker.launch.request import LaunchOperation, LaunchRequest, SessionTarget
from clanker.launch.service import LaunchOptions
from clanker.registry import Registry
from clanker.testing.doubles import prepend_to_path
from tests.core.bridge.test_launch import Accepting
from tests.helpers import committed_repository, git, make_plugin, write_script

# `fake-agent [resume ID]`: draws a line naming where it runs, then echoes what is
# typed until `/exit`. The resume of the id `gone` behaves as a resume of an unknown
# conversation does: it prints an error and exits 1 at once.
AGENT = """
    import os, sys
    if os.environ.get("FAKE_REFUSE_WORKTREES") and "-worktrees" in os.getcwd():
        sys.argv[1:] = ["resume", "gone"]  # as if the conversation could not be found there
    if sys.argv[1:] == ["resume", "gone"]:
        print("No conversation found with session ID: gone", flush=True)
        raise SystemExit(1)
    print(f"running {' '.join(sys.argv[1:]) or 'fresh'} in {os.getcwd()}", flush=True)
    for line in sys.stdin:
        if line.strip() == "/exit":
            break
        print(f"echo {line.strip()} in {os.getcwd()}", flush=True)
"""


class HotReplaced:
    """A rehome capability declaring ``hot-replace``; the launch directory decides."""

    strategy = RehomeStrategy.HOT_REPLACE

    def resume_flags(self, target: str, user_flags: tuple[str, ...]) -> tuple[str, ...]:
        return user_flags

    def is_transient_contention(self, output: str) -> bool:
        return False


class Binding(Accepting):
    """Attention that binds the session a resume names (as a trusted resume does)."""

    resume_preserves_session_id = True


def library(*, rehome: bool = True) -> Clanker:
    made = make_plugin()
    type(made).clanker_attention = hookimpl(lambda self: Binding())  # type: ignore[attr-defined]
    if rehome:
        type(made).clanker_checkout_rehome = hookimpl(  # type: ignore[attr-defined]
            lambda self: HotReplaced())
    return Clanker(registry=Registry.from_plugins({"fake-agent": made}, environ={}))


class User:
    """The user's side of a relayed launch: pipes, with the relay running in a thread."""

    def __init__(self, clanker: Clanker, cwd: Path, session: str | None = None,
                 harness: str = "fake-agent") -> None:
        self.stdin_r, self.stdin_w = os.pipe()
        self.stdout_r, self.stdout_w = os.pipe()
        self.seen = b""
        request = LaunchRequest(cwd=str(cwd)) if session is None else LaunchRequest(
            operation=LaunchOperation.RESUME, session=SessionTarget(native_id=session),
            cwd=str(cwd))
        self.relayed: RelayedLaunch = clanker.relay_launch(
            harness, request, LaunchOptions(bridge=True, trusted_session_id=session),
            stdin_fd=self.stdin_r, stdout_fd=self.stdout_w)
        self.status: list[int] = []
        self.thread = threading.Thread(target=lambda: self.status.append(self.relayed.run()))
        self.thread.start()

    def read_until(self, text: str) -> None:
        while text.encode() not in self.seen:
            chunk = os.read(self.stdout_r, 65536)
            assert chunk, f"the relay ended before {text!r}: {self.seen!r}"
            self.seen += chunk

    def type(self, text: str) -> None:
        os.write(self.stdin_w, text.encode())

    def close(self) -> None:
        for fd in (self.stdin_r, self.stdin_w, self.stdout_r, self.stdout_w):
            os.close(fd)

    def finish(self) -> int:
        self.type("/exit\n")
        self.thread.join()
        self.close()
        return self.status[0]


@pytest.fixture
def checkouts(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "fake-agent", AGENT)
    prepend_to_path(monkeypatch, bin_dir)
    main, target = tmp_path / "main", tmp_path / "target"
    main.mkdir()
    target.mkdir()
    return main, target


QUICK = Proof(first_output_within=60.0, survives=0.2)


def fresh(checkouts: tuple[Path, Path]) -> tuple[Clanker, User]:
    """A relayed fresh launch in the main checkout, drawn."""
    main, _ = checkouts
    clanker = library()
    user = User(clanker, main)
    user.read_until(f"running fresh in {main}")
    return clanker, user


def test_a_proven_move_continues_in_the_target_with_new_attachments(
    checkouts: tuple[Path, Path],
) -> None:
    _, target = checkouts
    clanker, user = fresh(checkouts)
    [before] = clanker.agents()
    old_token = user.relayed.launch.env[wire.TOKEN_VARIABLE]
    moved = user.relayed.move(SessionTarget(native_id="abc"), str(target), proof=QUICK)
    assert user.relayed.launch is moved and moved.cwd == str(target)
    user.read_until(f"running resume abc in {target}")
    user.type("hello\n")
    user.read_until(f"echo hello in {target}")
    [after] = clanker.agents()  # the original's terminal is retired, the new one listed
    assert after.terminal != before.terminal and after.cwd == str(target)
    new_token = moved.env[wire.TOKEN_VARIABLE]
    assert new_token != old_token
    assert clanker.host_commands(moved.env).capabilities()
    with pytest.raises(CommandError):  # revoked past the commit point
        clanker.host_commands({**moved.env, wire.TOKEN_VARIABLE: old_token}).capabilities()
    assert user.finish() == 0
    assert clanker.agents() == []


def test_a_refused_move_leaves_the_original_running_where_it_was(
    checkouts: tuple[Path, Path],
) -> None:
    main, target = checkouts
    clanker, user = fresh(checkouts)
    [before] = clanker.agents()
    original = user.relayed.launch
    with pytest.raises(ReplacementRefused) as refused:
        user.relayed.move(SessionTarget(native_id="gone"), str(target), proof=QUICK)
    assert refused.value.why is Why.EXITED
    assert user.relayed.launch is original
    assert clanker.agents() == [before]  # the resume's own terminal is retired again
    assert clanker.host_commands(original.env).capabilities()
    user.type("still\n")
    user.read_until(f"echo still in {main}")
    assert b"No conversation found" not in user.seen  # a refused resume is never shown
    assert user.finish() == 0


def test_a_second_move_while_one_is_under_way_is_refused(
    checkouts: tuple[Path, Path],
) -> None:
    _, target = checkouts
    _, user = fresh(checkouts)
    second: list[BaseException] = []

    def confirm(_: object) -> bool:  # asked while the first move holds the launch
        try:
            user.relayed.move(SessionTarget(native_id="xyz"), str(target), proof=QUICK)
        except MoveBusy as busy:
            second.append(busy)
        return True

    user.relayed.move(SessionTarget(native_id="abc"), str(target),
                      proof=Proof(first_output_within=60.0, survives=0.2, confirm=confirm))
    assert len(second) == 1
    user.read_until(f"running resume abc in {target}")
    assert user.finish() == 0


def test_a_launch_that_cannot_be_moved_is_not_relayed(checkouts: tuple[Path, Path]) -> None:
    main, _ = checkouts
    clanker = library(rehome=False)
    with pytest.raises(HarnessCapabilityError):
        clanker.relay_launch("fake-agent", LaunchRequest(cwd=str(main)),
                             LaunchOptions(bridge=True))
    assert clanker.agents() == []  # what it acquired is released
    with pytest.raises(HarnessCapabilityError):  # no bridge: nothing to move it with
        library().relay_launch("fake-agent", LaunchRequest(cwd=str(main)),
                               LaunchOptions(bridge=False))


# -- the agent asks for its own checkout -------------------------------------------------


@pytest.fixture
def repository(checkouts: tuple[Path, Path], tmp_path: Path) -> Path:
    return committed_repository(tmp_path / "repo")


def ask(env: dict[str, str], *args: str) -> tuple[int, dict[str, object]]:
    """``clanker cmd run clanker_create_isolated_checkout ARGS`` as the agent runs it."""
    done = subprocess.run([sys.executable, "-m", "clanker", "cmd", "run",
                           "clanker_create_isolated_checkout", *args, "--json"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, json.loads(done.stdout)


def started(clanker: Clanker, repo: Path) -> User:
    user = User(clanker, repo, session="abc")
    user.read_until(f"running resume abc in {repo}")
    assert user.relayed.listening.wait(60)
    return user


def test_the_agent_moves_itself_into_a_new_checkout(repository: Path) -> None:
    clanker = library()
    user = started(clanker, repository)
    env = dict(user.relayed.launch.env)
    [before] = clanker.agents()
    assert "clanker_create_isolated_checkout" in before.bridge
    code, answer = ask(env, "--arg", "branch=feature/x")
    assert code == 0, answer
    path = str(answer["path"])
    assert answer == {"status": "created", "branch": "feature/x", "path": path}
    assert git(Path(path), "rev-parse", "--abbrev-ref", "HEAD") == "feature/x"
    assert git(Path(path), "rev-parse", "HEAD") == git(repository, "rev-parse", "HEAD")
    user.read_until(f"running resume abc in {path}")
    [after] = clanker.agents()  # status shows the conversation in the new checkout
    assert after.cwd == path and after.terminal != before.terminal
    assert ask(env, "--arg", "branch=feature/y")[0] == wire.EXIT_NO_AUTHORITY  # rotated
    assert user.relayed.listening.wait(60)  # the new terminal listens in turn
    code, again = ask(dict(user.relayed.launch.env), "--arg", "branch=feature/y")
    assert (code, again) == (0, {"status": "already-isolated", "branch": "feature/x",
                                 "path": path})
    assert user.finish() == 0


def test_a_refused_move_keeps_the_worktree_and_the_agent_where_it_was(
    repository: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAKE_REFUSE_WORKTREES", "1")
    clanker = library()
    user = started(clanker, repository)
    [before] = clanker.agents()
    code, answer = ask(dict(user.relayed.launch.env), "--arg", "branch=feature/x")
    assert code == wire.EXIT_CAPABILITY_FAILED
    message = str(answer["error"]["message"])  # type: ignore[index]
    assert "(not-moved (exited): you continue where you were; the worktree is kept at" in message
    kept = git(repository, "worktree", "list", "--porcelain").count("branch refs/heads/feature/x")
    assert kept == 1
    assert clanker.agents() == [before]
    user.type("still\n")
    user.read_until(f"echo still in {repository}")
    assert user.finish() == 0


def test_the_checkout_comes_from_the_caller_never_from_its_arguments(repository: Path) -> None:
    clanker = library()
    user = started(clanker, repository)
    env = dict(user.relayed.launch.env)
    for refused in ('{"branch": "x", "path": "/tmp"}', '{"branch": "x", "workspace": "/"}',
                    '{"branch": "x", "terminal": "t-1"}', '{}'):
        code, _ = ask(env, "--json", refused)
        assert code == wire.EXIT_USAGE, refused
    code, answer = ask(env, "--arg", "branch=not..valid")
    assert code == wire.EXIT_CAPABILITY_FAILED
    assert "(invalid-branch: " in str(answer["error"]["message"])  # type: ignore[index]
    assert git(repository, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert user.finish() == 0


def test_two_creates_at_once_for_one_agent_make_one_checkout(repository: Path) -> None:
    clanker = library()
    user = started(clanker, repository)
    env = dict(user.relayed.launch.env)
    command = [sys.executable, "-m", "clanker", "cmd", "run",
               "clanker_create_isolated_checkout", "--json"]
    calls = [subprocess.Popen([*command[:-1], "--arg", f"branch=feature/{n}", "--json"],
                              env=env, stdout=subprocess.PIPE, text=True) for n in "ab"]
    outcomes = sorted((call.wait(120), json.loads(call.communicate()[0])) for call in calls)
    (won_code, won), (lost_code, lost) = outcomes
    assert won_code == 0 and won["status"] == "created"
    # The other was refused while the first ran, or came after it had moved (and its
    # caller's credential had been rotated away): never a second checkout.
    assert lost_code in (wire.EXIT_CAPABILITY_FAILED, wire.EXIT_NO_AUTHORITY), lost
    if lost_code == wire.EXIT_CAPABILITY_FAILED:
        assert "(busy: " in str(lost["error"]["message"])
    assert git(repository, "worktree", "list", "--porcelain").count("worktree ") == 2
    user.read_until(f"running resume abc in {won['path']}")
    assert user.finish() == 0


def test_a_launch_nobody_relays_is_refused_before_anything_is_created(
    repository: Path,
) -> None:
    clanker = library()
    request = LaunchRequest(operation=LaunchOperation.RESUME,
                            session=SessionTarget(native_id="abc"), cwd=str(repository))
    options = LaunchOptions(bridge=True, trusted_session_id="abc")
    with clanker.prepare_launch("fake-agent", request, options) as launch:  # run elsewhere
        code, answer = ask(dict(launch.env), "--arg", "branch=feature/x")
    assert code == wire.EXIT_CAPABILITY_FAILED
    assert "(not-relayed: " in str(answer["error"]["message"])  # type: ignore[index]
    assert git(repository, "worktree", "list", "--porcelain").count("worktree ") == 1
