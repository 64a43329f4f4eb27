"""``clanker_complete_isolated_checkout``, the way back: the agent, moved into a
worktree by ``clanker_create_isolated_checkout``, asks to finish it; its
conversation continues in the main checkout, then the worktree is completed
with the strict rules. Real grid daemon, real PTYs, real git, the agent's own
``clanker cmd run``; the harness is the double of the relayed-launch tests."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from clanker.api import Clanker
from clanker.bridge import wire
from clanker.grid import daemon
from clanker.launch.request import LaunchOperation, LaunchRequest, SessionTarget
from clanker.launch.service import LaunchOptions
from clanker.testing.doubles import prepend_to_path
from tests.core.bridge.test_relayed_launch import AGENT, User, git, library
from tests.helpers import write_script

# The double of test_relayed_launch, and two more behaviours for a resume in the
# directory a file names: while $FAKE_REFUSE_IN names it, the resume cannot find its
# conversation; while $FAKE_HOLD_IN does, it writes its pid to $FAKE_HOLD_IN.pid and
# waits (silent) until that file is gone.
REFUSING_AGENT = """
    import os, sys, time
    def named(variable):
        path = os.environ.get(variable, "")
        try:
            with open(path) as file:
                return sys.argv[1:2] == ["resume"] and file.read() == os.getcwd()
        except OSError:
            return False
    if named("FAKE_REFUSE_IN"):
        sys.argv[1:] = ["resume", "gone"]
    if named("FAKE_HOLD_IN"):
        held = os.environ["FAKE_HOLD_IN"]
        with open(held + ".pid", "w") as pid:
            pid.write(str(os.getpid()))
        while os.path.exists(held):
            time.sleep(0.05)
""" + AGENT

COMPLETE = "clanker_complete_isolated_checkout"


@pytest.fixture
def repository(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with one commit (``*.log`` ignored), the double on PATH, and a
    throwaway HOME (git's configuration and the grid's Trash)."""
    user_home = tmp_path / "home"
    (user_home / ".local" / "share").mkdir(parents=True)
    for name, value in (("HOME", str(user_home)),
                        ("XDG_DATA_HOME", str(user_home / ".local" / "share")),
                        ("GIT_CONFIG_GLOBAL", str(user_home / ".gitconfig")),
                        ("GIT_CONFIG_NOSYSTEM", "1"),
                        ("GIT_AUTHOR_NAME", "Fake Person"),
                        ("GIT_AUTHOR_EMAIL", "fake@example.invalid"),
                        ("GIT_COMMITTER_NAME", "Fake Person"),
                        ("GIT_COMMITTER_EMAIL", "fake@example.invalid"),
                        ("FAKE_REFUSE_IN", str(tmp_path / "refuse-in")),
                        ("FAKE_HOLD_IN", str(tmp_path / "hold-in"))):
        monkeypatch.setenv(name, value)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "fake-agent", REFUSING_AGENT)
    prepend_to_path(monkeypatch, bin_dir)
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("hello\n")
    (repo / ".gitignore").write_text("*.log\n")
    git(repo, "add", "README", ".gitignore")
    git(repo, "commit", "-q", "-m", "first")
    return repo


def call(env: dict[str, str], name: str, *args: str) -> tuple[int, dict[str, object]]:
    """``clanker cmd run NAME ARGS --json`` as the agent runs it."""
    done = subprocess.run([sys.executable, "-m", "clanker", "cmd", "run", name, *args,
                           "--json"], env=env, capture_output=True, text=True, timeout=180,
                          check=False)
    return done.returncode, json.loads(done.stdout)


def message(answer: dict[str, object]) -> str:
    return str(answer["error"]["message"])  # type: ignore[index]


