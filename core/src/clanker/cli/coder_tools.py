"""``clanker coder clean`` and ``clanker coder secret``: the coder's own files and
its agents' secrets (thin over :class:`~clanker.api.Clanker`)."""

from __future__ import annotations

import sys
from datetime import timedelta

import click

from clanker.cli.common import (
    DurationArgument,
    Failure,
    capability_errors,
    echo_json,
    json_option,
    library,
)
from clanker.errors import EXIT_USAGE

__all__ = ["clean", "secret"]

_CONTEXT = {"help_option_names": ["-h", "--help"]}


@click.command(context_settings=_CONTEXT)
@click.option("--older-than", type=DurationArgument(), metavar="DURATION",
              help="Remove what was last written longer ago than this (90m, 12h, 30d, 2w).")
@click.option("--keep", type=click.IntRange(min=0), metavar="N",
              help="Keep the N newest transcripts and the N newest agent logs.")
@click.option("--dry-run", is_flag=True, help="Only say what would be removed.")
@json_option
def clean(older_than: timedelta | None, keep: int | None, dry_run: bool, as_json: bool) -> None:
    """Remove coder transcripts and agent stderr logs by a rule (--older-than,
    --keep, or both: then a file must match each)."""
    try:
        result = library().clean_coder(older_than=older_than, keep=keep, dry_run=dry_run)
    except ValueError as exc:
        raise Failure(str(exc), EXIT_USAGE) from None
    if as_json:
        echo_json({"directory": str(result.directory), "dry_run": result.dry_run,
                   "removed": [str(p) for p in result.removed], "kept": result.kept})
        return
    verb = "would remove" if dry_run else "removed"
    for path in result.removed:
        click.echo(f"{verb} {path}")
    click.echo(f"{verb} {len(result.removed)} file(s), kept {result.kept}", err=True)


@click.group(context_settings=_CONTEXT)
def secret() -> None:
    """Agent secrets (an API key an ACP agent needs) in the OS credential store,
    put into that agent's environment only when clanker coder starts it. AGENT
    is a harness id or an --agent-command's executable name."""


def _failing(exc: Exception) -> Failure:
    from clanker.acp.errors import CoderError

    if isinstance(exc, CoderError):
        return Failure(exc.message, exc.exit_code, kind=exc.failure.value)
    return Failure(str(exc), EXIT_USAGE)


@secret.command("set", context_settings=_CONTEXT)
@click.argument("agent")
@click.argument("name")
def secret_set(agent: str, name: str) -> None:
    """Store NAME for AGENT; the value is asked for without echo on a terminal,
    else read from stdin (its first line). Never give it as an argument."""
    from clanker.acp.errors import CoderError

    if sys.stdin.isatty():
        value = click.prompt(f"value of {name}", hide_input=True, err=True)
    else:
        value = sys.stdin.readline(64 * 1024).rstrip("\r\n")
    try:
        with capability_errors():
            library().set_coder_secret(agent, name, value)
    except (ValueError, CoderError) as exc:
        raise _failing(exc) from None
    click.echo(f"stored {name} for {agent}", err=True)


@secret.command("list", context_settings=_CONTEXT)
@click.argument("agent")
@json_option
def secret_list(agent: str, as_json: bool) -> None:
    """The names stored for AGENT (never the values)."""
    try:
        with capability_errors():
            names = library().coder_secrets(agent)
    except ValueError as exc:
        raise _failing(exc) from None
    if as_json:
        echo_json({"agent": agent, "names": names})
    else:
        for name in names:
            click.echo(name)


@secret.command("remove", context_settings=_CONTEXT)
@click.argument("agent")
@click.argument("name")
def secret_remove(agent: str, name: str) -> None:
    """Remove AGENT's NAME from the credential store and from clanker's index."""
    from clanker.acp.errors import CoderError

    try:
        with capability_errors():
            removed = library().remove_coder_secret(agent, name)
    except (ValueError, CoderError) as exc:
        raise _failing(exc) from None
    if not removed:
        raise Failure(f"no secret {name} stored for {agent}", EXIT_USAGE)
    click.echo(f"removed {name} for {agent}", err=True)
