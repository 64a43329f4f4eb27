"""omp's session history, against stores captured from omp 18.2.3 (tests/fixtures/omp/sessions)."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import pickle
import shutil
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import clanker_omp
from clanker.descriptor import SessionOperation
from clanker.environment.files import FileSample, confined, read_sample
from clanker.environment.lines import decode_object
from clanker.environment.local import LocalFiles
from clanker.execution import LocalTransport
from clanker.ids import HarnessId
from clanker.launch.planning import plan_launch
from clanker.launch.request import LaunchOperation, LaunchRequest, SessionTarget
from clanker.registry import Registry
from clanker.sessions import pool
from clanker.sessions.cache import SummaryCache
from clanker.sessions.capability import SessionsContext
from clanker.sessions.selection import resolve_selection
from clanker.sessions.sniffing import SNIFF_BYTES
from clanker.sessions.types import FOREIGN, parse_timestamp
from clanker.testing import registered
from clanker.testing.sessions import (
    sample_of_bytes,
)
from clanker.testing.sessions import session_service as service
from clanker.testing.strategies import awkward_values, json_line_records
from clanker_omp.sessions import (
    OmpSessions,
    SessionRoot,
    agent_dir,
    profile_name,
    session_roots,
    sessions_dir,
)
from clanker_omp.summaries import (
    HEAD_BYTES,
    TAIL_BYTES,
    BesidePi,
    _summarize,
    encode_cwd,
    parent_from,
    pi_places,
    project_dir_filter,
    summarize,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "omp"
STORE = FIXTURES / "sessions"
AGENT = STORE / "omp-agent"
OMPREPO = AGENT / "sessions" / "-src-omprepo"
MAIN_ID = "01a22ba8-453b-71ef-9bd9-0be5f12b2832"
MAIN = OMPREPO / f"2026-11-30T08-52-57-787Z_{MAIN_ID}.jsonl"
ENCODINGS = STORE / "omp-agent-encodings" / "sessions"
MTIME = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
# The slot keeps what fits in 256 bytes of a 312-byte title set through RPC.
LONG_TITLE = ("Überarbeite den Parser für verschachtelte Sitzungsdateien — sehr lange Überschrift "
              "sehr lange Überschrift sehr lange Überschrift sehr lange Überschrif")


def sample(path: Path) -> FileSample:
    return read_sample(path, head_bytes=HEAD_BYTES, tail_bytes=TAIL_BYTES)


def sample_of(data: bytes, *, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> FileSample:
    """What read_sample would see of ``data``, without a file."""
    return sample_of_bytes(data, head_bytes=head, tail_bytes=tail, mtime=MTIME)


def ms(value: int) -> datetime:
    stamp = parse_timestamp(value)
    assert stamp is not None
    return stamp


def header_of(path: Path) -> dict[str, object]:
    for line in path.read_text().splitlines()[:2]:
        value = json.loads(line)
        if value.get("type") == "session":
            assert isinstance(value, dict)
            return value
    raise AssertionError(path)


# -- every captured file --------------------------------------------------------------------

# (file, id, title, cwd, updated (ms), created, model, messages, parent id). Read off the
# files: `updated` is the newest `message` entry's own timestamp (the trailing `session_exit`
# entries do not count), the model is the default-role `model_change`.
_ENC = "sessions/omp-agent-encodings/sessions"
CAPTURED = [
    ("session-loopback-fork--2026-11-30T08-23-26-947Z_01a22b8d-3fe3-723f-b65b-0b7774ede243.jsonl",
     "01a22b8d-3fe3-723f-b65b-0b7774ede243", "hi", "/home/dev/src/omprepo", 1796027010980,
     "2026-11-30T08:23:26.947+00:00", "loopback/probe-model", 10,
     "01a22b8c-ca4c-72fc-ac3b-8d1148698ba1"),
    ("sessions/custom-session-dirs/envsess/2026-11-30T08-57-44-972Z_01a22bac-a70c-7233-b092"
     "-42b0ef726234.jsonl", "01a22bac-a70c-7233-b092-42b0ef726234", "hi", "/home/dev/src/proj",
     1796029071040, "2026-11-30T08:57:44.972+00:00", "loopback/probe-model", 2, None),
    ("sessions/custom-session-dirs/flagsess/2026-11-30T08-57-56-010Z_01a22bac-d22a-7702-aa29"
     "-a3fda02e18d5.jsonl", "01a22bac-d22a-7702-aa29-a3fda02e18d5", "hi", "/home/dev/src/proj",
     1796029082052, "2026-11-30T08:57:56.010+00:00", "loopback/probe-model", 2, None),
    ("sessions/inputs/missing-cwd-before-move.jsonl", MAIN_ID, LONG_TITLE, "/home/dev/src/gone",
     1796028810120, "2026-11-30T08:52:57.787+00:00", "loopback/probe-model", 4, None),
    ("sessions/inputs/truncated-tail-before-resume.jsonl",
     "01a22bb0-9544-751b-86b4-b2cbe80cbbf1", "first prompt", "/home/dev/src/migrepo",
     1796029327039, "2026-11-30T09:02:02.565+00:00", "loopback/probe-model", 2, None),
    # pi's version-1 format, no slot: header on line 1, model only on messages and header.
    ("sessions/inputs/v1-session-before-migration.jsonl",
     "5f0c7a52-3c1e-4d2a-9b7e-0a1b2c3d4e5f", "old v1 question", "/home/dev/src/migrepo",
     1766224802000, "2025-12-20T10:00:00+00:00", "loopback/probe-model", 2, None),
    # Migrated by omp: slot added (empty), no model_change, so the assistant's model.
    ("sessions/omp-agent/sessions/-src-migrepo/2025-12-20T10-00-00-000Z_5f0c7a52-3c1e-4d2a-9b7e"
     "-0a1b2c3d4e5f.jsonl", "5f0c7a52-3c1e-4d2a-9b7e-0a1b2c3d4e5f", "old v1 question",
     "/home/dev/src/migrepo", 1796029271857, "2025-12-20T10:00:00+00:00", "loopback/probe-model",
     4, None),
    ("sessions/omp-agent/sessions/-src-migrepo/2026-11-30T09-02-02-565Z_01a22bb0-9544-751b-86b4"
     "-b2cbe80cbbf1.jsonl", "01a22bb0-9544-751b-86b4-b2cbe80cbbf1", "first prompt",
     "/home/dev/src/migrepo", 1796029337102, "2026-11-30T09:02:02.565+00:00",
     "loopback/probe-model", 4, None),
    ("sessions/omp-agent/sessions/-src-omprepo/2026-11-30T08-52-57-787Z_01a22ba8-453b-71ef-9bd9"
     "-0be5f12b2832.jsonl", MAIN_ID, LONG_TITLE, "/home/dev/src/omprepo", 1796028810120,
     "2026-11-30T08:52:57.787+00:00", "loopback/probe-model", 4, None),
    # --fork: parentSession is the source's id.
    ("sessions/omp-agent/sessions/-src-omprepo/2026-11-30T08-53-32-310Z_01a22ba8-cc16-75f9-a12a"
     "-ea2a402e4d9e.jsonl", "01a22ba8-cc16-75f9-a12a-ea2a402e4d9e", LONG_TITLE,
     "/home/dev/src/omprepo", 1796028816336, "2026-11-30T08:53:32.310+00:00",
     "loopback/probe-model", 6, MAIN_ID),
    # /branch: parentSession is the source's path; copied messages are older than the branch.
    ("sessions/omp-agent/sessions/-src-omprepo/2026-11-30T08-53-47-344Z_01a22ba9-06d0-7111-a86a"
     "-87a60ef1a6ca.jsonl", "01a22ba9-06d0-7111-a86a-87a60ef1a6ca", LONG_TITLE,
     "/home/dev/src/omprepo", 1796028827344, "2026-11-30T08:53:47.344+00:00",
     "loopback/probe-model", 2, MAIN_ID),
    # /new: header only, no message, no model, an empty slot.
    ("sessions/omp-agent/sessions/-src-omprepo/2026-11-30T08-53-47-452Z_01a22ba9-073c-730e-84d8"
     "-000f85fb605b.jsonl", "01a22ba9-073c-730e-84d8-000f85fb605b", None, "/home/dev/src/omprepo",
     1796028827452, "2026-11-30T08:53:47.452+00:00", None, 0, None),
    ("sessions/omp-agent-after-move/sessions/-src-elsewhere/2026-11-30T08-52-57-787Z_01a22ba8"
     "-453b-71ef-9bd9-0be5f12b2832.jsonl", MAIN_ID, LONG_TITLE, "/home/dev/src/elsewhere",
     1796028810120, "2026-11-30T08:52:57.787+00:00", "loopback/probe-model", 4, None),
    (f"{_ENC}/-/2026-11-30T08-55-35-559Z_01a22baa-ad87-7440-a3e3-c4d21ef4931c.jsonl",
     "01a22baa-ad87-7440-a3e3-c4d21ef4931c", "hi", "/home/dev", 1796028937034,
     "2026-11-30T08:55:35.559+00:00", "loopback/probe-model", 2, None),
    (f"{_ENC}/--srv-work-abs--/2026-11-30T08-55-17-769Z_01a22baa-6809-7112-9c79-618877feee9f"
     ".jsonl", "01a22baa-6809-7112-9c79-618877feee9f", "hi", "/srv/work/abs", 1796028919552,
     "2026-11-30T08:55:17.769+00:00", "loopback/probe-model", 2, None),
    (f"{_ENC}/-src-a-b/2026-11-30T08-54-16-778Z_01a22ba9-79ca-7169-813a-57228d06ff58.jsonl",
     "01a22ba9-79ca-7169-813a-57228d06ff58", "hi", "/home/dev/src/a:b", 1796028859006,
     "2026-11-30T08:54:16.778+00:00", "loopback/probe-model", 2, None),
    (f"{_ENC}/-src-a-b/2026-11-30T08-54-27-612Z_01a22ba9-a41c-7738-8890-4a9c7550b476.jsonl",
     "01a22ba9-a41c-7738-8890-4a9c7550b476", "hi", "/home/dev/src/a-b", 1796028869512,
     "2026-11-30T08:54:27.612+00:00", "loopback/probe-model", 2, None),
    (f"{_ENC}/-src-a-b/2026-11-30T08-54-33-482Z_01a22ba9-bb0a-7361-ae3f-3e369af9e883.jsonl",
     "01a22ba9-bb0a-7361-ae3f-3e369af9e883", "hi", "/home/dev/src/a/b", 1796028875006,
     "2026-11-30T08:54:33.482+00:00", "loopback/probe-model", 2, None),
    (f"{_ENC}/-src-dots.v1.2/2026-11-30T08-54-06-160Z_01a22ba9-5050-73f4-82ad-949c6095734e.jsonl",
     "01a22ba9-5050-73f4-82ad-949c6095734e", "hi", "/home/dev/src/dots.v1.2", 1796028848135,
     "2026-11-30T08:54:06.160+00:00", "loopback/probe-model", 2, None),
    (f"{_ENC}/-src-real/2026-11-30T08-54-57-921Z_01a22baa-1a81-77b7-8d01-509f18433f0c.jsonl",
     "01a22baa-1a81-77b7-8d01-509f18433f0c", "hi", "/home/dev/src/real", 1796028899551,
     "2026-11-30T08:54:57.921+00:00", "loopback/probe-model", 2, None),
    # `--cwd <symlink>`: the dir is named from the target, the header keeps the link.
    (f"{_ENC}/-src-real/2026-11-30T08-55-28-145Z_01a22baa-9091-713e-b5a1-c4b68636fa5e.jsonl",
     "01a22baa-9091-713e-b5a1-c4b68636fa5e", "hi", "/srv/link-to-real", 1796028930068,
     "2026-11-30T08:55:28.145+00:00", "loopback/probe-model", 2, None),
    (f"{_ENC}/-src-with space/2026-11-30T08-54-00-905Z_01a22ba9-3bc9-72d6-a3b3-cdc0a61a90a8.jsonl",
     "01a22ba9-3bc9-72d6-a3b3-cdc0a61a90a8", "hi", "/home/dev/src/with space", 1796028843064,
     "2026-11-30T08:54:00.905+00:00", "loopback/probe-model", 2, None),
    (f"{_ENC}/-src-ünï-çødé/2026-11-30T08-54-11-998Z_01a22ba9-671e-70e4-b0e5-f907eaa3643f.jsonl",
     "01a22ba9-671e-70e4-b0e5-f907eaa3643f", "hi", "/home/dev/src/ünï-çødé", 1796028853672,
     "2026-11-30T08:54:11.998+00:00", "loopback/probe-model", 2, None),
    (f"{_ENC}/-tmp/2026-11-30T08-54-50-984Z_01a22ba9-ff68-728e-bd57-f2679abcc64d.jsonl",
     "01a22ba9-ff68-728e-bd57-f2679abcc64d", "hi", "/tmp", 1796028892525,
     "2026-11-30T08:54:50.984+00:00", "loopback/probe-model", 2, None),
    (f"{_ENC}/-tmp/2026-11-30T08-55-04-103Z_01a22baa-32a7-723d-8ccf-c2dbe36b8496.jsonl",
     "01a22baa-32a7-723d-8ccf-c2dbe36b8496", "hi", "/home/dev/tmp", 1796028905871,
     "2026-11-30T08:55:04.103+00:00", "loopback/probe-model", 2, None),
    (f"{_ENC}/-tmp-work-x/2026-11-30T08-54-38-887Z_01a22ba9-d027-7549-8660-3e7f568480bc.jsonl",
     "01a22ba9-d027-7549-8660-3e7f568480bc", "hi", "/tmp/work/x", 1796028880341,
     "2026-11-30T08:54:38.887+00:00", "loopback/probe-model", 2, None),
    (f"{_ENC}/-tmp-x/2026-11-30T08-54-22-367Z_01a22ba9-8f9f-7068-9837-aff12ccea6f8.jsonl",
     "01a22ba9-8f9f-7068-9837-aff12ccea6f8", "hi", "/home/dev/tmp-x", 1796028864198,
     "2026-11-30T08:54:22.367+00:00", "loopback/probe-model", 2, None),
]


def test_the_table_covers_every_captured_session_file() -> None:
    covered = {FIXTURES / row[0] for row in CAPTURED}
    # commit/ holds `--print --mode json` streams (test_commit.py) and acp/ ACP frames
    # (tests/core/acp), not session files.
    sessions = {p for p in FIXTURES.rglob("*.jsonl")
                if "cli-output" not in p.parts
                and not {"commit", "acp"} & set(p.relative_to(FIXTURES).parts)}
    assert sessions == covered
    assert summarize(sample(STORE / "cli-output" / "acp-session-list-responses.jsonl")) is None


def test_the_slot_is_line_one_and_exactly_256_bytes() -> None:
    first = MAIN.read_bytes().split(b"\n")[0]
    assert len(first) + 1 == 256
    assert json.loads(first)["type"] == "title"


def test_agrees_with_omps_own_listing() -> None:
    # ACP `session/list` (captured): id, cwd, title and message count per file. omp counts
    # messages in a 4 KB prefix, so the one file larger than that (4765 bytes) is undercounted.
    response = json.loads(
        (STORE / "cli-output" / "acp-session-list-responses.jsonl").read_text().splitlines()[0])
    listed = {s["sessionId"]: s for s in response["result"]["sessions"]}
    for path in OMPREPO.glob("*.jsonl"):
        found = summarize(sample(path))
        assert found is not None
        theirs = listed[found.native_id]
        assert (found.cwd, found.title) == (theirs["cwd"], theirs.get("title"))
        if path.stat().st_size <= 4096:
            assert found.message_count == theirs["_meta"]["messageCount"]
        else:
            assert (found.message_count, theirs["_meta"]["messageCount"]) == (6, 5)


def test_parent_ids_from_an_id_or_a_path() -> None:
    branch = header_of(
        OMPREPO / "2026-11-30T08-53-47-344Z_01a22ba9-06d0-7111-a86a-87a60ef1a6ca.jsonl")
    assert branch["parentSession"] == f"/home/dev/.omp/agent/sessions/-src-omprepo/{MAIN.name}"
    assert parent_from(branch["parentSession"]) == MAIN_ID
    assert parent_from(MAIN_ID) == MAIN_ID
    assert parent_from(MAIN.name) == MAIN_ID  # a bare file name is a path too
    assert parent_from("/x/renamed.jsonl") is None
    assert parent_from("id with\nnewline") is None
    assert parent_from(["x"]) is None


# -- the slot and the header ----------------------------------------------------------------


def entry(kind: str, **fields: object) -> bytes:
    return json.dumps({"type": kind, **fields}).encode() + b"\n"


def slot(title: str) -> bytes:
    line = json.dumps({"type": "title", "v": 1, "title": title, "updatedAt": "2026-11-30T00:00Z",
                       "pad": ""}).encode()
    return line + b" " * (255 - len(line)) + b"\n" if len(line) < 255 else line + b"\n"


HEADER = entry("session", version=3, id=MAIN_ID, timestamp="2026-11-30T08:00:00.000Z",
               cwd="/home/dev/src/big", title="Header title")


def user(text: str, stamp: str = "2026-11-30T09:00:00Z") -> bytes:
    return entry("message", id=text[:8], timestamp=stamp,
                 message={"role": "user", "content": text, "timestamp": 1})


def test_an_empty_slot_hides_the_header_title() -> None:
    found = summarize(sample_of(slot("") + HEADER + user("first ask")))
    assert found is not None
    assert found.title == "first ask"


def test_without_a_slot_the_header_title_counts() -> None:
    found = summarize(sample_of(HEADER + user("first ask")))
    assert found is not None
    assert found.title == "Header title"


def test_a_slot_caught_mid_rewrite_is_as_if_there_were_none() -> None:
    found = summarize(sample_of(b'{"type":"title","v":1,"tit\x00\xff' + b"\n" + HEADER))
    assert found is not None
    assert found.title == "Header title"


@pytest.mark.parametrize("first", [
    entry("custom", customType="x"), entry("message", message={"role": "user"}),
])
def test_a_header_on_line_two_needs_a_slot_on_line_one(first: bytes) -> None:
    assert summarize(sample_of(first + HEADER)) is None


def test_a_header_after_line_two_is_no_session() -> None:
    assert summarize(sample_of(slot("t") + entry("custom") + HEADER)) is None


FILLER = entry("message", id="tool", timestamp="2026-11-30T09:30:00Z",
               message={"role": "toolResult", "content": "x" * (300 * 1024)})


def test_temporary_model_roles_do_not_count_and_large_files_read_the_tail() -> None:
    data = (slot("T") + HEADER + entry("model_change", model="p/early") + user("ask") + FILLER
            + entry("model_change", model="p/default-late")
            + entry("model_change", model="p/smol", role="smol")
            + user("later", "2026-11-30T11:00:00Z")
            + entry("custom", customType="session_exit", timestamp="2026-11-30T12:00:00Z"))
    found = summarize(sample_of(data))
    assert found is not None
    assert found.model == "p/default-late"
    assert found.updated_at == datetime(2026, 11, 30, 11, tzinfo=UTC)  # session_exit is no activity
    assert found.message_count is None
    assert found.title == "T"


def test_the_model_in_the_head_when_the_tail_has_none() -> None:
    data = slot("T") + HEADER + entry("model_change", model="p/early") + FILLER + user("x")
    found = summarize(sample_of(data))
    assert found is not None
    assert found.model == "p/early"


def test_a_giant_last_line_leaves_the_file_time() -> None:
    found = summarize(sample_of(slot("T") + HEADER + user("ask") + FILLER + FILLER))
    assert found is not None
    assert found.updated_at == MTIME


def test_long_tool_output_moves_the_time_only_when_it_is_newer() -> None:
    # A long tool result is decoded only when its opening names a newer time than any
    # already read; one that does not parse is no activity, whatever it names.
    tool = entry("message", id="tool2", timestamp="2026-11-30T13:00:00Z",
                 message={"role": "toolResult", "content": "y" * 5000})
    data = slot("T") + HEADER + user("ask") + FILLER + user("later", "2026-11-30T11:00:00Z")
    for tail, hour, minute in [
        (tool, 13, 0),
        (tool.replace(b"13:00", b"10:00"), 11, 0),
        (tool[:3000] + b"\n" + user("last", "2026-11-30T11:30:00Z"), 11, 30),
    ]:
        found = summarize(sample_of(data + tail))
        assert found is not None
        assert found.updated_at == datetime(2026, 11, 30, hour, minute, tzinfo=UTC)


def test_a_long_model_change_in_the_head_is_read() -> None:
    data = (slot("T") + HEADER + entry("model_change", model="p/early", x="y" * 5000)
            + FILLER + user("x"))
    found = summarize(sample_of(data))
    assert found is not None
    assert found.model == "p/early"


def test_a_header_larger_than_the_head_is_a_skip() -> None:
    huge = entry("session", id=MAIN_ID, cwd="/x", title="t" * HEAD_BYTES)
    assert summarize(sample_of(slot("") + huge + user("ask"))) is None


# -- where the store is -------------------------------------------------------------------------

HOME = {"HOME": "/home/u"}


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, None),
    ({"OMP_PROFILE": "work"}, "work"),
    ({"PI_PROFILE": "work"}, "work"),
    ({"OMP_PROFILE": "", "PI_PROFILE": "work"}, None),  # defined and empty: the default
    ({"OMP_PROFILE": "home", "PI_PROFILE": "work"}, "home"),
    ({"OMP_PROFILE": " default "}, None),
    ({"OMP_PROFILE": "Work"}, None),  # invalid: omp refuses to start, its resolver uses the default
    ({"OMP_PROFILE": "a."}, None),
    ({"OMP_PROFILE": "con"}, None),
    ({"OMP_PROFILE": "../x"}, None),
])
def test_profile_names(environ: dict[str, str], expected: str | None) -> None:
    assert profile_name(environ) == expected


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, ("/home/u/.omp/agent", True)),
    ({"PI_CONFIG_DIR": ".ompalt"}, ("/home/u/.ompalt/agent", True)),
    ({"PI_CONFIG_DIR": "/abs"}, ("/home/u/abs/agent", True)),  # node's path.join keeps the home
    ({"PI_CODING_AGENT_DIR": "/srv/alt/"}, ("/srv/alt", False)),
    ({"PI_CODING_AGENT_DIR": "/home/u/.omp/agent"}, ("/home/u/.omp/agent", True)),
    ({"PI_CODING_AGENT_DIR": ""}, ("/home/u/.omp/agent", True)),
    ({"PI_CODING_AGENT_DIR": "~/alt"}, None),  # no ~ expansion: relative to omp's cwd
    ({"PI_CODING_AGENT_DIR": "relative"}, None),
    ({"OMP_PROFILE": "work"}, ("/home/u/.omp/profiles/work/agent", True)),
    # A named profile ignores PI_CODING_AGENT_DIR.
    ({"OMP_PROFILE": "work", "PI_CODING_AGENT_DIR": "/srv/alt"},
     ("/home/u/.omp/profiles/work/agent", True)),
    # ...and one that is the agent dir of a PI_PROFILE that OMP_PROFILE overrode is inherited.
    ({"OMP_PROFILE": "", "PI_PROFILE": "work",
      "PI_CODING_AGENT_DIR": "/home/u/.omp/profiles/work/agent"}, ("/home/u/.omp/agent", True)),
])
def test_agent_dir_precedence(environ: dict[str, str], expected: tuple[str, bool] | None) -> None:
    assert agent_dir({**HOME, **environ}) == expected


def test_xdg_moves_sessions_only_when_its_directory_exists(tmp_path: Path) -> None:
    data = tmp_path / "data"
    environ = {"HOME": "/home/u", "XDG_DATA_HOME": str(data)}
    assert (sessions_dir(environ, LocalFiles(), platform="linux")
            == Path("/home/u/.omp/agent/sessions"))
    (data / "omp").mkdir(parents=True)
    assert sessions_dir(environ, LocalFiles(), platform="linux") == data / "omp" / "sessions"
    assert sessions_dir(environ, LocalFiles(), platform="darwin") == data / "omp" / "sessions"
    assert (sessions_dir(environ, LocalFiles(), platform="win32")
            == Path("/home/u/.omp/agent/sessions"))
    # A custom agent dir is never relocated; one equal to the default is.
    assert sessions_dir({**environ, "PI_CODING_AGENT_DIR": "/srv/alt"}, LocalFiles(),
                        platform="linux") == Path("/srv/alt/sessions")
    assert sessions_dir({**environ, "PI_CODING_AGENT_DIR": "/home/u/.omp/agent"}, LocalFiles(),
                        platform="linux") == data / "omp" / "sessions"
    assert sessions_dir({**environ, "XDG_DATA_HOME": "relative"}, LocalFiles(),
                        platform="linux") == Path("/home/u/.omp/agent/sessions")
    # A named profile moves only once its own XDG directory exists.
    profile = {**environ, "OMP_PROFILE": "work"}
    assert sessions_dir(profile, LocalFiles(), platform="linux") == Path(
        "/home/u/.omp/profiles/work/agent/sessions")
    (data / "omp" / "profiles" / "work").mkdir(parents=True)
    moved = data / "omp" / "profiles" / "work" / "sessions"
    assert sessions_dir(profile, LocalFiles(), platform="linux") == moved


def test_roots_managed_and_explicit() -> None:
    environ = {"HOME": "/home/u", "PI_CODING_AGENT_SESSION_DIR": "/srv/sessions"}
    assert session_roots(environ, LocalFiles(), platform="linux") == (
        SessionRoot(Path("/home/u/.omp/agent/sessions"), nested=True),
        SessionRoot(Path("/srv/sessions"), nested=False),
    )
    for relative in ("~/envsess", "relsess"):  # omp expands neither
        found = session_roots({**environ, "PI_CODING_AGENT_SESSION_DIR": relative}, LocalFiles())
        assert found == (SessionRoot(Path("/home/u/.omp/agent/sessions"), nested=True),)
    assert session_roots({"HOME": "/home/u", "PI_CODING_AGENT_DIR": "rel"}, LocalFiles()) == ()
    assert OmpSessions().store_roots(environ, LocalFiles()) == (Path("/home/u/.omp/agent/sessions"),
                                                  Path("/srv/sessions"))


# -- project directory names ----------------------------------------------------------------

ENV_FOR_FIXTURES = {"HOME": "/home/dev", "TMPDIR": "/tmp"}


def test_the_encoding_rules_match_the_captured_names() -> None:
    assert encode_cwd("src/a:b") == encode_cwd("src/a/b") == encode_cwd("src/a-b") == "src-a-b"
    assert encode_cwd("src/with space") == "src-with space"


@pytest.mark.parametrize("path", sorted(ENCODINGS.glob("*/*.jsonl")), ids=lambda p: p.parent.name)
def test_the_project_filter_keeps_every_captured_project(path: Path) -> None:
    cwd = str(header_of(path)["cwd"])
    # The workspace clanker matches is canonical: the symlink's target, not the link.
    scope = "/home/dev/src/real" if cwd == "/srv/link-to-real" else cwd
    accept = project_dir_filter((scope,), ENV_FOR_FIXTURES, LocalFiles())
    if scope in ("/home/dev", "/tmp"):
        assert accept is None
    else:
        assert accept is not None and accept(0, path.parent.name)


def test_the_project_filter_drops_other_projects() -> None:
    accept = project_dir_filter(("/home/dev/src/a-b",), ENV_FOR_FIXTURES, LocalFiles())
    assert accept is not None
    assert accept(0, "-src-a-b") and accept(0, "-src-a-b-sub")
    assert not accept(0, "-src-dots.v1.2") and not accept(0, "-tmp") and not accept(0, "-")
    assert accept(0, "--home-dev-src-a-b--")  # the name before omp's home migration
    assert accept(0, "home-a-b-0123abcd")  # a hashed 17.2.5-17.2.8 name: not recognizable
    temp = project_dir_filter(("/tmp/work/x",), ENV_FOR_FIXTURES, LocalFiles())
    assert temp is not None and temp(0, "-tmp-work-x") and not temp(0, "-src-a-b")
    outside = project_dir_filter(("/srv/work/abs",), ENV_FOR_FIXTURES, LocalFiles())
    assert outside is not None and outside(0, "--srv-work-abs--") and not outside(0, "-src")
    assert project_dir_filter(("/home",), ENV_FOR_FIXTURES, LocalFiles()) is None  # holds the home
    assert project_dir_filter(("/",), ENV_FOR_FIXTURES, LocalFiles()) is None
    assert project_dir_filter(("rel",), ENV_FOR_FIXTURES, LocalFiles()) is None
    assert project_dir_filter((), ENV_FOR_FIXTURES, LocalFiles()) is None


def test_the_project_filter_knows_a_linked_home(tmp_path: Path) -> None:
    real = tmp_path / "real-home"
    (real / "src" / "x").mkdir(parents=True)
    link = tmp_path / "home-link"
    link.symlink_to(real)
    # omp names from the canonical home; older omp from $HOME as spelled.
    accept = project_dir_filter((str(real / "src" / "x"),), {"HOME": str(link), "TMPDIR": "/nx"},
                                LocalFiles())
    assert accept is not None
    assert accept(0, "-src-x")
    assert accept(0, f"--{encode_cwd(str(link)[1:])}-src-x--")


# -- discovery, end to end ----------------------------------------------------------------------


def registry() -> Registry:
    return Registry.from_plugins({"omp": clanker_omp.plugin}, environ={})


PROVIDER = registered(clanker_omp.plugin, "omp")


def copy_store(agent: Path, envsess: Path) -> None:
    """The captured agent dir and env session dir, copied to ``agent`` and ``envsess``."""
    shutil.copytree(AGENT, agent)
    shutil.copytree(STORE / "custom-session-dirs" / "envsess", envsess)


@pytest.fixture
def store(tmp_path: Path) -> dict[str, str]:
    """The captured store, copied, with the captured HOME's names."""
    copy_store(tmp_path / "agent", tmp_path / "envsess")
    # HOME as in the captures, so the project names mean what they meant there; the
    # agent dir is given explicitly so nothing is read from /home/dev.
    return {"HOME": "/home/dev", "TMPDIR": "/tmp", "PATH": os.environ["PATH"],
            "PI_CODING_AGENT_DIR": str(tmp_path / "agent"),
            "PI_CODING_AGENT_SESSION_DIR": str(tmp_path / "envsess")}


