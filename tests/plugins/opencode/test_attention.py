"""OpenCode attention: launch preparation, and the real plugin file run under Node.

The plugin (``attention_plugin.mjs``) is run by ``node`` exactly as clanker
installs it (copied by ``prepare()``), fed the bus events captured from
opencode-ai 1.18.33 (``tests/fixtures/opencode/attention``) through its
``event`` hook, with a stand-in for OpenCode's ``client.session.get``. It
delivers to a socket double speaking the grid protocol (to see the exact
envelopes) or to the real :class:`clanker.grid.server.Grid` (to see the states).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import shutil
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import clanker_opencode
from clanker.attention.capability import (
    AttachmentContext,
    AttachmentPlan,
    Declined,
)
from clanker.attention.extension_source import combined
from clanker.grid.server import Grid
from clanker.testing.attention import GridDouble
from clanker.testing.doubles import attachment_context
from clanker_opencode.attention import (
    CONFIG_VARIABLE,
    PLUGIN_FILE_NAME,
    PLUGIN_SOURCE,
    OpenCodeAttention,
    plugin_config,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode" / "attention"
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")

ROOT = "ses_dd0000000001FakeId01000000"  # live-run-permission.json
PERMISSION = "per_dd0000000001FakeId01000000"
TASK_ROOT = "ses_dd0000000002FakeId02000000"  # live-run-subagent.json
TASK_CHILD = "ses_dd0000000003FakeId03000000"
ERROR_ROOT = "ses_dd0000000004FakeId04000000"  # live-run-error.json
CWD = "/home/user/project"
FALLBACK = "/home/user/fallback"
CREDENTIALS = {
    "CLANKER_ATTENTION_SOCKET": "/tmp/grid.sock",
    "CLANKER_ATTENTION_TERMINAL": "t-0000000000000000",
    "CLANKER_ATTENTION_TOKEN": "0" * 64,
    "CLANKER_ATTENTION_STATE": "/tmp/state",
    "CLANKER_ATTENTION_COMMAND": "/tmp/hook",
}

# What OpenCode hands a server plugin (1.18.33: client, project, worktree,
# directory, experimental_workspace, serverUrl, $), with a session store
# standing in for client.session.get: an id maps to its record, to "throw", or
# is absent (OpenCode answers {error}).
DRIVER = r"""
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [plugin, eventsFile, sessionsFile] = process.argv.slice(2);
const events = JSON.parse(readFileSync(eventsFile, "utf8"));
const sessions = JSON.parse(readFileSync(sessionsFile, "utf8"));
const asked = [];
const client = { session: { get: async ({ path }) => {
  asked.push(path.id);
  const record = sessions[path.id];
  if (record === "throw") throw new Error("unavailable");
  return record ? { data: record } : { error: { name: "NotFoundError" } };
} } };
const module = await import(pathToFileURL(plugin).href);
const hooks = await module.ClankerAttention({
  client, project: { id: "global", worktree: "/" }, directory: process.env.DRIVER_DIRECTORY,
  worktree: "/", experimental_workspace: { register() {} },
  serverUrl: new URL("http://localhost:4096"), $: undefined,
});
let returned = 0;
for (const event of events) {
  const result = hooks.event ? hooks.event({ event }) : undefined;
  if (result !== undefined) { await result; returned += 1; }
}
process.on("exit", () => {
  process.stdout.write(JSON.stringify({ exports: Object.keys(module), hooks: Object.keys(hooks),
                                        returned, asked }) + "\n");
});
"""


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def built(name: str) -> dict[str, Any]:
    event: dict[str, Any] = copy.deepcopy(fixture("schema-built-question.json")[name])
    return event


def context(tmp_path: Path, env: dict[str, str] | None = None,
            flags: tuple[str, ...] = ()) -> AttachmentContext:
    private = tmp_path / "private"
    private.mkdir(mode=0o700, exist_ok=True)
    return attachment_context(
        argv=("opencode", *flags), env={"PATH": "/usr/bin", **CREDENTIALS, **(env or {})},
        cwd=CWD, private_dir=private, user_flags=flags,
    )


def status(session: str, kind: str) -> dict[str, Any]:
    return {"type": "session.status",
            "properties": {"sessionID": session, "status": {"type": kind}}}


def root_record(session: str, directory: str = CWD) -> dict[str, Any]:
    return {"id": session, "slug": "s", "projectID": "global", "directory": directory,
            "title": "t", "version": "1.18.33", "time": {"created": 1, "updated": 1}}


# -- the grid: a socket double, and the real one -------------------------------------------------


def install(tmp_path: Path) -> Path:
    """The plugin file exactly where ``prepare()`` puts it."""
    plan = OpenCodeAttention().prepare(context(tmp_path))
    assert isinstance(plan, AttachmentPlan)
    return tmp_path / "private" / PLUGIN_FILE_NAME


async def run_plugin(plugin: Path, events: list[dict[str, Any]], sessions: dict[str, Any],
                     env: dict[str, str], work: Path) -> dict[str, Any]:
    assert NODE is not None
    (work / "driver.mjs").write_text(DRIVER)
    (work / "events.json").write_text(json.dumps(events))
    (work / "sessions.json").write_text(json.dumps(sessions))
    process = await asyncio.create_subprocess_exec(
        NODE, str(work / "driver.mjs"), str(plugin), str(work / "events.json"),
        str(work / "sessions.json"),
        env={"PATH": os.environ.get("PATH", ""), "DRIVER_DIRECTORY": FALLBACK, **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    assert err == b""
    result: dict[str, Any] = json.loads(out)
    return result


def to_double(tmp_path: Path, short_dir: Path, events: list[dict[str, Any]],
              sessions: dict[str, Any] | None = None, *,
              refuse: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    plugin = install(tmp_path)
    refusal = {"v": 1, "ok": False, "error": "unauthorized"} if refuse else None
    double = GridDouble(short_dir / "g.sock", token="ab" * 32, answer=refusal)
    try:
        result = asyncio.run(run_plugin(plugin, events, sessions or {}, {
            "CLANKER_ATTENTION_SOCKET": str(double.path),
            "CLANKER_ATTENTION_TERMINAL": "t-0123456789abcdef",
            "CLANKER_ATTENTION_TOKEN": "ab" * 32,
        }, tmp_path))
    finally:
        double.close()
    assert double.problems == []  # every request one the grid would take
    for request in double.requests:
        assert request["terminal"] == "t-0123456789abcdef" and request["token"] == "ab" * 32
    return double.envelopes(), result


def to_grid(tmp_path: Path, short_dir: Path, events: list[dict[str, Any]],
            sessions: dict[str, Any] | None = None,
            trusted: str | None = None) -> dict[str, Any]:
    """Run the plugin against the real grid; return the terminal's entry as JSON."""
    plugin = install(tmp_path)

    async def main() -> dict[str, Any]:
        async with Grid(short_dir / "grid.sock") as grid:
            registration = grid.register(harness="opencode", cwd=CWD, launcher_pid=os.getpid(),
                                         trusted_root_session_id=trusted)
            await run_plugin(plugin, events, sessions or {}, {
                "CLANKER_ATTENTION_SOCKET": str(grid.socket_path),
                "CLANKER_ATTENTION_TERMINAL": registration.terminal,
                "CLANKER_ATTENTION_TOKEN": registration.token,
            }, tmp_path)
            entry = grid.entry(registration.terminal)
            assert entry is not None
            return {"attention": entry.attention, "location": entry.location,
                    "revision": entry.revision}

    return asyncio.run(main())


