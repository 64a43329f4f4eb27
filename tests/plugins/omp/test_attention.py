"""Oh My Pi attention: the extension run for real (node or bun) against a grid, and prepare().

The extension file is the one shipped in the package. A small shim stands in for omp's
extension loader: it imports the file, hands it an ``on()`` API, then calls its handlers
with the event objects and contexts of ``tests/fixtures/omp/attention`` (captured live
from omp 18.2.3, or built from its shipped types; the README says which).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clanker.attention.capability import (
    AttachmentContext,
    AttachmentPlan,
    Declined,
)
from clanker.attention.extension_source import combined
from clanker.attention.presentation import Attention, derive_attention
from clanker.grid.server import Grid
from clanker.launch.request import LaunchOperation, LaunchRequest, SessionTarget
from clanker.testing.attention import GridDouble
from clanker.testing.doubles import attachment_context
from clanker_omp.attention import EXTENSION, EXTENSION_FILE_NAME, OmpAttention
from clanker_omp.launch import OmpLaunch
from tests.helpers import GRID_TOKEN

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "omp" / "attention"
OMP_FIXTURES = FIXTURES.parent
LIVE = json.loads((FIXTURES / "live-events.json").read_text())
BUILT = json.loads((FIXTURES / "types-built.json").read_text())
S1 = "01a2f00d-0000-7000-8000-000000000001"
S2 = "01a2f00d-0000-7000-8000-000000000002"
CWD = "/home/dev/src/omprepo"
TOKEN = GRID_TOKEN  # what the grid fixture takes

SHIM = """
import { readFileSync } from "node:fs";
const ext = (await import(process.argv[2])).default;
const steps = JSON.parse(readFileSync(process.argv[3], "utf8"));
const handlers = {};
await ext({ on(name, fn) { (handlers[name] ??= []).push(fn); } });
const results = [];
for (const step of steps) {
  const { sessionId, ...rest } = step.ctx;
  const ctx = { ...rest, sessionManager: { getSessionId: () => sessionId } };
  for (const fn of handlers[step.event.type] ?? []) {
    const result = fn(step.event, ctx);
    results.push(result === undefined ? "undefined" : result);
  }
}
console.log(JSON.stringify({ registered: Object.keys(handlers).sort(), results }));
"""


def runtimes() -> list[str]:
    """The JavaScript runtimes here that can run the extension (omp itself runs on bun)."""
    found = [path for path in (shutil.which("node"), shutil.which("bun")) if path is not None]
    return found


RUNTIMES = runtimes()
needs_runtime = pytest.mark.skipif(not RUNTIMES, reason="neither node nor bun is installed")


# -- a grid socket double (section 3): records every envelope, checks each one --------------




def run_extension(runtime: str, directory: Path, steps: list[dict[str, Any]],
                  env: dict[str, str]) -> dict[str, Any]:
    """Run the shipped extension under ``runtime`` through the shim; return its report."""
    extension = directory / "clanker-attention.mjs"  # node needs .mjs for ES modules
    extension.write_bytes(combined(EXTENSION))  # the file prepare() stages
    shim = directory / "shim.mjs"
    shim.write_text(SHIM)
    script = directory / "steps.json"
    script.write_text(json.dumps(steps))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CLANKER_ATTENTION_")}
    environ.update(env)
    done = subprocess.run([runtime, str(shim), extension.as_uri(), str(script)], env=environ,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def attention_env(socket_path: Path | str, terminal: str = "t-1",
                  token: str = TOKEN) -> dict[str, str]:
    return {"CLANKER_ATTENTION_SOCKET": str(socket_path), "CLANKER_ATTENTION_TERMINAL": terminal,
            "CLANKER_ATTENTION_TOKEN": token}


def step(event: dict[str, Any], ctx: dict[str, Any] | None = None,
         **ctx_fields: Any) -> dict[str, Any]:
    context = copy.deepcopy(ctx if ctx is not None else BUILT["main_ctx"])
    context.update(ctx_fields)
    return {"event": copy.deepcopy(event), "ctx": context}


def agent_start(**ctx_fields: Any) -> dict[str, Any]:
    return step({"type": "agent_start"}, **ctx_fields)


def session_stop(stop_reason: str | None = "stop", **ctx_fields: Any) -> dict[str, Any]:
    event = copy.deepcopy(BUILT["session_stop"])
    if stop_reason is None:
        del event["last_assistant_message"]
    else:
        event["last_assistant_message"]["stopReason"] = stop_reason
    return step(event, **ctx_fields)


def summary(envelopes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["event"], e["sessionId"], e.get("nativeEvent"), e.get("cwd"), "turnId" in e)
            for e in envelopes]


# -- the extension, run for real -------------------------------------------------------------


@needs_runtime
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_live_session_maps_to_the_lifecycle(runtime: str, short_dir: Path,
                                                grid: GridDouble) -> None:
    report = run_extension(runtime, short_dir, LIVE["switch"], attention_env(grid.path))
    assert report["registered"] == ["agent_start", "session_branch", "session_shutdown",
                                    "session_start", "session_stop", "session_switch"]
    assert set(report["results"]) == {"undefined"}  # nothing is ever asked of omp
    assert summary(grid.envelopes()) == [
        ("location_changed", S1, "session_start", CWD, False),
        ("turn_started", S1, "agent_start", CWD, True),
        # /new: the old session ends (no cwd: it is the new session's), the new one is located
        ("session_ended", S1, "session_switch", None, False),
        ("location_changed", S2, "session_switch", CWD, False),
        ("turn_started", S2, "agent_start", CWD, True),
        ("session_ended", S2, "session_shutdown", CWD, False),
    ]
    turns = [e["turnId"] for e in grid.envelopes() if "turnId" in e]
    assert len(set(turns)) == 2 and all(t.split("-")[0].isdigit() for t in turns)
    assert all(e["scope"] == "root" for e in grid.envelopes())
    assert {r["terminal"] for r in grid.requests} == {"t-1"}
    # The live deliveries of the real omp run have the same shape.
    live = json.loads((FIXTURES / "live-deliveries.json").read_text())["switch"]
    assert summary([e for r in live for e in r["envelopes"]]) == summary(grid.envelopes())


@needs_runtime
@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize(("run", "settled"), [("completed", "turn_completed"),
                                              ("failed", "turn_failed")])
def test_the_live_turns_settle_on_session_stop(runtime: str, short_dir: Path, grid: GridDouble,
                                               run: str, settled: str) -> None:
    report = run_extension(runtime, short_dir, LIVE[run], attention_env(grid.path))
    assert set(report["results"]) == {"undefined"}
    session = LIVE[run][0]["ctx"]["sessionId"]
    assert summary(grid.envelopes()) == [
        ("location_changed", session, "session_start", CWD, False),
        ("turn_started", session, "agent_start", CWD, True),
        (settled, session, "session_stop", CWD, True),  # agent_end after it changes nothing
        ("session_ended", session, "session_shutdown", CWD, False),
    ]
    live = json.loads((FIXTURES / "live-deliveries.json").read_text())[run]
    assert summary([e for r in live for e in r["envelopes"]]) == summary(grid.envelopes())


@needs_runtime
@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize(("stop_reason", "settled"), [
    ("stop", "turn_completed"), ("toolUse", "turn_completed"), (None, "turn_completed"),
    ("error", "turn_failed"), ("aborted", "turn_interrupted"),
])
def test_main_session_stop_settles_the_turn(runtime: str, short_dir: Path, grid: GridDouble,
                                            stop_reason: str | None, settled: str) -> None:
    run_extension(runtime, short_dir, [
        agent_start(),
        step(BUILT["agent_end"]),  # never a settle
        session_stop(stop_reason),
        session_stop(stop_reason),  # a second stop has no open turn
    ], attention_env(grid.path))
    started, ended = grid.envelopes()
    assert (started["event"], ended["event"]) == ("turn_started", settled)
    assert ended["turnId"] == started["turnId"] and ended["sessionId"] == S1
    assert ended["nativeEvent"] == "session_stop" and ended["cwd"] == CWD
    assert "errorMessage" not in json.dumps(grid.requests)


@needs_runtime
@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("ctx_fields", [
    BUILT["subagent_ctx"],                                   # 18.2.3: a sub-agent's session
    {**BUILT["main_ctx"], "mode": "print", "hasUI": False},  # omp -p: kind unknown
    {**BUILT["main_ctx"], "mode": "rpc", "hasUI": True},
    {**BUILT["main_ctx"], "agent": {"kind": "sub"}},         # a version naming the kind
    {**BUILT["main_ctx"], "agent": {"kind": "advisor"}},
    {**BUILT["main_ctx"], "agent": None},
    {**BUILT["main_ctx"], "agent": {}},
])
def test_sub_agents_and_unknown_kinds_never_report(runtime: str, short_dir: Path,
                                                   grid: GridDouble,
                                                   ctx_fields: dict[str, Any]) -> None:
    other = dict(ctx_fields)
    run_extension(runtime, short_dir, [
        step({"type": "session_start"}, other),
        step({"type": "agent_start"}, other),
        session_stop("stop", **other),
        step(BUILT["session_branch"], other),
        step({"type": "session_shutdown"}, other),
    ], attention_env(grid.path))
    assert grid.requests == []


@needs_runtime
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_sub_agent_inside_a_main_turn_changes_nothing(runtime: str, short_dir: Path,
                                                        grid: GridDouble) -> None:
    sub = BUILT["subagent_ctx"]
    run_extension(runtime, short_dir, [
        agent_start(),
        step({"type": "agent_start"}, sub),
        step({"type": "session_shutdown"}, sub),  # the sub-agent's session is disposed
        session_stop(),
    ], attention_env(grid.path))
    assert [e["event"] for e in grid.envelopes()] == ["turn_started", "turn_completed"]
    assert {e["sessionId"] for e in grid.envelopes()} == {S1}


@needs_runtime
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_named_main_kind_reports_in_any_mode(runtime: str, short_dir: Path,
                                               grid: GridDouble) -> None:
    main = {**BUILT["main_ctx"], "mode": "print", "hasUI": False, "agent": {"kind": "main"}}
    run_extension(runtime, short_dir, [step({"type": "agent_start"}, main),
                                       session_stop("stop", **main)], attention_env(grid.path))
    assert [e["event"] for e in grid.envelopes()] == ["turn_started", "turn_completed"]


@needs_runtime
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_branch_or_an_unannounced_session_change_ends_the_old_root(
        runtime: str, short_dir: Path, grid: GridDouble) -> None:
    s3 = "01a2f00d-0000-7000-8000-000000000003"
    run_extension(runtime, short_dir, [
        step({"type": "session_start"}),
        step(BUILT["session_branch"], sessionId=S2),
        agent_start(sessionId=s3),  # the id changed with no event: that session ended
        session_stop(sessionId=s3),
        step(BUILT["session_branch"], sessionId=s3, cwd="/home/dev/src/other"),  # same id
    ], attention_env(grid.path))
    assert summary(grid.envelopes()) == [
        ("location_changed", S1, "session_start", CWD, False),
        ("session_ended", S1, "session_branch", None, False),
        ("location_changed", S2, "session_branch", CWD, False),
        ("session_ended", S2, "agent_start", None, False),
        ("turn_started", s3, "agent_start", CWD, True),
        ("turn_completed", s3, "session_stop", CWD, True),
        ("location_changed", s3, "session_branch", "/home/dev/src/other", False),
    ]


@needs_runtime
@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("cwd", [
    "relative/dir", "/bad\x07dir", "/" + "x" * 1024, "/a\u2028b", None, 42,
])
def test_an_unusable_cwd_is_left_out(runtime: str, short_dir: Path, grid: GridDouble,
                                     cwd: Any) -> None:
    run_extension(runtime, short_dir, [step({"type": "session_start"}, cwd=cwd),
                                       agent_start(cwd=cwd)], attention_env(grid.path))
    assert [(e["event"], "cwd" in e) for e in grid.envelopes()] == [("turn_started", False)]


@needs_runtime
@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("session", ["", "x" * 257, "bad\nid", None, 7])
def test_an_unusable_session_id_reports_nothing(runtime: str, short_dir: Path,
                                                grid: GridDouble, session: Any) -> None:
    run_extension(runtime, short_dir, [step({"type": "session_start"}, sessionId=session),
                                       agent_start(sessionId=session),
                                       session_stop(sessionId=session)],
                  attention_env(grid.path))
    assert grid.requests == []


@needs_runtime
@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("missing", ["CLANKER_ATTENTION_SOCKET", "CLANKER_ATTENTION_TERMINAL",
                                     "CLANKER_ATTENTION_TOKEN"])
def test_without_the_launch_credentials_it_is_inert(runtime: str, short_dir: Path,
                                                    grid: GridDouble, missing: str) -> None:
    env = attention_env(grid.path)
    del env[missing]
    report = run_extension(runtime, short_dir, LIVE["switch"], env)
    assert report == {"registered": [], "results": []}
    assert grid.requests == []


@needs_runtime
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_grid_that_is_down_leaves_omp_alone(runtime: str, short_dir: Path) -> None:
    report = run_extension(runtime, short_dir, LIVE["switch"] * 3,
                           attention_env(short_dir / "nobody.sock"))
    assert set(report["results"]) == {"undefined"}


@needs_runtime
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_revoked_credential_stops_deliveries(runtime: str, short_dir: Path,
                                               grid: GridDouble) -> None:
    run_extension(runtime, short_dir, LIVE["switch"], attention_env(grid.path, token="cd" * 32))
    assert len(grid.requests) == 1  # refused once, then silent


@needs_runtime
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_deliveries_stay_ordered_and_bounded(runtime: str, short_dir: Path,
                                             grid: GridDouble) -> None:
    turns = [s for _ in range(40) for s in (agent_start(), session_stop())]
    run_extension(runtime, short_dir, turns, attention_env(grid.path))
    events = [e["event"] for e in grid.envelopes()]
    assert events == ["turn_started", "turn_completed"] * 40
    ids = [e["turnId"] for e in grid.envelopes()]
    assert ids[0::2] == ids[1::2] and len(set(ids)) == 40


@needs_runtime
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_an_overwhelmed_queue_stops_for_good(runtime: str, short_dir: Path,
                                             grid: GridDouble) -> None:
    # 400 envelopes in one synchronous burst: the first is already on its way, the
    # rest queue up, and past 256 queued the extension drops them and stops for good.
    turns = [s for _ in range(200) for s in (agent_start(), session_stop())]
    run_extension(runtime, short_dir, turns, attention_env(grid.path))
    assert [e["event"] for e in grid.envelopes()] == ["turn_started"]


# -- the extension against the real grid ------------------------------------------------------


@needs_runtime
def test_the_real_grid_accepts_what_the_extension_sends(short_dir: Path) -> None:
    runtime = RUNTIMES[0]
    sub = BUILT["subagent_ctx"]

    async def main() -> tuple[list[dict[str, Any]], Attention, Any]:
        async with Grid(short_dir / "grid.sock") as real:
            registration = real.register(harness="omp", cwd=CWD, launcher_pid=os.getpid())
            env = attention_env(real.socket_path, registration.terminal, registration.token)
            await asyncio.to_thread(run_extension, runtime, short_dir, [
                step({"type": "session_start"}),
                agent_start(),
                step({"type": "agent_start"}, sub),
                session_stop(),
            ], env)
            explained = real.broker.explain(registration.terminal)
            revision = real.broker.snapshot(registration.terminal)
            assert explained is not None and revision is not None
            recent: list[dict[str, Any]] = explained["recent"]  # type: ignore[assignment]
            return recent, derive_attention(revision, 0), revision.snapshot

    recent, attention, snapshot = asyncio.run(main())
    assert [(r["event"], r["decision"]) for r in recent if r["event"] != "register"] == [
        ("location_changed", "accepted"), ("turn_started", "accepted"),
        ("turn_completed", "accepted"),
    ]
    assert attention is Attention.DONE
    assert snapshot is not None and snapshot.root_session_id == S1


# -- prepare() ---------------------------------------------------------------------------------


def context(tmp_path: Path, argv: tuple[str, ...], flags: tuple[str, ...] = (),
            env: dict[str, str] | None = None) -> AttachmentContext:
    private = tmp_path / "private"
    private.mkdir(mode=0o700, exist_ok=True)
    return attachment_context(argv=argv, env=attention_env("/tmp/g.sock") if env is None else env,
                            cwd=CWD, private_dir=private, user_flags=flags)


def test_prepare_loads_a_private_copy_right_after_launch(tmp_path: Path) -> None:
    flags = ("--thinking", "high", "-e", "/home/dev/mine.ts", "models")
    plan = OmpLaunch().build(LaunchRequest(
        operation=LaunchOperation.RESUME, model="loopback/probe-model",
        session=SessionTarget(native_id=S1), user_flags=flags, cwd=CWD))
    prepared = OmpAttention().prepare(context(tmp_path, plan.argv, flags))
    assert prepared is not None and dict(prepared.env) == {}
    copy_path = tmp_path / "private" / EXTENSION_FILE_NAME
    assert prepared.argv == ("omp", "launch", "--extension", str(copy_path),
                             "--model", "loopback/probe-model", "--resume", S1, *flags)
    assert copy_path.read_bytes() == combined(EXTENSION)
    assert copy_path.stat().st_mode & 0o777 == 0o600


def test_prepare_without_a_subcommand_puts_it_after_the_executable(tmp_path: Path) -> None:
    prepared = OmpAttention().prepare(context(tmp_path, ("omp", "--model", "m")))
    assert prepared is not None and prepared.argv is not None
    assert prepared.argv[:2] == ("omp", "--extension")


@pytest.mark.parametrize("flags", [
    ("--trusted-extension", "/home/dev/t.ts"), ("--trusted-extension=/home/dev/t.ts",),
    ("--model", "m", "--trusted-extension", "/home/dev/t.ts"),
])
def test_a_user_who_decides_extensions_is_a_conflict(tmp_path: Path,
                                                     flags: tuple[str, ...]) -> None:
    plan = OmpAttention().prepare(context(tmp_path, ("omp", "launch", *flags), flags))
    assert isinstance(plan, Declined) and "--trusted-extension" in plan.reason
    assert list((tmp_path / "private").iterdir()) == []


@pytest.mark.parametrize("flags", [
    ("--no-extensions",),  # stops discovery only: omp still loads an explicit --extension
    ("-e", "/home/dev/mine.ts", "--hook", "/home/dev/h.ts"),
    ("--", "--trusted-extension", "/x"),  # prompt words
])
def test_flags_that_leave_explicit_extensions_alone_are_no_conflict(
        tmp_path: Path, flags: tuple[str, ...]) -> None:
    assert OmpAttention().prepare(context(tmp_path, ("omp", "launch", *flags), flags)) is not None


def test_a_launch_without_the_attention_environment_fails_loudly(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="CLANKER_ATTENTION_TOKEN"):
        OmpAttention().prepare(context(tmp_path, ("omp", "launch"), env={
            "CLANKER_ATTENTION_SOCKET": "/tmp/g.sock", "CLANKER_ATTENTION_TERMINAL": "t"}))


_WORD = st.text(alphabet="abcdefxyz-=/._ ", min_size=1, max_size=12).filter(
    lambda w: w != "--" and not w.startswith("--trusted-extension"))


@given(flags=st.lists(_WORD, max_size=8))
def test_user_flags_stay_last_together_and_in_order(flags: list[str]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        plan = OmpLaunch().build(LaunchRequest(user_flags=tuple(flags), cwd=CWD))
        prepared = OmpAttention().prepare(context(Path(directory), plan.argv, tuple(flags)))
        assert prepared is not None and prepared.argv is not None
        assert prepared.argv[:4] == ("omp", "launch", "--extension",
                                     str(Path(directory) / "private" / EXTENSION_FILE_NAME))
        assert prepared.argv[4:] == plan.argv[2:]
        assert list(prepared.argv[len(prepared.argv) - len(flags):]) == flags


def test_the_extension_ships_inside_the_package() -> None:
    from importlib.resources import files

    shipped = files("clanker_omp") / "attention_extension.js"
    assert shipped.is_file() and shipped.read_bytes() == EXTENSION.read_bytes()


# -- the real CLI, when it is installed --------------------------------------------------------


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("omp") is None, reason="omp is not installed")
@pytest.mark.parametrize("flags", [(), ("--no-extensions",)])
def test_real_omp_loads_the_extension_and_reports_its_session(
        tmp_path: Path, short_dir: Path, flags: tuple[str, ...]) -> None:
    """The interactive TUI in a pseudo-terminal, with a refused loopback provider: omp
    loads the extension, whose session_start reaches the real grid. No prompt is sent.
    ``--no-extensions`` stops discovery only: the explicit extension still loads."""
    home, work = tmp_path / "home", tmp_path / "work"
    agent = home / ".omp" / "agent"
    agent.mkdir(parents=True)
    work.mkdir()
    shutil.copy(OMP_FIXTURES / "loopback-models.yml", agent / "models.yml")
    shutil.copy(OMP_FIXTURES / "loopback-config.yml", agent / "config.yml")
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("CLANKER_", "PI_", "OMP_", "XDG_"))}
    environ.update(HOME=str(home), TERM="xterm-256color")

    async def main() -> list[dict[str, Any]]:
        async with Grid(short_dir / "grid.sock") as real:
            registration = real.register(harness="omp", cwd=str(work), launcher_pid=os.getpid())
            environ.update(attention_env(real.socket_path, registration.terminal,
                                         registration.token))
            argv = ("omp", "launch", "--model", "loopback/probe-model", *flags)
            plan = OmpAttention().prepare(attachment_context(
                argv=argv, env=environ, cwd=str(work), private_dir=short_dir, user_flags=flags))
            assert isinstance(plan, AttachmentPlan) and plan.argv is not None
            stop = threading.Event()
            tui = threading.Thread(target=_run_tui, args=(plan.argv, environ, work, stop))
            tui.start()
            recent: list[dict[str, Any]] = []
            try:
                async with asyncio.timeout(60):  # a bound, not a timed assertion
                    while tui.is_alive() and not any(
                            r["event"] == "location_changed" for r in recent):
                        await asyncio.sleep(0.1)
                        explained = real.broker.explain(registration.terminal)
                        assert explained is not None
                        recent = list(explained["recent"])  # type: ignore[call-overload]
            finally:
                stop.set()
                await asyncio.to_thread(tui.join)
            return recent

    recent = asyncio.run(main())
    assert ("location_changed", "session_start", "accepted") in [
        (r["event"], r["nativeEvent"], r["decision"]) for r in recent]


def _run_tui(argv: tuple[str, ...], environ: dict[str, str], work: Path,
             stop: threading.Event) -> None:
    """Run omp's TUI in a pseudo-terminal until ``stop``, then terminate it."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.chdir(work)
        os.execvpe(argv[0], list(argv), environ)
    try:
        while not stop.is_set():
            ready, _, _ = select.select([fd], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(fd, 65536)
            except OSError:
                return
            if b"\x1b[c" in data:  # answer the terminal's device-attributes query
                os.write(fd, b"\x1b[?62;22c")
    finally:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        os.close(fd)
