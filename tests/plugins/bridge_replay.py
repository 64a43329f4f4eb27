"""Replaying what a real harness's MCP client sent to clanker's endpoint.

A capture (``tests/plugins/<id>/fixtures/bridge-live.json``) was recorded in
``cli-sandbox`` with the argv the plugin's bridge provider produced, a real grid
and the real CLI (docs/harnesses/<id>.md, "Agent bridge"): every request head
as the endpoint received it, with its body and the status it was answered
with. The token and the port are placeholders (``${TOKEN}``, ``${PORT}``).
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.core.bridge.mcp_peer import Agent, Answer, exchange


def load(path: Path) -> dict[str, Any]:
    capture: dict[str, Any] = json.loads(path.read_text())
    return capture


def raw(record: dict[str, Any], agent: Agent) -> bytes:
    """The bytes of one captured request, sent with ``agent``'s token to its port."""
    def fill(text: str) -> str:
        return text.replace("${TOKEN}", agent.token).replace("${PORT}", str(agent.port))

    body = fill(record.get("body", "")).encode()
    head = f"{record['method']} {record['target']} HTTP/1.1\r\n"
    for name, value in record["headers"]:
        sent = str(len(body)) if name == "content-length" else fill(value)
        head += f"{name}: {sent}\r\n"
    return head.encode("latin-1") + b"\r\n" + body


def replay(record: dict[str, Any], agent: Agent) -> Answer:
    answer = exchange(agent.port, raw(record, agent))
    assert answer is not None, "the endpoint closed the connection without an answer"
    return answer


class JsonLines:
    """A real CLI speaking one JSON object per line on stdio, read with a deadline
    (the real_cli tests: every wait is bounded, none is asserted on)."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path) -> None:
        self._process = subprocess.Popen(
            list(argv), env=dict(env), cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, message: Mapping[str, Any]) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(message) + "\n")
        self._process.stdin.flush()

    def until(self, wanted: Callable[[dict[str, Any]], bool], *, seconds: float = 60
              ) -> dict[str, Any]:
        """The next message ``wanted`` accepts; fail when the CLI ends or ``seconds`` pass."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError("the CLI did not answer in time") from None
            assert line is not None, "the CLI ended without answering"
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and wanted(message):
                return message

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._reader.join(30)
        if self._process.stdout is not None:
            self._process.stdout.close()
