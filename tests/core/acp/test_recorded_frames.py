"""The frames recorded from the real agents (tests/fixtures/<id>/acp, see
docs/harnesses/<id>.md) are valid ACP v1 by the official SDK's schema, and
clanker's client reads them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acp import schema

from clanker.acp.client import PROTOCOL_VERSION

FIXTURES = Path(__file__).parents[2] / "fixtures"
RECORDED = sorted(FIXTURES.glob("*/acp/handshake.jsonl"))


def _frames(path: Path) -> list[tuple[str, dict[str, object]]]:
    return [(r["dir"], r["frame"]) for r in map(json.loads, path.read_text().splitlines())]


def test_every_acp_harness_has_a_recording() -> None:
    assert {p.parts[-3] for p in RECORDED} == {"opencode", "omp", "hermes", "claude", "codex"}


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.parts[-3])
def test_recorded_frames_match_the_schema(path: Path) -> None:
    frames = _frames(path)
    sent = {f["id"]: f for d, f in frames if d == "out"}
    schema.InitializeRequest.model_validate(sent[0]["params"])
    schema.NewSessionRequest.model_validate(sent[1]["params"])
    answers = {f["id"]: f for d, f in frames if d == "in" and "id" in f}
    init = schema.InitializeResponse.model_validate(answers[0]["result"])
    assert init.protocol_version == PROTOCOL_VERSION
    new = answers[1]
    if "result" in new:
        assert schema.NewSessionResponse.model_validate(new["result"]).session_id
    else:  # a typed JSON-RPC error (no account, no provider configured)
        assert isinstance(new["error"]["code"], int)


@pytest.mark.parametrize(("harness", "allow", "reject", "tool"), [
    ("opencode", "once", "reject", "▸ ls [execute] failed"),
    ("omp", "allow_once", "reject_once", "▸ $ ls [execute] failed"),
])
def test_a_recorded_permission_request_through_the_ladder(harness: str, allow: str, reject: str,
                                                          tool: str) -> None:
    from clanker.acp.policy import PermissionRequest, Policy
    from clanker.acp.render import render_state, replay

    frames = _frames(FIXTURES / harness / "acp" / "permission.jsonl")
    (asked,) = [f for d, f in frames if f.get("method") == "session/request_permission"]
    schema.RequestPermissionRequest.model_validate(asked["params"])
    for _, frame in frames:
        if frame.get("method") == "session/update":
            schema.SessionNotification.model_validate(frame["params"])
    request = PermissionRequest.from_params(asked["params"])
    assert request.tool_kind == "execute"
    alone = Policy(workspace="/work/project", interactive=False)
    assert alone.decide(request).option_id == reject
    approved = Policy(workspace="/work/project", interactive=False, approved={"execute"})
    assert approved.decide(request).option_id == allow  # never the allow_always one
    records = [{"dir": d, "frame": f} for d, f in frames]
    assert render_state(replay(records)).splitlines()[0] == tool
