"""``clanker cmd``: what an agent may ask the host to do (list, describe, run).

The command itself lives in :mod:`clanker.bridge.cmd`, a standard-library
client that the ``clanker`` script reaches before it imports click (agents
call it in loops). This entry makes it one of the group's commands (help,
``python -m clanker.cli cmd ...``) and hands it the arguments unparsed.
"""

from __future__ import annotations

import click

__all__ = ["cmd"]


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                      "help_option_names": []},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def cmd(args: tuple[str, ...]) -> None:
    """Ask the host to do something: `clanker cmd list | describe NAME | run NAME`.

    Only for an agent launched with `clanker launch --bridge`; see
    `clanker cmd --help`.
    """
    from clanker.bridge.cmd import main

    raise SystemExit(main(list(args)))
