"""``clanker commit-message``: a commit message for the current change, from a harness."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from clanker.api import Clanker
from clanker.cli.common import (
    Failure,
    HarnessArgument,
    capability_errors,
    echo_json,
    json_option,
    library,
    run_async,
)
from clanker.commit.gitcontext import NotARepositoryError, NothingToCommitError
from clanker.commit.message import Style
from clanker.commit.service import (
    CommitProposal,
    InvalidModelError,
    RepositoryBusyError,
    StagingError,
)
from clanker.config import ConfigError, load_settings
from clanker.errors import (
    EXIT_BUSY,
    EXIT_NOT_A_REPOSITORY,
    EXIT_NOTHING_TO_COMMIT,
    EXIT_USAGE,
)
from clanker.registry import HarnessProvider

__all__ = ["commit_message"]


def _fail(message: str, code: int, kind: str = "usage") -> Failure:
    return Failure(message, code, kind=kind)


def _choose_harness(
    clanker: Clanker, given: HarnessProvider | None, configured: str | None
) -> HarnessProvider:
    if given is not None:
        return given
    registry = clanker.registry
    if configured is not None:
        provider = registry.find_provider(configured)
        if provider is None:
            raise _fail(f"config.toml names an unknown harness {configured!r}", EXIT_USAGE)
        return provider
    able = [p.id for p in registry.providers.values() if p.commit is not None]
    raise _fail(
        "choose a harness with --harness, or set [commit] harness in "
        f"{clanker.paths.config / 'config.toml'} (harnesses that can: {', '.join(able)})",
        EXIT_USAGE,
    )


def _record(proposal: CommitProposal) -> dict[str, Any]:
    return {
        "harness": proposal.harness,
        "model": proposal.model,
        "subject": proposal.message.subject,
        "body": proposal.message.body,
        "message": proposal.message.text,
        "repository": proposal.change.root,
        "omitted": list(proposal.change.omitted),
    }


@click.command("commit-message")
@click.option("--harness", type=HarnessArgument(), help="Harness that writes the message.")
@click.option("--model", "-m", metavar="MODEL", help="Model (default: the harness's own).")
@click.option("--style", type=click.Choice([s.value for s in Style]),
              help="Subject style (default: plain, or [commit] style in config.toml).")
@click.option("--commit", "do_commit", is_flag=True,
              help="Stage everything and commit with the message, after showing it.")
@click.option("--yes", is_flag=True, help="With --commit: do not ask for confirmation.")
@json_option
def commit_message(
    harness: HarnessProvider | None,
    model: str | None,
    style: str | None,
    do_commit: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Write a commit message for everything uncommitted here (staged, unstaged, untracked).

    Nothing in the repository changes unless --commit is given and confirmed.
    """
    clanker = library()
    try:
        settings = load_settings(clanker.paths.config).commit
    except ConfigError as exc:
        raise _fail(str(exc), EXIT_USAGE) from exc
    provider = _choose_harness(clanker, harness, settings.harness)
    chosen_style = Style(style or settings.style or Style.PLAIN.value)
    with capability_errors():
        try:
            proposal = run_async(clanker.commit_message(
                provider, os.getcwd(), model=model or settings.model, style=chosen_style
            ))
        except NotARepositoryError as exc:
            raise _fail(str(exc), EXIT_NOT_A_REPOSITORY, "not-a-repository") from exc
        except NothingToCommitError as exc:
            raise _fail(str(exc), EXIT_NOTHING_TO_COMMIT, "nothing-to-commit") from exc
        except RepositoryBusyError as exc:
            raise _fail(str(exc), EXIT_BUSY, "busy") from exc
        except InvalidModelError as exc:
            raise _fail(str(exc), EXIT_USAGE) from exc
    if as_json:
        echo_json(_record(proposal))
    else:
        click.echo(proposal.message.text)
    for note in proposal.change.omitted:
        click.echo(f"clanker: left out of the prompt: {note}", err=True)
    if do_commit:
        raise SystemExit(_commit(clanker, proposal, confirmed=yes))


def _commit(clanker: Clanker, proposal: CommitProposal, *, confirmed: bool) -> int:
    """Stage everything and commit, after the person said yes (or ``--yes`` did)."""
    if not confirmed:
        if not sys.stdin.isatty():
            raise _fail("--commit needs --yes when there is no terminal to confirm", EXIT_USAGE)
        if not click.confirm("Stage everything and commit with this message?", err=True):
            raise _fail("not committed", 1, "declined")
    with capability_errors():
        try:
            return clanker.commit(proposal)
        except StagingError as exc:
            raise _fail(str(exc), exc.status, "command-failed") from exc
