"""OpenCode's session history, against listings captured from opencode-ai 1.18.33.

Fixtures: tests/fixtures/opencode/sessions (README section "sessions/").
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import clanker_opencode
from clanker.descriptor import SessionOperation
from clanker.environment.local import LocalFiles
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import MAX_OUTPUT, CommandRequest, CommandResult, LocalTransport
from clanker.ids import HarnessId
from clanker.launch.planning import plan_launch
from clanker.launch.request import LaunchOperation, LaunchRequest, SessionTarget
from clanker.registry import HarnessProvider, Registry
from clanker.sessions.cache import SummaryCache
from clanker.sessions.capability import SessionsContext
from clanker.sessions.selection import SessionNotFoundError, resolve_selection
from clanker.sessions.service import SessionService
from clanker.sessions.types import HarnessSession, SessionScan
from clanker.testing import FailingExecutor, ScriptedExecutor
from clanker.testing.doubles import EnvironmentDouble
from clanker.testing.strategies import json_values, prefixes
from clanker_opencode.sessions import LIST_ARGS, MAX_ROWS, OpenCodeSessions, list_request
from clanker_opencode.summaries import (
    PARTIAL_WITHOUT_WORKSPACE,
    is_default_title,
    parse_session_list,
    summarize_row,
)

STORE = Path(__file__).resolve().parents[2] / "fixtures" / "opencode" / "sessions"
GIT = STORE / "session-list-git-project.json"
GLOBAL = STORE / "session-list-global-project.json"
SUB_ID = "ses_dd459764affevH4X4nlzzHZzIQ"
GONE_ID = "ses_dd455284bffeoVbW2CLxqO6uhU"


def ms(value: int) -> datetime:
    return datetime.fromtimestamp(value / 1000, UTC)


def rows(path: Path) -> list[dict[str, Any]]:
    value = json.loads(path.read_text())
    assert isinstance(value, list)
    return value


# -- every captured listing -----------------------------------------------------------------

# (id, title, updated ms, created ms, directory), read off the files by hand. OpenCode's
# placeholder title is no title; the forks' "<placeholder> (fork #1)" is not a placeholder
# to OpenCode, so it stays.
GIT_ROWS = [
    (SUB_ID, "t-sub", 1796029309244, 1796028664245, "/home/dev/src/alpha/pkg/sub"),
    ("ses_dd4557e10ffe60n3bPdVKbQZt0", "New session - 2026-11-30T08:50:38.574Z (fork #1)",
     1796028928327, 1796028924400, "/home/dev/src/alpha"),
    ("ses_dd455b960ffeTjZJmB6IHszqc8", "New session - 2026-11-30T08:50:38.574Z (fork #1)",
     1796028912379, 1796028909216, "/home/dev/src/alpha"),
    ("ses_dd455f313ffeXa4hyIXy0weD88", "t-archived", 1796028894444, 1796028894444,
     "/home/dev/src/alpha"),
    ("ses_dd457f4caffeK0NIj9a75Sbjs6", "t-link", 1796028765784, 1796028762934,
     "/home/dev/src/alpha"),
    ("ses_dd4597276ffe4eG13xcx2aJ2Fy", "t-wt", 1796028665594, 1796028665227,
     "/home/dev/src/alpha-wt"),
    ("ses_dd459da91ffe82l4ebtBHSAIFN", None, 1796028641850, 1796028638574,
     "/home/dev/src/alpha"),
]
GLOBAL_ROWS = [
    ("ses_dd45101e0ffeBxzjFosfDHhpXq", "t-conc", 1796029220527, 1796029218336,
     "/home/dev/src/plain2"),
    (GONE_ID, "t-gone", 1796029013330, 1796028946356, "/home/dev/src/gone"),
    ("ses_dd458297cffeYIoqSHq5ITAHaC", "t-dots", 1796028751763, 1796028749444,
     "/home/dev/src/dots.v1.2"),
    ("ses_dd458d7e7ffeYtVYF98W5YvtZy", "t-emptygit", 1796028709625, 1796028704793,
     "/home/dev/src/emptygit"),
    ("ses_dd458f4ffffeYyrQXG5DMB6LDc", "t-uni", 1796028697345, 1796028697345,
     "/home/dev/src/ünï-проект"),
    ("ses_dd4593d96ffez7A4rv1P9wSP9w", "t-plain2", 1796028679213, 1796028678761,
     "/home/dev/src/plain2"),
    ("ses_dd4593f41ffeg4k1qgbCIaiq8C", "t-plain", 1796028678788, 1796028678335,
     "/home/dev/src/plain"),
    ("ses_dd45941f5ffeNTT4XgEf2sKIaS", "t-space", 1796028678573, 1796028677643,
     "/home/dev/src/with space"),
]


@pytest.mark.parametrize(("path", "expected"), [
    (GIT, GIT_ROWS),
    (GLOBAL, GLOBAL_ROWS),
    (STORE / "session-list-git-remote-project.json", [
        ("ses_dd4596ef5ffetJ41Uxv7Tq2SJo", "t-beta", 1796028666470, 1796028666122,
         "/home/dev/src/beta"),
    ]),
    (STORE / "session-list-n2.json", [
        ("ses_dd4521688ffemLKM2Mn8GDL6Ci", None, 1796029147511, 1796029147511,
         "/home/dev/src/many"),
        ("ses_dd45216bbffePbqhrs2zKeqOQV", None, 1796029147460, 1796029147460,
         "/home/dev/src/many"),
    ]),
], ids=lambda value: value.name if isinstance(value, Path) else "")
def test_every_row_of_a_captured_listing(path: Path,
                                         expected: list[tuple[str, str | None, int, int, str]]
                                         ) -> None:
    listing = parse_session_list(path.read_text())
    assert listing.skipped == 0
    assert [(s.native_id, s.title, s.updated_at, s.created_at, s.cwd)
            for s in listing.sessions] == [
        (native_id, title, ms(updated), ms(created), cwd)
        for native_id, title, updated, created, cwd in expected
    ]
    # OpenCode's listing has none of these; a fork is not linked to its parent.
    assert all(s.model is None and s.message_count is None and s.parent_id is None
               and s.store_path is None for s in listing.sessions)


def test_the_long_listings() -> None:
    default = parse_session_list((STORE / "session-list-default-100.json").read_text())
    everything = parse_session_list((STORE / "session-list-max-count-4097.json").read_text())
    # 105 ACP sessions in ~/src/many: the default page stops at 100, --max-count 4097 does not.
    assert (len(default.sessions), len(everything.sessions)) == (100, 105)
    assert [s.native_id for s in everything.sessions[:100]] == [
        s.native_id for s in default.sessions]
    assert {s.cwd for s in everything.sessions} == {"/home/dev/src/many"}
    # Created by ACP session/new: no prompt, so the placeholder title and created == updated.
    assert all(s.title is None and s.created_at == s.updated_at for s in everything.sessions)
    updated = [s.updated_at for s in everything.sessions]
    assert updated == sorted(updated, reverse=True)


def test_no_session_at_all_is_no_output() -> None:
    # OpenCode prints nothing (not "[]") and exits 0 when a project has no session.
    assert (STORE / "session-list-empty.stdout").read_bytes() == b""
    for stdout in ("", "\n", "  \n"):
        listing = parse_session_list(stdout)
        assert (listing.sessions, listing.skipped) == ((), 0)


def test_equal_times_put_the_newer_id_first() -> None:
    # OpenCode orders by time alone; its ids count down, so the smaller one is newer.
    first, second = (dict(r) for r in rows(GIT)[:2])
    first["updated"] = second["updated"]
    listing = parse_session_list(json.dumps([first, second]))
    assert [s.native_id for s in listing.sessions] == sorted([first["id"], second["id"]])


@pytest.mark.parametrize(("title", "default"), [
    ("New session - 2026-11-30T08:50:38.574Z", True),
    ("Child session - 2026-11-30T08:50:38.574Z", True),
    ("New session - 2026-11-30T08:50:38.574Z (fork #1)", False),
    ("New session - 2026-11-30T08:50:38Z", False),
    ("new session - 2026-11-30T08:50:38.574Z", False),
    ("t-sub", False),
])
def test_opencodes_placeholder_titles(title: str, default: bool) -> None:
    assert is_default_title(title) is default


# -- what is not OpenCode's format ----------------------------------------------------------


def _changed(**fields: object) -> str:
    row: dict[str, object] = dict(rows(GIT)[0])
    row.update(fields)
    return json.dumps([{k: v for k, v in row.items() if v is not ...}])


@pytest.mark.parametrize("stdout", [
    "not json",
    '{"id": "ses_x"}',
    "[1]",
    "[null]",
    _changed(id=...),
    _changed(title=None),
    _changed(updated="1796029309244"),
    _changed(updated=True),
    _changed(created=1.5),
    _changed(directory=["/home/dev"]),
    "[" * 100_000,
], ids=["text", "object", "number-row", "null-row", "no-id", "null-title", "string-time",
        "bool-time", "float-time", "list-directory", "deep"])
def test_a_changed_format_is_a_parse_failure(stdout: str) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        parse_session_list(stdout)
    assert caught.value.kind is ErrorKind.PARSE_FAILURE


@pytest.mark.parametrize("stdout", [
    _changed(id="ses_imported-from-elsewhere"),
    _changed(id="SES_dd459764affevH4X4nlzzHZzIQ"),
    _changed(directory="relative/dir"),
    _changed(directory="/with\x00nul"),
    _changed(updated=-1),
    _changed(created=10**20),
], ids=["foreign-id", "upper-case", "relative", "nul", "negative-time", "huge-time"])
def test_a_row_clanker_cannot_offer_is_a_counted_skip(stdout: str) -> None:
    listing = parse_session_list(stdout)
    assert (listing.sessions, listing.skipped) == ((), 1)


def test_other_keys_are_ignored() -> None:
    listing = parse_session_list(_changed(archived=True, parentID="ses_x", model={"id": "m"}))
    assert [s.native_id for s in listing.sessions] == [SUB_ID]


def test_more_than_4096_sessions_is_an_output_limit() -> None:
    row = rows(GIT)[0]
    assert len(parse_session_list(json.dumps([row] * MAX_ROWS)).sessions) == MAX_ROWS
    with pytest.raises(HarnessCapabilityError) as caught:
        parse_session_list(json.dumps([row] * (MAX_ROWS + 1)))
    assert caught.value.kind is ErrorKind.OUTPUT_LIMIT
    assert "more than 4096 sessions" in str(caught.value)


# -- the command ----------------------------------------------------------------------------


def test_the_listing_command() -> None:
    request = list_request(("/home/dev/src/alpha", "/home/dev/src/link-alpha"))
    assert request.argv == ("opencode", "session", "list", "--format", "json",
                            "--max-count", "4097")
    assert request.args == LIST_ARGS
    assert request.cwd == "/home/dev/src/alpha"  # the canonical workspace: scopes[0]
    assert (request.timeout, request.max_output_bytes) == (30.0, MAX_OUTPUT)
    assert list_request(()).cwd is None  # where clanker runs


def context(executor: ScriptedExecutor, *, scopes: tuple[str, ...] = (),
            native_id: str | None = None, limit: int = 512) -> SessionsContext:
    return SessionsContext(files=LocalFiles(),
                           harness=HarnessId("opencode"), executor=executor, environ={},
                           cache=SummaryCache(HarnessId("opencode"), None), scopes=scopes,
                           native_id=native_id, limit=limit)


def scan(executor: ScriptedExecutor, **kwargs: Any) -> SessionScan:
    return asyncio.run(OpenCodeSessions().discover(context(executor, **kwargs)))


def test_a_workspace_listing_is_complete() -> None:
    executor = ScriptedExecutor.returning(GIT.read_text())
    found = scan(executor, scopes=("/home/dev/src/alpha",))
    assert found.complete
    assert [s.native_id for s in found.sessions] == [row[0] for row in GIT_ROWS]
    assert [s.order for s in found.sessions] == list(range(7))
    assert [r.cwd for r in executor.requests] == ["/home/dev/src/alpha"]


def test_without_a_workspace_the_scan_says_it_is_partial() -> None:
    found = scan(ScriptedExecutor.returning(GLOBAL.read_text()))
    assert len(found.sessions) == 8
    assert found.partial == PARTIAL_WITHOUT_WORKSPACE
    assert not found.complete


def test_the_bound_cuts_the_oldest_but_never_a_refind() -> None:
    executor = ScriptedExecutor.returning(GIT.read_text())
    cut = scan(executor, scopes=("/w",), limit=3)
    assert [s.native_id for s in cut.sessions] == [row[0] for row in GIT_ROWS[:3]]
    assert cut.truncated
    oldest = GIT_ROWS[-1][0]
    refound = scan(executor, scopes=("/w",), native_id=oldest, limit=1)
    assert [s.native_id for s in refound.sessions] == [oldest]
    assert not refound.truncated


def test_a_failed_listing_never_shows_opencodes_stderr() -> None:
    executor = ScriptedExecutor.returning("", "Error: secret-looking detail", 1)
    with pytest.raises(HarnessCapabilityError) as caught:
        scan(executor, scopes=("/w",))
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    assert "secret-looking" not in str(caught.value)


def test_the_store_is_reached_through_opencode_alone() -> None:
    assert OpenCodeSessions().store_roots({"HOME": "/home/dev"}, LocalFiles()) == ()


def test_opencode_refuses_a_session_whose_directory_is_gone() -> None:
    # Verified 2026-11-30 with opencode-ai 1.18.33 (fixture run-resume-removed-cwd.stderr.txt):
    # `opencode run --session <id>` from another directory found the session, then exited 1
    # with "Unexpected server error" (realPath ENOENT on the recorded directory).
    assert OpenCodeSessions.resumes_without_original_directory is False
    assert "Unexpected server error" in (STORE / "run-resume-removed-cwd.stderr.txt").read_text()


# -- discovery and selection, end to end ----------------------------------------------------


def registry() -> Registry:
    return Registry.from_plugins({"opencode": clanker_opencode.plugin}, environ={})


def provider() -> HarnessProvider:
    return registry().get_provider(HarnessId("opencode"))


def answering(stdout: str | Callable[[CommandRequest], str]) -> ScriptedExecutor:
    """OpenCode's listing for ``opencode``; ``git`` fails (no repository here)."""
    def respond(request: CommandRequest) -> CommandResult:
        if request.command == "git":
            return CommandResult("", "fatal: not a git repository", 128)
        return CommandResult(stdout(request) if callable(stdout) else stdout, "", 0)
    return ScriptedExecutor(respond)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A ``PATH`` with an ``opencode`` on it, as where OpenCode is installed (the scripted
    executor answers for it)."""
    directory = tmp_path_factory.mktemp("bin")
    (directory / "opencode").write_text("#!/bin/sh\nexit 99\n")
    (directory / "opencode").chmod(0o755)
    return str(directory)


def service(executor: ScriptedExecutor, path: str) -> SessionService:
    return SessionService(environment=EnvironmentDouble(executor=executor,
                                                        environ={"PATH": path}),
                          cache_dir=None)


def _without_opencode(tmp_path: Path, environ: dict[str, str]) -> SessionsContext:
    """A context on a host where running ``opencode`` fails as a missing binary does."""
    return SessionsContext(files=LocalFiles(), harness=HarnessId("opencode"),
                           executor=FailingExecutor(HarnessCapabilityError(
                               ErrorKind.BINARY_UNAVAILABLE, "opencode")),
                           environ=environ, cache=SummaryCache(HarnessId("opencode"), None),
                           scopes=(str(tmp_path),), limit=512)


def test_nothing_is_listed_where_opencode_was_never_installed(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path), "PATH": str(tmp_path / "bin")}
    scan = asyncio.run(OpenCodeSessions().discover(_without_opencode(tmp_path, environ)))
    assert scan == SessionScan()


@pytest.mark.parametrize("kept", ["data directory", "OPENCODE_DB", "XDG_DATA_HOME"])
def test_a_store_left_without_opencode_is_a_listing_it_cannot_run(tmp_path: Path,
                                                                 kept: str) -> None:
    environ = {"HOME": str(tmp_path), "PATH": str(tmp_path / "bin")}
    if kept == "data directory":
        (tmp_path / ".local" / "share" / "opencode").mkdir(parents=True)
    elif kept == "OPENCODE_DB":
        environ["OPENCODE_DB"] = str(tmp_path / "elsewhere.db")
    else:
        environ["XDG_DATA_HOME"] = str(tmp_path / "data")
        (tmp_path / "data" / "opencode").mkdir(parents=True)
    with pytest.raises(HarnessCapabilityError) as caught:
        asyncio.run(OpenCodeSessions().discover(_without_opencode(tmp_path, environ)))
    assert caught.value.kind is ErrorKind.BINARY_UNAVAILABLE


def test_the_service_keeps_the_workspaces_own_sessions(installed: str) -> None:
    executor = answering(GIT.read_text())
    listing = asyncio.run(service(executor, installed).discover(
        [provider()], workspace="/home/dev/src/alpha"))
    assert listing.complete
    # The CLI lists the whole repository; the worktree's session is another workspace (git
    # found no worktrees here), so the service leaves it out.
    assert [s.native_id for s in listing.sessions] == [
        row[0] for row in GIT_ROWS if row[4] != "/home/dev/src/alpha-wt"]
    assert listing.sessions[0].cwd == "/home/dev/src/alpha/pkg/sub"
    listings = [r for r in executor.requests if r.args[:2] == ("session", "list")]
    assert [r.cwd for r in listings] == ["/home/dev/src/alpha"]


def test_sessions_everywhere_are_partial(installed: str) -> None:
    listing = asyncio.run(service(answering(GLOBAL.read_text()), installed).discover(
        [provider()], workspace=None))
    assert len(listing.sessions) == 8
    assert not listing.complete
    assert listing.scans[0].scan.partial == PARTIAL_WITHOUT_WORKSPACE


def relocated(listing: Path, directory: Path) -> Callable[[CommandRequest], str]:
    """The captured listing with every row's directory moved to ``directory``."""
    def stdout(request: CommandRequest) -> str:
        moved = [dict(row, directory=str(directory)) for row in rows(listing)]
        return json.dumps(moved, indent=2, ensure_ascii=False) + "\n"
    return stdout


