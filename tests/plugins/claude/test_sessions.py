"""Claude Code's session history, against a store captured from Claude Code 2.1.197
(tests/fixtures/claude/sessions, listed in tests/fixtures/claude/README.md)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from attrs import evolve
from hypothesis import given, settings
from hypothesis import strategies as st

import clanker_claude
from clanker.descriptor import SessionOperation
from clanker.environment.files import FileSample, confined, read_sample
from clanker.environment.local import LocalFiles
from clanker.execution import LocalTransport
from clanker.ids import HarnessId
from clanker.launch.planning import plan_launch
from clanker.launch.request import LaunchOperation, LaunchRequest, SessionTarget
from clanker.registry import Registry
from clanker.sessions.cache import SummaryCache
from clanker.sessions.capability import SessionsContext
from clanker.sessions.selection import Selection, resolve_selection
from clanker.sessions.types import SessionScan
from clanker.testing import registered
from clanker.testing.sessions import (
    sample_of_bytes,
    sessions_context,
)
from clanker.testing.sessions import session_service as service
from clanker.testing.strategies import awkward_values, json_line_records
from clanker_claude.sessions import ClaudeSessions, config_dir, projects_dir
from clanker_claude.summaries import (
    HEAD_BYTES,
    TAIL_BYTES,
    _strip_tag_blocks,
    encode_project,
    parse,
    project_dir_filter,
    summarize,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "claude" / "sessions"
CONFIG = FIXTURES / "claude-config"
PROJECTS = CONFIG / "projects"
APP = PROJECTS / "-home-dev-src-app"
A = "9c1d75a4-0723-453d-9683-1be60e3fb27e"  # claude -p, then -p --resume
B = "842e7e8b-6e79-47d0-a41d-817c4bbd57a0"  # -p --resume A --fork-session
C = "7f580a28-e36b-442e-8a18-32ece3323a24"  # TUI, /rename Build walkthrough
D = "f9538709-d6ed-4910-9a11-6d4ba0c0b85a"  # TUI /branch of C
E = "810adeb4-1b42-408d-83a8-e7fa0f6b854e"  # TUI --resume C --fork-session
OLD = datetime(2020, 1, 1, tzinfo=UTC)


def transcript(native_id: str) -> Path:
    [path] = [*PROJECTS.glob(f"*/{native_id}.jsonl")]
    return path


def sample(path: Path, *, mtime: datetime = OLD) -> FileSample:
    """The file as read, with an mtime older than every record (so records decide)."""
    return evolve(read_sample(path, head_bytes=HEAD_BYTES, tail_bytes=TAIL_BYTES), mtime=mtime)


SID = "11111111-2222-4333-8444-555555555555"


def sample_of(data: bytes, *, head: int = HEAD_BYTES, tail: int = TAIL_BYTES,
              name: str = f"{SID}.jsonl", mtime: datetime = OLD) -> FileSample:
    """What read_sample would see of ``data``, without a file."""
    return sample_of_bytes(data, head_bytes=head, tail_bytes=tail, path=Path("/p/-w") / name,
                           mtime=mtime)


def iso(value: str) -> datetime:
    return datetime.fromisoformat(value)


# -- every captured transcript ----------------------------------------------------------------

# (id, title, cwd, updated, created, parent, entrypoint), read off the files by hand. With an
# mtime older than the records, "updated" is the newest record timestamp.
CAPTURED = [
    (A, "Add a README section about installation", "/home/dev/src/app",
     "2026-11-30T09:17:52.903", "2026-11-30T09:17:50.267", None, "sdk-cli"),
    # --fork-session copies the history (first prompt included) and records no parent.
    (B, "Add a README section about installation", "/home/dev/src/app",
     "2026-11-30T09:17:55.313", "2026-11-30T09:17:54.957", None, "sdk-cli"),
    # agent-name and custom-title ("/rename") both say "Build walkthrough".
    (C, "Build walkthrough", "/home/dev/src/app", "2026-11-30T09:18:10.719",
     "2026-11-30T09:18:03.612", None, "cli"),
    # /branch: forkedFrom on every copied record; its own custom-title.
    (D, "Explain the build (café ✓) (Branch)", "/home/dev/src/app", "2026-11-30T09:18:28.485",
     "2026-11-30T09:18:03.612", C, "cli"),
    # An interactive --fork-session copy: C's custom-title copied first, the copied
    # records keep their times (so "created" is C's).
    (E, "Build walkthrough", "/home/dev/src/app", "2026-11-30T09:18:46.339",
     "2026-11-30T09:18:03.612", None, "cli"),
    ("e2a54243-7977-41fa-be7a-80e5b44f5ece", "Work inside a worktree",
     "/home/dev/src/app/.claude/worktrees/wt1", "2026-11-30T09:18:58.604",
     "2026-11-30T09:18:58.458", None, "sdk-cli"),
    ("8203b1b7-9bd9-4357-abde-dd4ca12dc366", "Session in my project.v2_test",
     "/home/dev/src/my project.v2_test", "2026-11-30T09:18:59.927", "2026-11-30T09:18:59.642",
     None, "sdk-cli"),
    ("243b56f4-1b51-440a-a561-4ada7cddf8f2", "Session in 日本語", "/home/dev/src/ünïcödé/日本語",
     "2026-11-30T09:19:01.025", "2026-11-30T09:19:00.739", None, "sdk-cli"),
    ("a10c7a88-14a7-49b7-9b17-5511b34ac665", "Session in emoji-😀-dir",
     "/home/dev/src/emoji-😀-dir", "2026-11-30T09:19:02.364", "2026-11-30T09:19:02.053", None,
     "sdk-cli"),
    # Started in src/link-dir, a link to real_dir.v2: Claude records the real path.
    ("1263d984-b4dc-465f-bece-cfacf9c7a9a2", "Session in link-dir", "/home/dev/src/real_dir.v2",
     "2026-11-30T09:19:03.727", "2026-11-30T09:19:03.418", None, "sdk-cli"),
    ("56b30560-cfd0-498e-9dd1-b3700b1f2bbe", "Session in very-long-directory-name-segment-07",
     "/home/dev/src/" + "/".join(f"very-long-directory-name-segment-{n:02}" for n in range(8)),
     "2026-11-30T09:19:05.051", "2026-11-30T09:19:04.735", None, "sdk-cli"),
    # Two projects, one directory name: only the records tell them apart.
    ("35b76e36-1efa-4db5-85b0-6100d88c7ea2", "Session in c", "/home/dev/src/a-b/c",
     "2026-11-30T09:19:06.229", "2026-11-30T09:19:06.009", None, "sdk-cli"),
    ("330bba5c-7a2a-481b-9edd-34461027fe18", "Session in b-c", "/home/dev/src/a/b-c",
     "2026-11-30T09:19:07.200", "2026-11-30T09:19:07.020", None, "sdk-cli"),
]


@pytest.mark.parametrize(("native_id", "title", "cwd", "updated", "created", "parent", "entry"),
                         CAPTURED, ids=[row[0][:8] for row in CAPTURED])
def test_every_captured_transcript(native_id: str, title: str, cwd: str, updated: str,
                                   created: str, parent: str | None, entry: str) -> None:
    found = parse(sample(transcript(native_id)))
    assert found is not None
    assert found.entrypoint == entry
    session = found.session
    assert session.harness == "claude"
    assert session.native_id == native_id
    assert session.title == title
    assert session.cwd == cwd
    assert session.updated_at == iso(updated + "+00:00")
    assert session.created_at == iso(created + "+00:00")
    assert session.parent_id == parent
    # Offline, every assistant record is a local error with model "<synthetic>".
    assert session.model is None
    assert session.message_count is None
    # Print-mode runs are hidden from a listing, as in Claude's own picker.
    summarized = summarize(sample(transcript(native_id)))
    assert summarized is not None
    assert summarized.hidden == (entry != "cli")


def test_the_table_covers_every_captured_transcript() -> None:
    assert set(PROJECTS.glob("*/*.jsonl")) == {transcript(row[0]) for row in CAPTURED}


def test_the_history_file_is_not_a_transcript() -> None:
    assert parse(sample(CONFIG / "history.jsonl")) is None


def test_updated_is_the_files_mtime_unless_a_record_is_newer() -> None:
    later = datetime(2030, 1, 1, tzinfo=UTC)
    found = summarize(sample(transcript(C), mtime=later))
    assert found is not None and found.updated_at == later


# -- the directory encoding ---------------------------------------------------------------------


def first_cwd(path: Path) -> str:
    for text in path.read_text().splitlines():
        record = json.loads(text)
        if isinstance(record.get("cwd"), str):
            return str(record["cwd"])
    raise AssertionError(path)


def test_the_encoding_names_every_captured_project_dir() -> None:
    for path in PROJECTS.glob("*/*.jsonl"):
        assert encode_project(first_cwd(path)) == path.parent.name


@pytest.mark.parametrize(("path", "name"), [
    ("/home/dev/src/app", "-home-dev-src-app"),
    ("/home/dev/src/my project.v2_test", "-home-dev-src-my-project-v2-test"),
    ("/home/dev/src/ünïcödé/日本語", "-home-dev-src--n-c-d-----"),
    ("/home/dev/src/emoji-😀-dir", "-home-dev-src-emoji----dir"),  # two UTF-16 units
    ("/x/e\u0301", "-x-e-"),  # no normalization of the cwd
    ("/x/trailing.", "-x-trailing-"),
    ("/home/dev/src/app/.claude/worktrees/wt1", "-home-dev-src-app--claude-worktrees-wt1"),
])
def test_the_encoding_of_verified_paths(path: str, name: str) -> None:
    assert encode_project(path) == name


def test_a_long_path_is_cut_and_hashed_as_the_cli_did() -> None:
    segments = "/".join(f"very-long-directory-name-segment-{n:02}" for n in range(8))
    # The CLI named the real sandbox path's directory with the suffix hn9vyv.
    real = encode_project(f"/tmp/clanker-clis/homes/clfx/src/{segments}")
    assert real.endswith("-hn9vyv") and len(real) == 207
    assert encode_project(f"/home/dev/src/{segments}").endswith("-szjher")


def test_the_project_filter_is_conservative() -> None:
    accept = project_dir_filter(("/home/dev/src/app",))
    assert accept is not None
    assert accept(0, "-home-dev-src-app")
    assert accept(0, "-home-dev-src-app--claude-worktrees-wt1")  # below the workspace
    assert accept(0, "-home-dev-src-app-v2")  # a sibling: the service drops it by cwd
    assert not accept(0, "-home-dev-src-other")
    assert not accept(0, "-home-dev-src")
    assert project_dir_filter(()) is None
    assert project_dir_filter(("/",)) is None
    assert project_dir_filter(("relative",)) is None


def test_the_project_filter_keeps_long_paths_whatever_their_hash() -> None:
    long = "/home/dev/src/" + "/".join(f"very-long-directory-name-segment-{n:02}"
                                       for n in range(8))
    accept = project_dir_filter((long,))
    assert accept is not None
    assert accept(0, encode_project(long))
    assert accept(0, encode_project(long + "/deeper/still"))
    assert accept(0, encode_project(long)[:201] + "older")  # Claude accepts any hash too
    ancestor = long.rsplit("/", 3)[0]  # short enough to be encoded whole
    assert len(encode_project(ancestor)) < 200
    short = project_dir_filter((ancestor,))
    assert short is not None and short(0, encode_project(long))


# -- where the store is -------------------------------------------------------------------------


def test_the_config_dir_defaults_to_dot_claude() -> None:
    assert config_dir({"HOME": "/home/u"}) == Path("/home/u/.claude")
    assert projects_dir({"HOME": "/home/u"}) == Path("/home/u/.claude/projects")
    assert ClaudeSessions().store_roots({"HOME": "/home/u"}, LocalFiles()) == (
        Path("/home/u/.claude/projects"),)


def test_claude_config_dir_wins() -> None:
    environ = {"HOME": "/home/u", "CLAUDE_CONFIG_DIR": "/srv/claude/"}
    assert config_dir(environ) == Path("/srv/claude")
    # Claude NFC-normalizes the root (not the cwd).
    assert config_dir({"CLAUDE_CONFIG_DIR": "/srv/cafe\u0301"}) == Path("/srv/caf\u00e9")


@pytest.mark.parametrize("value", ["", "relative", "~/claude"])
def test_a_config_dir_relative_to_claudes_cwd_is_not_guessed(value: str) -> None:
    # `??` keeps an empty value, and nothing expands "~": all relative to Claude's cwd.
    assert config_dir({"HOME": "/home/u", "CLAUDE_CONFIG_DIR": value}) is None
    assert ClaudeSessions().store_roots({"CLAUDE_CONFIG_DIR": value}, LocalFiles()) == ()


# -- titles, places and times, from synthetic transcripts -----------------------------------


def record(**fields: Any) -> bytes:
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def message(kind: str, content: object, *, when: str = "2026-11-30T10:00:00.000Z",
            cwd: str = "/w", entrypoint: str = "cli", model: str = "<synthetic>",
            **extra: Any) -> bytes:
    """A message record with the keys in Claude's order."""
    body = ({"role": "user", "content": content} if kind == "user" else
            {"id": "m", "model": model, "role": "assistant", "content": content})
    return record(parentUuid=None, isSidechain=False, type=kind, message=body, **extra,
                  uuid="u", timestamp=when, userType="external", entrypoint=entrypoint,
                  cwd=cwd, sessionId=SID, version="2.1.197", gitBranch="main")


