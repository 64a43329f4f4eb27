"""The one-shot executor against real child processes."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, LocalTransport
from clanker.execution.request import MAX_OUTPUT, MAX_TIMEOUT
from tests.helpers import path_with, write_script


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "bin"
    directory.mkdir()
    return directory


def run(transport: LocalTransport, request: CommandRequest):  # type: ignore[no-untyped-def]
    return asyncio.run(transport.run(request))


def test_runs_and_returns_output_and_exit_code(bin_dir: Path) -> None:
    write_script(bin_dir, "hello", """
        import sys
        print("out", sys.argv[1:])
        print("err", file=sys.stderr)
        sys.exit(3)
    """)
    request = CommandRequest(command="hello", args=("a b", "c"))
    result = run(LocalTransport(path_with(bin_dir)), request)
    assert result.stdout == "out ['a b', 'c']\n"
    assert result.stderr == "err\n"
    assert result.exit_code == 3


def test_stdin_is_delivered(bin_dir: Path) -> None:
    write_script(bin_dir, "cat-upper", "import sys; sys.stdout.write(sys.stdin.read().upper())")
    request = CommandRequest(command="cat-upper", stdin="héllo\n".encode())
    assert run(LocalTransport(path_with(bin_dir)), request).stdout == "HÉLLO\n"


def test_missing_binary_is_binary_unavailable(bin_dir: Path) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        run(LocalTransport(path_with(bin_dir)), CommandRequest(command="no-such-harness-xyz"))
    assert caught.value.kind is ErrorKind.BINARY_UNAVAILABLE


def test_timeout_kills_and_reaps_the_whole_group(bin_dir: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    write_script(bin_dir, "hang", f"""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pidfile)!r} + ".tmp", "w").write(str(child.pid))
        os.rename({str(pidfile)!r} + ".tmp", {str(pidfile)!r})
        time.sleep(60)
    """)
    started = time.monotonic()
    with pytest.raises(HarnessCapabilityError) as caught:
        # Long enough for a loaded machine to start two interpreters.
        run(LocalTransport(path_with(bin_dir)), CommandRequest(command="hang", timeout=3.0))
    assert caught.value.kind is ErrorKind.TIMEOUT
    assert time.monotonic() - started < 15
    grandchild = int(pidfile.read_text())
    _assert_gone(grandchild)


def _assert_gone(pid: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        # A zombie whose parent died is reaped by init; give it a moment.
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().split()[2] == "Z":
                    return
        except FileNotFoundError:
            return
        time.sleep(0.05)
    pytest.fail(f"process {pid} survived")


def test_sigterm_ignoring_child_is_killed(bin_dir: Path) -> None:
    write_script(bin_dir, "stubborn", """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(60)
    """)
    with pytest.raises(HarnessCapabilityError) as caught:
        run(LocalTransport(path_with(bin_dir)), CommandRequest(command="stubborn", timeout=0.5))
    assert caught.value.kind is ErrorKind.TIMEOUT


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_cap_stops_a_flood(bin_dir: Path, stream: str) -> None:
    write_script(bin_dir, "flood", f"""
        import sys
        while True:
            sys.{stream}.write("x" * 65536)
    """)
    with pytest.raises(HarnessCapabilityError) as caught:
        run(LocalTransport(path_with(bin_dir)),
            CommandRequest(command="flood", max_output_bytes=100_000))
    assert caught.value.kind is ErrorKind.OUTPUT_LIMIT
    assert stream in str(caught.value)


def test_output_exactly_at_the_cap_is_accepted(bin_dir: Path) -> None:
    write_script(bin_dir, "exact", "import sys; sys.stdout.write('y' * 1000)")
    request = CommandRequest(command="exact", max_output_bytes=1000)
    result = run(LocalTransport(path_with(bin_dir)), request)
    assert len(result.stdout) == 1000


def test_invalid_utf8_never_crashes(bin_dir: Path) -> None:
    write_script(bin_dir, "garbage", "import sys; sys.stdout.buffer.write(b'\\xff\\xfe ok \\x80')")
    result = run(LocalTransport(path_with(bin_dir)), CommandRequest(command="garbage"))
    assert "ok" in result.stdout


def test_cancellation_terminates_and_reaps(bin_dir: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    write_script(bin_dir, "slow", f"""
        import os, time
        open({str(pidfile)!r}, "w").write(str(os.getpid()))
        time.sleep(60)
    """)
    transport = LocalTransport(path_with(bin_dir))

    async def scenario() -> None:
        task = asyncio.create_task(transport.run(CommandRequest(command="slow", timeout=20)))
        while not (pidfile.exists() and pidfile.read_text()):  # created, then written
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    _assert_gone(int(pidfile.read_text()))


def test_credentials_are_never_passed_to_children(bin_dir: Path) -> None:
    write_script(bin_dir, "show-env", """
        import os
        print(sorted(k for k in os.environ if k.upper().startswith("CLANKER")))
    """)
    env = path_with(bin_dir) | {
        "CLANKER_ATTENTION_TOKEN": "s", "clanker_mcp_token": "s", "CLANKER_HOME": "/h"
    }
    result = run(LocalTransport(env), CommandRequest(command="show-env"))
    assert result.stdout.strip() == "['CLANKER_HOME']"


def test_missing_cwd_is_a_command_failure(bin_dir: Path, tmp_path: Path) -> None:
    write_script(bin_dir, "noop", "pass")
    with pytest.raises(HarnessCapabilityError) as caught:
        run(LocalTransport(path_with(bin_dir)),
            CommandRequest(command="noop", cwd=str(tmp_path / "missing")))
    assert caught.value.kind is ErrorKind.COMMAND_FAILED


@pytest.mark.parametrize(
    "fields",
    [
        {"command": "/usr/bin/env"},
        {"command": "../x"},
        {"command": "-rf"},
        {"command": ""},
        {"command": "ok", "args": ("a\0b",)},
        {"command": "ok", "env": {"BAD NAME": "x"}},
        {"command": "ok", "env": {"X": "a\0b"}},
        {"command": "ok", "env": {"CLANKER_ATTENTION_TOKEN": "x"}},
        {"command": "ok", "env": {"Clanker_Mcp_Token": "x"}},
        {"command": "ok", "cwd": "relative"},
        {"command": "ok", "timeout": 0},
        {"command": "ok", "timeout": MAX_TIMEOUT + 1},
        {"command": "ok", "timeout": True},
        {"command": "ok", "max_output_bytes": MAX_OUTPUT + 1},
        {"command": "ok", "max_output_bytes": 0},
    ],
)
def test_invalid_requests_are_refused_at_construction(fields: dict[str, object]) -> None:
    with pytest.raises((ValueError, TypeError)):
        CommandRequest(**fields)  # type: ignore[arg-type]


def test_inference_raises_the_timeout_ceiling() -> None:
    assert CommandRequest(command="ok", timeout=90, inference=True).timeout == 90
    with pytest.raises(ValueError):
        CommandRequest(command="ok", timeout=91, inference=True)


_NUL_FREE = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"))


@given(args=st.lists(_NUL_FREE))
def test_any_nul_free_argument_is_accepted_verbatim(args: list[str]) -> None:
    assert CommandRequest(command="ok", args=tuple(args)).args == tuple(args)


def test_pwd_follows_the_requested_directory(bin_dir: Path, tmp_path: Path) -> None:
    write_script(bin_dir, "show-pwd", "import os; print(os.environ.get('PWD'))")
    env = path_with(bin_dir) | {"PWD": "/somewhere/else"}
    result = run(LocalTransport(env), CommandRequest(command="show-pwd", cwd=str(tmp_path)))
    assert result.stdout.strip() == str(tmp_path)
    explicit = run(LocalTransport(env), CommandRequest(command="show-pwd", cwd=str(tmp_path),
                                                       env={"PWD": ""}))
    assert explicit.stdout.strip() == ""


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ("#!/nonexistent/interpreter\n", "broken"),  # execve: ENOENT, although the file is there
        ("\x7fELF not really a program\n", "broken could not be started"),  # ENOEXEC
    ],
)
def test_a_file_that_cannot_be_executed_is_binary_unavailable(
    bin_dir: Path, body: str, detail: str
) -> None:
    script = bin_dir / "broken"
    script.write_text(body)
    script.chmod(0o755)
    with pytest.raises(HarnessCapabilityError) as caught:
        run(LocalTransport(path_with(bin_dir)), CommandRequest(command="broken"))
    assert caught.value.kind is ErrorKind.BINARY_UNAVAILABLE
    assert detail in str(caught.value)


def test_death_by_signal_is_reported_as_a_negative_exit_code(bin_dir: Path) -> None:
    write_script(bin_dir, "self-kill", """
        import os, signal
        print("before", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    result = run(LocalTransport(path_with(bin_dir)), CommandRequest(command="self-kill"))
    assert (result.stdout, result.exit_code) == ("before\n", -9)


def test_only_an_attended_command_may_wait_for_the_person_up_to_five_minutes() -> None:
    from clanker.execution import ATTENDED_TIMEOUT

    assert CommandRequest(command="x", timeout=ATTENDED_TIMEOUT, attended=True).timeout == 300
    for fields in ({"timeout": 301.0, "attended": True}, {"timeout": 31.0},
                   {"timeout": 91.0, "inference": True}):
        with pytest.raises(ValueError, match="timeout"):
            CommandRequest(command="x", **fields)  # type: ignore[arg-type]
