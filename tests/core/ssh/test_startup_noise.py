"""What the host's shell startup files print before the program starts is bounded."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest
from clanker.execution.ssh import SshTransport
from tests.sshd import Sshd


@pytest.fixture
def bashrc(sshd: Sshd) -> Iterator[Path]:
    """The test user's ``~/.bashrc``, restored afterwards. bash run by sshd reads it
    (Debian builds bash so), before clanker's remote ``/bin/sh`` starts."""
    if os.geteuid() != 0:
        pytest.skip("changing the remote startup files needs the dedicated test user (root)")
    path = sshd.home / ".bashrc"
    saved = path.read_bytes() if path.exists() else None
    try:
        yield path
    finally:
        if saved is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(saved)
            shutil.chown(path, sshd.user)


def _write_first(path: Path, line: str, sshd: Sshd) -> None:
    rest = path.read_text() if path.exists() else ""
    path.write_text(line + "\n" + rest)
    shutil.chown(path, sshd.user)


def test_startup_output_stays_stderr_and_the_program_runs(
    transport: SshTransport, sshd: Sshd, bashrc: Path
) -> None:
    _write_first(bashrc, "echo clanker-startup-noise >&2", sshd)
    result = asyncio.run(transport.run(CommandRequest(command="echo", args=("answer",))))
    assert result.stdout == "answer\n"
    assert result.stderr.startswith("clanker-startup-noise\n")


def test_a_flood_before_the_program_starts_is_refused(
    transport: SshTransport, sshd: Sshd, bashrc: Path
) -> None:
    _write_first(bashrc, "head -c 40000 /dev/zero | tr '\\0' x >&2; echo >&2", sshd)
    with pytest.raises(HarnessCapabilityError) as caught:
        asyncio.run(transport.run(CommandRequest(command="echo", args=("answer",))))
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    assert "before the program started" in str(caught.value)