def test_a_refound_session_resumes_and_forks_by_id_in_its_directory(tmp_path: Path,
                                                                   installed: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    executor = answering(relocated(GIT, work))
    for operation, flags in ((SessionOperation.RESUME, ()), (SessionOperation.FORK, ("--fork",))):
        selection = asyncio.run(resolve_selection(
            service(executor, installed), registry(), f"opencode:{SUB_ID}", operation=operation,
            workspace=str(tmp_path)))
        assert (selection.session.native_id, selection.launch_cwd) == (SUB_ID, str(work))
        assert selection.notice is None and selection.session.store_path is None
        target = SessionTarget(native_id=SUB_ID, store_path=selection.session.store_path)
        launch = LaunchOperation.RESUME if operation is SessionOperation.RESUME else (
            LaunchOperation.FORK)
        plan = plan_launch(selection.provider, LaunchRequest(
            operation=launch, session=target, cwd=selection.launch_cwd))
        assert plan.argv == ("opencode", "-s", SUB_ID, *flags)
    # The re-find ran OpenCode where the caller is (it lists one project at a time).
    assert {r.cwd for r in executor.requests
            if r.args[:2] == ("session", "list")} == {str(tmp_path)}


def test_a_session_whose_directory_is_gone_is_refused(tmp_path: Path, installed: str) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        asyncio.run(resolve_selection(
            service(answering(GLOBAL.read_text()), installed), registry(), f"opencode:{GONE_ID}",
            operation=SessionOperation.RESUME, workspace=str(tmp_path)))
    assert caught.value.kind is ErrorKind.UNSUPPORTED
    assert "no longer exists" in str(caught.value)


def test_a_session_of_another_project_is_not_found(tmp_path: Path, installed: str) -> None:
    # OpenCode lists only the caller's project: a session of another one is not there.
    with pytest.raises(SessionNotFoundError):
        asyncio.run(resolve_selection(
            service(answering(GIT.read_text()), installed), registry(), f"opencode:{GONE_ID}",
            operation=SessionOperation.RESUME, workspace=str(tmp_path)))


# -- properties -----------------------------------------------------------------------------

_PROPERTY = settings(max_examples=200, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])