def meta(kind: str, **fields: Any) -> bytes:
    return record(type=kind, **fields, sessionId=SID)


BIG = message("user", [{"type": "tool_result", "content": "x" * 70_000}])


_PROPERTY_SMALL = settings(max_examples=300, deadline=None)


def title_of(data: bytes) -> str | None:
    found = parse(sample_of(data))
    assert found is not None
    return found.session.title


def test_titles_follow_claudes_order() -> None:
    first = message("user", "the first prompt")
    assert title_of(first) == "the first prompt"
    assert title_of(first + meta("summary", summary="a summary")) == "a summary"
    assert title_of(first + meta("summary", summary="s") + meta("ai-title", aiTitle="ai")) == "ai"
    named = first + meta("ai-title", aiTitle="ai") + meta("custom-title", customTitle="mine")
    assert title_of(named) == "mine"
    assert title_of(named + meta("agent-name", agentName="agent")) == "agent"
    # The last of each kind wins.
    assert title_of(named + meta("custom-title", customTitle="renamed")) == "renamed"


def test_in_a_large_file_the_tail_wins_and_summary_is_read_there_only() -> None:
    start = (meta("custom-title", customTitle="early") + meta("summary", summary="old summary")
             + message("user", "ask"))
    assert title_of(start + BIG) == "early"
    assert title_of(start + BIG + meta("custom-title", customTitle="late")) == "late"
    assert title_of(meta("summary", summary="old summary") + message("user", "ask") + BIG) == (
        "ask")