def test_the_whole_store_is_listed(store: dict[str, str]) -> None:
    listing = asyncio.run(service(store).discover([PROVIDER], workspace=None))
    assert listing.complete
    assert listing.scans[0].scan.skipped == 0
    assert sorted(s.native_id[:13] for s in listing.sessions) == [
        "01a22ba8-453b", "01a22ba8-cc16", "01a22ba9-06d0", "01a22ba9-073c", "01a22bac-a70c",
        "01a22bb0-9544", "5f0c7a52-3c1e",
    ]
    roots = OmpSessions().store_roots(store, LocalFiles())
    assert all(s.store_path and confined(s.store_path, roots) for s in listing.sessions)


def test_a_workspace_lists_its_own_sessions_newest_first(store: dict[str, str]) -> None:
    listing = asyncio.run(service(store).discover([PROVIDER], workspace="/home/dev/src/omprepo"))
    assert [s.native_id for s in listing.sessions] == [
        "01a22ba9-073c-730e-84d8-000f85fb605b",
        "01a22ba9-06d0-7111-a86a-87a60ef1a6ca",
        "01a22ba8-cc16-75f9-a12a-ea2a402e4d9e",
        MAIN_ID,
    ]
    assert [s.parent_id for s in listing.sessions] == [None, MAIN_ID, MAIN_ID, None]