# Any JSON value, the infinities included (opencode's JSON never has NaN).
JSON_VALUES = json_values(floats=st.floats(allow_nan=False))


def check_types(session: HarnessSession) -> None:
    assert isinstance(session.native_id, str) and session.native_id.startswith("ses_")
    assert session.updated_at.tzinfo is not None
    assert session.created_at is not None and session.created_at.tzinfo is not None
    assert session.title is None or (isinstance(session.title, str)
                                     and session.title.isprintable() and session.title)
    assert session.cwd is None or (session.cwd.startswith("/") and "\x00" not in session.cwd)
    assert session.store_path is None


def parse_or_fail(stdout: str) -> None:
    """A listing of well-typed sessions, or a typed failure: nothing else."""
    failure: HarnessCapabilityError | None = None
    try:
        listing = parse_session_list(stdout)
    except HarnessCapabilityError as exc:
        failure = exc
    if failure is not None:
        assert failure.kind in (ErrorKind.PARSE_FAILURE, ErrorKind.OUTPUT_LIMIT)
        return
    for session in listing.sessions:
        check_types(session)


@_PROPERTY
@given(st.text(max_size=2000))
def test_arbitrary_output_parses_or_fails_typed(stdout: str) -> None:
    parse_or_fail(stdout)


@_PROPERTY
@given(st.lists(st.fixed_dictionaries({}, optional={
    "id": JSON_VALUES | st.sampled_from([SUB_ID, "ses_x"]),
    "title": JSON_VALUES, "updated": JSON_VALUES, "created": JSON_VALUES,
    "directory": JSON_VALUES | st.sampled_from(["/home/dev", "rel"]),
}), max_size=5))
def test_wrong_typed_rows_parse_or_fail_typed(listing: list[dict[str, Any]]) -> None:
    parse_or_fail(json.dumps(listing))