def test_the_first_prompt_passes_over_what_is_not_one() -> None:
    data = (message("user", "<command-name>/model</command-name><command-args></command-args>")
            + message("user", "Continue from where you left off.", isMeta=True)
            + message("user", [{"type": "tool_result", "content": "out"}])
            + message("user", "<system-reminder>x</system-reminder>")
            + message("user", "[Request interrupted by user]")
            + message("user", [{"type": "image"},
                               {"type": "text", "text": " line one\nline two "}]))
    assert title_of(data) == "line one line two"
    assert title_of(message("user", "<bash-input>ls -la</bash-input>")) == "! ls -la"
    # A slash command is only a fallback.
    assert title_of(message("user", "<command-name>/init</command-name>")) == "/init"
    assert title_of(message("user", "  ")) is None


def test_tag_blocks_are_cut_from_titles() -> None:
    data = message("user", "fix this <ide_selection>a lot of code</ide_selection> please")
    assert title_of(data) == "fix this please"
    assert title_of(meta("custom-title", customTitle="<b>only</b>") + message("user", "x")) == (
        "<b>only</b>")


# Claude's picker removes tag blocks with this regex (`GHs`); clanker does the same in
# linear time (attributes up to 200 characters).
_PICKER_TAG_BLOCK = re.compile(r"<([a-z][\w-]*)(?:\s[^>]*)?>[\s\S]*?</\1>\n?")


