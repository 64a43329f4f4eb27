"""The attention contract's shared pieces for providers: hook_command and private_file."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from clanker.attention.capability import (
    COMMAND_VARIABLE,
    AttachmentContext,
    hook_command,
    private_file,
)
from clanker.environment.local import LocalFiles
from clanker.execution import CommandResult


def test_hook_command_is_the_environments_or_a_value_error() -> None:
    assert hook_command({COMMAND_VARIABLE: "/run/clanker/hook"}) == "/run/clanker/hook"
    for env in ({}, {COMMAND_VARIABLE: ""}):
        with pytest.raises(ValueError, match="no hook command"):
            hook_command(env)


def _context(private: Path) -> AttachmentContext:
    def run(request: object) -> CommandResult:
        raise AssertionError("nothing runs")

    return AttachmentContext(argv=("agent",), env={}, cwd="/", private_dir=private,
                             files=LocalFiles(), run=run)


def test_private_file_is_new_and_0600_and_never_replaces_one(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    path = private_file(_context(private), "settings.json", b"{}\n")
    assert path == private / "settings.json"
    assert path.read_bytes() == b"{}\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with pytest.raises(FileExistsError):
        private_file(_context(private), "settings.json", b"other")
    assert path.read_bytes() == b"{}\n"