@_PROPERTY
@given(st.fixed_dictionaries({
    "id": st.just(SUB_ID), "title": st.text(), "directory": st.text(),
    "updated": st.integers(), "created": st.integers(),
}))
def test_well_typed_rows_never_raise(row: dict[str, Any]) -> None:
    found = summarize_row(row)
    if found is not None:
        check_types(found)


@_PROPERTY
@given(prefixes([GLOBAL.read_text()]))
def test_every_prefix_of_a_real_listing_parses_or_fails_typed(cut: str) -> None:
    parse_or_fail(cut)


def test_huge_and_deep_outputs_fail_typed() -> None:
    for stdout in ("[" + "{}," * 200_000 + "{}]", "[" * 200_000 + "]" * 200_000,
                   _changed(title="x" * 1_000_000)):
        parse_or_fail(stdout)
    listing = parse_session_list(_changed(title="x\n" * 10_000))
    assert listing.sessions[0].title is not None and len(listing.sessions[0].title) <= 200


# -- the real CLI, when it is installed -----------------------------------------------------

LOOPBACK_CONFIG = {
    "$schema": "https://opencode.ai/config.json",
    "autoupdate": False,
    "provider": {"loop": {
        "npm": "@ai-sdk/openai-compatible", "name": "Loop",
        "options": {"baseURL": "http://127.0.0.1:9/v1", "apiKey": "dummy-not-a-key"},
        "models": {"m1": {"name": "Loop M1"}},
    }},
    "model": "loop/m1",
}