def test_archives_sub_agents_locks_temps_and_backups_are_not_sessions(
    store: dict[str, str], tmp_path: Path
) -> None:
    project = tmp_path / "agent" / "sessions" / "-src-omprepo"
    other = MAIN.read_bytes().replace(MAIN_ID.encode(), b"01a22ba8-0000-7000-8000-000000000000")
    artifacts = project / MAIN.name.removesuffix(".jsonl")
    artifacts.mkdir()
    (artifacts / "agent-1.jsonl").write_bytes(other)  # a sub-agent's transcript
    (artifacts / "nested").mkdir()
    (artifacts / "nested" / "agent-2.jsonl").write_bytes(other)
    (project / f".{MAIN.name}.lock").write_bytes(other)
    (project / f".{MAIN.name}.123456.tmp").write_bytes(other)
    (project / f"{MAIN.name}.123456.bak").write_bytes(other)
    archived = tmp_path / "agent" / "archive" / "sessions" / "-src-omprepo" / MAIN.name
    (archived.parent / f"{MAIN.name}.gz").unlink()
    archived.write_bytes(other)  # even uncompressed, the archive is outside the sessions dir
    listing = asyncio.run(service(store).discover([PROVIDER], workspace=None))
    assert "01a22ba8-0000-7000-8000-000000000000" not in {s.native_id for s in listing.sessions}
    assert len(listing.sessions) == 7
    assert listing.scans[0].scan.skipped == 0