def summary(envelopes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["event"], e["sessionId"], e.get("turnId"), e.get("inputId"), e.get("cwd"),
             e["nativeEvent"]) for e in envelopes]


# -- prepare() ------------------------------------------------------------------------------------


def test_prepare_installs_the_plugin_and_points_opencode_at_it(tmp_path: Path) -> None:
    ctx = context(tmp_path, flags=("--model", "x/y"))
    plan = OpenCodeAttention().prepare(ctx)
    assert isinstance(plan, AttachmentPlan)
    assert plan.argv is None  # the argv stays the user's
    installed = ctx.private_dir / PLUGIN_FILE_NAME
    assert installed.read_bytes() == combined(PLUGIN_SOURCE)
    assert installed.stat().st_mode & 0o777 == 0o600
    assert dict(plan.env) == {CONFIG_VARIABLE: plugin_config(installed)}
    assert json.loads(plan.env[CONFIG_VARIABLE]) == {"plugin": [installed.as_uri()]}
    assert list(ctx.private_dir.iterdir()) == [installed]


def test_the_plugin_ships_inside_the_package() -> None:
    assert PLUGIN_SOURCE.parent == Path(clanker_opencode.__file__).parent
    assert PLUGIN_SOURCE.is_file()


@pytest.mark.parametrize(("env", "flags"), [
    ({"OPENCODE_CONFIG_CONTENT": '{"model":"a/b"}'}, ()),
    ({"OPENCODE_CONFIG_DIR": "/home/user/oc"}, ()),
    ({"OPENCODE_PURE": "1"}, ()),
    ({"OPENCODE_PURE": "true"}, ()),
    ({}, ("--pure",)),
    ({}, ("-m", "a/b", "--pure=true")),
    ({}, ("--pure=false", "--pure")),
])
def test_what_the_user_owns_declines_attention(tmp_path: Path, env: dict[str, str],
                                                flags: tuple[str, ...]) -> None:
    ctx = context(tmp_path, env, flags)
    assert isinstance(OpenCodeAttention().prepare(ctx), Declined)
    assert list(ctx.private_dir.iterdir()) == []  # nothing written