@pytest.fixture
def opencode_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh home whose only configured provider is a refused loopback port."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, str(tmp_path / "xdg" / name.lower()))
    for name in ("OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "OPENCODE_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENCODE_CONFIG_CONTENT", json.dumps(LOOPBACK_CONFIG))
    return tmp_path


def new_acp_session(cwd: Path) -> str:
    """Create one empty session the cheap way OpenCode offers: ACP ``session/new``, no prompt."""
    with subprocess.Popen(["opencode", "acp"], cwd=cwd, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as process:
        assert process.stdin is not None and process.stdout is not None
        replies: dict[int, dict[str, Any]] = {}

        def call(ident: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": ident, "method": method,
                                            "params": params}) + "\n")
            process.stdin.flush()
            while ident not in replies:
                line = process.stdout.readline()
                assert line, "opencode acp stopped"
                message = json.loads(line)
                if isinstance(message.get("id"), int):
                    replies[message["id"]] = message
            return replies[ident]

        call(1, "initialize", {"protocolVersion": 1, "clientInfo": {"name": "t", "version": "0"},
                               "clientCapabilities": {"terminal": False}})
        created = call(2, "session/new", {"cwd": str(cwd), "mcpServers": []})
        process.stdin.close()
        process.wait(timeout=30)
    session_id = created["result"]["sessionId"]
    assert isinstance(session_id, str)
    return session_id


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("opencode") is None, reason="opencode is not installed")
def test_real_opencode_session_is_listed_in_its_workspace(opencode_home: Path) -> None:
    work = opencode_home / "work"
    (work / "sub").mkdir(parents=True)
    session_id = new_acp_session(work)
    transport = LocalTransport(base_env=dict(os.environ))
    listing = asyncio.run(SessionService(environment=EnvironmentDouble(executor=transport),
                          cache_dir=None).discover(
        [provider()], workspace=str(work / "sub")))
    # Listed from a subdirectory (one project), but it is the parent's session: not shown.
    assert listing.sessions == () and listing.complete
    listing = asyncio.run(SessionService(environment=EnvironmentDouble(executor=transport),
                          cache_dir=None).discover(
        [provider()], workspace=str(work)))
    [found] = listing.sessions
    assert (found.native_id, found.cwd, found.title) == (session_id, str(work.resolve()), None)
    assert listing.complete