def test_the_gc_archive_holds_a_copy_that_is_never_a_second_session(store: dict[str, str]) -> None:
    archived = AGENT / "archive" / "sessions" / "-src-omprepo" / f"{MAIN.name}.gz"
    assert gzip.decompress(archived.read_bytes()) == MAIN.read_bytes()
    found = asyncio.run(service(store).find(PROVIDER, MAIN_ID))  # one match, or it raises
    assert found is not None and found.store_path is not None
    assert found.store_path.endswith(f"/sessions/-src-omprepo/{MAIN.name}")


def test_the_custom_session_file_registry_is_not_followed(store: dict[str, str]) -> None:
    # custom-session-files/ names files anywhere (flagsess, a stale relsess entry): only the
    # configured roots count.
    listing = asyncio.run(service(store).discover([PROVIDER], workspace=None))
    assert "01a22bac-d22a-7702-aa29-a3fda02e18d5" not in {s.native_id for s in listing.sessions}


def test_a_gone_directory_resumes_by_path_in_the_workspace(store: dict[str, str],
                                                           tmp_path: Path) -> None:
    # /home/dev/src/omprepo does not exist here. omp loads a session by path from another
    # directory (verified, see OmpSessions), so clanker continues it in the workspace...
    selection = asyncio.run(resolve_selection(
        service(store), registry(), f"omp:{MAIN_ID}", operation=SessionOperation.RESUME,
        workspace=str(tmp_path)))
    assert selection.launch_cwd == str(tmp_path)
    assert selection.notice is not None and "no longer exists" in selection.notice
    store_path = str(tmp_path / "agent" / "sessions" / "-src-omprepo" / MAIN.name)
    assert selection.session.store_path == store_path
    # ...and only ever by that path: by id omp refuses a session whose directory is gone.
    target = SessionTarget(native_id=MAIN_ID, store_path=selection.session.store_path)
    for operation, flag in ((LaunchOperation.RESUME, "--resume"), (LaunchOperation.FORK, "--fork")):
        plan = plan_launch(selection.provider, LaunchRequest(
            operation=operation, session=target, cwd=selection.launch_cwd))
        assert plan.argv == ("omp", "launch", flag, store_path)


