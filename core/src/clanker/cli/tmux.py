"""The ``--tmux`` options of every command that launches a harness."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from clanker.tmux.handoff import TmuxTerminal

__all__ = ["tmux_options", "tmux_terminal"]

F = TypeVar("F", bound=Callable[..., Any])


def tmux_options(command: F) -> F:
    """``--tmux``, ``--session NAME`` and ``--tmux-socket NAME``."""
    command = click.option(
        "--tmux-socket", metavar="NAME",
        help="The tmux server to use, as `tmux -L NAME` (default: the one this terminal "
             "runs inside, else tmux's default).")(command)
    command = click.option(
        "--session", "tmux_session", metavar="NAME",
        help="The tmux session for --tmux (default: clanker; created on demand).")(command)
    return click.option(
        "--tmux", "in_tmux", is_flag=True,
        help="Run in a new window of a clanker tmux session instead of this terminal.",
    )(command)


def tmux_terminal(in_tmux: bool, session: str | None, socket: str | None
                  ) -> TmuxTerminal | None:
    """The ``--tmux`` options as a launch's terminal (``None``: this terminal)."""
    if not in_tmux:
        if session is not None or socket is not None:
            raise click.UsageError("--session and --tmux-socket need --tmux")
        return None
    from clanker.tmux.control import DEFAULT_SESSION
    from clanker.tmux.handoff import TmuxTerminal

    try:
        return TmuxTerminal(session=session or DEFAULT_SESSION, socket_name=socket)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--session") from exc
