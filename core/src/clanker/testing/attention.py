"""Testing attention sources: a stand-in grid, the real one on a thread, and
interpreters loaded as the hook bridge loads them.

:class:`GridDouble` listens on a Unix socket and speaks the grid protocol's
``deliver`` operation as the real grid does (one request line per connection,
at most 65,536 bytes, ``"v": 1``, up to 16 envelopes, each one strictly parsed:
the real grid refuses a whole batch for one malformed envelope; none only with
the hook bridge's ``failedClosed`` count). It records
every request and answers ``accepted`` for each envelope, or ``unauthorized``
when the token is not the one it was given::

    double = GridDouble(short_dir / "g.sock", token="ab" * 32)
    try:
        run_my_extension(env={"CLANKER_ATTENTION_SOCKET": str(double.path), ...})
        assert [e["event"] for e in double.envelopes()] == ["turn_started", ...]
    finally:
        double.close()

Use the real :class:`~clanker.grid.server.Grid` where the test is about the
resulting state (``clanker status``); the double is for exact envelopes.
:func:`check_interpretation` is what every answer of a stdlib interpreter
(``interpret(payload, state)``) must satisfy.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, cast

from clanker.attention.envelope import parse_envelope
from clanker.grid.client import GridClient
from clanker.grid.protocol import MAX_LINE
from clanker.grid.server import Grid

__all__ = [
    "Envelopes",
    "GridDouble",
    "Interpret",
    "check_interpretation",
    "fixture_payload",
    "interpret_function",
    "load_interpreter",
    "running_grid",
]

Envelopes = list[dict[str, object]]
"""What an interpreter returns beside its state: the canonical envelopes."""
Interpret = Callable[[object, dict[str, object]], tuple[Envelopes, dict[str, object]]]
"""An interpreter's ``interpret(payload, state) -> (envelopes, state)``."""


class GridDouble:
    """A socket speaking the grid's ``deliver`` operation (see the module notes)."""

    def __init__(
        self, path: Path, *, token: str | None = None, answer: dict[str, Any] | None = None
    ) -> None:
        self.path = path
        self.requests: list[dict[str, Any]] = []
        """Every well-formed request, in arrival order."""
        self.problems: list[str] = []
        """Why each request the real grid would refuse was refused."""
        self._token = token
        self._answer = answer
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(path))
        self._server.listen(64)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def envelopes(self) -> list[dict[str, Any]]:
        """Every delivered envelope, in order."""
        return [envelope for request in self.requests for envelope in request["envelopes"]]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            # Wakes the accept() of the serving thread; close() alone would not.
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        self._thread.join(5)

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return  # closed
            with connection, connection.makefile("rwb") as stream:
                reply = self._answer_to(stream.readline(MAX_LINE + 2))
                stream.write(json.dumps(reply).encode() + b"\n")
                stream.flush()

    def _answer_to(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
            if not line.endswith(b"\n") or len(line) > MAX_LINE + 1:
                raise ValueError("line: not one bounded line")
            if request.get("v") != 1 or request.get("op") != "deliver":
                raise ValueError("request: not a version 1 deliver")
            envelopes = request["envelopes"]
            failed = request.get("failedClosed")
            if failed is not None and (type(failed) is not int or failed < 0):
                raise ValueError("failedClosed: not a count")
            fewest = 1 if failed is None else 0  # a failed-closed count may come alone
            if not fewest <= len(envelopes) <= 16:
                raise ValueError("envelopes: not 1 to 16 (0 only with failedClosed)")
            for envelope in envelopes:
                parse_envelope(envelope)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            self.problems.append(str(error))
            return {"v": 1, "ok": False, "error": "bad-request"}
        self.requests.append(request)
        if self._answer is not None:
            return self._answer
        if self._token is not None and request.get("token") != self._token:
            return {"v": 1, "ok": False, "error": "unauthorized"}
        return {"v": 1, "ok": True, "decisions": ["accepted"] * len(envelopes)}


def check_interpretation(
    answer: tuple[object, object], *, max_state: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Assert that an interpreter's ``(envelopes, state)`` keeps the hook bridge's
    contract: a list of envelopes the grid accepts, and a JSON object state of fewer
    than ``max_state`` characters. Returns both."""
    envelopes, state = answer
    assert isinstance(envelopes, list) and isinstance(state, dict)
    for envelope in envelopes:
        parse_envelope(envelope)  # the grid's own wire contract
    assert len(json.dumps(state)) < max_state
    return envelopes, state


def load_interpreter(path: Path) -> ModuleType:
    """Load a provider's interpreter file the way the hook bridge does: by path,
    as a module outside its package (so a stray package import would fail here too)."""
    spec = importlib.util.spec_from_file_location(f"_interpreter_{path.parent.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def interpret_function(module: ModuleType) -> Interpret:
    """The ``interpret`` function of an interpreter loaded by :func:`load_interpreter`."""
    return cast(Interpret, module.interpret)


def fixture_payload(directory: Path, name: str, **changes: object) -> dict[str, Any]:
    """A harness's captured hook payload ``directory/<name>.json``, with ``changes``
    applied to its top level (a ``None`` value removes the key)."""
    loaded: dict[str, Any] = json.loads((directory / f"{name}.json").read_text())
    for key, value in changes.items():
        if value is None:
            loaded.pop(key, None)
        else:
            loaded[key] = value
    return loaded


@contextlib.contextmanager
def running_grid(socket_path: Path, **options: Any) -> Iterator[GridClient]:
    """The real :class:`~clanker.grid.server.Grid` on its own event loop thread, as the
    daemon runs it (``options`` go to ``Grid``); yields a client, shuts the grid down after."""
    started = threading.Event()

    def run() -> None:
        async def main() -> None:
            async with Grid(socket_path, **options) as grid:
                started.set()
                await grid.wait_stopped()

        asyncio.run(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(30)
    client = GridClient(socket_path, timeout=30)
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.shutdown()
        thread.join(30)