@_PROPERTY_SMALL
@given(st.lists(st.sampled_from(["<a>", "</a>", "<b x>", "</b>", "x", " ", "\n", "<", ">",
                                 "<ab-c>", "</ab-c>", "/"]), max_size=14))
def test_tag_blocks_are_cut_as_the_picker_does(parts: list[str]) -> None:
    text = "".join(parts)
    assert _strip_tag_blocks(text) == _PICKER_TAG_BLOCK.sub("", text)


def test_a_title_made_of_unclosed_tags_is_cheap() -> None:
    started = time.perf_counter()
    assert title_of(meta("custom-title", customTitle="<a " * 15_000) + message("user", "x"))
    assert title_of(message("user", "<command-name>" * 2_000 + "<a>" * 5_000)) is None
    assert time.perf_counter() - started < 2


def test_the_cwd_is_the_newest_records() -> None:
    data = message("user", "ask", cwd="/w/first") + message("assistant", [], cwd="/w/later")
    found = parse(sample_of(data))
    assert found is not None and found.session.cwd == "/w/later"
    found = parse(sample_of(data + meta("relocated", relocatedCwd="/w/moved")))
    assert found is not None and found.session.cwd == "/w/moved"


def test_the_cwd_falls_back_to_the_first_in_the_head() -> None:
    data = (message("user", "ask", cwd="/w/first") + message("user", "b", cwd="/w/second")
            + record(type="progress", data="x" * 70_000) + meta("mode", mode="normal") * 10)
    found = parse(sample_of(data))
    assert found is not None and found.session.cwd == "/w/first"