@pytest.mark.parametrize(("env", "flags"), [
    ({"OPENCODE_CONFIG_CONTENT": ""}, ()),  # opencode ignores an empty value
    ({"OPENCODE_PURE": "0"}, ()),
    ({"OPENCODE_CONFIG": "/home/user/extra.json"}, ()),  # a file layer, merged first
    ({}, ("--pure=false",)),
    ({}, ("--", "--pure")),  # a message word
])
def test_what_does_not_conflict(tmp_path: Path, env: dict[str, str],
                                flags: tuple[str, ...]) -> None:
    assert OpenCodeAttention().prepare(context(tmp_path, env, flags)) is not None


@settings(max_examples=60, deadline=None)
@given(flags=st.lists(st.text(min_size=0, max_size=12).filter(lambda w: "--pure" not in w),
                      max_size=6))
def test_flags_without_pure_never_decline(flags: list[str]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        plan = OpenCodeAttention().prepare(context(Path(directory), flags=tuple(flags)))
        assert isinstance(plan, AttachmentPlan)


def test_a_launch_without_credentials_is_an_operational_failure(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir()
    ctx = attachment_context(argv=("opencode",), env={"PATH": "/usr/bin"}, cwd=CWD,
                           private_dir=private)
    with pytest.raises(ValueError, match="lacks CLANKER_ATTENTION_SOCKET, "
                                         "CLANKER_ATTENTION_TERMINAL, CLANKER_ATTENTION_TOKEN"):
        OpenCodeAttention().prepare(ctx)


# -- the plugin under Node, against a grid double -------------------------------------------------


@needs_node
def test_the_live_permission_run_maps_to_the_lifecycle(tmp_path: Path, short_dir: Path) -> None:
    envelopes, result = to_double(tmp_path, short_dir, fixture("live-run-permission.json"))
    assert result["exports"] == ["ClankerAttention"]  # OpenCode calls every exported function
    assert result["hooks"] == ["event"]
    assert result["asked"] == []  # session.created already told the parentage
    turn = envelopes[0]["turnId"]
    assert summary(envelopes) == [
        # busy arrives twice in one turn: one turn
        ("turn_started", ROOT, turn, None, CWD, "session.status"),
        ("input_requested", ROOT, turn, PERMISSION, None, "permission.asked"),
        ("input_resolved", ROOT, turn, PERMISSION, None, "permission.replied"),
        # the legacy session.idle is not a second completion
        ("turn_completed", ROOT, turn, None, CWD, "session.status"),
    ]
    assert all(e["scope"] == "root" for e in envelopes)
    assert turn.endswith("-1")


@needs_node
def test_a_subagent_session_never_reaches_the_pane(tmp_path: Path, short_dir: Path) -> None:
    envelopes, _ = to_double(tmp_path, short_dir, fixture("live-run-subagent.json"))
    assert [(e["event"], e["sessionId"]) for e in envelopes] == [
        ("turn_started", TASK_ROOT), ("turn_completed", TASK_ROOT),
    ]
    assert all(TASK_CHILD not in json.dumps(e) for e in envelopes)


@needs_node
def test_a_failed_turn_is_failed_and_the_repeated_idle_absorbed(tmp_path: Path,
                                                                short_dir: Path) -> None:
    envelopes, _ = to_double(tmp_path, short_dir, fixture("live-run-error.json"))
    assert [(e["event"], e["sessionId"]) for e in envelopes] == [
        ("turn_started", ERROR_ROOT), ("turn_failed", ERROR_ROOT),
    ]
    assert "unauthorized" not in json.dumps(envelopes)  # no error text


@needs_node
def test_an_aborted_turn_is_interrupted(tmp_path: Path, short_dir: Path) -> None:
    aborted = built("session.error.aborted")
    envelopes, _ = to_double(tmp_path, short_dir, [
        status(ROOT, "busy"), aborted, status(ROOT, "idle"),
    ], {ROOT: root_record(ROOT)})
    assert [e["event"] for e in envelopes] == ["turn_started", "turn_interrupted"]


@needs_node
def test_questions_wait_and_resolve_by_request_id(tmp_path: Path, short_dir: Path) -> None:
    asked, replied, rejected = (built("question.asked"), built("question.replied"),
                                built("question.rejected"))
    other = copy.deepcopy(replied)
    other["properties"]["requestID"] = "que_unrelated"
    envelopes, _ = to_double(tmp_path, short_dir, [
        status(ROOT, "busy"), asked, other, replied, asked, rejected, status(ROOT, "idle"),
    ], {ROOT: root_record(ROOT)})
    assert [(e["event"], e.get("inputId")) for e in envelopes] == [
        ("turn_started", None),
        ("input_requested", "que_dd0000000001FakeId01000000"),
        ("input_resolved", "que_dd0000000001FakeId01000000"),
        ("input_requested", "que_dd0000000001FakeId01000000"),
        ("input_resolved", "que_dd0000000001FakeId01000000"),
        ("turn_completed", None),
    ]
    assert "Which one" not in json.dumps(envelopes)


@needs_node
def test_parentage_comes_from_opencode_when_no_event_told_it(tmp_path: Path,
                                                             short_dir: Path) -> None:
    # A resumed session: no session.created, only status events.
    child = "ses_dd0000000009FakeId09000000"
    unknown = "ses_dd0000000010FakeId10000000"
    failing = "ses_dd0000000011FakeId11000000"
    events = [status(s, k) for s in (child, unknown, failing, ROOT) for k in ("busy", "idle")]
    envelopes, result = to_double(tmp_path, short_dir, events, {
        ROOT: root_record(ROOT, "/home/user/elsewhere"),
        child: {**root_record(child), "parentID": ROOT},
        failing: "throw",
    })
    assert summary(envelopes) == [
        ("turn_started", ROOT, envelopes[0]["turnId"], None, "/home/user/elsewhere",
         "session.status"),
        ("turn_completed", ROOT, envelopes[0]["turnId"], None, "/home/user/elsewhere",
         "session.status"),
    ]
    assert result["asked"] == [child, unknown, failing, ROOT]


@needs_node
def test_the_instance_directory_is_the_fallback_location(tmp_path: Path,
                                                         short_dir: Path) -> None:
    bad = {**root_record(ROOT), "directory": "relative/dir"}
    envelopes, _ = to_double(tmp_path, short_dir, [status(ROOT, "busy")], {ROOT: bad})
    assert envelopes[0]["cwd"] == FALLBACK


@needs_node
def test_deleting_the_root_ends_the_session_and_a_child_does_not(tmp_path: Path,
                                                                 short_dir: Path) -> None:
    envelopes, _ = to_double(tmp_path, short_dir, fixture("live-session-delete.json"))
    assert summary(envelopes) == [
        ("session_ended", TASK_ROOT, None, None, CWD, "session.deleted"),
    ]


@needs_node
def test_waits_outside_a_turn_and_unknown_replies_say_nothing(tmp_path: Path,
                                                              short_dir: Path) -> None:
    asked = fixture("live-run-permission.json")[6]
    replied = fixture("live-run-permission.json")[7]
    assert asked["type"] == "permission.asked" and replied["type"] == "permission.replied"
    envelopes, _ = to_double(tmp_path, short_dir, [
        asked, replied, status(ROOT, "idle"), {"type": "session.status"}, {"nope": 1}, None, 7,
        {"type": "session.status", "properties": {"sessionID": "x" * 300,
                                                   "status": {"type": "busy"}}},
    ], {ROOT: root_record(ROOT)})
    assert envelopes == []


@needs_node
def test_without_credentials_the_plugin_is_inert(tmp_path: Path, short_dir: Path) -> None:
    plugin = install(tmp_path)

    async def main() -> dict[str, Any]:
        return await run_plugin(plugin, fixture("live-run-permission.json"), {},
                                {"CLANKER_ATTENTION_TERMINAL": "t-0123456789abcdef"}, tmp_path)

    result = asyncio.run(main())
    assert result["hooks"] == []
    assert result["asked"] == []


@needs_node
def test_a_grid_that_is_down_or_refuses_never_breaks_the_harness(tmp_path: Path,
                                                                  short_dir: Path) -> None:
    # Down: nothing listens on the socket; every hook call still returns.
    plugin = install(tmp_path)
    events = fixture("live-run-permission.json")

    async def down() -> dict[str, Any]:
        return await run_plugin(plugin, events, {}, {
            "CLANKER_ATTENTION_SOCKET": str(short_dir / "absent.sock"),
            "CLANKER_ATTENTION_TERMINAL": "t-0123456789abcdef",
            "CLANKER_ATTENTION_TOKEN": "ab" * 32,
        }, tmp_path)

    assert asyncio.run(down())["returned"] == len(events)
    # A revoked credential: the first refusal stops delivery for good.
    second = tmp_path / "second"
    second.mkdir()
    envelopes, _ = to_double(second, short_dir, events + fixture("live-run-error.json"),
                             refuse=True)
    assert len(envelopes) == 1


# -- the plugin under Node, against the real grid --------------------------------------------------


@needs_node
@pytest.mark.parametrize(("cut", "expected"), [
    (6, "working"),  # turn started
    (7, "needs-input"),  # permission.asked
    (8, "working"),  # permission.replied
    (10, "done"),  # idle
])
def test_the_grid_shows_each_step_of_the_live_run(tmp_path: Path, short_dir: Path, cut: int,
                                                  expected: str) -> None:
    entry = to_grid(tmp_path, short_dir, fixture("live-run-permission.json")[:cut])
    assert entry["attention"] == expected
    assert entry["location"] == CWD
    assert entry["revision"]["snapshot"]["rootSessionId"] == ROOT


@needs_node
def test_the_grid_shows_a_failed_turn_and_a_resumed_root(tmp_path: Path,
                                                         short_dir: Path) -> None:
    entry = to_grid(tmp_path, short_dir, fixture("live-run-error.json"), trusted=ERROR_ROOT)
    assert entry["attention"] == "failed"
    assert entry["revision"]["snapshot"]["rootSessionId"] == ERROR_ROOT


# -- the installed CLI ----------------------------------------------------------------------------


class _Refuse(BaseHTTPRequestHandler):
    """A loopback provider that refuses every request (HTTP 401): no model anywhere."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = b'{"error":{"message":"refused","type":"invalid_request_error"}}'
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("opencode") is None, reason="opencode is not installed")
def test_real_opencode_loads_the_plugin_and_reports_a_failed_turn(tmp_path: Path,
                                                                   short_dir: Path) -> None:
    opencode = shutil.which("opencode")
    assert opencode is not None
    stub = HTTPServer(("127.0.0.1", 0), _Refuse)
    thread = threading.Thread(target=stub.serve_forever, daemon=True)
    thread.start()
    home = tmp_path / "home"
    config = home / ".config" / "opencode"
    (config / "node_modules").mkdir(parents=True)
    # OpenCode waits for `@opencode-ai/plugin` in its config directory before
    # loading any external plugin; without a network that install never
    # completes, so the dependency is recorded as already installed.
    (config / "package.json").write_text('{"dependencies":{"@opencode-ai/plugin":"1.18.33"}}')
    (config / "package-lock.json").write_text(
        '{"packages":{"":{"dependencies":{"@opencode-ai/plugin":"1.18.33"}}}}')
    # The user's own provider, in their global config: clanker's layer is merged after it.
    (config / "opencode.json").write_text(json.dumps({
        "provider": {"loop": {"npm": "@ai-sdk/openai-compatible", "models": {"m1": {}},
                              "options": {"baseURL": f"http://127.0.0.1:{stub.server_port}/v1",
                                          "apiKey": "dummy-not-a-key"}}},
        "model": "loop/m1", "share": "disabled", "autoupdate": False,
    }))
    project = tmp_path / "project"
    project.mkdir()
    private = tmp_path / "private"
    private.mkdir(mode=0o700)

    async def main() -> tuple[dict[str, Any], int]:
        async with Grid(short_dir / "grid.sock") as grid:
            registration = grid.register(harness="opencode", cwd=str(project),
                                         launcher_pid=os.getpid())
            env = {
                "PATH": os.environ["PATH"], "HOME": str(home),
                "XDG_CONFIG_HOME": str(home / ".config"),
                "XDG_DATA_HOME": str(home / ".local" / "share"),
                "XDG_STATE_HOME": str(home / ".local" / "state"),
                "XDG_CACHE_HOME": str(home / ".cache"), "PWD": str(project),
                "CLANKER_ATTENTION_SOCKET": str(grid.socket_path),
                "CLANKER_ATTENTION_TERMINAL": registration.terminal,
                "CLANKER_ATTENTION_TOKEN": registration.token,
                "CLANKER_ATTENTION_STATE": str(private),
                "CLANKER_ATTENTION_COMMAND": str(private / "hook"),
            }
            plan = OpenCodeAttention().prepare(attachment_context(
                argv=(opencode,), env=env, cwd=str(project), private_dir=private))
            assert isinstance(plan, AttachmentPlan)
            process = await asyncio.create_subprocess_exec(
                opencode, "run", "--title", "probe", "hi", cwd=project,
                env={**env, **plan.env}, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )
            await asyncio.wait_for(process.communicate(), 120)
            entry = grid.entry(registration.terminal)
            assert entry is not None
            assert process.returncode is not None
            return {"attention": entry.attention, "location": entry.location,
                    "revision": entry.revision}, process.returncode

    try:
        entry, returncode = asyncio.run(main())
    finally:
        stub.shutdown()
        stub.server_close()
    assert returncode == 1  # the refused request is opencode's own error
    snapshot = entry["revision"]["snapshot"]
    assert snapshot["rootSessionId"].startswith("ses_")
    assert entry["attention"] == "failed"
    assert entry["location"] == str(project)