class Isolated:
    """A relayed conversation the agent itself moved into the worktree of ``feature/x``."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.clanker: Clanker = library()
        self.user = User(self.clanker, repo, session="abc")
        self.user.read_until(f"running resume abc in {repo}")
        assert self.user.relayed.listening.wait(60)
        code, answer = call(self.env, "clanker_create_isolated_checkout",
                            "--arg", "branch=feature/x")
        assert code == 0, answer
        self.path = Path(str(answer["path"]))
        self.user.read_until(f"running resume abc in {self.path}")
        assert self.user.relayed.listening.wait(60)

    @property
    def env(self) -> dict[str, str]:
        return dict(self.user.relayed.launch.env)

    def complete(self, *args: str) -> tuple[int, dict[str, object]]:
        return call(self.env, COMPLETE, *args)

    def runs_in(self) -> str:
        [agent] = self.clanker.agents()
        return agent.cwd

    def listed(self) -> bool:
        return f"worktree {self.path}\n" in git(self.repo, "worktree", "list", "--porcelain")

    def branch_exists(self) -> bool:
        return bool(git(self.repo, "branch", "--list", "feature/x"))

    def finish(self) -> None:
        assert self.user.finish() == 0


class Notices:
    """What a ``watch --notify`` is sent: every notification's message, from a thread."""

    def __init__(self) -> None:
        from clanker.grid.client import GridClient
        from clanker.grid.daemon import grid_location

        self.seen: list[str] = []
        synced = threading.Event()

        def follow() -> None:
            client = GridClient(grid_location().socket)
            for event in client.subscribe(notifications=True):
                if event.kind.value == "synced":
                    synced.set()
                if event.notification is not None:
                    self.seen.append(event.notification.message)

        threading.Thread(target=follow, daemon=True).start()
        assert synced.wait(60)


def test_the_agent_finishes_its_worktree_and_continues_in_the_main_checkout(
    repository: Path,
) -> None:
    isolated = Isolated(repository)
    [before] = isolated.clanker.agents()
    assert COMPLETE in before.bridge  # granted where create is
    notices = Notices()
    moved_env = isolated.env
    code, answer = isolated.complete("--arg", "deleteBranch=true")
    assert code == 0, answer
    assert answer == {"status": "completed", "moved_to": str(repository),
                      "path": str(isolated.path), "branch": "feature/x",
                      "removal": "removed", "trashed": False, "branch_deleted": True}
    isolated.user.read_until(f"running resume abc in {repository}")
    assert isolated.runs_in() == str(repository)
    assert not isolated.listed() and not isolated.path.exists()
    assert not isolated.branch_exists()
    wait_for(lambda: bool(notices.seen), "the person's notice")
    assert notices.seen == [f"isolated checkout completed: {isolated.path} removed, its "
                            f"branch deleted; the agent continues in {repository}"]
    assert call(moved_env, COMPLETE)[0] == wire.EXIT_NO_AUTHORITY  # rotated with the move
    assert isolated.user.relayed.listening.wait(60)
    code, again = isolated.complete()
    assert (code, again) == (0, {"status": "already-complete", "last": answer})
    isolated.finish()


@pytest.mark.parametrize(("change", "category"), [
    ("tracked", "tracked"), ("staged", "staged"), ("untracked", "untracked")])
def test_changes_block_and_nothing_moves(repository: Path, change: str, category: str) -> None:
    isolated = Isolated(repository)
    if change == "tracked":
        (isolated.path / "README").write_text("changed\n")
    else:
        (isolated.path / "new.txt").write_text("new\n")
        if change == "staged":
            git(isolated.path, "add", "new.txt")
    code, answer = isolated.complete("--arg", "deleteBranch=true", "--arg",
                                     "discardIgnored=true")
    assert code == 0, answer
    assert answer["status"] == "dirty" and answer["can_complete_with_discard_ignored"] is False
    changes = answer["changes"]
    assert isinstance(changes, dict) and changes[category]["count"] == 1
    assert isolated.runs_in() == str(isolated.path)  # nothing moved
    assert isolated.listed() and isolated.branch_exists()
    isolated.finish()


