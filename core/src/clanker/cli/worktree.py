"""``clanker worktree``: isolated git worktrees, created and completed safely."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import click

from clanker.cli.checkout_errors import checkout_errors
from clanker.cli.common import (
    HarnessArgument,
    echo_json,
    echo_table,
    json_option,
    library,
    run_async,
)
from clanker.cli.tmux import tmux_options, tmux_terminal
from clanker.errors import (
    EXIT_CHECKOUT_DIRTY,
    EXIT_IGNORED_ONLY,
    EXIT_REMOVAL_FAILED,
)

if TYPE_CHECKING:
    from clanker.checkouts.types import (
        Changes,
        CompletionResult,
        CreationResult,
        PrunePlan,
        Worktree,
    )
    from clanker.registry import HarnessProvider

__all__ = ["worktree"]

repository_option = click.option(
    "-C", "--repository", "repository", metavar="DIR",
    type=click.Path(file_okay=False, path_type=str),
    help="A directory of the repository (default: the current one).")


def _where(repository: str | None) -> str:
    return os.path.abspath(repository or os.getcwd())


def _changes(changes: Changes | None) -> dict[str, Any] | None:
    return None if changes is None else changes.to_json()


def _created(result: CreationResult) -> dict[str, Any]:
    return {"path": result.path, "branch": result.branch, "base": result.base,
            "created": result.created, "main_checkout": result.main_checkout,
            "copied": list(result.copies.copied), "skipped": list(result.copies.skipped)}


def _worktree(item: Worktree) -> dict[str, Any]:
    return {
        "path": item.path, "branch": item.branch, "head": item.head, "main": item.main,
        "listed": item.listed, "created_by_clanker": item.created_by_clanker,
        "locked": item.locked, "dirtiness": item.dirtiness.value,
        "changes": _changes(item.changes), "problem": item.problem, "base": item.base,
        "created_at": item.created_at.isoformat() if item.created_at else None,
        "removed_at": item.removed_at.isoformat() if item.removed_at else None,
        "agents": [{"terminal": a.terminal, "harness": a.harness, "attention": a.attention}
                   for a in item.agents],
    }


def _completed(result: CompletionResult) -> dict[str, Any]:
    return {"path": result.path, "branch": result.branch, "status": result.status.value,
            "done": result.done, "trashed": result.trashed,
            "branch_deleted": result.branch_deleted, "branch_note": result.branch_note,
            "can_complete_with_discard_ignored": result.can_complete_with_discard_ignored,
            "changes": _changes(result.changes)}


def _summary(changes: Changes | None) -> str:
    if changes is None:
        return ""
    parts = []
    for name in ("staged", "tracked", "untracked", "ignored"):
        category = getattr(changes, name)
        if category.count:
            shown = ", ".join(category.examples[:5])
            more = "" if category.count <= 5 else ", ..."
            parts.append(f"{category.count} {name} ({shown}{more})")
    return "; ".join(parts)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def worktree() -> None:
    """Isolated git worktrees: one new branch each, beside the repository.

    A worktree lives at `<repo>-worktrees/<branch>-<hash>`. Completing one is
    strict: changes block it, ignored files alone block it unless
    --discard-ignored (the checkout then goes to the Trash), and only
    worktrees clanker created are ever removed.
    """


@worktree.command("new")
@click.argument("branch")
@click.option("--harness", type=HarnessArgument(), help="Launch this harness in the new worktree.")
@click.option("--model", "-m", metavar="MODEL", help="Model id for the launched harness.")
@click.option("--base", metavar="REV", help="Start the branch here (default: the main "
              "checkout's HEAD).")
@click.option("--no-attention", is_flag=True,
              help="Do not report the launched agent's state to the grid.")
@repository_option
@json_option
@tmux_options
@click.argument("user_flags", nargs=-1, type=click.UNPROCESSED, metavar="[-- FLAGS...]")
def new(branch: str, harness: HarnessProvider | None, model: str | None, base: str | None,
        no_attention: bool, repository: str | None, as_json: bool, in_tmux: bool,
        tmux_session: str | None, tmux_socket: str | None,
        user_flags: tuple[str, ...]) -> None:
    """Create a worktree on the new BRANCH; with --harness, run that harness in it.

    Everything after `--` goes to the harness, as with `clanker launch`. Asked
    again for a branch clanker created whose worktree is still there, it uses
    that worktree.
    """
    if harness is None and (user_flags or model or in_tmux):
        raise click.UsageError("flags for a harness, --model and --tmux need --harness")
    tmux = tmux_terminal(in_tmux, tmux_session, tmux_socket)
    with checkout_errors():
        result = run_async(library().create_worktree(_where(repository), branch, base=base))
    if as_json:
        echo_json(_created(result))
    else:
        verb = "Created" if result.created else "Using the existing"
        click.echo(f"{verb} worktree {result.path} on {result.branch} "
                   f"(from {result.base[:12]})", err=harness is not None)
        if result.copies.copied:
            click.echo(f"Copied from the main checkout: {', '.join(result.copies.copied)}",
                       err=harness is not None)
    for line in result.copies.skipped:
        click.echo(f"clanker: not copied: {line}", err=True)
    if harness is None:
        return
    from clanker.cli.launch import run_launch
    from clanker.launch.request import LaunchOperation, LaunchRequest

    try:
        request = LaunchRequest(operation=LaunchOperation.FRESH, model=model,
                                user_flags=user_flags, cwd=result.path)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    raise SystemExit(run_launch(harness, request, attention=not no_attention, tmux=tmux))


@worktree.command("list")
@repository_option
@click.option("--no-inspect", is_flag=True, help="Do not run git status in each worktree.")
@json_option
def list_worktrees(repository: str | None, no_inspect: bool, as_json: bool) -> None:
    """List the repository's worktrees: git's, and those clanker created and removed."""
    with checkout_errors():
        listing = run_async(library().worktrees(_where(repository), inspect=not no_inspect))
    if as_json:
        echo_json({"main_checkout": listing.main_checkout,
                   "worktrees": [_worktree(w) for w in listing.worktrees]})
        return
    rows = []
    for item in listing.worktrees:
        state = "removed" if not item.listed and item.removed_at else item.dirtiness.value
        if item.locked:
            state += ", locked"
        agents = ", ".join(f"{a.harness} {a.terminal}" for a in item.agents) or "-"
        origin = "main" if item.main else "clanker" if item.created_by_clanker else "other"
        rows.append([item.path, item.branch or "(detached)", state, origin, agents])
    echo_table(["PATH", "BRANCH", "STATE", "CREATED BY", "AGENTS"], rows)


@worktree.command("complete")
@click.argument("target", required=False, metavar="[PATH|BRANCH]")
@click.option("--delete-branch", is_flag=True,
              help="Also delete the branch, with `git branch -d` (kept when not merged).")
@click.option("--discard-ignored", is_flag=True,
              help="Allow ignored files: the whole worktree goes to the Trash.")
@repository_option
@json_option
def complete(target: str | None, delete_branch: bool, discard_ignored: bool,
             repository: str | None, as_json: bool) -> None:
    """Remove a worktree clanker created (default: the one you are in).

    PATH is an existing directory (a bare name such as `docs` that is no
    worktree is then tried as a branch); anything else is read as a BRANCH
    name. Exits 24 when changes block it and 25 when only ignored files do; nothing
    is removed then.
    """
    where = _where(repository)
    with checkout_errors():
        result = run_async(_complete(where, target, repository is None, delete_branch,
                                     discard_ignored))
    _report_completion(result, as_json)
    if not result.done:
        raise SystemExit(EXIT_CHECKOUT_DIRTY if result.status.value == "dirty"
                         else EXIT_IGNORED_ONLY)


async def _complete(where: str, target: str | None, from_target: bool, delete_branch: bool,
                    discard_ignored: bool) -> CompletionResult:
    """TARGET is a path when it is an existing directory; a bare word that is also a
    directory (``docs``) is tried as a branch when no worktree is there."""
    from clanker.checkouts.types import CheckoutError, Refusal

    clanker = library()
    if target is None or not os.path.isdir(target):
        return await clanker.complete_worktree(where, branch=target, delete_branch=delete_branch,
                                               discard_ignored=discard_ignored)
    path = os.path.abspath(target)
    try:
        return await clanker.complete_worktree(path if from_target else where, path=path,
                                               delete_branch=delete_branch,
                                               discard_ignored=discard_ignored)
    except CheckoutError as exc:
        bare = os.sep not in target and not target.startswith(".")
        if not bare or exc.reason not in (Refusal.NOT_FOUND, Refusal.MAIN_CHECKOUT):
            raise
    return await clanker.complete_worktree(where, branch=target, delete_branch=delete_branch,
                                           discard_ignored=discard_ignored)


def _report_completion(result: CompletionResult, as_json: bool) -> None:
    if as_json:
        echo_json(_completed(result))
    status = result.status.value
    if status == "dirty":
        click.echo(f"clanker: {result.path} is not removed: it has changes "
                   f"({_summary(result.changes)})", err=True)
    elif status == "ignored-only":
        click.echo(f"clanker: {result.path} is not removed: it holds ignored files "
                   f"({_summary(result.changes)}); --discard-ignored moves it to the Trash",
                   err=True)
    elif not as_json:
        how = " (moved to the Trash)" if result.trashed else ""
        if status == "already-gone":
            click.echo(f"{result.path} was already gone; git no longer lists it")
        else:
            click.echo(f"Removed {result.path}{how}")
        if result.branch_deleted:
            click.echo(f"Deleted the branch {result.branch}")
    if result.branch_note:
        click.echo(f"clanker: {result.branch_note}", err=True)


@worktree.command("prune")
@click.option("--apply", is_flag=True, help="Complete them (default: only say which).")
@repository_option
@json_option
def prune(apply: bool, repository: str | None, as_json: bool) -> None:
    """Complete the worktrees clanker created that are clean and merged.

    Merged means the branch is contained in the main checkout's HEAD; each
    pruned branch is deleted with `git branch -d`. Without --apply nothing
    changes.
    """
    with checkout_errors():
        plan = run_async(library().prune_worktrees(_where(repository), apply=apply))
    if as_json:
        echo_json(_plan(plan))
    else:
        rows = [[c.worktree.path, c.worktree.branch or "(detached)",
                 "yes" if c.eligible else "no", c.reason] for c in plan.candidates]
        echo_table(["PATH", "BRANCH", "PRUNE", "WHY"], rows)
        if not apply and any(c.eligible for c in plan.candidates):
            click.echo("Nothing was changed: run `clanker worktree prune --apply` to prune.")
        for done in plan.results:
            click.echo(f"Removed {done.path}" + (" and its branch" if done.branch_deleted
                                                 else ""))
    for line in plan.failures:
        click.echo(f"clanker: {line}", err=True)
    if plan.failures:
        raise SystemExit(EXIT_REMOVAL_FAILED)


def _plan(plan: PrunePlan) -> dict[str, Any]:
    return {"main_checkout": plan.main_checkout, "applied": plan.applied,
            "candidates": [{"path": c.worktree.path, "branch": c.worktree.branch,
                            "eligible": c.eligible, "reason": c.reason}
                           for c in plan.candidates],
            "results": [_completed(r) for r in plan.results],
            "failures": list(plan.failures)}
