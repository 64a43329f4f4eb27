"""Replaying what a real harness's MCP client sent to clanker's endpoint.

A capture (``tests/plugins/<id>/fixtures/bridge-live.json``) was recorded in
``cli-sandbox`` with the argv the plugin's bridge provider produced, a real grid
and the real CLI (docs/harnesses/<id>.md, "Agent bridge"): every request head
as the endpoint received it, with its body and the status it was answered
with. The token and the port are placeholders (``${TOKEN}``, ``${PORT}``).
"""

from __future__ import annotations

import json
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
