"""The loopback sshd (``tests/sshd.py``) and transports aimed at it."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from clanker.execution.ssh import SshTransport
from tests.sshd import REQUIRED_VARIABLE, Sshd, SshdUnavailable, start_sshd


# One server for this package's tests (a worker's, under xdist), stopped after them:
# it holds its test user (tests/sshd.py), which another run of the suite waits for.
@pytest.fixture(scope="package")
def sshd_server() -> Iterator[tuple[Sshd, object]]:
    try:
        with start_sshd() as running:
            yield running
    except SshdUnavailable as exc:
        if os.environ.get(REQUIRED_VARIABLE) == "required":
            pytest.fail(f"the test sshd must start here: {exc}")
        pytest.skip(f"no test sshd: {exc}")


@pytest.fixture
def sshd(sshd_server: tuple[Sshd, object]) -> Sshd:
    return sshd_server[0]


@pytest.fixture
def control_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ckc-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def transport(sshd: Sshd, control_dir: Path) -> Iterator[SshTransport]:
    ssh = SshTransport(sshd.alias, control_dir=control_dir, config_file=sshd.config_file)
    try:
        yield ssh
    finally:
        ssh.close()


@pytest.fixture
def remote_bin(sshd: Sshd) -> Iterator[Path]:
    """``~/.local/bin`` of the test user, which Debian's ``~/.profile`` puts on a login
    shell's PATH; removed afterwards. Only with the dedicated test user (as root)."""
    if os.geteuid() != 0:
        pytest.skip("placing programs on the remote PATH needs the dedicated test user (root)")
    directory = sshd.home / ".local" / "bin"
    entry = pwd.getpwnam(sshd.user)
    directory.mkdir(parents=True, exist_ok=True)
    for path in (directory.parent, directory):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    try:
        yield directory
    finally:
        shutil.rmtree(sshd.home / ".local", ignore_errors=True)