def test_records_in_another_key_order_are_decoded() -> None:
    reordered = record(type="user", cwd="/w/odd", message={"role": "user", "content": "ask"},
                       timestamp="2026-11-30T10:00:00.000Z", sessionId=SID, entrypoint="cli")
    found = parse(sample_of(reordered))
    assert found is not None
    assert (found.session.cwd, found.session.title) == ("/w/odd", "ask")


def test_a_transcript_without_a_cwd_or_with_another_id_is_none() -> None:
    assert parse(sample_of(meta("mode", mode="normal"))) is None
    other = message("user", "ask").replace(SID.encode(), b"99999999-2222-4333-8444-555555555555")
    assert parse(sample_of(other)) is None
    assert parse(sample_of(message("user", "ask"), name="agent-abc.jsonl")) is None
    assert parse(sample_of(message("user", "ask"), name=f"{SID}.json")) is None


def test_a_side_chain_file_is_none() -> None:
    chain = message("user", "ask").replace(b'"isSidechain":false', b'"isSidechain":true')
    assert parse(sample_of(chain)) is None
    # A side-chain record later in a main file does not matter.
    assert parse(sample_of(message("user", "ask") + chain)) is not None


def test_the_model_is_the_newest_real_one() -> None:
    data = (message("user", "ask") + message("assistant", [], model="claude-a")
            + message("assistant", [{"type": "tool_use", "input": {"model": "haiku"}}],
                      model="claude-b")
            + message("assistant", [], model="<synthetic>"))
    found = parse(sample_of(data))
    assert found is not None and found.session.model == "claude-b"


