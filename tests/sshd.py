"""A real OpenSSH server on loopback, for the SSH tests.

:func:`start_sshd` runs Debian's ``/usr/sbin/sshd -D -e`` with a generated
configuration, host key, client key and ``known_hosts`` in a private
temporary directory, on a free port of 127.0.0.1. The login is an
unprivileged user: when the tests run as root, :func:`sshd_user` (created
with ``useradd`` the first time, home ``/home/<name>``): ``clanker-sshd``,
and one user of its own for each pytest-xdist worker (``clanker-sshd-gw0``,
...), so workers run their SSH tests side by side; otherwise the user running
the tests, since an unprivileged sshd can only log in as itself. Each server
starts from its user's home as ``useradd`` made it, so two runs on one machine
must not share a user at once: a server holds its user's :func:`user_lock`
(``flock``) while it runs, and another run's server for that user waits.

The client side is an ``ssh_config`` file with one ``Host`` alias
(:data:`ALIAS`) carrying the port, user, key and strict host key checking
against the generated ``known_hosts``: the way a person's own
``~/.ssh/config`` would describe a host.

The server dies with the process that started it, however that one ends: on
Linux it is started through a small launcher that asks the kernel for
``SIGKILL`` when its parent dies (``prctl(PR_SET_PDEATHSIG)``, kept across
the ``exec`` of sshd), so a test run that is killed leaves no sshd behind.

When ``CLANKER_TEST_SSHD=required`` (``.ci/run`` sets it, after installing
``openssh-server``) a server that cannot start is a failure; otherwise the
tests that need it are skipped with the reason.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from attrs import frozen

SSHD = "/usr/sbin/sshd"
ALIAS = "clanker-test-host"
REQUIRED_VARIABLE = "CLANKER_TEST_SSHD"
# Set while this process holds its user's lock (not CLANKER_*: tests clear those
# around each test).
_HOLDING = "TESTS_SSHD_USER_HOLDER"


def sshd_user() -> str:
    """The dedicated login of this process's tests (as root): one per xdist worker."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return f"clanker-sshd-{worker}" if worker.isalnum() else "clanker-sshd"


def user_lock(user: str) -> Path:
    """What a server for ``user`` holds (``flock``) while it runs."""
    return Path(f"/tmp/{user}.lock")


# Asks for SIGKILL when the parent dies (PR_SET_PDEATHSIG is 1), makes sure the
# parent did not die before that, then becomes sshd (the setting survives exec).
_LAUNCHER = """
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) != 0:
    sys.exit("prctl(PR_SET_PDEATHSIG): " + os.strerror(ctypes.get_errno()))
if os.getppid() != int(sys.argv[1]):
    sys.exit("the process that started sshd is gone")
os.execv(sys.argv[2], sys.argv[2:])
"""


class SshdUnavailable(Exception):
    """The server cannot be started here; the message says why."""


@frozen
class Sshd:
    """A running server and how to reach it."""

    port: int
    user: str
    home: Path
    config_file: Path
    """The client configuration (``ssh -F``) defining :data:`ALIAS`."""
    host_public_key: str
    directory: Path
    pid: int
    """The server's process (it dies with the process that started it)."""

    @property
    def alias(self) -> str:
        return ALIAS


def chown_to(path: Path, user: str) -> None:
    """Make ``path`` (itself, never a link's target) belong to ``user`` and that user's group:
    what the remote user must own on the host."""
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE, timeout=60)


def _login_user() -> tuple[str, Path]:
    if os.geteuid() != 0:
        entry = pwd.getpwuid(os.getuid())
        return entry.pw_name, Path(entry.pw_dir)
    user = sshd_user()
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        try:
            _run("useradd", "--create-home", "--shell", "/bin/bash", user)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise SshdUnavailable(f"cannot create the test user {user}: {exc}") from exc
        entry = pwd.getpwnam(user)
    try:
        # useradd leaves the account locked ("!"), which sshd refuses even for a
        # key; "*" is no password at all, and unlocked.
        _run("usermod", "--password", "*", user)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SshdUnavailable(f"cannot unlock the test user {user}: {exc}") from exc
    home = Path(entry.pw_dir)
    _reset_home(home, entry.pw_uid, entry.pw_gid)
    return entry.pw_name, home


def _reset_home(home: Path, uid: int, gid: int) -> None:
    """Put the suite's own user's home back as ``useradd`` made it: what a killed run
    left there (stores, doubles on its PATH, a noisy ``.bashrc``) would otherwise
    change the next run's answers."""
    for entry in home.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    skeleton = Path("/etc/skel")
    for entry in skeleton.iterdir() if skeleton.is_dir() else ():
        if entry.is_file() and not entry.is_symlink():
            shutil.copy2(entry, home / entry.name)
            os.chown(home / entry.name, uid, gid)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _keygen(path: Path) -> str:
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "clanker-test", "-f", str(path))
    return (path.parent / f"{path.name}.pub").read_text().strip()


