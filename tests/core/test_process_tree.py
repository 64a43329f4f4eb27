"""A harness command's whole tree ends with it, in both execution forms.

Real processes: each double forks a child that sleeps for 300 s, in one of
the ways a harness leaves work behind (a background job in its process group,
a daemon that called ``setsid``, a child that keeps stdout open), records the
child's identity, and answers at once. Once ``run()`` has returned, or the
session has been disposed, no such child may remain, and the answer must be
the leader's own. ``asyncio.timeout`` is only a hang guard: nothing here
asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
from click.testing import CliRunner

from clanker.cli import cli
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, LocalTransport
from clanker.registry import Registry, override_registry
from clanker.testing.doubles import prepend_to_path
from tests.helpers import make_plugin, path_with, write_script

T = TypeVar("T")
HANG_GUARD = 20.0

# How the child leaves: stays in the group, leaves the session, keeps stdout.
_CHILDREN = {
    "group": "quiet()",
    "setsid": "os.setsid(); quiet()",
    "stdout": "pass",
    "setsid-stdout": "os.setsid()",
    "double-fork": "os.setsid()\n    if os.fork():\n        os._exit(0)\n    quiet()",
    "ignores-sigterm": "signal.signal(signal.SIGTERM, signal.SIG_IGN)",
}


def _leaver(record: Path, how: str, *, then: str) -> str:
    """A double: fork a child that leaves as ``how`` and sleeps, record it, then ``then``."""
    return textwrap.dedent("""
        import os, signal, sys, time

        def quiet():
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)

        def identity():
            with open("/proc/self/stat") as handle:
                stat = handle.read()
            return f"{{os.getpid()}} {{stat[stat.rfind(')') + 2:].split()[19]}}"

        reported, ready = os.pipe()
        if os.fork() == 0:
            os.close(reported)
            {child}
            os.write(ready, identity().encode() + b"\\n")
            os.close(ready)
            time.sleep(300)
            os._exit(0)
        os.close(ready)
        who = b""
        while not who.endswith(b"\\n"):
            chunk = os.read(reported, 64)
            if not chunk:
                break
            who += chunk
        with open({record!r} + ".tmp", "w") as handle:
            handle.write(who.decode())
        os.replace({record!r} + ".tmp", {record!r})
        {then}
    """).format(child=_CHILDREN[how], record=str(record), then=textwrap.dedent(then).strip())


def _alive(identity: str) -> bool:
    """Whether the process recorded as ``pid starttime`` still runs (not a zombie)."""
    pid, started = identity.split()
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[19] == started and fields[0] != "Z"


def _guarded(coroutine: Coroutine[Any, Any, T]) -> T:
    async def guarded() -> T:
        async with asyncio.timeout(HANG_GUARD):
            return await coroutine

    return asyncio.run(guarded())


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads /proc to tell whether a child survived")


@pytest.mark.parametrize("how", sorted(_CHILDREN))
def test_run_ends_what_the_command_left_behind(tmp_path: Path, how: str) -> None:
    record = tmp_path / "child"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "leaver", _leaver(record, how, then='print("answer"); sys.exit(3)'))
    result = _guarded(LocalTransport(path_with(bin_dir)).run(
        CommandRequest(command="leaver", timeout=30)))
    # The leader's own answer, although a child may still hold its stdout.
    assert (result.stdout, result.exit_code) == ("answer\n", 3)
    assert not _alive(record.read_text())


@pytest.mark.parametrize("how", sorted(_CHILDREN))
def test_a_session_that_ends_takes_its_tree_with_it(tmp_path: Path, how: str) -> None:
    record = tmp_path / "child"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "leaver", _leaver(record, how, then="""
        print("ready", flush=True)
        sys.stdin.read()
        print("bye", flush=True)
        sys.exit(4)
    """))
    transport = LocalTransport(path_with(bin_dir))

    async def scenario() -> tuple[list[str | None], int]:
        async with await transport.open(CommandRequest(command="leaver", timeout=30)) as session:
            first = await session.read_line()
            await session.close_input()
            # EOF, not the session deadline, although a child may still hold stdout.
            lines = [first, await session.read_line(), await session.read_line()]
            return lines, (await session.wait()).exit_code

    assert _guarded(scenario()) == (["ready", "bye", None], 4)
    assert not _alive(record.read_text())


@pytest.mark.parametrize("how", ["group", "setsid", "stdout", "double-fork"])
def test_disposing_a_running_session_ends_its_tree(tmp_path: Path, how: str) -> None:
    record = tmp_path / "child"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "leaver", _leaver(record, how, then="""
        print("ready", flush=True)
        time.sleep(300)
    """))
    transport = LocalTransport(path_with(bin_dir))

    async def scenario() -> str | None:
        async with await transport.open(CommandRequest(command="leaver", timeout=30)) as session:
            return await session.read_line()

    assert _guarded(scenario()) == "ready"
    assert not _alive(record.read_text())


def test_a_timeout_ends_a_child_that_left_the_session(tmp_path: Path) -> None:
    record = tmp_path / "child"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "leaver", _leaver(record, "setsid", then="time.sleep(300)"))

    with pytest.raises(HarnessCapabilityError) as caught:
        _guarded(LocalTransport(path_with(bin_dir)).run(
            CommandRequest(command="leaver", timeout=3)))
    assert caught.value.kind is ErrorKind.TIMEOUT
    assert not _alive(record.read_text())


def test_the_environment_reaches_the_command_unchanged(tmp_path: Path) -> None:
    """Whatever stands between clanker and the command adds and drops nothing
    (an interpreter may coerce the locale into its own environment)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "show-env", """
        import json
        with open("/proc/self/environ", "rb") as handle:
            entries = handle.read().decode().split("\\0")
        print(json.dumps(dict(e.split("=", 1) for e in entries if e)))
    """)
    env = {"PATH": path_with(bin_dir)["PATH"], "ONLY": "this"}
    result = _guarded(LocalTransport(env).run(CommandRequest(command="show-env")))
    assert json.loads(result.stdout) == env


