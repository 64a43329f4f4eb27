"""Pi's session history, against stores captured from pi 0.73.1 (tests/fixtures/pi/sessions)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest

import clanker_pi
from clanker.descriptor import SessionOperation
from clanker.environment.files import FileSample, confined, read_sample
from clanker.environment.local import LocalFiles
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import LocalTransport
from clanker.ids import HarnessId
from clanker.launch.planning import plan_launch
from clanker.launch.request import LaunchOperation, LaunchRequest, SessionTarget
from clanker.registry import Registry
from clanker.sessions.cache import SummaryCache
from clanker.sessions.capability import SessionsContext
from clanker.sessions.selection import Selection, resolve_selection
from clanker.sessions.types import parse_timestamp
from clanker.testing import registered
from clanker.testing.sessions import (
    sample_of_bytes,
)
from clanker.testing.sessions import session_service as service
from clanker.testing.strategies import awkward_values, json_line_records
from clanker_pi.sessions import (
    PiSessions,
    SessionRoot,
    agent_dir,
    session_roots,
    settings_session_dir,
)
from clanker_pi.summaries import (
    HEAD_BYTES,
    TAIL_BYTES,
    encode_cwd,
    parent_from,
    project_dir_filter,
    summarize,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "pi"
STORE = FIXTURES / "sessions"
AGENT = STORE / "pi-agent"
PIREPO = AGENT / "sessions" / "--home-dev-src-pirepo--"
MAIN = PIREPO / "2026-11-30T08-50-51-402Z_01a22ba6-5788-7564-befe-73f0be84eb1a.jsonl"
MAIN_ID = "01a22ba6-5788-7564-befe-73f0be84eb1a"
CUSTOM = STORE / "custom-session-dir"
MTIME = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


def sample(path: Path) -> FileSample:
    return read_sample(path, head_bytes=HEAD_BYTES, tail_bytes=TAIL_BYTES)


def sample_of(data: bytes, *, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> FileSample:
    """What read_sample would see of ``data``, without a file."""
    return sample_of_bytes(data, head_bytes=head, tail_bytes=tail, mtime=MTIME)


def ms(value: int) -> datetime:
    stamp = parse_timestamp(value)
    assert stamp is not None
    return stamp


def iso(value: str) -> datetime:
    return datetime.fromisoformat(value)


def first_line(path: Path) -> dict[str, object]:
    value = json.loads(path.read_text().splitlines()[0])
    assert isinstance(value, dict)
    return value


# -- every captured file --------------------------------------------------------------------

# (file, id, title, cwd, updated (ms), created, model, messages, parent id). The values were
# read off the files by hand: e.g. the main file's last assistant message started at
# 1796028670145 ms, its last `session_info` names it "Fix the parser", and its second
# `model_change` switched to probe-model-2.
CAPTURED = [
    ("session-loopback--2026-11-30T08-17-59-277Z_01a22b88-3feb-75b8-aeec-e180f9f7f187.jsonl",
     "01a22b88-3feb-75b8-aeec-e180f9f7f187", "hi", "/home/dev/src/pirepo", 1796026693635,
     "2026-11-30T08:17:59.277+00:00", "loopback/probe-model", 8, None),
    ("session-loopback-fork--2026-11-30T08-18-20-980Z_01a22b88-94b3-7235-b1d0-f67e6364cd2d.jsonl",
     "01a22b88-94b3-7235-b1d0-f67e6364cd2d", "hi", "/home/dev/src/pirepo", 1796026701234,
     "2026-11-30T08:18:20.980+00:00", "loopback/probe-model", 10,
     "01a22b88-3feb-75b8-aeec-e180f9f7f187"),
    ("sessions/custom-session-dir/2026-11-30T08-49-45-803Z_01a22ba5-5749-7236-a17a-197e03855e59"
     ".jsonl", "01a22ba5-5749-7236-a17a-197e03855e59", "hi", "/home/dev/src/proj", 1796028586134,
     "2026-11-30T08:49:45.803+00:00", "loopback/probe-model", 2, None),
    # The last line cut mid-way: skipped, so one message and the user's time.
    ("sessions/inputs/truncated-tail-before-resume.jsonl",
     "01a22bb0-5562-714f-90e6-092bed22cedc", "first prompt", "/home/dev/src/migrepo",
     1796029306271, "2026-11-30T09:01:46.211+00:00", "loopback/probe-model", 1, None),
    # Version 1: no `version`, no entry ids; the model is also in the header.
    ("sessions/inputs/v1-session-before-migration.jsonl",
     "5f0c7a52-3c1e-4d2a-9b7e-0a1b2c3d4e5f", "old v1 question", "/home/dev/src/migrepo",
     1766224802000, "2025-12-20T10:00:00+00:00", "loopback/probe-model", 2, None),
    ("sessions/pi-agent/sessions/--home-dev-src-a-b--/2026-11-30T08-49-17-738Z_01a22ba4-e9a4-7477"
     "-a8fa-84d3574418b0.jsonl", "01a22ba4-e9a4-7477-a8fa-84d3574418b0", "hi", "/home/dev/src/a:b",
     1796028558133, "2026-11-30T08:49:17.738+00:00", "loopback/probe-model", 2, None),
    ("sessions/pi-agent/sessions/--home-dev-src-dots.v1.2--/2026-11-30T08-49-07-930Z_01a22ba4-c352"
     "-7675-9592-62552a1275ae.jsonl", "01a22ba4-c352-7675-9592-62552a1275ae", "hi",
     "/home/dev/src/dots.v1.2", 1796028548385, "2026-11-30T08:49:07.930+00:00",
     "loopback/probe-model", 2, None),
    # Migrated to v3 in place (header fields kept, ids appended), then resumed.
    ("sessions/pi-agent/sessions/--home-dev-src-migrepo--/2025-12-20T10-00-00-000Z_5f0c7a52-3c1e"
     "-4d2a-9b7e-0a1b2c3d4e5f.jsonl", "5f0c7a52-3c1e-4d2a-9b7e-0a1b2c3d4e5f", "old v1 question",
     "/home/dev/src/migrepo", 1796028703957, "2025-12-20T10:00:00+00:00", "loopback/probe-model",
     4, None),
    # Broken tail then resumed: a second header and re-appended entries; counted once each.
    ("sessions/pi-agent/sessions/--home-dev-src-migrepo--/2026-11-30T09-01-46-211Z_01a22bb0-5562"
     "-714f-90e6-092bed22cedc.jsonl", "01a22bb0-5562-714f-90e6-092bed22cedc", "first prompt",
     "/home/dev/src/migrepo", 1796029313200, "2026-11-30T09:01:46.211+00:00",
     "loopback/probe-model", 3, None),
    ("sessions/pi-agent/sessions/--home-dev-src-pirepo--/2026-11-30T08-50-51-402Z_01a22ba6-5788"
     "-7564-befe-73f0be84eb1a.jsonl", MAIN_ID, "Fix the parser", "/home/dev/src/pirepo",
     1796028670145, "2026-11-30T08:50:51.402+00:00", "loopback/probe-model-2", 6, None),
    # /clone: the copied messages are older than the clone itself, which floors `updated`.
    ("sessions/pi-agent/sessions/--home-dev-src-pirepo--/2026-11-30T08-51-14-308Z_01a22ba6-b0f8"
     "-7463-a7ac-a3ee58f0cfde.jsonl", "01a22ba6-b0f8-7463-a7ac-a3ee58f0cfde",
     "Cloned parser work", "/home/dev/src/pirepo", 1796028674308,
     "2026-11-30T08:51:14.308+00:00", "loopback/probe-model-2", 6, MAIN_ID),
    # /fork before the second prompt: no name copied, so the first user message.
    ("sessions/pi-agent/sessions/--home-dev-src-pirepo--/2026-11-30T08-51-21-973Z_01a22ba6-cedc"
     "-7748-921d-a56d13fd0fda.jsonl", "01a22ba6-cedc-7748-921d-a56d13fd0fda", "hello pi",
     "/home/dev/src/pirepo", 1796028681973, "2026-11-30T08:51:21.973+00:00",
     "loopback/probe-model", 2, MAIN_ID),
    # --fork: everything copied, the name included.
    ("sessions/pi-agent/sessions/--home-dev-src-pirepo--/2026-11-30T08-51-26-441Z_01a22ba6-e060"
     "-73c7-88be-ef7aea1118a8.jsonl", "01a22ba6-e060-73c7-88be-ef7aea1118a8", "Fix the parser",
     "/home/dev/src/pirepo", 1796028686580, "2026-11-30T08:51:26.441+00:00",
     "loopback/probe-model-2", 8, MAIN_ID),
    ("sessions/pi-agent/sessions/--home-dev-src-with space--/2026-11-30T08-49-01-973Z_01a22ba4"
     "-ac13-7201-93f5-c5a658c4c72f.jsonl", "01a22ba4-ac13-7201-93f5-c5a658c4c72f", "hi",
     "/home/dev/src/with space", 1796028542224, "2026-11-30T08:49:01.973+00:00",
     "loopback/probe-model", 2, None),
    ("sessions/pi-agent/sessions/--home-dev-src-ünï-çødé--/2026-11-30T08-49-12-372Z_01a22ba4-d4b3"
     "-76a8-83ce-6e7bcd8f77e1.jsonl", "01a22ba4-d4b3-76a8-83ce-6e7bcd8f77e1", "hi",
     "/home/dev/src/ünï-çødé", 1796028552620, "2026-11-30T08:49:12.372+00:00",
     "loopback/probe-model", 2, None),
]


def test_the_table_covers_every_captured_session_file() -> None:
    covered = {FIXTURES / row[0] for row in CAPTURED}
    # commit/ holds `--print --mode json` streams (test_commit.py): they open with the same
    # header line, but they are not session files.
    sessions = {p for p in FIXTURES.rglob("*.jsonl")
                if "commit" not in p.relative_to(FIXTURES).parts
                and json.loads(p.read_text().splitlines()[0]).get("type") == "session"}
    assert sessions == covered


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("rpc-*.jsonl")), ids=lambda p: p.name)
def test_other_json_lines_are_not_sessions(path: Path) -> None:
    assert summarize(sample(path)) is None


def test_a_fork_names_its_parent_by_the_id_in_the_parents_file_name() -> None:
    header = first_line(
        PIREPO / "2026-11-30T08-51-26-441Z_01a22ba6-e060-73c7-88be-ef7aea1118a8.jsonl")
    assert header["parentSession"] == f"/home/dev/.pi/agent/sessions/{PIREPO.name}/{MAIN.name}"
    assert parent_from(header["parentSession"]) == MAIN_ID
    assert parent_from("/x/custom-name.jsonl") is None  # `--session <path>` names files freely
    assert parent_from(f"C:\\Users\\dev\\{MAIN.name}") == MAIN_ID
    assert parent_from(7) is None


# -- bounds: a file larger than the head and the tail -------------------------------------------


def entry(kind: str, **fields: object) -> bytes:
    return json.dumps({"type": kind, **fields}).encode() + b"\n"


def user(text: str, when: int) -> bytes:
    return entry("message", id=f"u{when}", timestamp="2026-11-30T10:00:00Z",
                 message={"role": "user", "content": [{"type": "text", "text": text}],
                          "timestamp": when})


def assistant(model: str, when: int) -> bytes:
    return entry("message", id=f"a{when}", timestamp="2026-11-30T10:00:00Z",
                 message={"role": "assistant", "content": [], "provider": "p", "model": model,
                          "timestamp": when})


HEADER = entry("session", version=3, id=MAIN_ID, timestamp="2026-11-30T08:00:00.000Z",
               cwd="/home/dev/src/big")
FILLER = entry("message", id="tool", timestamp="2026-11-30T09:00:00Z",
               message={"role": "toolResult", "content": "x" * (300 * 1024)})


def test_a_large_file_takes_the_name_model_and_time_from_its_tail() -> None:
    data = (HEADER + entry("model_change", provider="p", modelId="early") + user("first", 1)
            + FILLER + entry("session_info", name="Late name") + user("later", 2_000_000_000_000)
            + assistant("late", 2_000_000_000_500))
    found = summarize(sample_of(data))
    assert found is not None
    assert (found.title, found.model) == ("Late name", "p/late")
    assert found.updated_at == ms(2_000_000_000_500)
    assert found.message_count is None  # only part of the file was read


def test_a_name_only_in_the_unread_middle_falls_back_to_the_first_message() -> None:
    data = (HEADER + user("the first ask", 1) + FILLER + entry("session_info", name="Hidden")
            + FILLER + user("later", 2))
    found = summarize(sample_of(data))
    assert found is not None
    assert found.title == "the first ask"


def test_a_name_in_the_head_counts_when_the_tail_has_none() -> None:
    data = (HEADER + user("ask", 1) + entry("session_info", name="Early name") + FILLER
            + user("x", 2))
    found = summarize(sample_of(data))
    assert found is not None
    assert found.title == "Early name"


def test_an_empty_name_clears_an_earlier_one() -> None:
    data = HEADER + user("ask", 1) + entry("session_info", name="Old") + entry("session_info")
    found = summarize(sample_of(data))
    assert found is not None
    assert found.title == "ask"


def test_a_giant_last_line_leaves_the_file_time() -> None:
    data = HEADER + user("ask", 1) + FILLER + FILLER
    found = summarize(sample_of(data))
    assert found is not None
    assert found.updated_at == MTIME


def test_a_first_message_larger_than_the_head_gives_no_title() -> None:
    data = HEADER + user("y" * HEAD_BYTES, 1) + assistant("m", 2)
    found = summarize(sample_of(data))
    assert found is not None
    assert found.title is None
    assert found.model == "p/m"


LONG = "y" * 5000  # a line of 1 KiB or more is judged by its opening before it is decoded


def test_long_lines_that_can_matter_are_read_in_the_tail() -> None:
    data = (HEADER + user("first", 1) + FILLER + entry("session_info", name="Long name", x=LONG)
            + entry("message", id="u9", timestamp="2026-11-30T10:00:00Z", message={
                "role": "user", "content": LONG, "timestamp": 2_000_000_000_000})
            + entry("message", id="a9", timestamp="2026-11-30T10:00:00Z", message={
                "role": "assistant", "content": [{"type": "text", "text": LONG}], "provider": "p",
                "model": "long", "timestamp": 1_900_000_000_000})
            # Tool output is no activity, however new.
            + entry("message", id="t9", timestamp="2026-11-30T10:00:00Z", message={
                "role": "toolResult", "content": LONG, "timestamp": 2_100_000_000_000}))
    found = summarize(sample_of(data))
    assert found is not None
    assert (found.title, found.model) == ("Long name", "p/long")
    assert found.updated_at == ms(2_000_000_000_000)


def test_long_lines_that_can_matter_are_read_in_the_head() -> None:
    data = (HEADER + entry("model_change", provider="p", modelId="early", x=LONG)
            + entry("message", id="u1", timestamp="2026-11-30T10:00:00Z", message={
                "role": "user", "content": "long first ask " + LONG, "timestamp": 1})
            + entry("session_info", name="Early name", x=LONG) + FILLER + user("x", 2))
    found = summarize(sample_of(data))
    assert found is not None
    assert (found.title, found.model) == ("Early name", "p/early")
    found = summarize(sample_of(data.replace(b"session_info", b"other_entry")))
    assert found is not None
    assert found.title is not None and found.title.startswith("long first ask yyy")


def test_an_entry_spelled_unusually_is_still_read() -> None:
    # Short lines are passed over by the tokens they must spell; JSON may spell them
    # with escapes, and json.loads takes leading space.
    escaped = b'{"type":"session_\\u0069nfo","name":"Escaped name"}\n'
    spaced = b' {"type": "model_change", "provider": "p", "modelId": "spaced"}\n'
    found = summarize(sample_of(HEADER + user("ask", 1) + FILLER + escaped + spaced))
    assert found is not None
    assert (found.title, found.model) == ("Escaped name", "p/spaced")


# -- where the store is -------------------------------------------------------------------------


def test_the_agent_dir_defaults_to_the_home() -> None:
    assert agent_dir({"HOME": "/home/u"}) == Path("/home/u/.pi/agent")
    assert agent_dir({"HOME": "/home/u", "PI_CODING_AGENT_DIR": ""}) == Path("/home/u/.pi/agent")


@pytest.mark.parametrize(("value", "expected"), [
    ("/srv/agent", "/srv/agent"),
    ("/srv/agent/", "/srv/agent"),
    ("~", "/home/u"),
    ("~/alt", "/home/u/alt"),
    ("~other/alt", None),  # pi expands only ~ and ~/: this stays relative
    ("relative/agent", None),  # relative to wherever pi was started: unknowable
])
def test_pi_coding_agent_dir(value: str, expected: str | None) -> None:
    found = agent_dir({"HOME": "/home/u", "PI_CODING_AGENT_DIR": value})
    assert found == (None if expected is None else Path(expected))


def test_roots_default_env_and_settings(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "settings.json").write_text(json.dumps({"sessionDir": "~/from-settings"}))
    environ = {"HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(agent),
               "PI_CODING_AGENT_SESSION_DIR": "~/from-env"}
    assert session_roots(environ, LocalFiles()) == (
        SessionRoot(agent / "sessions", nested=True),
        SessionRoot(tmp_path / "from-env", nested=False),
        SessionRoot(tmp_path / "from-settings", nested=False),
    )
    assert PiSessions().store_roots(environ, LocalFiles()) == (
        agent / "sessions", tmp_path / "from-env", tmp_path / "from-settings"
    )


def test_a_relative_session_dir_is_not_guessed(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path), "PI_CODING_AGENT_SESSION_DIR": "relsess"}
    assert session_roots(environ, LocalFiles()) == (
        SessionRoot(tmp_path / ".pi" / "agent" / "sessions", nested=True),
    )


def test_the_same_directory_twice_is_one_root(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path), "PI_CODING_AGENT_SESSION_DIR": str(tmp_path / "s")}
    (tmp_path / ".pi" / "agent").mkdir(parents=True)
    (tmp_path / ".pi" / "agent" / "settings.json").write_text('{"sessionDir": "~/s"}')
    assert [r.path for r in session_roots(environ, LocalFiles())] == [
        tmp_path / ".pi" / "agent" / "sessions", tmp_path / "s"
    ]


@pytest.mark.parametrize(("content", "expected"), [
    ('{"sessionDir": "/abs/dir"}', "/abs/dir"),
    ('{"sessionDir": "~"}', "HOME"),
    ('{"sessionDir": "~/s"}', "HOME/s"),
    ('{"sessionDir": "relsess"}', None),  # pi: relative to its cwd, not to the file
    ('{"sessionDir": ""}', None),
    ('{"sessionDir": 3}', None),
    ('{"retry": {"enabled": false}}', None),
    ("[1, 2]", None),
    ("{not json", None),
    ('{"sessionDir": "/abs", "pad": "' + "x" * (1024 * 1024) + '"}', None),  # over the bound
])
def test_the_global_settings_session_dir(tmp_path: Path, content: str, expected: str | None
                                         ) -> None:
    (tmp_path / "settings.json").write_text(content)
    found = settings_session_dir(tmp_path, {"HOME": "/home/u"}, LocalFiles())
    assert found == (None if expected is None else Path(expected.replace("HOME", "/home/u")))


def test_no_settings_file_is_no_setting(tmp_path: Path) -> None:
    assert settings_session_dir(tmp_path, {"HOME": "/home/u"}, LocalFiles()) is None
    (tmp_path / "settings.json").mkdir()
    assert settings_session_dir(tmp_path, {"HOME": "/home/u"}, LocalFiles()) is None


def test_a_settings_fifo_is_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "settings.json")
    assert settings_session_dir(tmp_path, {"HOME": "/home/u"}, LocalFiles()) is None


def test_a_linked_settings_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "dotfiles.json").write_text('{"sessionDir": "/linked"}')
    (tmp_path / "settings.json").symlink_to(tmp_path / "dotfiles.json")
    assert settings_session_dir(tmp_path, {"HOME": "/home/u"}, LocalFiles()) == Path("/linked")


def test_the_encoding_matches_every_captured_project_dir() -> None:
    for path in (AGENT / "sessions").glob("*/*.jsonl"):
        cwd = first_line(path)["cwd"]
        assert isinstance(cwd, str)
        assert f"--{encode_cwd(cwd)}--" == path.parent.name
    # Not reversible: three directories, one name.
    assert {encode_cwd(p) for p in ("/a/b-c", "/a/b/c", "/a/b:c")} == {"a-b-c"}


def test_the_project_filter_is_conservative() -> None:
    accept = project_dir_filter(("/home/dev/src/pirepo",))
    assert accept is not None
    assert accept(0, "--home-dev-src-pirepo--")
    assert accept(0, "--home-dev-src-pirepo-sub-dir--")  # a directory below the workspace
    assert accept(0, "--home-dev-src-pirepo-v2--")  # a sibling: the service drops it by cwd
    assert not accept(0, "--home-dev-src-migrepo--")
    assert not accept(0, "--home-dev-src--")
    assert project_dir_filter(()) is None
    assert project_dir_filter(("/",)) is None
    assert project_dir_filter(("relative",)) is None


# -- discovery, end to end ----------------------------------------------------------------------


def registry() -> Registry:
    return Registry.from_plugins({"pi": clanker_pi.plugin}, environ={})


PROVIDER = registered(clanker_pi.plugin, "pi")


def copy_store(agent: Path, custom: Path) -> None:
    """The captured agent dir and custom session dir, copied to ``agent`` and ``custom``."""
    shutil.copytree(AGENT, agent)
    shutil.copytree(CUSTOM, custom)


@pytest.fixture
def store(tmp_path: Path) -> dict[str, str]:
    """The captured store, copied; the environ pointing at it."""
    copy_store(tmp_path / "agent", tmp_path / "custom")
    return {"HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(tmp_path / "agent"),
            "PI_CODING_AGENT_SESSION_DIR": str(tmp_path / "custom"), "PATH": os.environ["PATH"]}


def test_the_whole_store_is_listed(store: dict[str, str]) -> None:
    listing = asyncio.run(service(store).discover([PROVIDER], workspace=None))
    assert listing.complete
    assert listing.scans[0].scan.skipped == 0
    assert len(listing.sessions) == 11
    assert {s.harness for s in listing.sessions} == {"pi"}
    roots = PiSessions().store_roots(store, LocalFiles())
    assert all(s.store_path and confined(s.store_path, roots) for s in listing.sessions)


def test_a_workspace_lists_its_own_sessions_newest_first(store: dict[str, str]) -> None:
    listing = asyncio.run(service(store).discover([PROVIDER], workspace="/home/dev/src/pirepo"))
    assert [s.native_id for s in listing.sessions] == [
        "01a22ba6-e060-73c7-88be-ef7aea1118a8",
        "01a22ba6-cedc-7748-921d-a56d13fd0fda",
        "01a22ba6-b0f8-7463-a7ac-a3ee58f0cfde",
        MAIN_ID,
    ]
    assert listing.sessions[-1].title == "Fix the parser"
    # `/home/dev/src/a:b` shares no prefix; `/home/dev/src/proj` is in the flat dir.
    custom = asyncio.run(service(store).discover([PROVIDER], workspace="/home/dev/src/proj"))
    assert [s.native_id for s in custom.sessions] == ["01a22ba5-5749-7236-a17a-197e03855e59"]


def test_the_workspace_prefilter_skips_other_projects(store: dict[str, str]) -> None:
    context = SessionsContext(files=LocalFiles(),
                              harness=HarnessId("pi"), executor=LocalTransport(), environ=store,
                              cache=SummaryCache(HarnessId("pi"), None),
                              scopes=("/home/dev/src/a:b",))
    scan = asyncio.run(PiSessions().discover(context))
    # The one project dir, plus the flat dir that cannot be filtered by name.
    assert sorted(s.native_id for s in scan.sessions) == [
        "01a22ba4-e9a4-7477-a8fa-84d3574418b0", "01a22ba5-5749-7236-a17a-197e03855e59",
    ]


def test_refinding_by_id_and_the_removed_directory_policy(store: dict[str, str],
                                                          tmp_path: Path) -> None:
    found = asyncio.run(service(store).find(PROVIDER, MAIN_ID))
    assert found is not None
    assert found.store_path == str(tmp_path / "agent" / "sessions" / PIREPO.name / MAIN.name)
    # /home/dev/src/pirepo does not exist here: pi refuses such a session by path,
    # so clanker refuses too rather than launching something that fails.
    with pytest.raises(HarnessCapabilityError) as caught:
        asyncio.run(resolve_selection(service(store), registry(), f"pi:{MAIN_ID}",
                                      operation=SessionOperation.RESUME,
                                      workspace=str(tmp_path)))
    assert caught.value.kind is ErrorKind.UNSUPPORTED
    assert "no longer exists" in str(caught.value)


def test_resume_and_fork_use_the_refound_file(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    project = tmp_path / "agent" / "sessions" / f"--{encode_cwd(str(work))}--"
    project.mkdir(parents=True)
    copied = project / MAIN.name
    copied.write_bytes(MAIN.read_bytes().replace(b"/home/dev/src/pirepo", str(work).encode()))
    environ = {"HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(tmp_path / "agent"),
               "PATH": os.environ["PATH"]}
    selection = asyncio.run(resolve_selection(
        service(environ), registry(), f"pi:{MAIN_ID}", operation=SessionOperation.RESUME,
        workspace=str(tmp_path)))
    assert isinstance(selection, Selection)
    assert selection.launch_cwd == str(work)
    assert selection.notice is None
    assert selection.session.store_path == str(copied)
    target = SessionTarget(native_id=selection.session.native_id,
                           store_path=selection.session.store_path)
    for operation, flag in ((LaunchOperation.RESUME, "--session"),
                            (LaunchOperation.FORK, "--fork")):
        plan = plan_launch(selection.provider, LaunchRequest(
            operation=operation, session=target, cwd=selection.launch_cwd))
        assert plan.argv == ("pi", flag, str(copied))


def test_a_refind_reads_only_files_that_can_hold_the_id(store: dict[str, str],
                                                        tmp_path: Path) -> None:
    decoy = tmp_path / "agent" / "sessions" / PIREPO.name / (
        "2026-11-30T00-00-00-000Z_00000000-0000-7000-8000-000000000000.jsonl")
    decoy.write_bytes(b"not a session")
    renamed = tmp_path / "custom" / "my-own-name.jsonl"
    renamed.write_bytes((STORE / CAPTURED[5][0].removeprefix("sessions/")).read_bytes())
    target = "01a22ba4-e9a4-7477-a8fa-84d3574418b0"
    context = SessionsContext(files=LocalFiles(),
                              harness=HarnessId("pi"), executor=LocalTransport(), environ=store,
                              cache=SummaryCache(HarnessId("pi"), None), native_id=target)
    scan = asyncio.run(PiSessions().discover(context))
    assert scan.skipped == 0  # the decoy's name says it is another session: never read
    # Found twice: under its own name and as a file named freely (`--session <path>`).
    assert sorted(Path(s.store_path or "").name for s in scan.sessions) == sorted(
        [CAPTURED[5][0].split("/")[-1], "my-own-name.jsonl"])


def test_what_is_not_a_session_file_is_never_read(store: dict[str, str], tmp_path: Path) -> None:
    project = tmp_path / "agent" / "sessions" / PIREPO.name
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / MAIN.name).write_bytes(MAIN.read_bytes().replace(MAIN_ID.encode(), b"1" * 36))
    (project / ".hidden.jsonl").write_bytes(MAIN.read_bytes())
    (project / "notes.txt").write_bytes(MAIN.read_bytes())
    (project / "nested").mkdir()
    (project / "nested" / "deeper.jsonl").write_bytes(MAIN.read_bytes())
    (project / "link.jsonl").symlink_to(outside / MAIN.name)
    (tmp_path / "agent" / "sessions" / "--linked--").symlink_to(outside)
    (tmp_path / "agent" / "legacy.jsonl").write_bytes(MAIN.read_bytes())  # pi 0.30's place
    listing = asyncio.run(service(store).discover([PROVIDER], workspace=None))
    assert len(listing.sessions) == 11
    assert listing.scans[0].scan.skipped == 0


def test_overlapping_roots_list_a_file_once(store: dict[str, str], tmp_path: Path) -> None:
    overlapping = {**store, "PI_CODING_AGENT_SESSION_DIR": str(
        tmp_path / "agent" / "sessions" / PIREPO.name)}
    listing = asyncio.run(service(overlapping).discover([PROVIDER], workspace=None))
    assert len(listing.sessions) == len({s.native_id for s in listing.sessions}) == 10
    assert asyncio.run(service(overlapping).find(PROVIDER, MAIN_ID)) is not None


def test_pi_refuses_a_session_whose_directory_is_gone() -> None:
    # Verified 2026-11-30 with pi 0.73.1 (tests/fixtures/pi/sessions/cli-output/
    # resume-missing-cwd-by-path-print.stderr.txt): `pi --session <path> -p x` run
    # elsewhere exits 1, "Stored session working directory does not exist".
    assert PiSessions.resumes_without_original_directory is False
    stderr = (STORE / "cli-output" / "resume-missing-cwd-by-path-print.stderr.txt").read_text()
    assert "Stored session working directory does not exist" in stderr


# -- shapes for the contract's properties (test_contract.py) ----------------------------------

_field = awkward_values()


SESSION_FILES = json_line_records(
    ["session", "message", "session_info", "model_change", "custom", "x"],
    ["id", "cwd", "timestamp", "name", "provider", "modelId", "message", "parentSession",
     "branchedFrom", "version"],
    _field, body=("message", ("message",), ("role", "content", "timestamp", "provider", "model")))
"""Session files with values of any type where pi's fields are."""

