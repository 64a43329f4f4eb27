"""``clanker models HARNESS``: the models a harness accepts, from the harness itself."""

from __future__ import annotations

import click

from clanker.cli.common import (
    CapabilityFailure,
    HarnessArgument,
    capability_errors,
    echo_json,
    echo_table,
    json_option,
    library,
    run_async,
)
from clanker.cli.hosts import echo_places, host_errors, host_option, library_on
from clanker.hosts import HostOutcome
from clanker.models.types import CatalogSource, ModelCatalog
from clanker.registry import HarnessProvider

__all__ = ["models"]


def _record(catalog: ModelCatalog) -> dict[str, object]:
    return {
        "harness": catalog.harness,
        "source": catalog.source.value,
        "stale": catalog.stale,
        "fetched_at": catalog.fetched_at.isoformat() if catalog.fetched_at else None,
        "failure": None if catalog.failure is None else {
            "kind": catalog.failure.kind.value, "message": catalog.failure.message
        },
        "models": [
            {"id": m.id, "label": m.label, "provider": m.provider, "default": m.is_default}
            for m in catalog.models
        ],
    }


@click.command()
@click.argument("harness", type=HarnessArgument())
@click.option("--refresh", is_flag=True, help="Ask the harness now, ignoring the cache.")
@host_option
@click.option("--all-hosts", is_flag=True,
              help="This machine and every registered host, each answer beside the others.")
@json_option
def models(harness: HarnessProvider, refresh: bool, host: str | None, all_hosts: bool,
           as_json: bool) -> None:
    """List the models HARNESS accepts, as its own listing command reports them.

    When listing fails, the last good list (marked stale) or the harness's
    fallback list is shown and the exit code is the failure's.
    """
    if all_hosts:
        if host is not None:
            raise click.UsageError("--host and --all-hosts exclude each other")
        _everywhere(harness, refresh=refresh, as_json=as_json)
        return

    async def listing() -> ModelCatalog:
        async with library_on(host) as clanker:
            return await clanker.models(harness, refresh=refresh)

    with capability_errors():
        catalog = run_async(listing())
    if as_json:
        echo_json(_record(catalog))
    elif catalog.models:
        rows = [
            [m.id + (" *" if m.is_default else ""), m.label or "", m.provider or ""]
            for m in catalog.models
        ]
        echo_table(["MODEL", "NAME", "PROVIDER"], rows)
    elif catalog.failure is None:
        click.echo(f"{harness.descriptor.display_name} lists no models: is a provider "
                   "configured? (`--refresh` asks it again now)")
    if catalog.failure is not None:
        if catalog.source is CatalogSource.CACHE:
            note = "showing the last good list"
        elif catalog.source is CatalogSource.FALLBACK:
            note = "showing the built-in fallback list"
        else:
            note = "no list to show"
        if not as_json:
            click.echo(f"clanker: {catalog.failure.message}; {note}", err=True)
        raise SystemExit(CapabilityFailure(catalog.failure).exit_code)


def _everywhere(harness: HarnessProvider, *, refresh: bool, as_json: bool) -> None:
    """``--all-hosts``: one block (or JSON entry) per place; exit with the first failure."""
    async def listings() -> list[HostOutcome[ModelCatalog]]:
        async with library() as clanker:
            return await clanker.each_host(lambda place: place.models(harness, refresh=refresh))

    with host_errors():
        outcomes = run_async(listings())
    found = (o.error or (o.value.failure if o.value is not None else None) for o in outcomes)
    failures = [failure for failure in found if failure is not None]
    def render(catalog: ModelCatalog) -> None:
        for m in catalog.models:
            click.echo(f"  {m.id}{' *' if m.is_default else ''}")
        if catalog.failure is not None:
            click.echo(f"  ! {catalog.failure.message}")

    echo_places(outcomes, as_json=as_json, key="catalog", record=_record, render=render)
    if failures:
        raise SystemExit(CapabilityFailure(failures[0]).exit_code)
