"""The SSH transport against a real sshd on loopback (``tests/sshd.py``)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest
from clanker.execution.ssh import SshTransport, remote_command, validate_target
from tests.sshd import Sshd, start_sshd

# Any text a str can hold except NUL (and lone surrogates, which are not text).
_WORD = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
                max_size=40)


def _run(transport: SshTransport, request: CommandRequest):  # type: ignore[no-untyped-def]
    return asyncio.run(transport.run(request))


def _remote_processes(transport: SshTransport, token: str) -> str:
    """What runs on the host with ``token`` in its command line (pgrep's own excluded)."""
    script = 'ps -eo pid=,args= | grep -F -- "$1" | grep -v -e grep -e "ps -eo"'
    result = _run(transport, CommandRequest(command="sh", args=("-c", script, "probe", token)))
    return result.stdout.strip()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.lists(_WORD, max_size=6))
def test_arguments_reach_the_remote_program_byte_for_byte(
    transport: SshTransport, args: list[str]
) -> None:
    result = _run(transport, CommandRequest(command="printf", args=("%s\\0", *args)) if args
                  else CommandRequest(command="printf", args=("",)))
    assert result.exit_code == 0
    assert result.stdout.split("\0")[:-1] == args if args else result.stdout == ""


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_WORD)
def test_environment_values_reach_the_remote_program(transport: SshTransport, value: str) -> None:
    result = _run(transport, CommandRequest(command="sh", args=("-c", 'printf %s "$CK_VALUE"'),
                                            env={"CK_VALUE": value}))
    assert result.stdout == value


def test_exit_codes_are_the_programs_own_127_included(transport: SshTransport) -> None:
    assert _run(transport, CommandRequest(command="sh", args=("-c", "exit 3"))).exit_code == 3
    own = _run(transport, CommandRequest(command="sh", args=("-c", "echo no >&2; exit 127")))
    assert (own.exit_code, own.stderr) == (127, "no\n")


def test_a_program_the_host_does_not_have_is_binary_unavailable(transport: SshTransport) -> None:
    for request in (CommandRequest(command="clanker-no-such-program"),
                    CommandRequest(command="clanker-no-such-program", env={"CK_A": "1"})):
        with pytest.raises(HarnessCapabilityError) as caught:
            _run(transport, request)
        assert caught.value.kind is ErrorKind.BINARY_UNAVAILABLE
        assert request.command in caught.value.message


def test_a_session_of_a_program_the_host_does_not_have_ends_binary_unavailable(
    transport: SshTransport,
) -> None:
    async def session() -> None:
        async with await transport.open(
                CommandRequest(command="clanker-no-such-program", timeout=30)) as opened:
            assert await opened.read_line() is None
            await opened.wait()

    with pytest.raises(HarnessCapabilityError) as caught:
        asyncio.run(session())
    assert caught.value.kind is ErrorKind.BINARY_UNAVAILABLE


def test_exit_255_and_signal_death_are_transport_failures(transport: SshTransport) -> None:
    for script in ("exit 255", "kill -9 $$"):
        with pytest.raises(HarnessCapabilityError) as caught:
            _run(transport, CommandRequest(command="sh", args=("-c", script)))
        assert caught.value.kind is ErrorKind.TRANSPORT_FAILURE


def test_stdin_cwd_and_login_path(transport: SshTransport, sshd: Sshd) -> None:
    assert _run(transport, CommandRequest(command="cat", stdin=b"one\ntwo")).stdout == "one\ntwo"
    where = _run(transport, CommandRequest(command="pwd", cwd="/tmp"))
    assert where.stdout == "/tmp\n"
    with pytest.raises(HarnessCapabilityError) as caught:
        _run(transport, CommandRequest(command="pwd", cwd="/clanker-no-such-directory"))
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    # A login shell read the profile: HOME is the remote user's, PATH the profile's.
    env = _run(transport, CommandRequest(command="sh", args=("-c", 'echo "$HOME"; echo "$PATH"')))
    home, path = env.stdout.splitlines()
    assert home == str(sshd.home)
    assert "/usr/bin" in path.split(":")


