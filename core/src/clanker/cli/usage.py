"""``clanker usage``: every subscription's remaining quota, from the harnesses themselves."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from clanker.cli.common import (
    HarnessArgument,
    echo_json,
    json_option,
    library,
    relative_time,
    run_async,
)
from clanker.cli.hosts import echo_places, host_errors, host_option, library_on
from clanker.errors import EXIT_CODES, ErrorKind
from clanker.hosts import HostOutcome
from clanker.registry import HarnessProvider
from clanker.usage.service import UsageEntry, UsageStatus
from clanker.usage.text import reset_text
from clanker.usage.types import Measurement

if TYPE_CHECKING:
    from clanker.api import Clanker

__all__ = ["usage"]

_BAR = 20
_LOW = 10.0  # percent remaining at or below which the bar turns amber

# One fixed sentence per failure category: vendor text never reaches the screen.
_FAILURES = {
    ErrorKind.UNAUTHENTICATED: "not signed in: sign in with the harness itself",
    ErrorKind.UNSUPPORTED: "this account or version reports no quota",
    ErrorKind.BINARY_UNAVAILABLE: "not installed",
    ErrorKind.TIMEOUT: "the harness did not answer in time",
    ErrorKind.PARSE_FAILURE: "the harness answered in an unexpected format",
    ErrorKind.ABORTED: "no reading yet",
}


def _amount(measurement: Measurement) -> tuple[str, float | None]:
    percent = measurement.remaining_percent
    if measurement.unit == "percent" and percent is not None:
        return f"{percent:.0f}% remaining", percent
    parts = []
    if measurement.used is not None:
        limit = f" / {measurement.limit:g}" if measurement.limit is not None else ""
        parts.append(f"{measurement.used:g}{limit} {measurement.unit} used")
    if measurement.remaining is not None:
        parts.append(f"{measurement.remaining:g} {measurement.unit} left")
    return ", ".join(parts), percent


def _bar(percent: float | None) -> str:
    if percent is None:
        return ""
    share = min(max(percent, 0.0), 100.0) / 100
    filled = round(share * _BAR)
    bar = "[" + "█" * filled + "░" * (_BAR - filled) + "]"
    return click.style(bar, fg="yellow") if percent <= _LOW else bar


def _render(provider: HarnessProvider, entry: UsageEntry, now: datetime,
            sign_in: str | None = None) -> None:
    """``sign_in`` names the account, once the harness has managed accounts."""
    title = provider.descriptor.display_name + (f" · {sign_in}" if sign_in else "")
    name = click.style(title, bold=True)
    if entry.status is UsageStatus.NOT_INSTALLED:
        click.echo(f"{name}  not installed")
        return
    if entry.status is UsageStatus.UNSUPPORTED:
        click.echo(f"{name}  no quota interface")
        return
    badge = click.style(" STALE", fg="yellow") if entry.status is UsageStatus.STALE else ""
    checked = f"checked {relative_time(entry.checked_at, now)}" if entry.checked_at else ""
    click.echo(f"{name}{badge}  {checked}".rstrip())
    if entry.snapshot is not None:
        groups: dict[tuple[str, str | None, str | None], list[Measurement]] = {}
        for m in entry.snapshot.measurements:
            key = (m.scope.provider_id, m.scope.plan_label, m.scope.account_label)
            groups.setdefault(key, []).append(m)
        for (_, plan, account), measurements in groups.items():
            who = " · ".join(p for p in (plan, account) if p)
            if who and len(groups) > 1:
                click.echo(f"  {who}")
            for m in measurements:
                amount, percent = _amount(m)
                click.echo(f"  {m.label:<28} {amount:<16} {_bar(percent)}  "
                           f"{reset_text(m.resets_at, now)}".rstrip())
        if not entry.snapshot.measurements:
            click.echo("  no active usage limits reported")
    if entry.failure is not None:
        text = _FAILURES.get(entry.failure.kind, "the reading failed")
        click.echo(f"  ! {text}")


def _record(provider: HarnessProvider, entry: UsageEntry) -> dict[str, Any]:
    def iso(moment: datetime | None) -> str | None:
        return moment.isoformat() if moment else None

    measurements = []
    if entry.snapshot is not None:
        for m in entry.snapshot.measurements:
            measurements.append({
                "kind": m.kind.value, "unit": m.unit, "label": m.label,
                "used": m.used, "remaining": m.remaining, "limit": m.limit,
                "remaining_percent": m.remaining_percent, "resets_at": iso(m.resets_at),
                "period": None if m.period is None else {
                    "label": m.period.label, "starts_at": iso(m.period.starts_at),
                    "ends_at": iso(m.period.ends_at)},
                # account_id is an internal grouping key and is never printed
                "description": m.description,
                "scope": {"provider": m.scope.provider_id, "account": m.scope.account_label,
                          "plan": m.scope.plan_label, "model": m.scope.model_id},
            })
    return {
        "harness": provider.id,
        "account": entry.account,
        "status": entry.status.value,
        "observed_at": iso(entry.snapshot.observed_at) if entry.snapshot else None,
        "checked_at": iso(entry.checked_at),
        "next_refresh_at": iso(entry.next_refresh_at),
        "refreshable_at": iso(entry.refreshable_at),
        "failure": None if entry.failure is None else {
            "kind": entry.failure.kind.value,
            "message": _FAILURES.get(entry.failure.kind, "the reading failed")},
        "measurements": measurements,
    }


def _account_names(clanker: Any, providers: list[HarnessProvider]
                   ) -> dict[tuple[str, str | None], str]:
    """What each sign-in is called, for the harnesses that have managed accounts."""
    names: dict[tuple[str, str | None], str] = {}
    for provider in providers:
        entries = clanker.accounts.listing(provider.id) if provider.accounts else ()
        if len(entries) > 1:
            for entry in entries:
                names[(provider.id, entry.record.id if entry.record else None)] = (
                    entry.name + (" *" if entry.selected else ""))
    return names


@click.command()
@click.option("--harness", "harnesses", type=HarnessArgument(), multiple=True,
              help="Only this harness (repeatable).")
@click.option("--refresh", is_flag=True,
              help="Ask again now (still within each harness's hard limits).")
@host_option
@click.option("--all-hosts", is_flag=True,
              help="This machine and every registered host, each answer beside the others.")
@json_option
def usage(harnesses: tuple[HarnessProvider, ...], refresh: bool, host: str | None,
          all_hosts: bool, as_json: bool) -> None:
    """Show every subscription's remaining quota, as each harness reports it."""
    requested = bool(harnesses)
    if all_hosts:
        if host is not None:
            raise click.UsageError("--host and --all-hosts exclude each other")
        _everywhere(harnesses, refresh=refresh, as_json=as_json)
        return

    async def collect() -> list[tuple[HarnessProvider, UsageEntry]]:
        async with library_on(host) as clanker:
            chosen = list(harnesses) or [p for p in clanker.harnesses() if p.usage is not None]
            if as_json:  # in the library's order: harness, then the selected sign-in first
                return [(clanker.harness(entry.harness), entry)
                        for entry in await clanker.usage(chosen, refresh=refresh)]
            names = _account_names(clanker, chosen)
            results = []
            async for entry in clanker.usage_as_completed(chosen, refresh=refresh):
                provider = clanker.harness(entry.harness)
                # Progressive: each block as soon as its probe answers.
                _render(provider, entry, datetime.now(UTC),
                        names.get((entry.harness, entry.account)))
                results.append((provider, entry))
        return results

    results = run_async(collect())
    if as_json:
        echo_json([_record(p, e) for p, e in results])
    codes = _failure_codes(results, requested=requested)
    if codes:
        raise SystemExit(codes[0])


