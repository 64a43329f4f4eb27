"""Hot replacement of a launch's child, with a double of ``claude --resume ID``
on real PTYs: proven (adopted, the original retired, the same relay goes on),
and refused (the resume exits as Claude does for an unknown id, or never
prints): the replacement retired, the original untouched and still relayed."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from clanker.environment.pty_relay import PtyChild, PtyRelay
from clanker.launch.replacement import Proof, ReplacementRefused, Why, hot_replace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "claude"
SESSION = "2bd84788-1866-4763-ad83-f2741628502f"

# What the proof observes of `claude --resume ID` 2.1.197 (docs/harnesses/claude.md):
# found, the TUI draws and waits for input in the launch directory; not found,
# it draws the captured "No conversation found" screen and exits 1. `silent`
# stands for a harness that hangs before drawing anything.
DOUBLE = r"""
import os, sys
mode = os.environ["DOUBLE_MODE"]
assert sys.argv[1:3] == ["--resume", sys.argv[2]], sys.argv
if mode == "unknown":
    sys.stdout.buffer.write(open(os.environ["DOUBLE_SCREEN"], "rb").read())
    sys.stdout.flush()
    raise SystemExit(1)
if mode == "found":
    print(f"resumed {sys.argv[2]} in {os.getcwd()}", flush=True)
while sys.stdin.readline().strip() != "/exit":
    pass
"""


def double_argv(tmp_path: Path) -> tuple[str, ...]:
    script = tmp_path / "claude"
    script.write_text(DOUBLE)
    return (sys.executable, str(script), "--resume", SESSION)


def env(mode: str) -> dict[str, str]:
    return {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.defpath,
            "DOUBLE_MODE": mode,
            "DOUBLE_SCREEN": str(FIXTURES / "resume-unknown-id.interactive.pty.raw")}


class Running:
    """A relay of the original in a thread, with the user's side as pipes."""

    def __init__(self, original: PtyChild) -> None:
        self.stdin_r, self.stdin_w = os.pipe()
        self.stdout_r, self.stdout_w = os.pipe()
        self.original = original
        self.relay = PtyRelay(original, stdin_fd=self.stdin_r, stdout_fd=self.stdout_w)
        self.status: list[int] = []
        self.thread = threading.Thread(target=lambda: self.status.append(self.relay.run()))
        self.thread.start()

    def type(self, text: str) -> None:
        os.write(self.stdin_w, text.encode())

    def finish(self) -> tuple[int, bytes]:
        self.type("/exit\n")
        self.thread.join()
        self.relay.close()
        os.close(self.stdout_w)
        chunks = []
        while chunk := os.read(self.stdout_r, 65536):
            chunks.append(chunk)
        for fd in (self.stdin_r, self.stdin_w, self.stdout_r):
            os.close(fd)
        return self.status[0], b"".join(chunks)


@pytest.fixture
def checkouts(tmp_path: Path) -> tuple[Path, Path]:
    main, target = tmp_path / "repo", tmp_path / "repo-worktrees" / "feature-1a2b3c4d"
    main.mkdir()
    target.mkdir(parents=True)
    return main, target


def test_a_proven_replacement_takes_over_and_the_original_is_retired(
    tmp_path: Path, checkouts: tuple[Path, Path],
) -> None:
    main, target = checkouts
    argv = double_argv(tmp_path)
    running = Running(PtyChild.spawn(argv, env("found"), str(main)))
    original_status = hot_replace(running.relay, argv, env("found"), str(target),
                                  Proof(first_output_within=60.0, survives=0.3))
    assert original_status == 143  # retired by SIGTERM, its exit waited for
    assert running.relay.child is not running.original
    assert running.relay.child.process.poll() is None
    status, output = running.finish()
    assert status == 0
    assert f"resumed {SESSION} in {target}".encode() in output


@pytest.mark.parametrize(("mode", "why", "deadline"), [
    ("unknown", Why.EXITED, 60.0),
    ("silent", Why.NO_OUTPUT, 0.3),
])
def test_a_refused_replacement_leaves_the_original_running(
    tmp_path: Path, checkouts: tuple[Path, Path], mode: str, why: Why, deadline: float,
) -> None:
    main, target = checkouts
    argv = double_argv(tmp_path)
    running = Running(PtyChild.spawn(argv, env("found"), str(main)))
    with pytest.raises(ReplacementRefused) as caught:
        hot_replace(running.relay, argv, env(mode), str(target),
                    Proof(first_output_within=deadline, survives=60.0))
    assert caught.value.why is why
    assert running.relay.child is running.original
    assert running.original.process.poll() is None
    status, output = running.finish()
    assert status == 0
    assert f"resumed {SESSION} in {main}".encode() in output
    assert b"No conversation found" not in output  # the held output was never shown


def test_a_replacement_the_caller_does_not_confirm_is_retired(
    tmp_path: Path, checkouts: tuple[Path, Path],
) -> None:
    main, target = checkouts
    argv = double_argv(tmp_path)
    running = Running(PtyChild.spawn(argv, env("found"), str(main)))
    asked: list[PtyChild] = []

    def confirm(candidate: PtyChild) -> bool:
        asked.append(candidate)
        return False  # e.g. no attention registration bound to the target

    with pytest.raises(ReplacementRefused) as caught:
        hot_replace(running.relay, argv, env("found"), str(target),
                    Proof(first_output_within=60.0, survives=0.3, confirm=confirm))
    assert caught.value.why is Why.UNCONFIRMED
    assert len(asked) == 1 and asked[0] is not running.original
    assert asked[0].process.poll() is not None  # the unconfirmed one was retired
    assert running.relay.child is running.original
    status, output = running.finish()
    assert status == 0
    assert f"resumed {SESSION} in {target}".encode() not in output


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc to see a zombie")
def test_retiring_a_group_ends_the_wrapper_and_what_it_started() -> None:
    from clanker.launch.replacement import retire_group

    # A wrapper that starts the real binary (same process group) and a binary that
    # ignores SIGTERM, as a harness still saving its state might.
    inner = "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " \
            "print('inner', os.getpid(), 'up', flush=True); time.sleep(600)"
    wrapper = (f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {inner!r}]); "
               "import time; time.sleep(600)")
    child = PtyChild.spawn((sys.executable, "-c", wrapper), env("found"), None)
    seen = b""
    while b" up" not in seen:
        seen += child.read()
    inner_pid = int(seen.split()[1])
    status = retire_group(child, grace=0.5)
    assert status == 128 + 15  # the wrapper ended on SIGTERM; the inner one on SIGKILL
    try:  # gone, or a zombie nobody reaped yet: either way it runs nothing
        with open(f"/proc/{inner_pid}/stat", "rb") as stat:
            assert stat.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except FileNotFoundError:
        pass
