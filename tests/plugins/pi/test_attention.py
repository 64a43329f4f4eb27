"""Pi attention: the launch-owned extension, run for real under ``node`` against a grid
socket double and the real broker, and the ``--extension`` wiring
(tests/fixtures/pi/attention: events captured live from pi 0.73.1 and 1.3.0, or built
from the 1.3.0 type definitions)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import clanker_pi
from clanker.attention.broker import Broker, Decision
from clanker.attention.capability import (
    AttachmentContext,
    AttachmentPlan,
    Declined,
)
from clanker.attention.envelope import parse_envelope
from clanker.attention.extension_source import combined
from clanker.testing.attention import GridDouble, running_grid
from clanker.testing.doubles import attachment_context
from clanker_pi.attention import EXTENSION, EXTENSION_NAME, SUBCOMMANDS, PiAttention
from tests.helpers import GRID_TOKEN

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "pi" / "attention"
LOOPBACK_MODELS = FIXTURES.parent / "loopback-models.json"
SESSION = "00000000-0000-7000-8000-000000000001"
SESSION_2 = "00000000-0000-7000-8000-000000000002"
CWD = "/home/u/src/repo"
TOKEN = GRID_TOKEN  # what the grid fixture takes
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")



def grid_env(grid: GridDouble) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "CLANKER_ATTENTION_SOCKET": str(grid.path),
        "CLANKER_ATTENTION_TERMINAL": "term-1",
        "CLANKER_ATTENTION_TOKEN": TOKEN,
        "CLANKER_ATTENTION_STATE": "/nonexistent",
        "CLANKER_ATTENTION_COMMAND": "/nonexistent",
    }


def replay(fixture: str, root: Path, env: dict[str, str], *, version: str | None,
           package: str = "@mariozechner/pi-coding-agent") -> dict[str, object]:
    """Run the real extension file under node, driven by the shim, as pi ``version``."""
    home = root / f"pkg-{version}-{len(list(root.iterdir()))}"
    (home / "dist").mkdir(parents=True)
    if version is not None:
        (home / "package.json").write_text(json.dumps({"name": package, "version": version}))
    shutil.copyfile(FIXTURES / "replay.mjs", home / "dist" / "replay.mjs")
    extension = home / EXTENSION_NAME
    extension.write_bytes(combined(EXTENSION))  # the file prepare() stages
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(home / "dist" / "replay.mjs"), str(extension), str(FIXTURES / fixture), CWD],
        env=env, capture_output=True, text=True, timeout=30, check=True,
    )
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def summary(envelopes: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return [(e["event"], e.get("nativeEvent")) for e in envelopes]


def check_with_broker(envelopes: list[dict[str, object]]) -> list[Decision]:
    """Every envelope parses, and the real broker accepts the sequence."""
    broker = Broker()
    broker.register("term-1")
    return [broker.apply("term-1", parse_envelope(e)) for e in envelopes]


# -- the mapping, per pi version ------------------------------------------------------------


@needs_node
@pytest.mark.parametrize(
    ("fixture", "version", "settle"),
    [
        ("live-0.73.1-stub-text.jsonl", "0.73.1", ("turn_completed", "agent_end")),
        ("live-0.73.1-http-400.jsonl", "0.73.1", ("turn_failed", "agent_end")),
        ("built-0.73.1-aborted.jsonl", "0.73.1", ("turn_interrupted", "agent_end")),
        ("live-1.3.0-stub-text.jsonl", "1.3.0", ("turn_completed", "agent_settled")),
        ("live-1.3.0-http-400.jsonl", "1.3.0", ("turn_failed", "agent_settled")),
        ("live-1.3.0-retry-then-text.jsonl", "1.3.0", ("turn_completed", "agent_settled")),
        ("built-1.3.0-aborted.jsonl", "1.3.0", ("turn_interrupted", "agent_settled")),
        ("built-1.3.0-compact-failed.jsonl", "1.3.0", ("turn_failed", "agent_settled")),
        ("built-1.0.3-settled-without-aborted.jsonl", "1.0.3",
         ("turn_interrupted", "agent_settled")),
    ],
)
def test_one_turn_settles_once_from_the_right_event(
    fixture: str, version: str, settle: tuple[str, str], grid: GridDouble, short_dir: Path
) -> None:
    replay(fixture, short_dir, grid_env(grid), version=version)
    envelopes = grid.envelopes()
    settles = [s for s in summary(envelopes)
               if str(s[0]).startswith("turn_") and s[0] != "turn_started"]
    assert settles == [settle]
    assert summary(envelopes)[:3] == [
        ("session_started", "session_start"),
        ("location_changed", "session_start"),
        ("turn_started", "agent_start"),
    ]
    started = envelopes[2]
    assert started["sessionId"] == SESSION and started["cwd"] == CWD and started["scope"] == "root"
    settled = next(e for e in envelopes if e["event"] == settle[0])
    assert settled["turnId"] == started["turnId"] and "cwd" not in settled
    assert all(d is Decision.ACCEPTED for d in check_with_broker(envelopes))


@needs_node
def test_a_retry_is_the_same_turn_where_agent_settled_exists(
    grid: GridDouble, short_dir: Path
) -> None:
    # Live 1.3.0: error, agent_end, a second agent_start, success, agent_end, agent_settled.
    replay("live-1.3.0-retry-then-text.jsonl", short_dir, grid_env(grid), version="1.3.0")
    events = [e["event"] for e in grid.envelopes()]
    assert events.count("turn_started") == 1
    assert events[-2:] == ["turn_completed", "session_ended"]


@needs_node
def test_an_unknown_version_settles_on_agent_end_until_agent_settled_is_seen(
    grid: GridDouble, short_dir: Path
) -> None:
    # No package.json above the entry script: the version is unknown. The first run's
    # agent_end settles; the agent_settled that follows proves the newer events exist.
    replay("live-1.3.0-retry-then-text.jsonl", short_dir, grid_env(grid), version=None)
    identity = ("session_started", "location_changed")
    assert [s for s in summary(grid.envelopes()) if s[0] not in identity] == [
        ("turn_started", "agent_start"), ("turn_failed", "agent_end"),
        ("turn_started", "agent_start"), ("turn_completed", "agent_end"),
        ("session_ended", "session_shutdown"),
    ]


@needs_node
def test_a_foreign_package_is_an_unknown_version(grid: GridDouble, short_dir: Path) -> None:
    replay("live-1.3.0-stub-text.jsonl", short_dir, grid_env(grid), version="18.2.3",
           package="@oh-my-pi/pi-coding-agent")
    assert ("turn_completed", "agent_end") in summary(grid.envelopes())


@needs_node
def test_foreground_dialogs_are_input_waits_and_idle_ones_are_not(
    grid: GridDouble, short_dir: Path
) -> None:
    replay("built-1.3.0-dialogs.jsonl", short_dir, grid_env(grid), version="1.3.0")
    envelopes = grid.envelopes()
    assert summary(envelopes) == [
        ("session_started", "session_start"), ("location_changed", "session_start"),
        ("turn_started", "agent_start"),
        ("input_requested", "ui_prompt_start"), ("input_resolved", "ui_prompt_end"),
        ("input_requested", "ui_prompt_start"),
        ("turn_completed", "agent_settled"),
        ("session_ended", "session_shutdown"),
    ]
    first, resolved, second = envelopes[3], envelopes[4], envelopes[5]
    assert first["inputId"] == resolved["inputId"] != second["inputId"]
    assert first["turnId"] == envelopes[2]["turnId"]
    assert "title" not in json.dumps(envelopes)
    decisions = check_with_broker(envelopes)
    assert all(d is Decision.ACCEPTED for d in decisions)


@needs_node
def test_a_session_switch_ends_the_old_root_and_binds_the_new_one(
    grid: GridDouble, short_dir: Path
) -> None:
    replay("built-1.3.0-session-switch.jsonl", short_dir, grid_env(grid), version="1.3.0")
    envelopes = grid.envelopes()
    assert [(e["event"], e["sessionId"]) for e in envelopes[-3:]] == [
        ("session_ended", SESSION), ("session_started", SESSION_2), ("location_changed", SESSION_2),
    ]  # the reload shutdown that follows is no boundary
    decisions = check_with_broker(envelopes)
    assert decisions[-2] is Decision.ACCEPTED  # the new root binds
    assert decisions[-1] is Decision.DUPLICATE  # same directory: no move
    assert all(d is Decision.ACCEPTED for d in decisions[:-1])


@needs_node
def test_nothing_private_reaches_the_grid_and_the_credential_leaves_the_environment(
    grid: GridDouble, short_dir: Path
) -> None:
    report = replay("live-1.3.0-http-400.jsonl", short_dir, grid_env(grid), version="1.3.0")
    assert report["env"] == []  # scrubbed from pi's environment once read
    for request in grid.requests:
        assert set(request) == {"v", "op", "terminal", "token", "envelopes"}
        assert request["op"] == "deliver" and request["token"] == TOKEN
    text = json.dumps(grid.envelopes())
    assert "<string>" not in text  # no message text, error text or title


@needs_node
@pytest.mark.parametrize("missing", ["CLANKER_ATTENTION_SOCKET", "CLANKER_ATTENTION_TOKEN",
                                     "CLANKER_ATTENTION_TERMINAL"])
def test_without_the_launch_variables_it_is_inert(
    missing: str, grid: GridDouble, short_dir: Path
) -> None:
    env = grid_env(grid)
    del env[missing]
    report = replay("live-0.73.1-stub-text.jsonl", short_dir, env, version="0.73.1")
    assert report["handled"] == [] and grid.requests == []


@needs_node
def test_a_grid_that_is_down_costs_nothing(short_dir: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""),
           "CLANKER_ATTENTION_SOCKET": str(short_dir / "no.sock"),
           "CLANKER_ATTENTION_TERMINAL": "term-1", "CLANKER_ATTENTION_TOKEN": TOKEN}
    report = replay("live-1.3.0-retry-then-text.jsonl", short_dir, env, version="1.3.0")
    handled = report["handled"]
    assert isinstance(handled, list) and "agent_settled" in handled  # every handler returned


@needs_node
def test_a_revoked_credential_stops_delivery(short_dir: Path) -> None:
    double = GridDouble(short_dir / "r.sock", answer={"v": 1, "ok": False, "error": "unauthorized"})
    try:
        replay("live-1.3.0-stub-text.jsonl", short_dir, grid_env(double), version="1.3.0")
    finally:
        double.close()
    assert len(double.requests) == 1


@needs_node
@pytest.mark.parametrize(
    ("fixture", "version", "attention"),
    [
        ("live-1.3.0-stub-text.jsonl", "1.3.0", "done"),
        ("live-1.3.0-http-400.jsonl", "1.3.0", "failed"),
        ("built-1.3.0-aborted.jsonl", "1.3.0", "idle"),
        ("live-0.73.1-stub-text.jsonl", "0.73.1", "done"),
    ],
)
def test_the_real_grid_accepts_the_turn_and_status_follows(
    fixture: str, version: str, attention: str, short_dir: Path
) -> None:
    with running_grid(short_dir / "grid.sock") as client:
        registration = client.register(harness="pi", workspace=CWD, cwd=CWD,
                                       launcher_pid=os.getpid())
        env = {"PATH": os.environ.get("PATH", ""),
               "CLANKER_ATTENTION_SOCKET": str(short_dir / "grid.sock"),
               "CLANKER_ATTENTION_TERMINAL": registration.terminal,
               "CLANKER_ATTENTION_TOKEN": registration.token}
        # Without the session_shutdown line: the terminal stays bound to the root.
        lines = (FIXTURES / fixture).read_text().splitlines()
        trimmed = short_dir / fixture
        trimmed.write_text("\n".join(line for line in lines if "session_shutdown" not in line))
        home = short_dir / "pkg"
        (home / "dist").mkdir(parents=True)
        (home / "package.json").write_text(
            json.dumps({"name": "@mariozechner/pi-coding-agent", "version": version}))
        shutil.copyfile(FIXTURES / "replay.mjs", home / "dist" / "replay.mjs")
        extension = short_dir / EXTENSION_NAME
        extension.write_bytes(combined(EXTENSION))  # the file prepare() stages
        assert NODE is not None
        subprocess.run([NODE, str(home / "dist" / "replay.mjs"), str(extension),
                        str(trimmed), CWD],
                       env=env, capture_output=True, text=True, timeout=30, check=True)
        [entry] = [e for e in client.list_terminals() if e.terminal == registration.terminal]
    assert entry.attention == attention
    snapshot = entry.revision["snapshot"]
    assert snapshot["rootSessionId"] == SESSION
    assert entry.location == CWD


# -- the wiring -----------------------------------------------------------------------------


def context(
    tmp_path: Path, argv: tuple[str, ...], user_flags: tuple[str, ...] = ()
) -> AttachmentContext:
    private = tmp_path / "private"
    private.mkdir(mode=0o700, exist_ok=True)
    return attachment_context(
        argv=argv, env={"CLANKER_ATTENTION_SOCKET": "/s", "CLANKER_ATTENTION_TERMINAL": "t",
                        "CLANKER_ATTENTION_TOKEN": TOKEN},
        cwd=CWD, private_dir=private, user_flags=user_flags,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ("pi",),
        ("pi", "--model", "loopback/probe-model", "--session", "/s/x.jsonl",
         "--no-extensions", "-e", "mine.ts"),
        ("pi", "--fork", "/s/x.jsonl", "fix", "it"),
        ("pi", "installation", "notes"),
        ("pi", "--model", "m", "list"),  # not first: a prompt word, as pi reads it
    ],
)
def test_the_extension_comes_first_and_the_rest_keeps_its_order(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    ctx = context(tmp_path, argv, user_flags=argv[1:])
    plan = PiAttention().prepare(ctx)
    assert isinstance(plan, AttachmentPlan) and plan.argv is not None
    target = ctx.private_dir / EXTENSION_NAME
    assert plan.argv == (argv[0], "--extension", str(target), *argv[1:])
    assert target.read_bytes() == combined(EXTENSION)
    assert (target.stat().st_mode & 0o777) == 0o600
    assert dict(plan.env) == {}


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rest=st.lists(st.text(min_size=0, max_size=12), max_size=8))
def test_the_user_flags_stay_contiguous_and_in_order(tmp_path: Path, rest: list[str]) -> None:
    # A fresh private directory each example, as each launch has its own.
    with tempfile.TemporaryDirectory(dir=tmp_path) as directory:
        ctx = context(Path(directory), ("pi", *rest), user_flags=tuple(rest))
        plan = PiAttention().prepare(ctx)
    if rest and rest[0] in SUBCOMMANDS:
        assert isinstance(plan, Declined)
        return
    assert isinstance(plan, AttachmentPlan) and plan.argv is not None
    assert plan.argv[:2] == ("pi", "--extension")
    assert plan.argv[3:] == tuple(rest)


@pytest.mark.parametrize("word", sorted(SUBCOMMANDS))
def test_a_subcommand_runs_no_agent_so_attention_declines(tmp_path: Path, word: str) -> None:
    ctx = context(tmp_path, ("pi", word, "--help"), user_flags=(word, "--help"))
    assert isinstance(PiAttention().prepare(ctx), Declined)
    assert list(ctx.private_dir.iterdir()) == []


def test_a_launch_without_a_grid_connection_is_an_operational_error(tmp_path: Path) -> None:
    private = tmp_path / "p"
    private.mkdir()
    ctx = attachment_context(argv=("pi",), env={}, cwd=CWD, private_dir=private)
    with pytest.raises(ValueError, match="lacks CLANKER_ATTENTION_SOCKET, "
                                         "CLANKER_ATTENTION_TERMINAL, CLANKER_ATTENTION_TOKEN"):
        PiAttention().prepare(ctx)


def test_the_extension_ships_in_the_package() -> None:
    assert EXTENSION.parent == Path(clanker_pi.__file__).parent
    assert EXTENSION.is_file()


# -- the real CLI, when it is installed -----------------------------------------------------


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("pi") is None, reason="pi is not installed")
def test_real_pi_loads_the_extension_and_reports_one_turn(
    short_dir: Path, grid: GridDouble
) -> None:
    """The installed pi, a refused loopback provider (no model anywhere): the extension
    loads from the launch-owned copy and reports start, settle and the session end."""
    agent = short_dir / "agent"
    agent.mkdir()
    shutil.copy(LOOPBACK_MODELS, agent / "models.json")
    (agent / "settings.json").write_text('{"retry":{"enabled":false}}')
    work = short_dir / "work"
    work.mkdir()
    ctx = context(short_dir, ("pi", "--offline", "--mode", "json", "--no-session",
                              "--model", "loopback/probe-model", "-p", "hi"))
    plan = PiAttention().prepare(ctx)
    assert isinstance(plan, AttachmentPlan) and plan.argv is not None
    env = {**grid_env(grid), "HOME": str(short_dir), "PI_CODING_AGENT_DIR": str(agent)}
    pi = shutil.which("pi")
    assert pi is not None
    done = subprocess.run([pi, *plan.argv[1:]], cwd=work, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    events = [e["event"] for e in grid.envelopes()]
    assert events == ["session_started", "location_changed", "turn_started", "turn_failed",
                      "session_ended"]
    assert grid.envelopes()[1]["cwd"] == str(work.resolve())
    assert all(d is Decision.ACCEPTED for d in check_with_broker(grid.envelopes()))
