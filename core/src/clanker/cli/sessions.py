"""``clanker sessions``: every harness's history in one list; ``show`` for one session."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from clanker.cli.common import (
    Failure,
    HarnessArgument,
    capability_errors,
    echo_json,
    echo_json_listing,
    echo_table,
    json_option,
    library,
    relative_time,
    run_async,
)
from clanker.cli.hosts import host_option, library_on
from clanker.errors import EXIT_NOT_FOUND, EXIT_USAGE
from clanker.registry import HarnessProvider
from clanker.sessions.capability import DEFAULT_STORE_LIMIT
from clanker.sessions.listing import SessionListing
from clanker.sessions.types import HarnessSession

__all__ = ["session_record", "sessions"]


def session_record(session: HarnessSession) -> dict[str, Any]:
    """The JSON shape of one session (``sessions --json``, ``sessions show --json``)."""
    return {
        "harness": session.harness,
        "id": session.native_id,
        "key": session.key,
        "title": session.title,
        "cwd": session.cwd,
        "created_at": session.created_at.isoformat() if session.created_at else None,
        "updated_at": session.updated_at.isoformat(),
        "model": session.model,
        "message_count": session.message_count,
        "parent_id": session.parent_id,
        "store_path": session.store_path,
        "account": session.account,
    }


def _report_scans(listing: SessionListing, limit: int) -> list[str]:
    notes = []
    for result in listing.scans:
        scan = result.scan
        if scan.error is not None:
            notes.append(scan.error.message)  # it names its harness already
        if scan.skipped:
            notes.append(f"{result.harness}: {scan.skipped} unreadable file(s) skipped")
        if scan.partial is not None:
            notes.append(f"{result.harness}: {scan.partial}")
        if scan.truncated:
            notes.append(f"{result.harness}: only the newest {limit} sessions were read "
                         "(--limit raises the bound)")
    return notes


@click.group(invoke_without_command=True)
@click.option("--workspace", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="List sessions of this directory (default: the current one).")
@click.option("--all", "everywhere", is_flag=True, help="List sessions of every directory.")
@click.option("--harness", "harnesses", type=HarnessArgument(), multiple=True,
              help="Only this harness (repeatable).")
@click.option("--limit", type=click.IntRange(1, 100_000), default=DEFAULT_STORE_LIMIT,
              show_default=True, help="Sessions read per harness store, newest first.")
@host_option
@click.option("--all-hosts", is_flag=True,
              help="This machine (every directory) and every registered host, each "
                   "answer beside the others.")
@json_option
@click.pass_context
def sessions(
    ctx: click.Context,
    workspace: Path | None,
    everywhere: bool,
    harnesses: tuple[HarnessProvider, ...],
    limit: int,
    host: str | None,
    all_hosts: bool,
    as_json: bool,
) -> None:
    """List past conversations of every harness for this workspace, newest first.

    With --host, the conversations on that SSH host, of every directory.
    """
    if ctx.invoked_subcommand is not None:
        return
    if all_hosts:
        _everywhere(harnesses, limit, as_json=as_json, alone=host is None and workspace is None)
        return
    directory = _directory(workspace, everywhere, host)
    interactive = sys.stderr.isatty() and not as_json
    if interactive:
        click.echo("Reading session history…", err=True, nl=False)

    async def read() -> SessionListing:
        async with library_on(host) as clanker:
            return await clanker.sessions(workspace=directory, harnesses=harnesses or None,
                                          limit=limit)

    with capability_errors():
        # Stores read from files alone (or nothing to read anywhere): answered as
        # the scan would, without starting an event loop (asyncio and the ssl it
        # imports are some 7 MB of a listing's memory).
        found = None if host is not None else library().sessions_now(
            workspace=directory, harnesses=harnesses or None, limit=limit)
        listing = found if found is not None else run_async(read())
    if interactive:
        click.echo("\r\x1b[K", err=True, nl=False)
    notes = _report_scans(listing, limit)
    if as_json:
        # Streamed: at tens of thousands of sessions one indented string of the whole
        # listing was the largest thing the process ever held.
        echo_json_listing({
            "workspace": directory,
            "complete": listing.complete,
            "incomplete": [
                {"harness": gap.harness, "reason": gap.reason.value, "kind": gap.kind,
                 "detail": gap.detail}
                for gap in listing.incomplete
            ],
            "sessions": None,
            "scans": [
                {"harness": r.harness, "account": r.account,
                 "skipped": r.scan.skipped, "truncated": r.scan.truncated,
                 "partial": r.scan.partial,
                 "error": None if r.scan.error is None else {
                     "kind": r.scan.error.kind.value, "message": r.scan.error.message}}
                for r in listing.scans
            ],
        }, "sessions", map(session_record, listing.sessions))
    elif listing.sessions:
        now = datetime.now(UTC)
        # The key, whole: it is what `clanker resume` takes back (a unique prefix works too).
        rows = [[relative_time(s.updated_at, now), (s.title or "")[:60], s.model or "", s.key]
                for s in listing.sessions]
        headers = ["UPDATED", "TITLE", "MODEL", "SESSION"]
        if any(s.account is not None for s in listing.sessions):
            # Only once managed accounts hold history: which sign-in each one is under.
            names = {r.id: r.name for r in library().accounts.state().accounts}
            headers.insert(3, "ACCOUNT")
            for row, s in zip(rows, listing.sessions, strict=True):
                row.insert(3, "default" if s.account is None else names.get(s.account,
                                                                               s.account))
        echo_table(headers, rows)
    else:
        where = "anywhere" if directory is None else f"for {directory}"
        click.echo(f"No sessions {where}.")
    if not as_json:
        for note in notes:
            click.echo(f"clanker: {note}", err=True)


def _directory(workspace: Path | None, everywhere: bool, host: str | None) -> str | None:
    """The directory whose sessions are listed (``None``: every directory)."""
    if workspace is not None and everywhere:
        raise click.UsageError("--workspace and --all cannot be combined")
    if workspace is not None and host is not None:
        raise click.UsageError("--workspace names a directory of this machine: with --host "
                               "every directory of the host is listed")
    return None if everywhere or host is not None else os.path.abspath(workspace or os.getcwd())


def _everywhere(harnesses: tuple[HarnessProvider, ...], limit: int, *, as_json: bool,
                alone: bool) -> None:
    """``--all-hosts``: each place's listing of every directory, a host that failed
    shown beside the others (:meth:`Clanker.each_host`)."""
    if not alone:
        raise click.UsageError("--all-hosts lists every directory of every place: not "
                               "with --host or --workspace")
    from clanker.api import Clanker
    from clanker.cli.hosts import echo_places, host_errors
    from clanker.hosts import HostOutcome

    async def collect() -> list[HostOutcome[SessionListing]]:
        async with library() as clanker:
            async def listing(place: Clanker) -> SessionListing:
                return await place.sessions(workspace=None, harnesses=harnesses or None,
                                            limit=limit)
            return await clanker.each_host(listing)

    with host_errors():
        outcomes = run_async(collect())
    now = datetime.now(UTC)

    def render(listing: SessionListing) -> None:
        for s in listing.sessions:
            click.echo(f"  {relative_time(s.updated_at, now)}  {(s.title or '')[:60]}  {s.key}")
        for note in _report_scans(listing, limit):
            click.echo(f"  ! {note}")

    echo_places(outcomes, as_json=as_json, key="sessions", render=render,
                record=lambda listing: [session_record(s) for s in listing.sessions])
    failed = [o.error for o in outcomes if o.error is not None]
    if failed:
        from clanker.errors import EXIT_CODES

        raise SystemExit(EXIT_CODES[failed[0].kind])


@sessions.command()
@click.argument("selection", metavar="HARNESS:ID")
@json_option
def show(selection: str, as_json: bool) -> None:
    """Show one session, re-found in its harness's own history."""
    from clanker.sessions.selection import InvalidSelectionError, SessionNotFoundError

    with capability_errors():
        try:
            found = run_async(library().find_session(selection, workspace=os.getcwd()))
        except InvalidSelectionError as exc:
            raise Failure(str(exc), EXIT_USAGE) from exc
        except SessionNotFoundError as exc:
            raise Failure(str(exc), EXIT_NOT_FOUND, kind="not-found") from exc
    record = session_record(found.session)
    if as_json:
        echo_json(record)
        return
    for name, value in record.items():
        if value is not None:
            click.echo(f"{name:>14}: {value}")