def test_updated_and_created() -> None:
    data = (meta("queue-operation", operation="enqueue", timestamp="2026-11-30T09:00:00.000Z")
            + message("user", "ask", when="2026-11-30T09:00:01.000Z")
            + meta("file-history-snapshot", snapshot={"timestamp": "2031-01-01T00:00:00.000Z"})
            + message("assistant", [], when="2026-11-30T09:30:00.000Z")
            + meta("last-prompt", lastPrompt="ask"))
    found = parse(sample_of(data))
    assert found is not None
    assert found.session.created_at == iso("2026-11-30T09:00:00+00:00")
    assert found.session.updated_at == iso("2026-11-30T09:30:00+00:00")
    later = datetime(2030, 1, 1, tzinfo=UTC)
    found = parse(sample_of(data, mtime=later))
    assert found is not None and found.session.updated_at == later


def test_the_entrypoint_decides_what_is_listed() -> None:
    for entrypoint, listed in (("cli", True), ("sdk-cli", False), ("sdk-ts", False),
                               ("sdk-py", False), ("claude-vscode", True)):
        data = message("user", "ask", entrypoint=entrypoint)
        found = parse(sample_of(data))
        assert found is not None and found.listed is listed
        summarized = summarize(sample_of(data))
        assert summarized is not None
        assert summarized.hidden is not listed


# -- discovery, end to end ----------------------------------------------------------------


def registry() -> Registry:
    return Registry.from_plugins({"claude": clanker_claude.plugin}, environ={})


PROVIDER = registered(clanker_claude.plugin, "claude")


def copy_store(target: Path) -> None:
    """The captured config dir, copied to ``target``, each file dated by its newest record."""
    shutil.copytree(CONFIG, target)
    for row in CAPTURED:
        when = iso(row[3] + "+00:00").timestamp()
        path = target / "projects" / transcript(row[0]).parent.name / f"{row[0]}.jsonl"
        os.utime(path, (when, when))


@pytest.fixture
def store(tmp_path: Path) -> dict[str, str]:
    copy_store(tmp_path / "claude")
    return {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
            "PATH": os.environ["PATH"]}


def context(environ: Mapping[str, str], **fields: Any) -> SessionsContext:
    return sessions_context("claude", environ, **fields)


def test_the_whole_store_is_listed_without_print_mode_runs(store: dict[str, str]) -> None:
    listing = asyncio.run(service(store).discover([PROVIDER], workspace=None))
    assert listing.complete
    # Ten `claude -p` transcripts are hidden on purpose, not counted as unreadable.
    assert listing.scans[0].scan.skipped == 0
    assert [s.native_id for s in listing.sessions] == [E, D, C]
    roots = ClaudeSessions().store_roots(store, LocalFiles())
    assert all(s.store_path and confined(s.store_path, roots) for s in listing.sessions)


def test_a_workspace_lists_its_sessions(store: dict[str, str]) -> None:
    listing = asyncio.run(service(store).discover([PROVIDER], workspace="/home/dev/src/app"))
    assert [s.native_id for s in listing.sessions] == [E, D, C]
    other = asyncio.run(service(store).discover([PROVIDER], workspace="/home/dev/src/a-b"))
    assert other.sessions == ()


def test_the_workspace_prefilter_skips_other_projects(store: dict[str, str],
                                                      tmp_path: Path) -> None:
    projects = tmp_path / "claude" / "projects"
    for directory in ("-home-dev-src-other", "-home-dev-src-app--claude-worktrees-wt2"):
        (projects / directory).mkdir()
        (projects / directory / f"{SID}.jsonl").write_bytes(b"unreadable")
    scan = asyncio.run(ClaudeSessions().discover(context(store, scopes=("/home/dev/src/app",))))
    assert scan.skipped == 1  # the worktree's directory was read, the other project's not
    assert sorted(s.native_id for s in scan.sessions) == sorted([C, D, E])


