"""``clanker grid start|stop|status``: the per-user daemon that owns live state."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import click

from clanker.cli.common import Failure, echo_json, json_option, library, relative_time
from clanker.errors import EXIT_GRID_UNAVAILABLE

__all__ = ["GridFailure", "grid", "grid_errors"]


class GridFailure(Failure):
    """A grid failure, shown as its safe message with the grid's exit code (18)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_GRID_UNAVAILABLE, kind="grid-unavailable")


@contextmanager
def grid_errors() -> Iterator[None]:
    """Turn any :class:`~clanker.grid.errors.GridError` into a clean CLI failure."""
    from clanker.grid.errors import GridError

    try:
        yield
    except GridError as exc:
        raise GridFailure(str(exc)) from exc


@click.group()
def grid() -> None:
    """Start, stop or check the per-user grid daemon.

    The grid owns live state: the running agents, their attention and their
    credentials. `clanker launch` starts it when needed.
    """


@grid.command()
def start() -> None:
    """Start the grid unless it already runs."""
    clanker = library()
    with grid_errors():
        before = clanker.grid_status()
        found = before if before.running else clanker.start_grid()
    verb = "was already running" if before.running else "started"
    click.echo(f"The grid {verb} (pid {found.pid}, socket {found.location.socket}).")


@grid.command()
def stop() -> None:
    """Stop the grid; running agents keep running, unwatched."""
    with grid_errors():
        stopped = library().stop_grid()
    click.echo("The grid stopped." if stopped else "The grid is not running.")


@grid.command()
@json_option
def status(as_json: bool) -> None:
    """Say whether the grid runs (exit 0 either way)."""
    with grid_errors():
        found = library().grid_status()
    if as_json:
        record: dict[str, Any] = {
            "running": found.running,
            "pid": found.pid,
            "version": found.version,
            "started_at": found.started_at.isoformat() if found.started_at else None,
            "terminals": found.terminals,
            "socket": str(found.location.socket),
            "log": str(found.location.log),
        }
        echo_json(record)
        return
    if not found.running:
        click.echo(f"The grid is not running (socket {found.location.socket}).")
        return
    since = relative_time(found.started_at, datetime.now(UTC)) if found.started_at else "?"
    count = found.terminals or 0
    click.echo(f"The grid is running: pid {found.pid}, started {since}, "
               f"{count} agent{'s' if count != 1 else ''}.")
    click.echo(f"  socket  {found.location.socket}")
    click.echo(f"  log     {found.location.log}")
    if found.version is not None:
        from clanker import __version__

        if found.version != __version__:
            click.echo(f"  note    it runs clanker {found.version}, this is {__version__}: "
                       "restart it with `clanker grid stop` then `clanker grid start`")