def test_an_existing_directory_is_where_the_session_resumes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    work = home / "src" / "omprepo"
    work.mkdir(parents=True)
    project = home / ".omp" / "agent" / "sessions" / "-src-omprepo"
    project.mkdir(parents=True)
    copied = project / MAIN.name
    copied.write_bytes(MAIN.read_bytes().replace(b"/home/dev", str(home).encode()))
    environ = {"HOME": str(home), "PATH": os.environ["PATH"]}
    listing = asyncio.run(service(environ).discover([PROVIDER], workspace=str(work)))
    assert [s.native_id for s in listing.sessions] == [MAIN_ID]
    selection = asyncio.run(resolve_selection(
        service(environ), registry(), f"omp:{MAIN_ID}", operation=SessionOperation.RESUME,
        workspace=str(tmp_path)))
    assert (selection.launch_cwd, selection.notice) == (str(work.resolve()), None)
    assert selection.session.store_path == str(copied)


def test_a_refind_reads_only_files_that_can_hold_the_id(store: dict[str, str],
                                                        tmp_path: Path) -> None:
    project = tmp_path / "agent" / "sessions" / "-src-omprepo"
    (project / "2026-01-01T00-00-00-000Z_00000000-0000-7000-8000-000000000000.jsonl").write_bytes(
        b"garbage")
    (project / "renamed.jsonl").write_bytes(MAIN.read_bytes())
    context = SessionsContext(files=LocalFiles(),
                              harness=HarnessId("omp"), executor=LocalTransport(), environ=store,
                              cache=SummaryCache(HarnessId("omp"), None), native_id=MAIN_ID)
    scan = asyncio.run(OmpSessions().discover(context))
    assert scan.skipped == 0
    assert sorted(Path(s.store_path or "").name for s in scan.sessions) == sorted(
        [MAIN.name, "renamed.jsonl"])


