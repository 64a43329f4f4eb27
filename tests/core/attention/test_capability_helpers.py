"""The attention contract's shared pieces for providers: hook_command, private_file and the
grid route an in-process extension delivers by."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from clanker.attention.capability import (
    COMMAND_VARIABLE,
    CREDENTIAL_VARIABLE,
    TRANSPORT_VARIABLE,
    AttachmentContext,
    grid_route,
    hook_command,
    private_file,
    require_grid_route,
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


_SOCKET = {"CLANKER_ATTENTION_SOCKET": "/run/grid.sock", "CLANKER_ATTENTION_TERMINAL": "t1",
           "CLANKER_ATTENTION_TOKEN": "secret"}


@pytest.mark.parametrize(("env", "unset"), [
    ({}, "CLANKER_ATTENTION_SOCKET, CLANKER_ATTENTION_TERMINAL, CLANKER_ATTENTION_TOKEN"),
    ({**_SOCKET, "CLANKER_ATTENTION_TOKEN": ""}, "CLANKER_ATTENTION_TOKEN"),
    ({"CLANKER_ATTENTION_TERMINAL": "t1"}, "CLANKER_ATTENTION_SOCKET, CLANKER_ATTENTION_TOKEN"),
])
def test_a_socket_route_names_what_it_lacks(env: dict[str, str], unset: str) -> None:
    assert not grid_route(env)
    with pytest.raises(ValueError, match=f"lacks {unset} \\(or, on a host, its terminal"):
        require_grid_route(env)


def test_a_terminal_transport_route_needs_only_its_credential() -> None:
    tty = {TRANSPORT_VARIABLE: "tty", CREDENTIAL_VARIABLE: "/run/credential"}
    assert grid_route(tty)
    require_grid_route(tty)
    require_grid_route(_SOCKET)
    # The socket's variables do not stand in for the transport's credential.
    without = {**_SOCKET, TRANSPORT_VARIABLE: "tty"}
    with pytest.raises(ValueError, match=f"lacks {CREDENTIAL_VARIABLE}$"):
        require_grid_route(without)
