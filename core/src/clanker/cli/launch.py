"""``clanker launch``: run a harness in this terminal, with attachments wired in."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from clanker.cli.common import Failure, HarnessArgument, library
from clanker.cli.tmux import tmux_options, tmux_terminal
from clanker.config import ConfigError
from clanker.errors import EXIT_USAGE
from clanker.launch.planning import InvalidSessionIdError
from clanker.launch.request import LaunchOperation, LaunchRequest, SessionTarget
from clanker.launch.service import LaunchOptions
from clanker.registry import HarnessProvider

if TYPE_CHECKING:
    from clanker.api import Clanker
    from clanker.tmux.handoff import TmuxTerminal

__all__ = ["bridge_option", "launch", "no_attention_option", "run_launch"]


def run_launch(
    provider: HarnessProvider,
    request: LaunchRequest,
    *,
    attention: bool = True,
    trusted_session_id: str | None = None,
    bridge: bool | None = None,
    account: str | None = None,
    tmux: TmuxTerminal | None = None,
    on: Clanker | None = None,
) -> int:
    """Run ``request`` through the library's one launch path, reporting as the CLI does.

    ``trusted_session_id`` is a session id re-found in trusted storage (by
    ``clanker resume``): the attention broker may bind it before the first event.
    ``bridge`` is ``--bridge``/``--no-bridge`` (``None``: as configured), ``account``
    ``--account`` (``None``: the selected one; a resume's own).
    With ``tmux`` (``--tmux``) the launch is handed to a new tmux window and this
    returns 0 once the window is open.
    ``on`` is the library of an SSH host (default: this machine's).
    Returns the harness's exit status; failures before it starts raise.
    """
    from clanker.cli.accounts import account_errors

    options = LaunchOptions(attention=attention, trusted_session_id=trusted_session_id,
                            bridge=bridge, account=account)
    with account_errors():
        try:
            if tmux is not None:
                return _hand_off(provider, request, options, tmux)
            return (on or library()).launch(provider, request, options, report=_report,
                                    notify=_notify)
        except InvalidSessionIdError as exc:
            raise click.BadParameter(str(exc), param_hint="session id") from exc
        except ConfigError as exc:
            raise Failure(str(exc), EXIT_USAGE) from exc


def _hand_off(provider: HarnessProvider, request: LaunchRequest, options: LaunchOptions,
              tmux: TmuxTerminal) -> int:
    from clanker.tmux.control import TmuxError, TmuxUnavailableError

    try:
        window = library().launch(provider, request, options, terminal=tmux)
    except TmuxError as exc:
        kind = "tmux-unavailable" if isinstance(exc, TmuxUnavailableError) else "tmux-failed"
        raise Failure(exc.message, exc.exit_code, kind=kind) from exc
    click.echo(f"clanker: {provider.id} runs in tmux session {window.session} "
               f"(pane {window.pane}; `clanker deck` jumps to it)", err=True)
    return 0


def _notify(notice: str) -> None:
    click.echo(f"clanker: {notice}", err=True)


def _report(step: str, phase: str) -> None:
    # An optional step failed: the launch goes on without it, and says so once.
    click.echo(f"clanker: {step} is unavailable for this launch ({phase} failed)", err=True)


no_attention_option = click.option(
    "--no-attention", is_flag=True,
    help="Do not report this agent's state to the grid (`clanker status`).",
)

bridge_option = click.option(
    "--bridge/--no-bridge", default=None,
    help="Let the agent ask the host to do things (`clanker cmd`); default: as "
         "config.toml's [bridge] harnesses says (off).",
)


@click.command()
@click.argument("harness", type=HarnessArgument())
@click.option("--model", "-m", metavar="MODEL", help="Model id, as the harness accepts it.")
@click.option(
    "--cwd",
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory to run the harness in (default: the current one; with --host, a "
         "directory of the host, default its home).",
)
@click.option("--host", "host", metavar="NAME", default=None,
              help="Run the harness on the SSH host NAME, in this terminal (see "
                   "`clanker hosts`).")
@click.option("--resume", "resume_id", metavar="ID",
              help="Continue the session with this id (unchecked; see `clanker resume`).")
@click.option("--fork", "fork_id", metavar="ID",
              help="Start a new session from this one (unchecked; see `clanker fork`).")
@no_attention_option
@bridge_option
@click.option("--account", metavar="ACCOUNT",
              help="Run under this managed account (label, email or id; `default`: the "
                   "harness's own); default: the selected one (`clanker accounts`).")
@tmux_options
@click.argument("user_flags", nargs=-1, type=click.UNPROCESSED, metavar="[-- FLAGS...]")
def launch(
    harness: HarnessProvider,
    model: str | None,
    cwd: Path | None,
    resume_id: str | None,
    fork_id: str | None,
    no_attention: bool,
    bridge: bool | None,
    account: str | None,
    host: str | None,
    in_tmux: bool,
    tmux_session: str | None,
    tmux_socket: str | None,
    user_flags: tuple[str, ...],
) -> None:
    """Run HARNESS in this terminal and exit with its exit status (with --tmux: in a
    new tmux window, exiting once it is open).

    Everything after `--` is passed to the harness unchanged and in order.
    `--resume`/`--fork` pass a syntactically checked id straight through;
    `clanker resume` / `clanker fork` first re-find the session in history.
    """
    if resume_id is not None and fork_id is not None:
        raise click.UsageError("--resume and --fork cannot be combined")
    tmux = tmux_terminal(in_tmux, tmux_session, tmux_socket)
    if host is not None:
        if tmux is not None:
            raise click.UsageError("--tmux launches run on this machine: not with --host")
        if cwd is not None and not cwd.is_absolute():
            raise click.UsageError("--cwd: with --host, an absolute directory of the host")
    elif cwd is not None:
        if not cwd.is_dir():
            raise click.BadParameter(f"{cwd} is not a directory", param_hint="--cwd")
        cwd = cwd.resolve()
    operation, session_id = LaunchOperation.FRESH, None
    if resume_id is not None:
        operation, session_id = LaunchOperation.RESUME, resume_id
    elif fork_id is not None:
        operation, session_id = LaunchOperation.FORK, fork_id
    if host is not None:
        raise SystemExit(_on_host(host, harness, operation, session_id, model, cwd,
                                  user_flags, attention=not no_attention, bridge=bridge,
                                  account=account))
    try:
        request = LaunchRequest(
            operation=operation,
            model=model,
            session=SessionTarget(native_id=session_id) if session_id is not None else None,
            user_flags=user_flags,
            cwd=str(cwd) if cwd is not None else os.getcwd(),
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    raise SystemExit(run_launch(harness, request, attention=not no_attention, bridge=bridge,
                                account=account, tmux=tmux))


def _on_host(host: str, harness: HarnessProvider, operation: LaunchOperation,
             session_id: str | None, model: str | None, cwd: Path | None,
             user_flags: tuple[str, ...], *, attention: bool, bridge: bool | None,
             account: str | None) -> int:
    """``launch --host``: the same launch path, through the host's environment."""
    from clanker.cli.common import capability_errors, run_async
    from clanker.cli.hosts import host_errors

    with host_errors(), capability_errors():
        remote = run_async(library().on_host(host))
    try:
        where = str(cwd) if cwd is not None else remote.environment.environ.get("HOME") or "/"
        try:
            request = LaunchRequest(
                operation=operation, transport=remote.environment.transport, model=model,
                session=SessionTarget(native_id=session_id) if session_id is not None else None,
                user_flags=user_flags, cwd=where)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from exc
        with capability_errors():
            return run_launch(harness, request, attention=attention, bridge=bridge,
                              account=account, on=remote)
    finally:
        run_async(remote.aclose())
