"""This machine as an environment: binary lookup with the answers of :func:`shutil.which`,
found at once, and its bounded reads of small files."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from clanker.environment import LocatesAtOnce
from clanker.environment.local import LocalEnvironment, which
from clanker.installation import installations_at_once, probe_installations
from clanker.registry import get_registry


def _tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    first, second, third = (tmp_path / name for name in ("first", "second", "third"))
    for directory in (first, second, third):
        directory.mkdir()
    (first / "plain").write_text("not executable")
    (first / "both").write_text("#!/bin/sh\n")
    (first / "both").chmod(0o755)
    (second / "both").write_text("#!/bin/sh\n")
    (second / "both").chmod(0o755)
    (second / "plain").write_text("#!/bin/sh\n")
    (second / "plain").chmod(0o755)
    (first / "adir").mkdir(mode=0o755)
    (third / "adir").write_text("#!/bin/sh\n")
    (third / "adir").chmod(0o755)
    os.symlink(second / "both", third / "link")
    os.symlink(tmp_path / "missing", third / "dangling")
    return first, second, third


@pytest.mark.parametrize("command", ["both", "plain", "adir", "link", "dangling", "absent",
                                     "first/both", "sh"])
@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (0, 0, 2), (1,), ()])
def test_which_answers_as_shutil_does(tmp_path: Path, command: str,
                                      order: tuple[int, ...]) -> None:
    dirs = _tree(tmp_path)
    search = os.pathsep.join(str(dirs[i]) for i in order)
    if command == "first/both":
        command = str(dirs[0] / "both")
    assert which(command, search) == shutil.which(command, path=search)


def test_an_empty_path_entry_is_the_working_directory_as_for_shutil(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, _, _ = _tree(tmp_path)
    monkeypatch.chdir(first)
    for search in (f":{tmp_path}", f"{tmp_path}::", ""):
        assert which("both", search) == shutil.which("both", path=search)


def test_local_lookup_needs_no_event_loop_and_agrees_with_the_probe(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    environment = LocalEnvironment({"PATH": str(bin_dir), "HOME": str(tmp_path)})
    assert isinstance(environment, LocatesAtOnce)
    providers = list(get_registry().providers.values())
    at_once = installations_at_once(providers, environment)
    assert at_once is not None
    assert [(i.provider.id, i.path) for i in at_once] == [(p.id, None) for p in providers]
    probed = asyncio.run(probe_installations(providers, environment))
    assert probed == at_once


def test_a_found_executable_with_a_version_to_ask_is_left_to_the_probe(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    providers = [p for p in get_registry().providers.values() if p.launch is not None]
    assert providers
    executable = bin_dir / providers[0].descriptor.executable
    executable.write_text("#!/bin/sh\necho 1.0.0\n")
    executable.chmod(0o755)
    environment = LocalEnvironment({"PATH": str(bin_dir), "HOME": str(tmp_path)})
    assert installations_at_once(providers, environment) is None
    found = asyncio.run(probe_installations(providers, environment))
    assert found[0].path == str(executable)
    assert all(i.path is None for i in found[1:])


def test_read_small_reads_a_small_regular_file_through_a_link_and_nothing_else(
    tmp_path: Path,
) -> None:
    files = LocalEnvironment().files
    small = tmp_path / "settings.json"
    small.write_bytes(b"{}\n")
    link = tmp_path / "linked.json"
    link.symlink_to(small)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert files.read_small(small, 3) == b"{}\n"
    assert files.read_small(str(link), 3) == b"{}\n"  # dotfile managers link such files
    assert files.read_small(small, 2) is None  # over the limit
    assert files.read_small(tmp_path / "missing", 8) is None
    assert files.read_small(tmp_path, 8) is None  # a directory
    assert files.read_small(fifo, 8) is None  # opened without waiting for a writer
    assert files.read_small("bad\0path", 8) is None