def test_sigpipe_reaches_the_command_with_its_default_action(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "show-ignored"
    script.write_text("#!/bin/sh\nexec grep '^SigIgn' /proc/self/status\n")
    script.chmod(0o755)
    result = _guarded(LocalTransport(path_with(bin_dir)).run(
        CommandRequest(command="show-ignored")))
    ignored = int(result.stdout.split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1))
    assert not ignored & (1 << (signal.SIGXFSZ - 1))


def test_an_abandoned_stdout_prints_no_traceback(tmp_path: Path) -> None:
    """A real interpreter: a child holding stdout after its leader left, a session
    read to the end and an interpreter that exits must print nothing at all."""
    record = tmp_path / "child"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "leaver", _leaver(record, "stdout", then='print("answer")'))
    program = textwrap.dedent("""
        import asyncio, sys
        from clanker.execution import CommandRequest, LocalTransport

        async def main():
            transport = LocalTransport()
            print((await transport.run(CommandRequest(command="leaver", timeout=5))).stdout,
                  end="")
            async with await transport.open(CommandRequest(command="leaver", timeout=5)) as s:
                print(await s.read_line())
                print(await s.read_line())
                print((await s.wait()).exit_code)

        asyncio.run(main())
    """)
    done = subprocess.run([sys.executable, "-c", program], env=path_with(bin_dir),
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.stderr == ""
    assert (done.returncode, done.stdout) == (0, "answer\nanswer\nNone\n0\n")


def test_a_failing_task_beside_starting_commands_never_hangs() -> None:
    """CPython gh-103847: cancelled while asyncio connects a child's pipes,
    ``create_subprocess_exec`` waited forever; one failing task among gathered
    ones made ``asyncio.run`` cancel the others at just that point."""
    program = textwrap.dedent("""
        import asyncio
        from clanker.execution import CommandRequest, LocalTransport

        async def fail():
            raise RuntimeError("one provider failed")

        async def main():
            transport = LocalTransport()
            runs = (transport.run(CommandRequest(command="true")) for _ in range(4))
            await asyncio.gather(*runs, fail())

        for _ in range(30):
            try:
                asyncio.run(main())
            except RuntimeError:
                pass
        print("done")
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "done\n", "")


def test_an_instant_version_answer_is_not_held_by_a_child_keeping_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end: ``clanker harnesses`` used to wait for the child's EOF until its
    timeout and report the harness broken."""
    record = tmp_path / "child"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_script(bin_dir, "fake-agent", _leaver(record, "stdout",
                                                then='print("fake-agent 1.2.3")'))
    prepend_to_path(monkeypatch, bin_dir)
    registry = Registry.from_plugins({"fake-agent": make_plugin()}, environ={})
    with override_registry(registry):
        result = CliRunner().invoke(cli, ["harnesses", "--json"], catch_exceptions=False)
    [found] = json.loads(result.output)
    assert (found["version"], found["error"]) == ("1.2.3", None)
    assert not _alive(record.read_text())