def test_ignored_files_alone_block_until_they_may_be_discarded(repository: Path) -> None:
    isolated = Isolated(repository)
    (isolated.path / "build.log").write_text("artifact\n")
    code, answer = isolated.complete()
    assert code == 0, answer
    assert answer["status"] == "ignored-only"
    assert answer["can_complete_with_discard_ignored"] is True
    assert answer["changes"]["ignored"] == {  # type: ignore[index]
        "count": 1, "examples": ["build.log"]}
    assert isolated.runs_in() == str(isolated.path) and isolated.listed()
    code, answer = isolated.complete("--arg", "discardIgnored=true")
    assert code == 0, answer
    assert answer["status"] == "completed" and answer["trashed"] is True
    isolated.user.read_until(f"running resume abc in {repository}")
    assert not isolated.listed() and not isolated.path.exists()
    trashed = Path(os.environ["XDG_DATA_HOME"]) / "Trash" / "files" / isolated.path.name
    assert (trashed / "build.log").read_text() == "artifact\n"
    assert isolated.branch_exists()  # not asked to delete it
    isolated.finish()


def test_an_unmerged_branch_is_kept(repository: Path) -> None:
    isolated = Isolated(repository)
    (isolated.path / "work.txt").write_text("work\n")
    git(isolated.path, "add", "work.txt")
    git(isolated.path, "commit", "-q", "-m", "work")
    code, answer = isolated.complete("--arg", "deleteBranch=true")
    assert code == 0, answer
    assert answer["status"] == "completed" and answer["branch_deleted"] is False
    assert "not fully merged" in str(answer["branch_note"])
    assert not isolated.listed() and isolated.branch_exists()
    isolated.finish()


def test_a_worktree_removed_behind_clankers_back_is_completed_after_the_move(
    repository: Path,
) -> None:
    isolated = Isolated(repository)
    shutil.rmtree(isolated.path)
    code, answer = isolated.complete("--arg", "deleteBranch=true")
    assert code == 0, answer
    assert answer["status"] == "completed" and answer["removal"] == "already-gone"
    assert answer["moved_to"] == str(repository) and answer["branch_deleted"] is True
    isolated.user.read_until(f"running resume abc in {repository}")
    assert not isolated.listed()  # git's entry is dropped too
    isolated.finish()


def test_a_refused_move_back_keeps_the_worktree_and_the_agent_in_it(
    repository: Path, tmp_path: Path,
) -> None:
    isolated = Isolated(repository)
    (tmp_path / "refuse-in").write_text(str(repository))
    code, answer = isolated.complete("--arg", "deleteBranch=true")
    assert code == wire.EXIT_CAPABILITY_FAILED
    assert ("(not-moved (exited): you continue where you were; the worktree is kept at "
            f"{isolated.path})") in message(answer)
    assert isolated.runs_in() == str(isolated.path)
    assert isolated.listed() and isolated.branch_exists()  # no cleanup after a failed move
    isolated.user.type("still\n")
    isolated.user.read_until(f"echo still in {isolated.path}")
    (tmp_path / "refuse-in").unlink()  # a retry, once the move can be made, completes it
    code, answer = isolated.complete()
    assert (code, answer["status"]) == (0, "completed")
    isolated.finish()


def test_a_create_and_a_complete_at_once_for_one_agent(repository: Path) -> None:
    isolated = Isolated(repository)
    env = isolated.env
    command = [sys.executable, "-m", "clanker", "cmd", "run"]
    calls = {name: subprocess.Popen([*command, name, *args, "--json"], env=env,
                                    stdout=subprocess.PIPE, text=True)
             for name, args in ((COMPLETE, ()),
                                ("clanker_create_isolated_checkout", ("--arg", "branch=y")))}
    outcomes = {name: (call.wait(180), json.loads(call.communicate()[0]))
                for name, call in calls.items()}
    code, answer = outcomes["clanker_create_isolated_checkout"]
    # Create answered first (already isolated), was refused while complete ran, or came
    # after the move had rotated its caller's credential away: never a second checkout.
    assert (code == 0 and answer["status"] == "already-isolated") or \
        (code == wire.EXIT_CAPABILITY_FAILED and "(busy: " in message(answer)) or \
        code == wire.EXIT_NO_AUTHORITY, answer
    code, answer = outcomes[COMPLETE]
    assert (code == 0 and answer["status"] == "completed") or \
        (code == wire.EXIT_CAPABILITY_FAILED and "(busy: " in message(answer)), answer
    completed = code == 0
    assert isolated.listed() is not completed
    if completed:
        isolated.user.read_until(f"running resume abc in {repository}")
    assert isolated.runs_in() == str(repository if completed else isolated.path)
    assert git(repository, "worktree", "list", "--porcelain").count("worktree ") == \
        (1 if completed else 2)
    isolated.finish()