HUGE_SESSION_FILES = (
    b'{"type":"session","id":"' + b"h" * 300_000 + b'","cwd":"/x"}\n',
    b'{"type":"session","id":"a","cwd":"/x"}\n' + b"[" * 100_000 + b"\n",
    b'{"type":"session","id":"a","cwd":"/x"}\n' + b'{"type":"message","message":' * 50_000,
    b'{"type":"session","id":"a","cwd":"/x"}\n' + b"z" * 1_000_000 + b"\n",
)
"""Huge and deeply nested values where the summarizer reads."""


# -- the real CLI -------------------------------------------------------------------------------


@pytest.fixture
def pi_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A Pi agent dir whose only provider is a refused loopback port; the child's environ."""
    agent = tmp_path / "agent"
    agent.mkdir()
    shutil.copy(FIXTURES / "loopback-models.json", agent / "models.json")
    (agent / "settings.json").write_text('{"retry": {"enabled": false}}')
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PI_")}
    environ.update(HOME=str(tmp_path), PI_CODING_AGENT_DIR=str(agent), PI_OFFLINE="1")
    return environ


def run_pi(environ: Mapping[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["pi", "--offline", *args], cwd=cwd, env=dict(environ), text=True,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=90, check=False)


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("pi") is None, reason="pi is not installed")
def test_real_pi_session_is_found_and_refused_once_its_directory_is_gone(
    pi_home: dict[str, str], tmp_path: Path
) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    run_pi(pi_home, work, "--model", "loopback/probe-model", "-p", "real prompt")
    listing = asyncio.run(service(pi_home).discover([PROVIDER], workspace=str(work)))
    [found] = listing.sessions
    assert (found.title, found.cwd, found.model) == ("real prompt", str(work.resolve()),
                                                     "loopback/probe-model")
    assert found.message_count == 2
    refound = asyncio.run(service(pi_home).find(PROVIDER, found.native_id))
    assert refound is not None and refound.store_path == found.store_path
    # The policy behind resumes_without_original_directory = False, live.
    work.rmdir()
    done = run_pi(pi_home, elsewhere, "--session", found.store_path or "", "-p", "x")
    assert done.returncode == 1
    assert "Stored session working directory does not exist" in done.stderr