def test_refinding_a_print_mode_session_and_resuming_it_by_path(store: dict[str, str],
                                                                 tmp_path: Path) -> None:
    found = asyncio.run(service(store).find(PROVIDER, A))
    assert found is not None  # hidden from listings, still resumable by id
    path = tmp_path / "claude" / "projects" / "-home-dev-src-app" / f"{A}.jsonl"
    assert found.store_path == str(path)
    workspace = tmp_path / "work"
    workspace.mkdir()
    selection = asyncio.run(resolve_selection(
        service(store), registry(), f"claude:{A}", operation=SessionOperation.RESUME,
        workspace=str(workspace)))
    assert isinstance(selection, Selection)
    # /home/dev/src/app does not exist here: Claude continues it by path.
    assert selection.launch_cwd == str(workspace)
    assert selection.notice is not None
    target = SessionTarget(native_id=A, store_path=selection.session.store_path)
    resume = plan_launch(selection.provider, LaunchRequest(
        operation=LaunchOperation.RESUME, session=target, cwd=selection.launch_cwd))
    assert resume.argv == ("claude", "--resume", str(path))
    fork = plan_launch(selection.provider, LaunchRequest(
        operation=LaunchOperation.FORK, session=target, cwd=selection.launch_cwd))
    assert fork.argv == ("claude", "--resume", str(path), "--fork-session")


def test_a_refind_is_not_filtered_by_where_the_caller_is(store: dict[str, str]) -> None:
    scan = asyncio.run(ClaudeSessions().discover(context(store, native_id=C,
                                                         scopes=("/somewhere/else",))))
    assert [s.native_id for s in scan.sessions] == [C]
    found = asyncio.run(service(store).find(PROVIDER, C, workspace="/somewhere/else"))
    assert found is not None and found.cwd == "/home/dev/src/app"


def test_a_refind_does_not_poison_the_listing_cache(store: dict[str, str]) -> None:
    cache = SummaryCache(HarnessId("claude"), None)
    base = {"harness": HarnessId("claude"), "executor": LocalTransport(), "environ": store,
            "cache": cache}
    listed = asyncio.run(ClaudeSessions().discover(SessionsContext(files=LocalFiles(), **base)))
    assert A not in {s.native_id for s in listed.sessions}
    refound = asyncio.run(ClaudeSessions().discover(SessionsContext(files=LocalFiles(),
                                                                    **base, native_id=A)))
    assert [s.native_id for s in refound.sessions] == [A]
    again = asyncio.run(ClaudeSessions().discover(SessionsContext(files=LocalFiles(), **base)))
    assert again.sessions == listed.sessions


def test_sub_agents_and_other_files_are_never_read(store: dict[str, str],
                                                   tmp_path: Path) -> None:
    project = tmp_path / "claude" / "projects" / "-home-dev-src-app"
    copy = transcript(C).read_bytes().replace(C.encode(), SID.encode())
    (project / C / "subagents").mkdir(parents=True)
    (project / C / "subagents" / f"{SID}.jsonl").write_bytes(copy)
    (project / "agent-a1b2c3.jsonl").write_bytes(copy)
    (project / f"{SID}.jsonl.tmp").write_bytes(copy)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / f"{SID}.jsonl").write_bytes(copy)
    (project / f"{SID}.jsonl").symlink_to(outside / f"{SID}.jsonl")
    (tmp_path / "claude" / "projects" / "-linked").symlink_to(outside)
    listing = asyncio.run(service(store).discover([PROVIDER], workspace=None))
    assert [s.native_id for s in listing.sessions] == [E, D, C]
    assert listing.scans[0].scan.skipped == 0


def test_an_empty_config_dir_variable_is_no_store() -> None:
    # A missing store is empty (the contract, test_contract.py); so is an unset one.
    assert asyncio.run(ClaudeSessions().discover(context({"CLAUDE_CONFIG_DIR": ""}))) == (
        SessionScan())