def test_the_checkout_comes_from_the_caller_never_from_its_arguments(
    repository: Path,
) -> None:
    isolated = Isolated(repository)
    for refused in ('{"path": "/tmp"}', '{"workspace": "/"}', '{"terminal": "t-1"}',
                    '{"checkout": "main"}', '{"deleteBranch": "yes"}',
                    '{"discardIgnored": 1}'):
        code, _ = call(isolated.env, COMPLETE, "--json", refused)
        assert code == wire.EXIT_USAGE, refused
    assert isolated.listed() and isolated.runs_in() == str(isolated.path)
    isolated.finish()


def test_the_main_checkout_is_already_complete(repository: Path) -> None:
    clanker = library()
    user = User(clanker, repository, session="abc")
    user.read_until(f"running resume abc in {repository}")
    assert user.relayed.listening.wait(60)
    code, answer = call(dict(user.relayed.launch.env), COMPLETE)
    assert (code, answer) == (0, {"status": "already-complete"})
    assert user.finish() == 0


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Wait for ``condition``; the deadline is generous and only fails on a real hang."""
    deadline = time.monotonic() + 120
    while not condition():
        assert time.monotonic() < deadline, f"still waiting: {what}"
        time.sleep(0.05)


def test_a_caller_cut_off_mid_move_does_not_cut_the_transaction_off(
    repository: Path, tmp_path: Path,
) -> None:
    isolated = Isolated(repository)
    hold = tmp_path / "hold-in"
    hold.write_text(str(repository))
    caller = subprocess.Popen([sys.executable, "-m", "clanker", "cmd", "run", COMPLETE,
                               "--json"], env=isolated.env, stdout=subprocess.DEVNULL)
    wait_for(Path(f"{hold}.pid").exists, "the resume in the main checkout to start")
    caller.kill()  # the agent's call ends while the move is being proven
    caller.wait()
    hold.unlink()
    isolated.user.read_until(f"running resume abc in {repository}")
    # The move was proven and adopted: the transaction finishes under the grid's care.
    wait_for(lambda: not isolated.listed(), "the worktree to be completed")
    assert not isolated.path.exists() and isolated.branch_exists()
    assert isolated.user.relayed.listening.wait(60)
    code, answer = isolated.complete()
    assert code == 0 and answer["status"] == "already-complete"
    assert answer["last"]["status"] == "completed"  # type: ignore[index]
    isolated.finish()


LAUNCHER = """
import json, sys, threading, time
from pathlib import Path
from tests.core.bridge.test_relayed_launch import User, library

user = User(library(), Path(sys.argv[1]), session="abc")
user.read_until("running resume abc in " + sys.argv[1])
assert user.relayed.listening.wait(60)
first = user.relayed.launch
print(json.dumps(dict(first.env)), flush=True)
user.read_until("-worktrees")  # moved by the agent's create
deadline = time.monotonic() + 120
while user.relayed.launch is first:  # it takes over once the original is retired
    assert time.monotonic() < deadline
    time.sleep(0.05)