def test_the_local_environment_is_not_forwarded(
    transport: SshTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANG", "clanker-local-lang")
    monkeypatch.setenv("LC_CLANKER", "local")
    local = SshTransport(transport.target, control_dir=transport._control.parent,
                         config_file=transport._config_file)
    result = _run(local, CommandRequest(command="env"))
    assert "clanker-local-lang" not in result.stdout
    assert "LC_CLANKER" not in result.stdout


def test_a_timeout_ends_the_remote_program(transport: SshTransport) -> None:
    token = f"clanker-hang-{uuid.uuid4().hex}"
    with pytest.raises(HarnessCapabilityError) as caught:
        _run(transport, CommandRequest(command="sh", args=("-c", "sleep 300; : $0", token),
                                       timeout=1))
    assert caught.value.kind is ErrorKind.TIMEOUT
    assert _remote_processes(transport, token) == ""


def test_a_flood_hits_the_cap_and_ends_the_remote_program(transport: SshTransport) -> None:
    token = f"clanker-flood-{uuid.uuid4().hex}"
    with pytest.raises(HarnessCapabilityError) as caught:
        _run(transport, CommandRequest(command="yes", args=(token,), max_output_bytes=4096))
    assert caught.value.kind is ErrorKind.OUTPUT_LIMIT
    assert _remote_processes(transport, token) == ""


def test_one_connection_serves_every_command(sshd: Sshd, control_dir: Path) -> None:
    # A server of its own: once it and every connection ended, its log is complete.
    with start_sshd() as (server, log):
        transport = SshTransport(server.alias, control_dir=control_dir,
                                 config_file=server.config_file)
        try:
            for _ in range(4):
                _run(transport, CommandRequest(command="true"))
        finally:
            transport.close()
    assert log.ended.wait(30)
    assert (transport.connections, transport.executions) == (1, 4)
    assert log.count("Accepted publickey") == 1
    assert log.count("Starting session: command") == 4


def test_a_session_moves_lines_and_dispose_ends_the_remote_program(
    transport: SshTransport,
) -> None:
    token = f"clanker-session-{uuid.uuid4().hex}"

    async def converse() -> tuple[str | None, int]:
        async with await transport.open(CommandRequest(command="cat")) as session:
            await session.write_line("ping")
            echoed = await session.read_line()
            await session.close_input()
            exit_code = (await session.wait()).exit_code
        async with await transport.open(CommandRequest(
                command="sh", args=("-c", "echo ready; sleep 300; : $0", token))) as hanging:
            assert await hanging.read_line() == "ready"
        return echoed, exit_code

    assert asyncio.run(converse()) == ("ping", 0)
    assert _remote_processes(transport, token) == ""


def test_a_changed_host_key_is_refused(sshd: Sshd, tmp_path: Path, control_dir: Path) -> None:
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {(tmp_path / 'other_key.pub').read_text()}")
    config = tmp_path / "ssh_config"
    config.write_text(sshd.config_file.read_text().replace(
        str(sshd.directory / "known_hosts"), str(known)))
    transport = SshTransport(sshd.alias, control_dir=control_dir, config_file=config)
    with pytest.raises(HarnessCapabilityError) as caught:
        _run(transport, CommandRequest(command="true"))
    assert caught.value.kind is ErrorKind.TRANSPORT_FAILURE
    assert "host key" in str(caught.value)


def test_an_unreachable_host_is_a_transport_failure(sshd: Sshd, tmp_path: Path,
                                                    control_dir: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(sshd.config_file.read_text().replace(f"Port {sshd.port}", "Port 9"))
    transport = SshTransport(sshd.alias, control_dir=control_dir, config_file=config)
    with pytest.raises(HarnessCapabilityError) as caught:
        _run(transport, CommandRequest(command="true"))
    assert caught.value.kind is ErrorKind.TRANSPORT_FAILURE
    assert "refused" in str(caught.value)


@pytest.mark.parametrize("target", ["-oProxyCommand=x", "host name", "a\nb", "", "x;y"])
def test_targets_that_ssh_could_read_as_options_are_refused(target: str) -> None:
    with pytest.raises(ValueError):
        validate_target(target)


def test_the_remote_command_is_three_shells_of_quoted_words() -> None:
    """Run the string through a local sh, as sshd would: the words arrive intact."""
    words = ("$(touch x)", "it's", "`y`", "a\nb", "*")
    command = remote_command(CommandRequest(command="printf", args=("%s|", *words)))
    probe = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False,
                           env={"SHELL": "/bin/sh", "PATH": "/usr/bin:/bin"}, cwd="/")
    assert probe.stdout == "".join(f"{word}|" for word in words)
    assert probe.stderr.startswith("clanker-remote-pid ")


@pytest.mark.parametrize(("env", "marked"), [({}, True), ({"CK_A": "1"}, True),
                                             ({"PATH": "/usr/bin:/bin"}, False)])
def test_the_remote_command_marks_a_program_its_path_lacks(
    env: dict[str, str], marked: bool,
) -> None:
    """The lookup runs on the login PATH; with a PATH of the request's own, ``env`` finds the
    program (or not) on that one, so there is no lookup and 127 is left as it is."""
    command = remote_command(CommandRequest(command="clanker-no-such-program", env=env))
    probe = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False,
                           env={"SHELL": "/bin/sh", "PATH": "/usr/bin:/bin"}, cwd="/")
    assert probe.returncode == 127
    assert probe.stderr.endswith("clanker-remote-not-found\n") is marked


def test_cancelling_a_run_ends_the_remote_program(transport: SshTransport) -> None:
    token = f"clanker-cancel-{uuid.uuid4().hex}"
    directory = Path(tempfile.mkdtemp(prefix="ck-fifo-", dir="/tmp"))
    try:
        directory.chmod(0o755)
        fifo = directory / "started"
        os.mkfifo(fifo)
        fifo.chmod(0o666)  # the remote user writes it

        async def cancel_once_started() -> None:
            task = asyncio.ensure_future(transport.run(CommandRequest(
                command="sh", args=("-c", 'echo go > "$1"; sleep 300; : $0', token, str(fifo)),
                timeout=30)))
            # The host is this machine: opening the FIFO for reading returns once the
            # remote program opened it to write, so it is running.
            started = await asyncio.to_thread(fifo.read_text)
            assert started == "go\n"
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(cancel_once_started())
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert _remote_processes(transport, token) == ""