def test_claude_continues_a_session_whose_directory_is_gone_by_path() -> None:
    # Verified 2026-11-30 with Claude Code 2.1.197 (docs/harnesses/claude.md,
    # "Sessions"): after the session's worktree was removed, `--resume <id>`
    # answered "No conversation found", while `--resume <transcript path>`
    # (and `--resume <path> --fork-session`) loaded it from another directory.
    # Clanker passes the re-found path (test above), so True holds for its argv.
    assert ClaudeSessions.resumes_without_original_directory is True


# -- shapes for the contract's properties (test_contract.py) --------------------------------

_field = awkward_values([SID, "<synthetic>", "sdk-cli", {"sessionId": SID},
                         "<command-name>/x</command-name>"])


TRANSCRIPTS = json_line_records(
    ["user", "assistant", "system", "custom-title", "agent-name", "ai-title", "summary",
     "relocated", "queue-operation", "x"],
    ["cwd", "sessionId", "timestamp", "entrypoint", "isMeta", "customTitle", "agentName",
     "aiTitle", "summary", "relocatedCwd", "forkedFrom", "parentUuid", "isSidechain"],
    _field, body=("message", ("user", "assistant"), ("role", "content", "model")), compact=True)
"""Transcripts with values of any type where Claude Code's fields are."""

HUGE_TRANSCRIPTS = (
    message("user", "ask") + b"[" * 100_000 + b"\n",
    message("user", "ask") + b'{"type":"user","message":' * 50_000,
    message("user", "x" * 1_000_000),
    message("user", "ask", cwd="/" + "a" * 100_000),
    b'{"cwd":"/' + b"\\" * 100_000 + b'","sessionId":"' + SID.encode() + b'"}\n',
    meta("custom-title", customTitle="t" * 500_000) + message("user", "ask"),
)
"""Huge and deeply nested values where the summarizer reads."""


# -- the real CLI ---------------------------------------------------------------------------


def run_claude(environ: Mapping[str, str], cwd: Path, *args: str
               ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["claude", "-p", *args], cwd=cwd, env=dict(environ), text=True,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                          check=False)


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("claude") is None, reason="claude is not installed")
def test_real_transcript_is_refound_and_continued_by_path_elsewhere(tmp_path: Path) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("CLAUDE_", "ANTHROPIC_"))}
    environ.update(HOME=str(tmp_path), CLAUDE_CONFIG_DIR=str(tmp_path / ".claude"),
                   DISABLE_TELEMETRY="1", DISABLE_AUTOUPDATER="1",
                   CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    # No account: Claude writes the transcript, then answers "Not logged in" (exit 1).
    run_claude(environ, work, "real prompt")
    [path] = (tmp_path / ".claude" / "projects").glob("*/*.jsonl")
    assert path.parent.name == encode_project(str(work.resolve()))
    listing = asyncio.run(service(environ).discover([PROVIDER], workspace=str(work)))
    assert listing.sessions == ()  # a print-mode run, hidden like Claude's picker does
    assert listing.scans[0].scan.skipped == 0
    found = asyncio.run(service(environ).find(PROVIDER, path.stem))
    assert found is not None
    assert (found.title, found.cwd, found.store_path) == ("real prompt", str(work.resolve()),
                                                          str(path))
    # The policy behind resumes_without_original_directory, live, by clanker's argv.
    work.rmdir()
    size = path.stat().st_size
    by_id = run_claude(environ, elsewhere, "--resume", path.stem, "again")
    assert "No conversation found" in by_id.stdout + by_id.stderr
    by_path = run_claude(environ, elsewhere, "--resume", str(path), "again")
    assert "No conversation found" not in by_path.stdout + by_path.stderr
    assert path.stat().st_size > size  # continued in its own file
    refound = asyncio.run(service(environ).find(PROVIDER, path.stem))
    assert refound is not None and refound.cwd == str(elsewhere.resolve())
