"""The spawn plan's strict read (:mod:`clanker.acp.plan`): whatever the file holds,
a plan back or ``None``, never an error; a plan written reads back as written."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from clanker.acp import plan
from clanker.envvars import host_environ

_CWD = "/work/somewhere"
_ENVIRON = {"PATH": "/usr/bin:/bin", "HOME": "/home/someone", "LANG": "C.UTF-8"}

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)
_names = st.text(st.characters(codec="utf-8", exclude_characters="\0="), min_size=1,
                 max_size=12)
_values = st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=20)


def _written(env: dict[str, str], argv: list[str]) -> dict[str, object]:
    built = plan.build(harness="opencode", account=None, argv=argv, env=env, cwd=_CWD,
                       environ=_ENVIRON, executable=sys.executable, modules=[], files=[])
    assert built is not None
    return built


@given(st.binary(max_size=400))
def test_any_bytes_read_as_a_plan_or_none(raw: bytes) -> None:
    assert plan.parse(raw, "opencode", None, _CWD, _ENVIRON) is None


@given(_json)
def test_any_json_reads_as_none(data: object) -> None:
    assert plan.parse(json.dumps(data).encode(), "opencode", None, _CWD, _ENVIRON) is None


@given(st.dictionaries(_names, _values, max_size=5), st.lists(_names, min_size=1, max_size=3),
       st.sampled_from(["version", "argv", "set", "unset", "files", "executable", "cwd"]),
       _json)
def test_a_plan_reads_back_as_written_and_a_changed_field_never_raises(
        added: dict[str, str], argv: list[str], field: str, value: object) -> None:
    env = {**host_environ(_ENVIRON), "PWD": _CWD, **added}
    kept = _written(env, argv)
    raw = json.dumps(kept).encode()
    found = plan.parse(raw, "opencode", None, _CWD, _ENVIRON)
    assert found is not None and (found.argv, found.env) == (tuple(argv), env)
    # Another account, harness or host's PATH: not this plan.
    assert plan.parse(raw, "opencode", "work", _CWD, _ENVIRON) is None
    assert plan.parse(raw, "codex", None, _CWD, _ENVIRON) is None
    assert plan.parse(raw, "opencode", None, _CWD, {**_ENVIRON, "PATH": "/bin"}) is None
    changed = {**kept, field: value}
    plan.parse(json.dumps(changed).encode(), "opencode", None, _CWD, _ENVIRON)


def test_a_plan_naming_its_directory_holds_there_alone() -> None:
    env = {**host_environ(_ENVIRON), "PWD": _CWD, "WORKSPACE": f"{_CWD}/sub"}
    raw = json.dumps(_written(env, ["agent"])).encode()
    assert plan.parse(raw, "opencode", None, _CWD, _ENVIRON) is not None
    assert plan.parse(raw, "opencode", None, "/elsewhere", _ENVIRON) is None
    moved = {**host_environ(_ENVIRON), "PWD": _CWD}
    raw = json.dumps(_written(moved, ["agent"])).encode()
    found = plan.parse(raw, "opencode", None, "/elsewhere", _ENVIRON)
    assert found is not None and found.env["PWD"] == "/elsewhere"


def test_a_written_plan_is_private_and_written_once(tmp_path: Path) -> None:
    path = str(tmp_path / "cache" / "coder-plan-opencode.json")
    kept = _written({**host_environ(_ENVIRON), "PWD": _CWD}, ["agent"])
    assert plan.write(path, kept)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert not plan.write(path, kept)  # the same plan: left as it is
    assert sorted(os.listdir(tmp_path / "cache")) == ["coder-plan-opencode.json"]
    assert plan.plan_path(str(tmp_path), "../escape") is None


def test_a_path_that_is_no_path_is_a_key_that_does_not_hold() -> None:
    kept = _written({**host_environ(_ENVIRON), "PWD": _CWD}, ["agent"])
    for bad in ("\udcff", "x\0y"):
        changed = {**kept, "files": [[bad, 1, 2]]}
        assert plan.parse(json.dumps(changed).encode(), "opencode", None, _CWD, _ENVIRON) is None