def test_the_project_filter_is_a_value_that_follows_the_home_through_links(
    tmp_path: Path
) -> None:
    # A remembered listing is keyed by the filter, so it must compare by value and
    # change when the home resolves elsewhere, though the store did not change.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    home = tmp_path / "home"
    home.symlink_to(tmp_path / "a")
    environ = {"HOME": str(home), "TMPDIR": "/tmp"}
    scope = str(home / "src" / "x")
    first = project_dir_filter((scope,), environ, LocalFiles())
    assert first is not None and first == project_dir_filter((scope,), environ, LocalFiles())
    assert hash(first) == hash(project_dir_filter((scope,), environ, LocalFiles()))
    home.unlink()
    home.symlink_to(tmp_path / "b")
    assert project_dir_filter((scope,), environ, LocalFiles()) != first


def test_overlapping_roots_list_a_file_once(store: dict[str, str], tmp_path: Path) -> None:
    overlapping = {**store, "PI_CODING_AGENT_SESSION_DIR": str(
        tmp_path / "agent" / "sessions" / "-src-omprepo")}
    listing = asyncio.run(service(overlapping).discover([PROVIDER], workspace=None))
    assert len(listing.sessions) == len({s.native_id for s in listing.sessions}) == 6
    assert asyncio.run(service(overlapping).find(PROVIDER, MAIN_ID)) is not None