assert user.relayed.listening.wait(60)
print(json.dumps(dict(user.relayed.launch.env)), flush=True)
threading.Event().wait()
"""


def test_a_launcher_that_dies_mid_move_reports_nothing_done(
    repository: Path, tmp_path: Path,
) -> None:
    """The launcher runs in a process of its own here, so that it can be killed."""
    launcher = subprocess.Popen(  # a launcher that fails ends its output: readline says so
        [sys.executable, "-c", f"import os\ntry:\n{textwrap.indent(LAUNCHER, '    ')}\n"
         "finally:\n    os._exit(1)", str(repository)],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[3])
    assert launcher.stdout is not None
    hold = tmp_path / "hold-in"
    try:
        code, created = call(json.loads(launcher.stdout.readline()),
                             "clanker_create_isolated_checkout", "--arg", "branch=x")
        assert code == 0, created
        worktree = str(created["path"])
        env = json.loads(launcher.stdout.readline())
        hold.write_text(str(repository))
        caller = subprocess.Popen([sys.executable, "-m", "clanker", "cmd", "run", COMPLETE,
                                   "--json"], env=env, stdout=subprocess.PIPE, text=True)
        wait_for(Path(f"{hold}.pid").exists, "the resume in the main checkout to start")
        launcher.kill()  # the launcher dies while the move is being proven
        launcher.wait()
        answer = json.loads(caller.communicate(timeout=180)[0])
        assert caller.returncode == wire.EXIT_CAPABILITY_FAILED
        assert ("(not-moved (no-answer): you continue where you were; the worktree is "
                f"kept at {worktree})") in message(answer)
        listing = git(repository, "worktree", "list", "--porcelain")
        assert f"worktree {worktree}\n" in listing and "branch refs/heads/x" in listing
        assert Path(worktree, "README").exists()
    finally:
        launcher.kill()
        launcher.wait()
        launcher.stdout.close()
        if Path(f"{hold}.pid").exists():  # the held resume its launcher left behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(Path(f"{hold}.pid").read_text()), signal.SIGKILL)


def test_nothing_moves_while_another_agent_works_in_the_worktree(repository: Path) -> None:
    isolated = Isolated(repository)
    other = LaunchRequest(cwd=str(isolated.path / "."))
    with isolated.clanker.prepare_launch("fake-agent", other, LaunchOptions()):
        code, answer = isolated.complete()
    assert code == wire.EXIT_CAPABILITY_FAILED
    assert "(in-use: another agent (terminal t-" in message(answer)
    assert isolated.listed() and isolated.runs_in() == str(isolated.path)
    isolated.finish()


def test_a_worktree_clanker_did_not_create_is_not_completed(repository: Path) -> None:
    theirs = repository.parent / "theirs"
    git(repository, "worktree", "add", "-q", "-b", "theirs", str(theirs))
    clanker = library()
    request = LaunchRequest(operation=LaunchOperation.RESUME,
                            session=SessionTarget(native_id="abc"), cwd=str(theirs))
    options = LaunchOptions(bridge=True, trusted_session_id="abc")
    with clanker.prepare_launch("fake-agent", request, options) as launch:
        code, answer = call(dict(launch.env), COMPLETE)
    assert code == wire.EXIT_CAPABILITY_FAILED
    assert f"(not-owned: {theirs} was not created by clanker" in message(answer)
    assert theirs.is_dir()


def test_both_checkout_transactions_declare_the_specs_bound_and_hints() -> None:
    from clanker.bridge.complete import CLANKER_COMPLETE_ISOLATED_CHECKOUT
    from clanker.bridge.isolated import CLANKER_CREATE_ISOLATED_CHECKOUT
    from clanker.checkouts.types import TRANSACTION_TIMEOUT
    from clanker.grid.daemon import STOP_TIMEOUT

    assert TRANSACTION_TIMEOUT == 30.0
    for capability in (CLANKER_CREATE_ISOLATED_CHECKOUT, CLANKER_COMPLETE_ISOLATED_CHECKOUT):
        assert capability.timeout == TRANSACTION_TIMEOUT, capability.name
        # The spec's hints: both mutate, completion may destroy, neither is idempotent.
        assert not capability.annotations.read_only
        assert not capability.annotations.idempotent, capability.name
    assert CLANKER_COMPLETE_ISOLATED_CHECKOUT.annotations.destructive
    assert not CLANKER_CREATE_ISOLATED_CHECKOUT.annotations.destructive
    assert STOP_TIMEOUT > TRANSACTION_TIMEOUT  # `grid stop` outwaits a transaction


def accepting() -> bool:
    """Whether the grid still takes connections on its socket."""
    from clanker.grid.daemon import grid_location

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(grid_location().socket))
        except OSError:
            return False
        return True


class Stopping:
    """``daemon.stop`` (a shutdown request, then waiting for the grid to be gone) in a
    thread, so the test can act while the grid shuts down."""

    def __init__(self) -> None:
        self.outcome: list[object] = []
        self.thread = threading.Thread(target=self._stop)
        self.thread.start()
        wait_for(lambda: not accepting() or bool(self.outcome), "the grid to start stopping")

    def _stop(self) -> None:
        try:
            self.outcome.append(daemon.stop())
        except Exception as error:  # reported by result()
            self.outcome.append(error)

    def result(self) -> object:
        self.thread.join()
        return self.outcome[0]


def test_a_shutdown_waits_for_a_completion_whose_git_step_is_held(
    repository: Path,
) -> None:
    isolated = Isolated(repository)
    # git waits for a ref lock it finds held (up to this many ms), so the test holds
    # the lock on the branch `git branch -d` must delete.
    git(repository, "config", "core.filesRefLockTimeout", "25000")
    lock = repository / ".git" / "refs" / "heads" / "feature" / "x.lock"
    lock.write_text("")
    caller = subprocess.Popen([sys.executable, "-m", "clanker", "cmd", "run", COMPLETE,
                               "--arg", "deleteBranch=true", "--json"], env=isolated.env,
                              stdout=subprocess.PIPE, text=True)
    try:
        isolated.user.read_until(f"running resume abc in {repository}")
        wait_for(lambda: not isolated.listed(), "the worktree to be removed")
        assert caller.poll() is None  # deleting the branch waits for the lock
        stopping = Stopping()
        assert stopping.thread.is_alive() and isolated.branch_exists()
        lock.unlink()  # only now can the transaction finish: the grid waited for it
        assert stopping.result() is True
    finally:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
        out = caller.communicate(timeout=180)[0]
    assert caller.returncode == 0, out
    answer = json.loads(out)
    assert answer["status"] == "completed" and answer["branch_deleted"] is True
    assert not isolated.branch_exists() and not isolated.path.exists()
    isolated.finish()


def test_a_shutdown_during_a_held_move_is_bounded_and_reports_nothing_done(
    repository: Path, tmp_path: Path,
) -> None:
    isolated = Isolated(repository)
    hold = tmp_path / "hold-in"
    hold.write_text(str(repository))  # the resume in the main checkout never answers
    caller = subprocess.Popen([sys.executable, "-m", "clanker", "cmd", "run", COMPLETE,
                               "--arg", "deleteBranch=true", "--json"], env=isolated.env,
                              stdout=subprocess.PIPE, text=True)
    try:
        wait_for(Path(f"{hold}.pid").exists, "the resume in the main checkout to start")
        stopping = Stopping()
        assert stopping.result() is True  # bounded: it did not wait for the move forever
        out = caller.communicate(timeout=180)[0]
    finally:
        hold.unlink()
        caller.kill()
        caller.wait()
    # The launcher gave up on the resume, or the call reached its own bound, or the
    # grid cut the move off at the transaction's: never a "completed".
    assert caller.returncode != 0, out
    if out:
        said = message(json.loads(out))
        assert "did not finish within 30 s" in said or (
            f"(not-moved (no-output): you continue where you were; the worktree is kept "
            f"at {isolated.path})") in said, out
    assert isolated.listed() and isolated.path.is_dir() and isolated.branch_exists()
    assert Path(isolated.path, "README").exists()
    isolated.user.thread.join(0)  # the relay may still adopt the late resume: let it
    isolated.finish()
