"""A harness's native relocation of a conversation: a transient local server,
owned by this one call, asked once and stopped with its exit proven.

The provider declares the server and the request
(:class:`clanker.checkouts.capability.RelocationRequest`); this module owns
everything that keeps the server safe: loopback only, a free port, a fresh
random password (HTTP Basic), clanker's own credentials stripped from its
environment, bounded waits, and the whole process group stopped (SIGTERM, then
SIGKILL) in every outcome. A move whose server cannot be proven gone fails.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import secrets
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from typing import IO, Final

from clanker.checkouts.capability import RelocationRequest

__all__ = ["LOOPBACK", "RelocationError", "RelocationFailed", "RelocationRefused",
           "ServerUnavailable", "UnverifiedProcessExit", "relocate"]

LOOPBACK: Final = "127.0.0.1"
_STRIPPED_PREFIX: Final = "CLANKER_"
_OUTPUT_LIMIT: Final = 4096


class RelocationError(Exception):
    """The conversation was not relocated (nothing to resume in the target)."""


class ServerUnavailable(RelocationError):
    """The server did not start or did not answer within its bound."""


class RelocationRefused(RelocationError):
    """The harness refused the move (a 4xx answer); nothing was changed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"relocation refused ({status}): {message}")
        self.status = status
        self.message = message


class RelocationFailed(RelocationError):
    """The server answered the move with neither success nor a refusal."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"relocation failed ({status}): {message}")
        self.status = status
        self.message = message


class UnverifiedProcessExit(RelocationError):
    """The server could not be proven gone; whatever it answered, the move fails."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def _environment(request: RelocationRequest, environ: Mapping[str, str],
                 password: str) -> dict[str, str]:
    env = {k: v for k, v in environ.items() if not k.upper().startswith(_STRIPPED_PREFIX)}
    env.update(dict(request.env))
    env[request.password_variable] = password
    return env


def _tail(output: IO[bytes]) -> str:
    output.flush()
    output.seek(0, os.SEEK_END)
    size = output.tell()
    output.seek(max(0, size - _OUTPUT_LIMIT))
    return output.read().decode(errors="replace").strip()


def _message(body: bytes) -> str:
    """The harness's own one-line reason, when its answer carries one."""
    text = body.decode(errors="replace")
    try:
        answer = json.loads(text)
    except ValueError:
        return text.strip()[:_OUTPUT_LIMIT] or "no reason given"
    if isinstance(answer, dict):
        data = answer.get("data")
        if isinstance(data, dict) and isinstance(data.get("message"), str):
            return str(data["message"])
        if isinstance(answer.get("message"), str):
            return str(answer["message"])
    return text.strip()[:_OUTPUT_LIMIT]


class _Server:
    """The transient server process and how to ask it."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, authorization: str,
                 output: IO[bytes]) -> None:
        self.process = process
        self.port = port
        self.authorization = authorization
        self.output = output

    def ask(self, method: str, path: str, body: str | None, timeout: float
            ) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection(LOOPBACK, self.port, timeout=timeout)
        try:
            headers = {"Authorization": self.authorization, "Accept": "application/json"}
            if body is not None:
                headers["Content-Type"] = "application/json"
            connection.request(method, path, body=body.encode() if body is not None else None,
                               headers=headers)
            answer = connection.getresponse()
            return answer.status, answer.read(1 << 20)
        finally:
            connection.close()

    def wait_ready(self, path: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer"
        while True:
            if self.process.poll() is not None:
                raise ServerUnavailable(
                    f"the server exited ({self.process.returncode}) before it answered: "
                    f"{_tail(self.output) or 'no output'}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ServerUnavailable(f"the server did not answer within {timeout:g} s "
                                        f"({last})")
            try:
                status, _ = self.ask("GET", path, None, min(2.0, max(remaining, 0.1)))
            except (OSError, http.client.HTTPException) as error:
                last = str(error) or type(error).__name__
            else:
                if 200 <= status < 300:
                    return
                last = f"status {status}"
            time.sleep(min(0.1, max(deadline - time.monotonic(), 0)))

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.process.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def _signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)

    def _gone_within(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=max(0.0, min(0.05, deadline - time.monotonic())))
            if self.process.returncode is not None and not self._group_alive():
                return True
            if time.monotonic() >= deadline:
                return False

    def stop(self, timeout: float) -> None:
        """Stop the server's whole process group; raise :class:`UnverifiedProcessExit`
        unless the server and everything it started are proven gone."""
        for signum in (signal.SIGTERM, signal.SIGKILL):
            self._signal(signum)
            if self._gone_within(timeout):
                return
        raise UnverifiedProcessExit(
            f"the relocation server (pid {self.process.pid}) could not be proven gone")


@contextlib.contextmanager
def _serving(request: RelocationRequest, cwd: str, environ: Mapping[str, str],
             stop_timeout: float) -> Iterator[_Server]:
    password = secrets.token_urlsafe(32)
    port = _free_port()
    argv = [*request.argv, request.host_flag, LOOPBACK, request.port_flag, str(port)]
    credentials = base64.b64encode(f"{request.username}:{password}".encode()).decode()
    with tempfile.TemporaryFile() as output:
        try:
            process = subprocess.Popen(argv, cwd=cwd, env=_environment(request, environ, password),
                                       stdin=subprocess.DEVNULL, stdout=output, stderr=output,
                                       start_new_session=True)
        except OSError as error:
            raise ServerUnavailable(f"the server could not start: {error}") from error
        server = _Server(process, port, f"Basic {credentials}", output)
        try:
            yield server
        finally:
            # In every outcome; an unproven exit outweighs whatever the server answered.
            server.stop(stop_timeout)


def relocate(request: RelocationRequest, *, cwd: str, environ: Mapping[str, str] | None = None,
             ready_timeout: float = 60.0, request_timeout: float = 30.0,
             stop_timeout: float = 5.0) -> None:
    """Run the relocation ``request`` declares: start its server in ``cwd`` (with
    ``environ``, default this process's, minus clanker's own variables), wait for
    it, send the move once, stop the server.

    Returns only once the harness said the move succeeded *and* the server is
    proven gone. Raises :class:`RelocationRefused` (a 4xx: the harness refused;
    nothing changed), :class:`RelocationFailed` (any other answer, or none),
    :class:`ServerUnavailable` and :class:`UnverifiedProcessExit`.
    """
    inherited = os.environ if environ is None else environ
    with _serving(request, cwd, inherited, stop_timeout) as server:
        server.wait_ready(request.ready_path, ready_timeout)
        try:
            status, body = server.ask("POST", request.path, request.body, request_timeout)
        except (OSError, http.client.HTTPException) as error:
            raise RelocationFailed(0, f"no answer: {error}") from error
        if status in request.success:
            return
        if 400 <= status < 500:
            raise RelocationRefused(status, _message(body))
        raise RelocationFailed(status, _message(body))
