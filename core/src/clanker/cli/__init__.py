"""The ``clanker`` command.

Start-up is lazy: the group knows each subcommand's module and one-line help,
so ``clanker --help`` and ``clanker --version`` import no provider, no plugin
and no subcommand module. ``clanker cmd`` never even reaches click from the
``clanker`` script (:mod:`clanker.__main__`).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any, Final

import click

from clanker import __version__
from clanker.errors import EXIT_INTERNAL, EXIT_USAGE

__all__ = ["cli", "main"]

# name -> (module, attribute, one-line help)
_COMMANDS: Final[dict[str, tuple[str, str, str]]] = {
    "accounts": ("clanker.cli.accounts", "accounts",
                 "List, add and choose the accounts harnesses sign in with."),
    "attention": ("clanker.cli.status", "attention",
                  "Explain an agent's attention state."),
    "cmd": ("clanker.cli.cmd", "cmd", "Ask the host to do something (for launched agents)."),
    "coder": ("clanker.cli.coder", "coder",
              "Drive an ACP agent with the approval ladder: one turn or a conversation."),
    "commit-message": ("clanker.cli.commit", "commit_message",
                       "Write a commit message for the current change."),
    "deck": ("clanker.cli.deck", "deck", "A live dashboard of every agent, with tmux jumps."),
    "doctor": ("clanker.cli.doctor", "doctor", "Check every harness and say what to fix."),
    "fork": ("clanker.cli.resume", "fork", "Start a new conversation from a past one."),
    "grid": ("clanker.cli.grid", "grid", "Start, stop or check the per-user grid daemon."),
    "harnesses": ("clanker.cli.harnesses", "harnesses", "List harnesses, installed or not."),
    "hosts": ("clanker.cli.hosts", "hosts", "Register SSH hosts and check what runs there."),
    "launch": ("clanker.cli.launch", "launch", "Run a harness in this terminal."),
    "models": ("clanker.cli.models", "models", "List the models a harness accepts."),
    "plugins": ("clanker.cli.plugins", "plugins", "List installed plugins and their hooks."),
    "resume": ("clanker.cli.resume", "resume", "Continue a past conversation."),
    "sessions": ("clanker.cli.sessions", "sessions", "List past conversations of every harness."),
    "status": ("clanker.cli.status", "status", "List running agents and what they need."),
    "usage": ("clanker.cli.usage", "usage", "Show every subscription's remaining quota."),
    "watch": ("clanker.cli.status", "watch", "Follow running agents live."),
    "worktree": ("clanker.cli.worktree", "worktree",
                 "Create, list and complete isolated git worktrees."),
}


# Commands that start an event loop only through `run_async` (which quiets asyncio
# first): their fast paths (an empty listing, no grid, nothing installed) then import
# no `logging`. Every other command is quieted when it is loaded, since the library
# code it calls may run a loop of its own (a launch's `blocking`).
_LOOPS_THROUGH_RUN_ASYNC: Final = frozenset({"harnesses", "sessions", "status"})


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when invoked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in _COMMANDS:
            module_name, attribute, _ = _COMMANDS[cmd_name]
            command = getattr(importlib.import_module(module_name), attribute)
            assert isinstance(command, click.Command)
            if cmd_name not in _LOOPS_THROUGH_RUN_ASYNC or "asyncio" in sys.modules:
                quiet_asyncio()
            return command
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, _COMMANDS[name][2]) for name in sorted(_COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="clanker")
def cli() -> None:
    """Terminal coding agents behind one registry.

    Exit codes are stable and documented in docs/exit-codes.md.
    """
    Output.json = False  # each invocation says for itself (one process may run several)


class Output:
    """How this invocation prints: set while its options are parsed."""

    json = False
    """``--json`` was given: a failure is then JSON on stdout as well."""


class _Quiet:
    """Set by :func:`main` outside debug mode; a library caller's logging is its own."""

    on = False


def _one_line(text: str) -> None:
    click.echo(f"clanker: internal warning: {text}", err=True)


def _quiet_internals() -> None:
    """Turn what Python reports on its own into one line each: an exception in
    a destructor (``sys.unraisablehook``) or in a thread never reaches ``main``."""
    import threading

    def unraisable(info: sys.UnraisableHookArgs) -> None:
        _one_line(f"{info.exc_type.__name__} ignored")

    def in_thread(args: threading.ExceptHookArgs) -> None:
        _one_line(f"{args.exc_type.__name__} in a thread")

    sys.unraisablehook = unraisable
    threading.excepthook = in_thread


def quiet_asyncio() -> None:
    """One line for what asyncio logs (an unretrieved task exception, say), which
    Python's last-resort handler would print with its traceback; nothing for a
    library caller or under ``CLANKER_DEBUG``.

    Called once a subcommand is loaded (for the few of
    :data:`_LOOPS_THROUGH_RUN_ASYNC`, only when it imported asyncio) and before
    :func:`~clanker.cli.common.run_async` starts a loop: it imports ``logging``,
    which a command that runs no loop (``--version``, a listing of empty stores)
    need not pay for.
    """
    if not _Quiet.on:
        return
    import logging

    class OneLine(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            _one_line(record.getMessage().partition("\n")[0])

    log = logging.getLogger("asyncio")
    if not log.handlers:
        log.addHandler(OneLine(logging.WARNING))
        log.propagate = False


def _cwd_exists() -> bool:
    try:
        os.getcwd()
    except FileNotFoundError:
        return False
    return True


def main(argv: list[str] | None = None) -> Any:
    """Run the CLI; never show a traceback unless CLANKER_DEBUG is set."""
    if os.environ.get("CLANKER_DEBUG"):
        import logging

        logging.basicConfig(level=logging.DEBUG, format="clanker: %(name)s: %(message)s")
    else:
        _Quiet.on = True
        _quiet_internals()
    try:
        return cli.main(args=argv, prog_name="clanker", standalone_mode=True)
    except Exception as exc:  # click already handled its own exceptions
        if os.environ.get("CLANKER_DEBUG"):
            import traceback

            traceback.print_exc()
        from clanker.registry import CapabilityLoadError

        if isinstance(exc, CapabilityLoadError):  # a broken plugin: it says which, and why
            click.echo(f"clanker: {exc}", err=True)
        elif isinstance(exc, FileNotFoundError) and not _cwd_exists():
            click.echo("clanker: the current directory no longer exists; cd to one that "
                       "does", err=True)
            sys.exit(EXIT_USAGE)
        else:
            click.echo(f"clanker: internal error: {type(exc).__name__}", err=True)
        sys.exit(EXIT_INTERNAL)
