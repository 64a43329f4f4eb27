"""``clean_coder``: only clanker's own coder files (their names, regular files, no
links, in the private directory) are ever removed, and exactly those the rule picks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clanker.acp.cleanup import clean_coder_files

from .conftest import Coder

NOW = 2_000_000_000.0
OWN = st.one_of(
    st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,20}\.jsonl\Z"),
    st.from_regex(r"\Aagent-[0-9]{8}T[0-9]{6}-[0-9]{1,6}\.log\Z"),
)
OTHER = st.one_of(
    st.from_regex(r"\A[A-Za-z0-9._-]{1,20}\Z"),
    st.sampled_from(["coder-secrets.json", ".x.jsonl", "a.jsonl.bak", "agent-1.log",
                     "config.toml", "agent-20260101T000000-1.log.1", "-a.jsonl"]),
).filter(lambda n: n not in (".", ".."))
KIND = st.sampled_from(["file", "symlink", "directory"])


def _make(directory: Path, entries: dict[str, tuple[str, int]], target: Path) -> None:
    for name, (kind, age) in entries.items():
        path = directory / name
        if kind == "file":
            path.write_text("x")
            os.utime(path, (NOW - age, NOW - age))
        elif kind == "symlink":
            path.symlink_to(target)
        else:
            path.mkdir()


def _kind(name: str) -> str | None:
    """The contract for an own coder file's name, stated independently of the code."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.jsonl", name):
        return "transcript"
    if re.fullmatch(r"agent-\d{8}T\d{6}-\d{1,10}\.log", name, re.ASCII):
        return "log"
    return None


def _expected(own: dict[str, int], older_than: int | None, keep: int | None) -> set[str]:
    """The rule, stated plainly: per kind, newest first, past the first ``keep``,
    older than ``older_than``."""
    expected: set[str] = set()
    for kind in ("transcript", "log"):
        newest_first = sorted((n for n in own if _kind(n) == kind), key=own.__getitem__)
        expected |= {n for n in newest_first[keep or 0:]
                     if older_than is None or own[n] > older_than}
    return expected


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.one_of(OWN, OTHER), unique=True, max_size=12),
       kinds=st.lists(KIND, min_size=12, max_size=12),
       ages=st.lists(st.integers(0, 10_000), unique=True, min_size=12, max_size=12),
       older_than=st.one_of(st.none(), st.integers(0, 10_000)),
       keep=st.one_of(st.none(), st.integers(0, 5)),
       dry_run=st.booleans())
def test_only_own_files_the_rule_picks_are_removed(
        tmp_path_factory: pytest.TempPathFactory, names: list[str], kinds: list[str],
        ages: list[int], older_than: int | None, keep: int | None, dry_run: bool) -> None:
    if older_than is None and keep is None:
        keep = 0
    entries = {n: (kinds[i], ages[i]) for i, n in enumerate(names)}
    root = tmp_path_factory.mktemp("clean")
    directory = root / "coder"
    directory.mkdir(mode=0o700)
    target = root / "target.jsonl"
    target.write_text("not clanker's")
    _make(directory, entries, target)
    result = clean_coder_files(directory, older_than=None if older_than is None
                               else timedelta(seconds=older_than), keep=keep,
                               dry_run=dry_run, now=NOW)

    own = {n: age for n, (kind, age) in entries.items()
           if kind == "file" and _kind(n) is not None}
    removed = {p.name for p in result.removed}
    assert removed == _expected(own, older_than, keep)
    assert [p.parent for p in result.removed] == [directory] * len(removed)
    left = set(os.listdir(directory))
    assert left == (set(entries) if dry_run else set(entries) - removed)
    assert target.read_text() == "not clanker's"
    assert result.kept == len(own) - len(removed)


def test_a_rule_is_required(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="give a rule"):
        clean_coder_files(tmp_path)


def test_a_directory_others_can_write_is_not_cleaned(tmp_path: Path) -> None:
    directory = tmp_path / "coder"
    directory.mkdir(mode=0o700)
    (directory / "s.jsonl").write_text("x")
    directory.chmod(0o777)
    with pytest.raises(ValueError, match="not a private directory"):
        clean_coder_files(directory, keep=0)
    assert (directory / "s.jsonl").exists()


def test_a_linked_directory_is_not_followed(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (real / "s.jsonl").write_text("x")
    (tmp_path / "coder").symlink_to(real)
    with pytest.raises(ValueError, match="not a directory clanker can clean"):
        clean_coder_files(tmp_path / "coder", keep=0)
    assert (real / "s.jsonl").exists()


def test_no_directory_removes_nothing(tmp_path: Path) -> None:
    result = clean_coder_files(tmp_path / "missing", keep=0)
    assert result.removed == () and result.kept == 0


def _cli(coder: Coder, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "clanker", "coder", "clean", *args],
                          cwd=coder.workspace, capture_output=True, text=True, timeout=120,
                          check=False, env={**coder.environ,
                                            "CLANKER_HOME": str(coder.workspace.parent / "h")})


def test_the_cli_reports_and_removes(coder: Coder) -> None:
    directory = coder.workspace.parent / "h" / "state" / "coder"
    directory.mkdir(parents=True, mode=0o700)
    old, new = directory / "old.jsonl", directory / "new.jsonl"
    for path, age in ((old, 40 * 86400), (new, 0)):
        path.write_text("{}\n")
        moment = os.stat(path).st_mtime - age
        os.utime(path, (moment, moment))
    (directory / "notes.txt").write_text("mine")
    dry = _cli(coder, "--older-than", "30d", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout == f"would remove {old}\n"
    assert old.exists()
    done = _cli(coder, "--older-than", "30d", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"directory": str(directory), "dry_run": False,
                                       "removed": [str(old)], "kept": 1}
    assert sorted(os.listdir(directory)) == ["new.jsonl", "notes.txt"]
    assert _cli(coder).returncode == 2
    assert _cli(coder, "--older-than", "soon").returncode == 2