def _server_config(directory: Path, port: int, user: str) -> Path:
    config = directory / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}",
        "ListenAddress 127.0.0.1",
        f"HostKey {directory / 'host_key'}",
        f"PidFile {directory / 'sshd.pid'}",
        f"AuthorizedKeysFile {directory / 'authorized_keys'}",
        f"AllowUsers {user}",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        # The keys live under /tmp (world-writable, sticky), which StrictModes refuses.
        "StrictModes no",
        "PermitRootLogin no",
        "PermitUserEnvironment no",
        "MaxSessions 64",
        "MaxStartups 64",
        "LogLevel VERBOSE",
        "",
    ]))
    return config


def _client_config(directory: Path, port: int, user: str) -> Path:
    config = directory / "ssh_config"
    config.write_text("\n".join([
        f"Host {ALIAS}",
        "    HostName 127.0.0.1",
        f"    Port {port}",
        f"    User {user}",
        f"    IdentityFile {directory / 'client_key'}",
        "    IdentitiesOnly yes",
        "    IdentityAgent none",
        f"    UserKnownHostsFile {directory / 'known_hosts'}",
        "    GlobalKnownHostsFile /dev/null",
        "    StrictHostKeyChecking yes",
        "",
    ]))
    return config


class _Log:
    """Collects the server's stderr and says when it listens."""

    def __init__(self, stream: object) -> None:
        self.lines: list[str] = []
        self.listening = threading.Event()
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: object) -> None:
        assert hasattr(stream, "readline")
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip()
            self.lines.append(line)
            if "Server listening on 127.0.0.1" in line:
                self.listening.set()
        self.ended.set()
        self.listening.set()

    def count(self, text: str) -> int:
        return sum(text in line for line in list(self.lines))


@contextlib.contextmanager
def _sole_user() -> Iterator[None]:
    """This process's test user for it alone while the block runs (as root): a
    server of another run resets the user's home when it starts, which would take
    this one's files. A process this one starts (a test's own server) inherits the
    hold."""
    if os.geteuid() != 0 or os.environ.get(_HOLDING):
        yield  # a user of its own, or this process's hold
        return
    with user_lock(sshd_user()).open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file is closed
        os.environ[_HOLDING] = str(os.getpid())
        try:
            yield
        finally:
            os.environ.pop(_HOLDING, None)


@contextlib.contextmanager
def start_sshd() -> Iterator[tuple[Sshd, _Log]]:
    """Run a server for the duration of the block (raise :class:`SshdUnavailable`).

    Call it from a thread that outlives the block (the kernel's "parent died"
    is the starting thread's end), as a pytest fixture is."""
    if not os.access(SSHD, os.X_OK) or shutil.which("ssh") is None:
        raise SshdUnavailable(f"{SSHD} or ssh is not installed (Debian: openssh-server)")
    with _sole_user(), _serve() as running:
        yield running


@contextlib.contextmanager
def _serve() -> Iterator[tuple[Sshd, _Log]]:
    user, home = _login_user()
    directory = Path(tempfile.mkdtemp(prefix="ck-sshd-", dir="/tmp"))
    try:
        # sshd reads authorized_keys as the login user: it must reach this directory.
        directory.chmod(0o755)
        host_public = _keygen(directory / "host_key")
        (directory / "authorized_keys").write_text(_keygen(directory / "client_key") + "\n")
        (directory / "authorized_keys").chmod(0o644)
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # privilege separation
        port = _free_port()
        (directory / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_public}\n")
        server_config = _server_config(directory, port, user)
        client_config = _client_config(directory, port, user)
        argv = [SSHD, "-D", "-e", "-f", str(server_config)]
        if sys.platform.startswith("linux"):
            argv = [sys.executable, "-I", "-c", _LAUNCHER, str(os.getpid()), *argv]
        process = subprocess.Popen(argv,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
        log = _Log(process.stderr)
        try:
            if not log.listening.wait(30) or log.ended.is_set():
                raise SshdUnavailable("sshd did not start: " + " | ".join(log.lines[-5:]))
            yield Sshd(port=port, user=user, home=home, config_file=client_config,
                       host_public_key=host_public, directory=directory,
                       pid=process.pid), log
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.ended.wait(10)
            assert process.stderr is not None
            process.stderr.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
