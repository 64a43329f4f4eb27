"""``clanker deck``: the live dashboard (``clanker.deck``) in this terminal."""

from __future__ import annotations

import io
import os
import sys

import click

from clanker.cli.common import Failure, library
from clanker.cli.grid import GridFailure, grid_errors
from clanker.errors import EXIT_DECK_UNUSABLE

__all__ = ["deck"]


@click.command()
@click.option("--tmux-socket", metavar="NAME",
              help="The tmux server to jump to and launch in, as `tmux -L NAME` (default: "
                   "the one this terminal runs inside, else tmux's default).")
@click.option("--bell/--no-bell", default=True, show_default=True,
              help="Ring the terminal bell when an agent needs input or finishes.")
@click.option("--desktop/--no-desktop", default=True, show_default=True,
              help="Show a desktop notification then too (notify-send or osascript).")
@click.option("--start-grid", is_flag=True,
              help="Start the grid without asking when it is not running.")
def deck(tmux_socket: str | None, bell: bool, desktop: bool, start_grid: bool) -> None:
    """Show every agent live, needs-input first, and jump to its tmux pane.

    Closing the deck stops nothing. What it marks seen is its own (kept in
    clanker's state directory), never the agents' state.
    """
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise Failure("the deck needs an interactive terminal", EXIT_DECK_UNUSABLE,
                      kind="deck")
    clanker = library()
    with grid_errors():
        if not clanker.grid_status().running:
            if not (start_grid or click.confirm("The grid is not running. Start it?",
                                                default=True)):
                raise GridFailure("the grid is not running (start it with `clanker grid start`)")
            clanker.start_grid()
    import asyncio

    from clanker.cli import quiet_asyncio
    from clanker.cli.status import Notifier
    from clanker.deck.app import Deck
    from clanker.deck.seen import SeenMarks

    notifier = Notifier(bell_stream=io.StringIO()) if desktop else None

    def notify(text: str) -> None:
        if bell:
            sys.stdout.write("\a")
            sys.stdout.flush()
        if notifier is not None:
            notifier.notify(text)

    app = Deck(clanker, seen=SeenMarks(clanker.paths.state / "deck-seen.json"),
               tmux=clanker.tmux(socket_name=tmux_socket), workspace=os.getcwd(),
               notify=notify if bell or desktop else None)
    quiet_asyncio()
    try:
        asyncio.run(app.run())
    finally:
        if notifier is not None:
            notifier.close()
