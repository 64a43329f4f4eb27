"""clanker.testing.attention.GridDouble answers as the real grid would."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from clanker.testing.attention import GridDouble

TOKEN = "cd" * 32
START = {"event": "turn_started", "scope": "root", "sessionId": "s", "turnId": "t"}


def _exchange(path: Path, request: object) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(10)
        client.connect(str(path))
        client.sendall(json.dumps(request).encode() + b"\n")
        reply: dict[str, Any] = json.loads(client.makefile("rb").readline())
        return reply


def _deliver(token: str, envelopes: list[object]) -> dict[str, object]:
    return {"v": 1, "op": "deliver", "terminal": "t-1", "token": token, "envelopes": envelopes}


def test_records_and_accepts_a_good_delivery(short_dir: Path) -> None:
    double = GridDouble(short_dir / "g.sock", token=TOKEN)
    try:
        assert _exchange(double.path, _deliver(TOKEN, [START])) == {
            "v": 1, "ok": True, "decisions": ["accepted"]}
        assert double.envelopes() == [START]
    finally:
        double.close()


def test_refuses_what_the_grid_refuses(short_dir: Path) -> None:
    double = GridDouble(short_dir / "g.sock", token=TOKEN)
    try:
        assert _exchange(double.path, _deliver("ef" * 32, [START]))["error"] == "unauthorized"
        malformed = {**START, "prompt": "never on the wire"}
        assert _exchange(double.path, _deliver(TOKEN, [START, malformed]))["error"] == (
            "bad-request")
        assert _exchange(double.path, _deliver(TOKEN, [START] * 17))["error"] == "bad-request"
        assert len(double.problems) == 2
        assert double.envelopes() == [START]  # the unauthorized request, recorded
    finally:
        double.close()
