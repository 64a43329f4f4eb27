"""Launch planning and running a harness in the foreground, with real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given

from clanker.capabilities import Capability
from clanker.descriptor import OperationSupport, Support, Transport
from clanker.environment.foreground import exit_status, run_foreground
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.ids import HarnessId
from clanker.launch.planning import InvalidSessionIdError, plan_launch
from clanker.launch.request import LaunchPlan, LaunchRequest, SessionTarget, split_user_flags
from clanker.registry import HarnessProvider, Registry
from clanker.testing.strategies import user_flags
from tests.helpers import make_plugin, path_with, write_script


def provider(**kwargs: object) -> HarnessProvider:
    registry = Registry.from_plugins({"fake-agent": make_plugin(**kwargs)}, environ={})  # type: ignore[arg-type]
    assert not registry.problems
    return registry.get_provider(HarnessId("fake-agent"))


def test_fresh_resume_and_fork_argv() -> None:
    p = provider()
    fresh = plan_launch(p, LaunchRequest(model="m1", user_flags=("--yolo",)))
    assert fresh.argv == ("fake-agent", "--model", "m1", "--yolo")
    session = SessionTarget(native_id="abc")
    resume = plan_launch(p, LaunchRequest(operation="resume", session=session))
    assert resume.argv == ("fake-agent", "resume", "abc")
    fork = plan_launch(p, LaunchRequest(operation="fork", session=SessionTarget(native_id="abc")))
    assert fork.argv == ("fake-agent", "--fork", "abc")


def test_operation_support_and_transport_restrictions_are_enforced() -> None:
    p = provider(fork=None)
    with pytest.raises(HarnessCapabilityError) as caught:
        plan_launch(p, LaunchRequest(operation="fork", session=SessionTarget(native_id="abc")))
    assert caught.value.kind is ErrorKind.UNSUPPORTED
    local_only = provider(fork=OperationSupport(Support.EMULATED, {Transport.LOCAL}))
    with pytest.raises(HarnessCapabilityError) as caught:
        plan_launch(local_only, LaunchRequest(
            operation="fork", transport="ssh", session=SessionTarget(native_id="abc")
        ))
    assert "fork over ssh" in str(caught.value)


def test_no_launch_capability_is_unsupported() -> None:
    p = provider(capabilities=(Capability.MODELS,))
    with pytest.raises(HarnessCapabilityError) as caught:
        plan_launch(p, LaunchRequest())
    assert caught.value.kind is ErrorKind.UNSUPPORTED


def test_malformed_session_id_is_refused() -> None:
    with pytest.raises(InvalidSessionIdError):
        plan_launch(provider(), LaunchRequest(
            operation="resume", session=SessionTarget(native_id="../x")
        ))


def test_a_plan_naming_another_executable_is_refused() -> None:
    p = provider()
    assert p.launch is not None
    p.launch.executable = "other"  # type: ignore[attr-defined]
    with pytest.raises(HarnessCapabilityError):
        plan_launch(p, LaunchRequest())


@pytest.mark.parametrize(
    "fields",
    [
        {"operation": "resume"},
        {"session": SessionTarget(native_id="x")},
        {"model": ""},
        {"model": " padded "},
        {"user_flags": ("",)},
        {"user_flags": ("a\0",)},
        {"cwd": "relative/dir"},
        {"operation": "teleport"},
        {"transport": "carrier-pigeon"},
    ],
)
def test_malformed_requests_are_refused(fields: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        LaunchRequest(**fields)  # type: ignore[arg-type]


def test_plans_cannot_carry_credentials_in_env() -> None:
    with pytest.raises(ValueError):
        LaunchPlan(argv=("x",), env={"CLANKER_ATTENTION_TOKEN": "t"})


@given(flags=user_flags())
def test_split_user_flags_is_plain_whitespace_splitting(flags: tuple[str, ...]) -> None:
    joined = " ".join(flags)
    assert split_user_flags(joined) == tuple(joined.split())


def test_exit_status_maps_signals_like_a_shell() -> None:
    assert exit_status(0) == 0
    assert exit_status(5) == 5
    assert exit_status(-signal.SIGTERM) == 128 + signal.SIGTERM


# -- the foreground runner, with real processes --------------------------------------


def test_foreground_passes_argv_env_cwd_and_returns_the_exit_code(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    out = tmp_path / "out.json"
    write_script(bin_dir, "fake-agent", f"""
        import json, os, sys
        json.dump({{"argv": sys.argv[1:], "cwd": os.getcwd(), "x": os.environ.get("X")}},
                  open({str(out)!r}, "w"))
        sys.exit(42)
    """)
    env = path_with(bin_dir) | {"X": "y"}
    status = run_foreground(("fake-agent", "a b", "--c"), env, str(tmp_path))
    assert status == 42
    assert json.loads(out.read_text()) == {"argv": ["a b", "--c"], "cwd": str(tmp_path), "x": "y"}


def test_foreground_missing_binary(tmp_path: Path) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        run_foreground(("no-such-agent-zz",), path_with(tmp_path), None)
    assert caught.value.kind is ErrorKind.BINARY_UNAVAILABLE


RUNNER = """
import sys
from clanker.environment.foreground import run_foreground
import os
sys.exit(run_foreground(("fake-agent",), dict(os.environ), None))
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signals_aimed_at_the_launcher_reach_the_harness(tmp_path: Path, signum: int) -> None:
    """Without a terminal, every signal sent to the launcher is forwarded once."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ready = tmp_path / "ready"
    write_script(bin_dir, "fake-agent", f"""
        import signal, sys, time
        def handler(signum, frame):
            print("got", signum, flush=True)
            sys.exit(3)
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(s, handler)
        open({str(ready)!r}, "w").close()
        time.sleep(30)
    """)
    launcher = subprocess.Popen(
        [sys.executable, "-c", RUNNER],
        env=path_with(bin_dir),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # no controlling terminal: nothing reaches the child but us
    )
    deadline = time.monotonic() + 15
    while not ready.exists():
        assert time.monotonic() < deadline, "harness did not start"
        time.sleep(0.02)
    os.kill(launcher.pid, signum)
    stdout, _ = launcher.communicate(timeout=15)
    assert launcher.returncode == 3
    assert stdout.strip() == f"got {signum}"


def test_ctrl_c_in_a_terminal_reaches_the_harness_exactly_once(tmp_path: Path) -> None:
    """In a real pseudo-terminal, Ctrl+C goes to the whole foreground group; the
    launcher must not forward it a second time (a second Ctrl+C quits many TUIs)."""
    import pty

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ready, report = tmp_path / "ready", tmp_path / "report"
    # The wakeup fd gets one byte per delivery, so two deliveries are counted
    # even when Python would run its handler only once for both.
    write_script(bin_dir, "fake-agent", f"""
        import os, signal, sys, time
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        signal.signal(signal.SIGINT, lambda signum, frame: None)
        open({str(ready)!r}, "w").close()
        deadline = time.monotonic() + 20
        seen = b""
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
            try:
                seen = os.read(r, 64)
            except BlockingIOError:
                pass
        time.sleep(1.0)  # time for a duplicate to arrive
        try:
            seen += os.read(r, 64)
        except BlockingIOError:
            pass
        open({str(report)!r}, "w").write(str(len(seen)))
        sys.exit(5)
    """)
    pid, master = pty.fork()
    if pid == 0:  # pragma: no cover - the child execs at once
        os.execve(sys.executable, [sys.executable, "-c", RUNNER], path_with(bin_dir))
    try:
        deadline = time.monotonic() + 15
        while not ready.exists():
            assert time.monotonic() < deadline, "harness did not start"
            time.sleep(0.02)
        os.write(master, b"\x03")  # the terminal's interrupt character
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(master)
    assert os.waitstatus_to_exitcode(status) == 5
    assert report.read_text() == "1"


def test_the_provider_normalized_session_id_is_what_launches() -> None:
    p = provider()
    assert p.launch is not None
    p.launch.validate_session_id = lambda raw: raw.lower()  # type: ignore[method-assign]
    plan = plan_launch(p, LaunchRequest(operation="resume", session=SessionTarget(native_id="ABC")))
    assert plan.argv == ("fake-agent", "resume", "abc")
