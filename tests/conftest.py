"""Suite-wide isolation: no test depends on the machine it runs on."""

from __future__ import annotations

import contextlib
import importlib.machinery
import json
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from clanker.envvars import is_credential_variable

# Hypothesis times each example (200 ms by default) and calls slow generation a
# failed health check: on a busy 2-core machine both are verdicts about the load,
# not the code. The suite's property tests are bounded by their example counts.
settings.register_profile(
    "clanker", deadline=None, suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("clanker")

# A run started in the background by a shell without job control (`nohup ./.ci/run &`
# from a script) inherits SIGINT ignored, and an ignored signal stays ignored across
# exec: every clanker a test starts would then ignore the Ctrl+C the test sends it, and
# the test would wait forever. A handler here is reset to the default in each child,
# as a terminal's foreground job has it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The importlib_metadata backport (keyring imports it before Python 3.12) deletes
# the standard PathFinder's distribution lookup and appends a finder of its own.
# Kept from before any test imports it, for the tests of the direct entry-point read.
STANDARD_FIND_DISTRIBUTIONS = importlib.machinery.PathFinder.__dict__.get("find_distributions")


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A fresh directory under /tmp, for Unix sockets: an ``AF_UNIX`` path holds at
    most 107 bytes, and pytest's own ``tmp_path`` can be longer."""
    path = Path(tempfile.mkdtemp(prefix="ck-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def grid_home(short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """CLANKER_HOME on a short path (the grid's socket must fit); a grid started
    under it is stopped afterwards."""
    monkeypatch.setenv("CLANKER_HOME", str(short_dir))
    try:
        yield short_dir
    finally:
        # The test may have left the directory unusable on purpose.
        with contextlib.suppress(Exception):
            _stop_grid(short_dir)


@pytest.fixture(autouse=True)
def isolated_clanker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point CLANKER_HOME at a fresh directory and drop inherited clanker variables."""
    home = tmp_path_factory.mktemp("clanker-home")
    saved = dict(os.environ)
    for name in list(os.environ):
        if name.upper().startswith("CLANKER_") or is_credential_variable(name):
            del os.environ[name]
    os.environ["CLANKER_HOME"] = str(home)
    from clanker.registry import _ProcessRegistry

    # The process-wide registry is loaded on first use with the environment of
    # the moment: one a test loaded (under its own plugin lists) ends with it.
    registry = _ProcessRegistry.current
    try:
        yield home
    finally:
        _stop_grid(home)
        os.environ.clear()
        os.environ.update(saved)
        _ProcessRegistry.current = registry


def _stop_grid(home: Path) -> None:
    """Stop a grid daemon a test started (a launch starts one on demand)."""
    if not (home / "run" / "grid").exists():
        return
    from clanker.grid.daemon import stop
    from clanker.paths import clanker_paths

    stop(clanker_paths({"CLANKER_HOME": str(home)}))


class _Refusing(BaseHTTPRequestHandler):
    """Answers every request with HTTP 401 and a JSON error body: never model output.

    A refused port would do too, but some harnesses retry that for a long time
    (opencode for about 78 s, close to clanker's 90 s); a 4xx fails at once.
    """

    bodies: list[bytes]

    def _refuse(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.bodies.append(self.rfile.read(length) if length else b"")
        body = json.dumps({"error": {"message": "loopback stub: no model here",
                                     "type": "invalid_request_error"}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _refuse

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing_provider() -> Iterator[tuple[str, list[bytes]]]:
    """A loopback model-provider URL that answers only 401, and the request bodies it got."""
    bodies: list[bytes] = []
    handler = type("Handler", (_Refusing,), {"bodies": bodies})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", bodies
    finally:
        server.shutdown()
        server.server_close()
