"""The test sshd (``tests/sshd.py``) dies with the process that started it, even
one killed with SIGKILL, so a killed test run leaves no server behind; and two runs
on one machine never use one test user at once."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.sshd import REQUIRED_VARIABLE, Sshd, user_lock

ROOT = Path(__file__).resolve().parents[3]

# Starts a server, reports it, and waits (holding it) until it is killed.
_HOLD = """
import json, sys
from tests.sshd import SshdUnavailable, start_sshd
try:
    with start_sshd() as (sshd, _):
        print(json.dumps({"pid": sshd.pid, "port": sshd.port,
                          "directory": str(sshd.directory)}), flush=True)
        sys.stdin.read()
except SshdUnavailable as exc:
    print(json.dumps({"unavailable": str(exc)}), flush=True)
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in {"Z", "X"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_sshd_of_a_killed_test_process_is_gone() -> None:
    holder = subprocess.Popen([sys.executable, "-c", _HOLD], cwd=ROOT, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    server: dict[str, object] = {}
    try:
        assert holder.stdout is not None
        server = json.loads(holder.stdout.readline() or "{}")
        if "unavailable" in server:
            if os.environ.get(REQUIRED_VARIABLE) == "required":
                pytest.fail(f"the test sshd must start here: {server['unavailable']}")
            pytest.skip(f"no test sshd: {server['unavailable']}")
        pid, port = int(str(server["pid"])), int(str(server["port"]))
        assert _alive(pid)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as peer:
            assert peer.recv(64).startswith(b"SSH-")  # it is the server, and it serves

        holder.send_signal(signal.SIGKILL)  # no finally, no atexit: only the kernel acts
        holder.wait()
        deadline = time.monotonic() + 60  # a hang guard: the kernel signals at the exit
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), "the sshd outlived the process that started it"
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()
        for stream in (holder.stdin, holder.stdout):
            if stream is not None:
                stream.close()
        if "pid" in server:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(str(server["pid"])), signal.SIGKILL)
        if "directory" in server:
            shutil.rmtree(str(server["directory"]), ignore_errors=True)


def test_another_run_waits_for_the_test_user(sshd: Sshd) -> None:
    # A server resets its user's home when it starts: while this one runs, a process
    # outside this run cannot take that user's lock.
    if os.geteuid() != 0:
        pytest.skip("only the dedicated test user (root) is shared between runs")
    take = ("import fcntl, sys\n"
            f"held = open({str(user_lock(sshd.user))!r}, 'a')\n"
            "try:\n"
            "    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            "except BlockingIOError:\n"
            "    sys.exit(3)\n")
    done = subprocess.run([sys.executable, "-c", take], timeout=60, check=False)
    assert done.returncode == 3, "the test user's lock was free while a server ran"