def _failure_codes(results: list[tuple[HarnessProvider, UsageEntry]], *, requested: bool
                   ) -> list[int]:
    """The exit codes of the failures among ``results``, in order (a requested harness
    that is missing or cannot report counts too)."""
    codes = [
        EXIT_CODES[e.failure.kind] for _, e in results
        if e.failure is not None and e.status in (UsageStatus.FAILED, UsageStatus.STALE)
    ]
    if requested:
        codes += [EXIT_CODES[ErrorKind.BINARY_UNAVAILABLE] for _, e in results
                  if e.status is UsageStatus.NOT_INSTALLED]
        codes += [EXIT_CODES[ErrorKind.UNSUPPORTED] for _, e in results
                  if e.status is UsageStatus.UNSUPPORTED]
    return codes


def _everywhere(harnesses: tuple[HarnessProvider, ...], *, refresh: bool, as_json: bool) -> None:
    """``--all-hosts``: every place's entries, a host that failed shown beside the others."""
    async def readings(place: Clanker) -> list[tuple[HarnessProvider, UsageEntry]]:
        chosen = list(harnesses) or [p for p in place.harnesses() if p.usage is not None]
        return [(place.harness(entry.harness), entry)
                for entry in await place.usage(chosen, refresh=refresh)]

    async def collect() -> list[HostOutcome[list[tuple[HarnessProvider, UsageEntry]]]]:
        async with library() as clanker:
            return await clanker.each_host(readings)

    with host_errors():
        outcomes = run_async(collect())
    now = datetime.now(UTC)

    def render(readings: list[tuple[HarnessProvider, UsageEntry]]) -> None:
        for provider, entry in readings:
            _render(provider, entry, now, None)

    echo_places(outcomes, as_json=as_json, key="entries", render=render,
                record=lambda readings: [_record(p, e) for p, e in readings])
    codes = [code for o in outcomes
             for code in ([EXIT_CODES[o.error.kind]] if o.error is not None
                          else _failure_codes(o.value or [], requested=bool(harnesses)))]
    if codes:
        raise SystemExit(codes[0])
