"""``clanker accounts``: several sign-ins of one harness, kept apart and chosen per launch."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from clanker.accounts.service import DEFAULT, AccountEntry, AccountError
from clanker.accounts.store import AccountRecord, AccountStoreError, check_label
from clanker.cli.common import (
    Failure,
    HarnessArgument,
    capability_errors,
    echo_json,
    echo_table,
    json_option,
    library,
    relative_time,
)
from clanker.errors import EXIT_ACCOUNT, EXIT_ACCOUNT_STORE, ErrorKind
from clanker.registry import HarnessProvider

__all__ = ["account_errors", "accounts"]


@contextmanager
def account_errors() -> Iterator[None]:
    """Turn account refusals into the CLI's one failure format."""
    try:
        with capability_errors():
            yield
    except AccountStoreError as exc:
        raise Failure(str(exc), EXIT_ACCOUNT_STORE, kind="account-settings") from exc
    except AccountError as exc:
        raise Failure(str(exc), EXIT_ACCOUNT, kind="account") from exc


def _check_label(label: str | None) -> None:
    try:
        check_label(label)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="label") from exc


def _record(entry: AccountEntry) -> dict[str, Any]:
    record = entry.record
    return {"harness": entry.harness, "id": entry.id, "selected": entry.selected,
            "managed": record is not None,
            "label": None if record is None else record.label,
            "email": None if record is None else record.email,
            "plan": None if record is None else record.plan,
            "status": None if record is None else record.status.value,
            "identity_changed": None if record is None else record.identity_changed,
            "created_at": None if record is None else record.created_at.isoformat()}


def _show_url(no_browser: bool) -> Any:
    def show(url: str) -> None:
        if not url.startswith(("https://", "http://")):
            return  # only a web address is ever shown or opened
        click.echo(f"Sign in at: {url}", err=True)
        if not no_browser:
            import webbrowser

            webbrowser.open(url)
    return show


def _run(coroutine: Any) -> Any:
    """Run a sign-in flow; Ctrl+C cancels it (the harness's own cancel runs) and exits 130."""
    try:
        return asyncio.run(coroutine)
    except KeyboardInterrupt:
        click.echo("clanker: cancelled", err=True)
        sys.exit(130)


def _describe(record: AccountRecord) -> str:
    who = f" ({record.email})" if record.email and record.email != record.name else ""
    return f"{record.name}{who}, {record.id}"


@click.group(invoke_without_command=True)
@json_option
@click.pass_context
def accounts(ctx: click.Context, as_json: bool) -> None:
    """List, add and choose the accounts harnesses sign in with.

    Each harness has its default account (its own home, exactly as you set it
    up); a managed account is another sign-in, kept in a home clanker owns.
    """
    with account_errors():
        # A sign-in cut off before it could keep its account left a home behind.
        library().accounts.recover_orphans()
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_accounts, as_json=as_json)


@accounts.command("list")
@json_option
def list_accounts(as_json: bool) -> None:
    """List every harness's accounts; the selected one is marked *."""
    service = library().accounts
    with account_errors():
        entries = service.listing()
    if as_json:
        echo_json({"managed_supported": service.managed_supported,
                   "accounts": [_record(e) for e in entries]})
        return
    if not entries:
        click.echo("No installed harness has managed accounts.")
        return
    rows = []
    for entry in entries:
        record = entry.record
        rows.append([
            entry.harness, entry.name + (" *" if entry.selected else ""), entry.id,
            "" if record is None else (record.email or ""),
            "" if record is None else record.status.value
            + (" (signed in as someone else)" if record.identity_changed else ""),
            "" if record is None else relative_time(record.created_at)])
    echo_table(["HARNESS", "ACCOUNT", "ID", "EMAIL", "STATUS", "ADDED"], rows)


@accounts.command("add")
@click.argument("harness", type=HarnessArgument())
@click.option("--label", metavar="LABEL", help="What to call it (default: its email).")
@click.option("--no-browser", is_flag=True, help="Print the sign-in address only.")
@json_option
def add(harness: HarnessProvider, label: str | None, no_browser: bool, as_json: bool) -> None:
    """Sign a new account of HARNESS in, in a home of its own."""
    _check_label(label)
    with account_errors():
        record = _run(library().accounts.add(harness.id, label=label,
                                             show_url=_show_url(no_browser)))
    if as_json:
        echo_json(_record(AccountEntry(harness=record.harness, record=record, selected=False)))
    else:
        click.echo(f"Added {_describe(record)}. Use it with `clanker launch {record.harness} "
                   f"--account {record.id}` or `clanker accounts select`.")


@accounts.command("select")
@click.argument("harness", type=HarnessArgument())
@click.argument("account")
def select(harness: HarnessProvider, account: str) -> None:
    """Launch HARNESS under ACCOUNT (a label, email or id, or `default`) from now on."""
    with account_errors():
        entry = library().accounts.select(harness.id, account)
    click.echo(f"{harness.descriptor.display_name} now launches under {entry.name}.")


@accounts.command("rename")
@click.argument("account")
@click.argument("label")
def rename(account: str, label: str) -> None:
    """Give ACCOUNT the label LABEL."""
    _check_label(label)
    with account_errors():
        record = library().accounts.rename(account, label)
    click.echo(f"Renamed {record.id} to {record.name}.")


@accounts.command("reconnect")
@click.argument("account")
@click.option("--no-browser", is_flag=True, help="Print the sign-in address only.")
def reconnect(account: str, no_browser: bool) -> None:
    """Sign ACCOUNT in again (in its own home)."""
    with account_errors():
        record = _run(library().accounts.reconnect(account, show_url=_show_url(no_browser)))
    click.echo(f"Reconnected {_describe(record)}.")


@accounts.command("remove")
@click.argument("account")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def remove(account: str, yes: bool) -> None:
    """Sign ACCOUNT out and delete its home (never the harness's own)."""
    if account == DEFAULT:
        raise Failure("the default account is the harness's own and cannot be removed",
                      EXIT_ACCOUNT, kind="account")
    service = library().accounts
    with account_errors():
        record = service.find(account)
        if not yes and not click.confirm(f"Sign out and remove {_describe(record)}?"):
            raise Failure("nothing was removed", EXIT_ACCOUNT, kind=ErrorKind.ABORTED.value)
        _run(service.remove(record.id))
    click.echo(f"Removed {_describe(record)}.")
