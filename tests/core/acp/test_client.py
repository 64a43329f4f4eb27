"""The ACP client against a fake agent in a real subprocess: the turn loop,
permissions through the ladder, cancel, bounds, failures and resume."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import pytest

from clanker.acp.errors import CoderError, CoderFailure
from clanker.acp.policy import Answer, Decision, PermissionRequest
from clanker.acp.transcript import read_transcript
from clanker.errors import ErrorKind, HarnessCapabilityError

from .conftest import FAKE_AGENT, Coder


def test_a_turn_streams_updates_in_order_and_ends_with_its_stop_reason(coder: Coder) -> None:
    async def run() -> str:
        async with coder.session() as client:
            return await client.prompt("hello")

    assert asyncio.run(run()) == "end_turn"
    assert coder.agent_text() == "Hello world"
    kinds = [e["event"] for e in coder.events]
    assert kinds.index("turn-started") < kinds.index("update") < kinds.index("turn-ended")


def test_the_transcript_is_private_and_holds_both_directions(coder: Coder) -> None:
    async def run() -> str | None:
        async with coder.session() as client:
            await client.prompt("hello")
            return client.transcript_path

    path = Path(str(asyncio.run(run())))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    records = list(read_transcript(path))
    methods = [r["frame"].get("method") for r in records if r["dir"] == "out"]
    assert methods[:3] == ["initialize", "session/new", "session/prompt"]
    init = next(r["frame"] for r in records if r["dir"] == "out")
    assert init["params"]["clientCapabilities"] == {
        "fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
    assert any(r["dir"] == "in" and r["frame"].get("method") == "session/update" for r in records)


def _outcomes(coder: Coder) -> list[str]:
    return [w.removeprefix("outcome:") for w in coder.agent_text().split()
            if w.startswith("outcome:")]


@pytest.mark.parametrize(("prompt", "approve", "expected"), [
    ("permission read standard", (), "allow-once"),          # automatic
    ("permission search standard", (), "allow-once"),
    ("permission edit standard", (), "reject-once"),          # ask once, nobody to ask
    ("permission edit standard", ("edit",), "allow-once"),    # --approve edit
    ("permission execute standard", (), "reject-once"),       # ask every time
    ("permission execute standard", ("execute",), "allow-once"),
    ("permission none standard", ("other",), "reject-once"),  # no kind: never approved blind
    ("permission read always-only", (), "reject"),            # allow_always is never picked
    ("permission read bypass", (), "reject"),                 # /bypass/i refused
    ("permission read no-reject", (), "allow-once"),
    ("permission execute no-reject", (), "cancelled"),        # no reject_once: cancelled
    ("permission read standard /etc/passwd", (), "reject-once"),  # outside the workspace
])
def test_every_ladder_level_without_a_person(coder: Coder, prompt: str,
                                             approve: tuple[str, ...], expected: str) -> None:
    async def run() -> int:
        async with coder.session(approve=approve) as client:
            await client.prompt(prompt)
            return client.refusals

    refusals = asyncio.run(run())
    assert _outcomes(coder) == [expected]
    assert (refusals > 0) == (expected not in ("allow-once",))
    approval = next(e for e in coder.events if e["event"] == "approval")
    assert approval["rule"]


def test_approving_edits_for_the_session_answers_the_other_pending_edits(coder: Coder) -> None:
    asked: list[PermissionRequest] = []
    all_pending = asyncio.Event()

    async def ask(request: PermissionRequest, decision: Decision) -> Answer:
        asked.append(request)
        if len(asked) == 3:
            all_pending.set()
        if len(asked) == 1:
            assert decision.session_choice
            await all_pending.wait()  # the three requests are pending at once
            return Answer.SESSION
        await asyncio.Event().wait()  # the others are answered by the session approval
        raise AssertionError("unreachable")

    async def run() -> None:
        async with coder.session(interactive=True, ask=ask) as client:
            await client.prompt("parallel 3 edit")
            await client.prompt("permission edit standard")  # remembered: not asked again

    asyncio.run(run())
    assert _outcomes(coder) == ["allow-once"] * 4
    assert len(asked) == 3


def test_execute_asks_every_time(coder: Coder) -> None:
    asked: list[str] = []

    async def ask(request: PermissionRequest, decision: Decision) -> Answer:
        asked.append(str(request.tool_kind))
        assert not decision.session_choice
        return Answer.SESSION  # not offered for execute: counts as once

    async def run() -> None:
        async with coder.session(interactive=True, ask=ask) as client:
            await client.prompt("permission execute standard")
            await client.prompt("permission execute standard")

    asyncio.run(run())
    assert asked == ["execute", "execute"]
    assert _outcomes(coder) == ["allow-once", "allow-once"]


def test_cancel_answers_pending_permissions_cancelled(coder: Coder) -> None:
    async def ask(request: PermissionRequest, decision: Decision) -> Answer:
        await client_ref[0].cancel()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    client_ref: list[object] = []

    async def run() -> str:
        async with coder.session(interactive=True, ask=ask) as client:
            client_ref.append(client)
            return await client.prompt("wait-cancel")

    assert asyncio.run(run()) == "cancelled"
    assert _outcomes(coder) == ["cancelled"]


def test_a_large_answer_streams_whole(coder: Coder) -> None:
    async def run() -> None:
        async with coder.session() as client:
            await client.prompt("large 2000")

    asyncio.run(run())
    assert coder.agent_text() == "x" * 1024 * 2000


def test_an_oversize_line_is_dropped_whole_and_counted(coder: Coder) -> None:
    async def run() -> tuple[str, int, str | None]:
        async with coder.session() as client:
            stop = await client.prompt("oversize")
            return stop, client.process.dropped_lines, client.transcript_path

    stop, dropped, path = asyncio.run(run())
    assert (stop, dropped) == ("end_turn", 1)
    assert coder.agent_text() == "after"
    events = [r["frame"] for r in read_transcript(Path(str(path))) if r["dir"] == "clanker"]
    assert {"event": "dropped-lines", "count": 1} in events


def test_unknown_update_kinds_and_garbage_are_kept_not_fatal(coder: Coder) -> None:
    async def run() -> str | None:
        async with coder.session() as client:
            assert await client.prompt("unknown") == "end_turn"
            assert await client.prompt("garbage") == "end_turn"
            return client.transcript_path

    path = asyncio.run(run())
    assert any(e.get("unsupported") and e["kind"] == "future_kind" for e in coder.events)
    frames = [r["frame"] for r in read_transcript(Path(str(path)))]
    assert "this is not json" in frames
    assert any(isinstance(f, dict) and f.get("params", {}).get("update", {}).get(
        "sessionUpdate") == "future_kind" for f in frames)


def _failed_turn(coder: Coder, prompt: str) -> CoderError:
    async def run() -> None:
        async with coder.session() as client:
            await client.prompt(prompt)

    with pytest.raises(CoderError) as caught:
        asyncio.run(run())
    return caught.value


def test_agent_death_mid_turn_fails_the_turn(coder: Coder) -> None:
    error = _failed_turn(coder, "die")
    assert (error.failure, error.exit_code) == (CoderFailure.TURN_FAILED, 33)
    assert coder.agent_text() == "partial"


def test_a_usage_limit_says_when_it_resets(coder: Coder) -> None:
    error = _failed_turn(coder, "usage-limit")
    assert error.failure is CoderFailure.USAGE_LIMIT
    assert "resets 3:10am" in error.message


def test_a_sign_in_asked_for_mid_session_is_its_own_failure(coder: Coder) -> None:
    error = _failed_turn(coder, "auth-required")
    assert (error.failure, error.exit_code) == (CoderFailure.UNAUTHENTICATED, 6)
    assert "needs signing in (error -32000)" in error.message
    assert {"event": "turn-failed", "reason": "unauthenticated", "code": -32000} in coder.events


def test_a_flood_of_stderr_never_blocks_and_is_logged_bounded(coder: Coder) -> None:
    async def run() -> str:
        async with coder.session() as client:
            return await client.prompt("stderr 4096")

    assert asyncio.run(run()) == "end_turn"
    logs = list((coder.paths.state / "coder").glob("agent-*.log"))
    assert len(logs) == 1
    assert logs[0].stat().st_size == 1024 * 1024


@pytest.mark.parametrize(("flags", "method"), [((), "session/resume"),
                                                (("--no-resume",), "session/load")])
def test_resume_then_load(coder: Coder, flags: tuple[str, ...], method: str) -> None:
    async def run() -> str:
        async with coder.session(*flags, resume="known") as client:
            assert client.session_id == "known"
            return await client.prompt("hello")

    assert asyncio.run(run()) == "end_turn"
    resumed = next(e for e in coder.events if e["event"] == "resumed")
    assert resumed["method"] == method
    history = [e for e in coder.events if e.get("history")]
    assert bool(history) == (method == "session/load")


def test_a_resume_that_fails_never_becomes_a_new_session(coder: Coder) -> None:
    async def run() -> None:
        async with coder.session(resume="unknown-id"):
            raise AssertionError("resumed")

    with pytest.raises(CoderError) as caught:
        asyncio.run(run())
    assert caught.value.failure is CoderFailure.RESUME_FAILED
    assert not any(e["event"] == "session" for e in coder.events)


@pytest.mark.parametrize(("flag", "kind"), [("--silent", ErrorKind.TIMEOUT),
                                             ("--exit-at-once", ErrorKind.COMMAND_FAILED),
                                             ("--v2", ErrorKind.UNSUPPORTED)])
def test_an_agent_that_cannot_start_is_a_typed_error(coder: Coder, flag: str,
                                                     kind: ErrorKind) -> None:
    from clanker.acp.service import CoderOptions, CoderService

    service = CoderService(environment=coder.clanker.environment, paths=coder.paths,
                           launch=coder.clanker._launch_service())
    # Only the agent that never answers waits for the bound; the others end on their
    # own, however long the SDK takes to import on a busy machine.
    options = CoderOptions(cwd=str(coder.workspace),
                           initialize_timeout=2.0 if kind is ErrorKind.TIMEOUT else 120.0)

    async def run() -> None:
        from .conftest import FAKE_AGENT
        client = await service.open(harness=None, agent_command=("python3", FAKE_AGENT, flag),
                                    options=options, on_event=lambda _: None)
        await client.close()

    with pytest.raises(HarnessCapabilityError) as caught:
        asyncio.run(run())
    assert caught.value.kind is kind


def test_an_agent_that_is_not_installed(coder: Coder) -> None:
    async def run() -> None:
        async with coder.clanker.coder(agent_command=("no-such-acp-agent",),
                                       cwd=coder.workspace):
            raise AssertionError("started")

    with pytest.raises(HarnessCapabilityError) as caught:
        asyncio.run(run())
    assert caught.value.kind is ErrorKind.BINARY_UNAVAILABLE


def test_json_frames_are_valid_json_lines(coder: Coder) -> None:
    async def run() -> str | None:
        async with coder.session() as client:
            await client.prompt("hello")
            return client.transcript_path

    raw = Path(str(asyncio.run(run()))).read_text().splitlines()
    assert all(isinstance(json.loads(line), dict) for line in raw)


def test_a_silent_turn_is_cancelled_at_the_idle_bound(coder: Coder) -> None:
    async def run() -> None:
        async with coder.session() as client:
            await client.prompt("silent", idle_timeout=1.0)

    with pytest.raises(CoderError) as caught:
        asyncio.run(run())
    assert caught.value.failure is CoderFailure.SILENT
    assert [e["event"] for e in coder.events][-2:] == ["cancel", "turn-failed"]


def test_a_refusal_is_a_stop_reason_not_an_error(coder: Coder) -> None:
    async def run() -> str:
        async with coder.session() as client:
            return await client.prompt("refuse")

    assert asyncio.run(run()) == "refusal"


def test_the_configured_table_sets_levels(coder: Coder) -> None:
    coder.paths.config.mkdir(parents=True)
    (coder.paths.config / "config.toml").write_text(
        '[coder.approvals]\nedit = "automatic"\nread = "ask-every-time"\n')

    async def run() -> None:
        async with coder.session() as client:
            await client.prompt("permission edit standard")
            await client.prompt("permission read standard")
            await client.prompt("permission read standard /etc/passwd")

    asyncio.run(run())
    assert _outcomes(coder) == ["allow-once", "reject-once", "reject-once"]


@pytest.mark.parametrize("table", ['bypass = "automatic"', 'edit = "refuse-never"'])
def test_a_configured_table_outside_the_ladder_is_refused(coder: Coder, table: str) -> None:
    from clanker.config import ConfigError

    coder.paths.config.mkdir(parents=True)
    (coder.paths.config / "config.toml").write_text(f"[coder.approvals]\n{table}\n")

    async def run() -> None:
        async with coder.session():
            raise AssertionError("started")

    with pytest.raises(ConfigError, match=r"coder\.approvals"):
        asyncio.run(run())


def test_transcripts_are_kept_to_the_retention_bound(
        coder: Coder, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from clanker.acp import service

    monkeypatch.setattr(service, "TRANSCRIPTS_KEPT", 3)
    directory = coder.paths.state / "coder"
    directory.mkdir(parents=True)
    for index in range(5):
        old = directory / f"old-{index}.jsonl"
        old.write_text("")
        os.utime(old, (index, index))

    async def run() -> None:
        async with coder.session() as client:
            await client.prompt("hello")

    asyncio.run(run())
    kept = sorted(p.name for p in directory.glob("*.jsonl"))
    assert kept == ["fake-1.jsonl", "old-3.jsonl", "old-4.jsonl"]


def test_the_model_is_chosen_over_the_protocol(coder: Coder) -> None:
    async def run() -> None:
        async with coder.session() as client:
            await client.choose("model", "m2")
            await client.prompt("model")
            with pytest.raises(ValueError, match="offered: m1, m2"):
                await client.choose("model", "m9")
            with pytest.raises(HarnessCapabilityError) as caught:
                await client.choose("thought_level", "high")
            assert caught.value.kind is ErrorKind.UNSUPPORTED

    asyncio.run(run())
    assert coder.agent_text() == "model:m2"


def test_a_session_resume_shows_the_history_clanker_recorded(coder: Coder) -> None:
    async def run() -> None:
        async with coder.session(resume="known") as client:
            await client.prompt("hello")

    asyncio.run(run())
    assert not [e for e in coder.events if e["event"] == "history"]  # nothing recorded yet
    coder.events.clear()
    asyncio.run(run())
    history = [e for e in coder.events if e["event"] == "history"]
    assert [h["text"] for h in history] == ["Hello world"]


@pytest.mark.parametrize(("flags", "closed"), [((), True), (("--no-close",), False)])
def test_the_session_is_closed_where_the_agent_offers_it(coder: Coder, flags: tuple[str, ...],
                                                         closed: bool) -> None:
    async def run() -> str | None:
        async with coder.session(*flags) as client:
            await client.prompt("hello")
            return client.transcript_path

    records = list(read_transcript(Path(str(asyncio.run(run())))))
    sent = [r["frame"].get("method") for r in records if r["dir"] == "out"]
    assert ("session/close" in sent) == closed


def test_a_failing_event_handler_loses_the_event_not_the_turn(coder: Coder) -> None:
    def on_event(event: dict[str, object]) -> None:
        if event.get("kind") == "agent_message_chunk":
            raise RuntimeError("a caller's bug")

    async def run() -> str:
        async with coder.clanker.coder(agent_command=("python3", FAKE_AGENT),
                                       cwd=coder.workspace, on_event=on_event) as client:
            return await client.prompt("hello")

    assert asyncio.run(run()) == "end_turn"