def test_omp_continues_a_session_whose_directory_is_gone_by_path() -> None:
    # Verified 2026-11-30 with omp 18.2.3: `omp --resume <path> -p ...` from another
    # directory loaded a session whose cwd was gone and appended to the same file (by id it
    # exits 1, tests/fixtures/omp/resume-missing-cwd.stderr.txt). True only because clanker
    # passes the store path (test_a_gone_directory_resumes_by_path_in_the_workspace).
    assert OmpSessions.resumes_without_original_directory is True
    assert "no longer exists" in (FIXTURES / "resume-missing-cwd.stderr.txt").read_text()


# -- shapes for the contract's properties (test_contract.py) ----------------------------------

_field = awkward_values(["/p/a_b.jsonl"])


SESSION_FILES = json_line_records(
    ["title", "session", "message", "model_change", "title_change", "custom"],
    ["id", "cwd", "timestamp", "title", "model", "role", "provider", "modelId", "message",
     "parentSession"],
    _field, body=("message", ("message",), ("role", "content", "timestamp", "provider", "model")))
"""Session files with values of any type where omp's fields are."""

HUGE_SESSION_FILES = (
    slot("") + b'{"type":"session","id":"' + b"h" * 300_000 + b'","cwd":"/x"}\n',
    slot("") + b'{"type":"session","id":"a","cwd":"/x"}\n' + b"[" * 100_000 + b"\n",
    slot("") + b'{"type":"session","id":"a","cwd":"/x"}\n'
    + b'{"type":"message","message":' * 50_000,
    slot("") + b'{"type":"session","id":"a","cwd":"/x"}\n' + b"z" * 1_000_000 + b"\n",
    b"\n" * 1000 + slot("") + b'{"type":"session","id":"a","cwd":"/x"}\n',
)
"""Huge and deeply nested values where the summarizer reads."""


# -- the real CLI -------------------------------------------------------------------------------


@pytest.fixture
def omp_home(tmp_path: Path) -> dict[str, str]:
    """A home whose only omp provider is a refused loopback port; the child's environ."""
    agent = tmp_path / "home" / ".omp" / "agent"
    agent.mkdir(parents=True)
    shutil.copy(FIXTURES / "loopback-models.yml", agent / "models.yml")
    shutil.copy(FIXTURES / "loopback-config.yml", agent / "config.yml")
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("PI_", "OMP_", "XDG_"))}
    environ["HOME"] = str(tmp_path / "home")
    return environ


