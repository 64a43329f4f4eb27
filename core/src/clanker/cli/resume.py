"""``clanker resume`` / ``clanker fork``: back into any past conversation."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from clanker.cli.checkout_errors import checkout_errors
from clanker.cli.common import Failure, library, run_async
from clanker.cli.hosts import host_option
from clanker.cli.launch import bridge_option, no_attention_option, run_launch
from clanker.cli.tmux import tmux_options, tmux_terminal
from clanker.descriptor import SessionOperation
from clanker.errors import EXIT_NOT_FOUND, EXIT_USAGE
from clanker.launch.request import LaunchOperation
from clanker.sessions.selection import InvalidSelectionError, SessionNotFoundError

if TYPE_CHECKING:
    from clanker.api import Clanker
    from clanker.tmux.handoff import TmuxTerminal

__all__ = ["fork", "resume"]


def _continue(
    operation: LaunchOperation, selection: str, model: str | None, workspace: Path | None,
    user_flags: tuple[str, ...], attention: bool, bridge: bool | None, recreate: bool,
    tmux: TmuxTerminal | None = None, host: str | None = None,
) -> None:
    if host is not None:
        if tmux is not None:
            raise click.UsageError("--tmux launches run on this machine: not with --host")
        if workspace is not None:
            raise click.UsageError("--workspace names a directory of this machine: not "
                                   "with --host")
        from clanker.cli.common import capability_errors
        from clanker.cli.hosts import host_errors

        with host_errors(), capability_errors():
            place = run_async(library().on_host(host))
        try:
            directory = place.environment.environ.get("HOME") or "/"
            _resume_in(place, operation, selection, directory, model, user_flags, attention,
                       bridge, recreate, None)
        finally:
            run_async(place.aclose())
        return
    _resume_in(library(), operation, selection, os.path.abspath(workspace or os.getcwd()),
               model, user_flags, attention, bridge, recreate, tmux)


def _resume_in(
    place: Clanker, operation: LaunchOperation, selection: str, directory: str,
    model: str | None, user_flags: tuple[str, ...], attention: bool, bridge: bool | None,
    recreate: bool, tmux: TmuxTerminal | None,
) -> None:
    with checkout_errors():
        try:
            provider, request, options, notice = run_async(place.resumption(
                selection, operation=SessionOperation(operation.value), workspace=directory,
                model=model, user_flags=user_flags, attention=attention, bridge=bridge,
                recreate_worktree=recreate))
        except InvalidSelectionError as exc:
            raise Failure(str(exc), EXIT_USAGE) from exc
        except SessionNotFoundError as exc:
            raise Failure(str(exc), EXIT_NOT_FOUND, kind="not-found") from exc
    if notice:
        click.echo(f"clanker: {notice}", err=True)
    raise SystemExit(run_launch(
        provider, request, attention=options.attention,
        trusted_session_id=options.trusted_session_id, bridge=options.bridge,
        account=options.account, tmux=tmux, on=place))


_workspace = click.option(
    "--workspace", type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Where to continue if the session's own directory is gone and was not a worktree "
         "clanker can attribute (default: here).",
)
_recreate = click.option(
    "--recreate-worktree", "recreate", is_flag=True,
    help="If the session's directory was a removed worktree clanker created, check its "
         "branch out there again and continue there.",
)
_model = click.option("--model", "-m", metavar="MODEL", help="Model for the continued session.")
_flags = click.argument("user_flags", nargs=-1, type=click.UNPROCESSED, metavar="[-- FLAGS...]")


def _command(operation: LaunchOperation, help_text: str) -> click.Command:
    @click.command(operation.value, help=help_text)
    @click.argument("selection", metavar="HARNESS:ID")
    @_model
    @_workspace
    @_recreate
    @no_attention_option
    @bridge_option
    @tmux_options
    @host_option
    @_flags
    def command(
        selection: str, model: str | None, workspace: Path | None, recreate: bool,
        no_attention: bool, bridge: bool | None, in_tmux: bool, tmux_session: str | None,
        tmux_socket: str | None, host: str | None, user_flags: tuple[str, ...],
    ) -> None:
        tmux = tmux_terminal(in_tmux, tmux_session, tmux_socket)
        _continue(operation, selection, model, workspace, user_flags, not no_attention,
                  bridge, recreate, tmux, host)

    return command


resume = _command(LaunchOperation.RESUME,
                  "Continue a past conversation in its own directory, through its harness.")
fork = _command(LaunchOperation.FORK,
                "Start a new conversation from a past one (natively, or emulated where declared).")
