"""``clanker commit-message``: a commit message for the current change, from a harness."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import click

from clanker.cli.common import HarnessArgument, capability_errors, echo_json, json_option, run_async
from clanker.commit.gitcontext import NotARepositoryError, NothingToCommitError
from clanker.commit.message import Style
from clanker.commit.service import (
    CommitProposal,
    CommitService,
    InvalidModelError,
    RepositoryBusyError,
)
from clanker.config import ConfigError, load_settings
from clanker.errors import (
    EXIT_BUSY,
    EXIT_NOT_A_REPOSITORY,
    EXIT_NOTHING_TO_COMMIT,
    EXIT_USAGE,
)
from clanker.execution import LocalTransport
from clanker.execution.process import resolve_executable
from clanker.paths import clanker_paths
from clanker.registry import HarnessProvider, get_registry

__all__ = ["commit_message"]


def _fail(message: str, code: int) -> SystemExit:
    click.echo(f"clanker: {message}", err=True)
    return SystemExit(code)


def _choose_harness(given: HarnessProvider | None, configured: str | None) -> HarnessProvider:
    if given is not None:
        return given
    registry = get_registry()
    if configured is not None:
        provider = registry.find_provider(configured)
        if provider is None:
            raise _fail(f"config.toml names an unknown harness {configured!r}", EXIT_USAGE)
        return provider
    able = [p.id for p in registry.providers.values() if p.commit is not None]
    raise _fail(
        "choose a harness with --harness, or set [commit] harness in "
        f"{clanker_paths().config / 'config.toml'} (harnesses that can: {', '.join(able)})",
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


def _commit(root: str, message: str) -> int:
    """Stage everything the message describes, then commit; a failed stage commits nothing.

    Runs in the foreground without a time bound: the user's own commit hooks
    may take their time and print to the terminal.
    """
    git = resolve_executable("git", os.environ)
    staged = subprocess.run([git, "-C", root, "add", "--all"], check=False)
    if staged.returncode != 0:
        raise _fail("staging the change failed; nothing was committed", staged.returncode)
    done = subprocess.run(
        [git, "-C", root, "commit", "--file", "-"], input=message.encode(), check=False
    )
    return done.returncode


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
    try:
        settings = load_settings(clanker_paths().config).commit
    except ConfigError as exc:
        raise _fail(str(exc), EXIT_USAGE) from exc
    provider = _choose_harness(harness, settings.harness)
    chosen_style = Style(style or settings.style or Style.PLAIN.value)
    service = CommitService(executor=LocalTransport(), lock_dir=clanker_paths().state / "locks")
    with capability_errors():
        try:
            proposal = run_async(service.propose(
                provider, os.getcwd(), model=model or settings.model, style=chosen_style
            ))
        except NotARepositoryError as exc:
            raise _fail(str(exc), EXIT_NOT_A_REPOSITORY) from exc
        except NothingToCommitError as exc:
            raise _fail(str(exc), EXIT_NOTHING_TO_COMMIT) from exc
        except RepositoryBusyError as exc:
            raise _fail(str(exc), EXIT_BUSY) from exc
        except InvalidModelError as exc:
            raise _fail(str(exc), EXIT_USAGE) from exc
    if as_json:
        echo_json(_record(proposal))
    else:
        click.echo(proposal.message.text)
    for note in proposal.change.omitted:
        click.echo(f"clanker: left out of the prompt: {note}", err=True)
    if not do_commit:
        return
    if not yes:
        if not sys.stdin.isatty():
            raise _fail("--commit needs --yes when there is no terminal to confirm", EXIT_USAGE)
        if not click.confirm("Stage everything and commit with this message?", err=True):
            raise _fail("not committed", 1)
    raise SystemExit(_commit(proposal.change.root, proposal.message.text))