def run_omp(environ: Mapping[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["omp", "--no-title", "--max-time", "6", *args], cwd=cwd,
                          env=dict(environ), text=True, stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=120, check=False)


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("omp") is None, reason="omp is not installed")
def test_real_omp_session_is_found_and_continued_by_path_once_its_directory_is_gone(
    omp_home: dict[str, str], tmp_path: Path
) -> None:
    work, elsewhere = tmp_path / "home" / "src" / "work", tmp_path / "elsewhere"
    work.mkdir(parents=True)
    elsewhere.mkdir()
    run_omp(omp_home, work, "--model", "loopback/probe-model", "-p", "real prompt")
    listing = asyncio.run(service(omp_home).discover([PROVIDER], workspace=str(work)))
    [found] = listing.sessions
    assert (found.title, found.cwd, found.model) == ("real prompt", str(work.resolve()),
                                                     "loopback/probe-model")
    assert found.message_count == 2
    assert found.store_path is not None and "/sessions/-src-work/" in found.store_path
    # The policy behind resumes_without_original_directory = True, live, with the argv
    # clanker builds (the store path, not the id).
    work.rmdir()
    argv = plan_launch(PROVIDER, LaunchRequest(
        operation=LaunchOperation.RESUME, cwd=str(elsewhere),
        session=SessionTarget(native_id=found.native_id, store_path=found.store_path))).argv
    assert argv[-1] == found.store_path
    run_omp(omp_home, elsewhere, "--resume", found.store_path, "-p", "after the move")
    again = asyncio.run(service(omp_home).find(PROVIDER, found.native_id))
    assert again is not None and again.store_path == found.store_path
    assert again.message_count == 4


# -- beside Pi: the early answer, and the other core -----------------------------------------

_LINES = st.sampled_from([
    b'{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00Z","cwd":"/w"}',
    b'{"type":"title","title":"named"}', b'{"type":"title"', b"", b"   ", b"\t",
    b'{"type":"message","id":"m1","message":{"role":"user","content":"hi"}}',
    b"not json", b'["type","session"]', b' {"type":"session","id":"s2","cwd":"/w"}'])


@settings(max_examples=300)
@given(st.lists(_LINES, max_size=6), st.sampled_from([b"\n", b""]))
def test_where_pi_reads_a_file_is_pis_exactly_when_its_first_line_is_a_header(
        lines: list[bytes], end: bytes) -> None:
    """The early answer where Pi reads (from line 1 alone) is the one omp's header rule
    gives: Pi's (foreign) when the first non-blank line is a session header, and
    otherwise omp's own summary, as where Pi does not read."""
    data = b"\n".join(lines) + end
    sample = FileSample(path=Path("/s/--w--/a.jsonl"), size=len(data),
                        mtime=datetime(2026, 1, 2, tzinfo=UTC), head=data, tail=b"")
    first = next((line for line in data.split(b"\n") if line.strip()), None)
    opening = None if first is None else decode_object(first)
    pis = opening is not None and opening.get("type") == "session"
    beside = _summarize(sample, pi_reads=True)
    assert (beside is FOREIGN) == pis
    if not pis:
        assert beside == _summarize(sample, pi_reads=False)


def test_beside_pi_the_summary_worker_answers_what_this_process_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """omp's summarizer where Pi reads can be sent to the summary worker, and a shared
    store listed through it is the listing of one process."""
    agent, flat = tmp_path / "agent", tmp_path / "flat"
    for source, target in ((FIXTURES.parent / "pi/sessions/pi-agent/sessions", agent / "sessions"),
                           (STORE / "omp-agent/sessions", agent / "sessions"),
                           (FIXTURES.parent / "pi/sessions/custom-session-dir", flat),
                           (STORE / "custom-session-dirs/envsess", flat)):
        shutil.copytree(source, target, dirs_exist_ok=True)
    environ = {"HOME": "/home/dev", "TMPDIR": "/tmp", "PATH": os.environ["PATH"],
               "PI_CODING_AGENT_DIR": str(agent), "PI_CODING_AGENT_SESSION_DIR": str(flat)}
    files = LocalFiles()
    roots = session_roots(environ, files)
    summarizer = BesidePi(pi_places(environ, files),
                          {str(root.path): (root, files.realpath(root.path)) for root in roots})
    assert pool._sendable(summarizer, summarizer.sniff)
    sample = read_sample(next((agent / "sessions").rglob("*.jsonl")), head_bytes=HEAD_BYTES,
                         tail_bytes=TAIL_BYTES)
    assert pickle.loads(pickle.dumps(summarizer))(sample) == summarizer(sample)
    # What the sniff decides from a file's first bytes is what its whole sample says.
    decided = 0
    for path in [*agent.rglob("*.jsonl"), *flat.rglob("*.jsonl")]:
        whole = read_sample(path, head_bytes=HEAD_BYTES, tail_bytes=TAIL_BYTES)
        first = summarizer.sniff(read_sample(path, head_bytes=SNIFF_BYTES, tail_bytes=0))
        assert first is None or first == summarizer(whole), path
        decided += first is not None
    assert decided  # Pi's own files, where Pi reads

    def listed() -> list[object]:
        listing = asyncio.run(service(environ).discover([PROVIDER], workspace=None,
                                                        limit=100_000))
        return [*(r.scan.skipped for r in listing.scans), *listing.sessions]

    monkeypatch.setattr(pool, "MIN_FILES", 10**9)
    alone = listed()
    monkeypatch.setattr(pool, "MIN_FILES", 1)
    monkeypatch.setattr(pool, "CHUNK", 1)
    assert listed() == alone
    assert len(alone) > 3
    # And with every file read whole (no sniff): the same listing. A method patched in
    # so cannot be sent (pickle names it by a name the class lacks): this process alone.
    monkeypatch.setattr(BesidePi, "sniff", lambda self, sample: None)
    assert not pool._sendable(summarizer, summarizer.sniff)
    assert listed() == alone
    assert not pool._WORKER._failed
