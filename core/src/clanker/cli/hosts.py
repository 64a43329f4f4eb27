"""``clanker hosts``: the SSH hosts harnesses run on."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import click

from clanker.cli.common import (
    Failure,
    capability_errors,
    echo_json,
    echo_table,
    json_option,
    library,
    run_async,
)
from clanker.errors import EXIT_HOST, EXIT_HOST_UNREACHABLE

if TYPE_CHECKING:
    from clanker.api import Clanker
    from clanker.hosts import HostOutcome

__all__ = ["echo_places", "host_errors", "host_option", "hosts", "library_on"]

P = ParamSpec("P")
T = TypeVar("T")


def host_option(function: Callable[P, T]) -> Callable[P, T]:
    """``--host NAME``: work on a registered SSH host instead of this machine."""
    return click.option("--host", "host", metavar="NAME", default=None,
                        help="Work on the SSH host NAME (see `clanker hosts`).")(function)


def echo_places(outcomes: Sequence[HostOutcome[T]], *, as_json: bool, key: str,
                record: Callable[[T], object], render: Callable[[T], None]) -> None:
    """``--all-hosts`` output: one JSON entry per place (``host``, ``key`` and
    ``error``), or a ``[place]`` block each, a place that failed saying why there."""
    if as_json:
        echo_json([{"host": o.host, key: None if o.value is None else record(o.value),
                    "error": None if o.error is None else {"kind": o.error.kind.value,
                                                           "message": o.error.message}}
                   for o in outcomes])
        return
    for outcome in outcomes:
        click.echo(f"[{outcome.host or 'local'}]")
        if outcome.error is not None:
            click.echo(f"  ! {outcome.error.message}")
        elif outcome.value is not None:
            render(outcome.value)


@asynccontextmanager
async def library_on(host: str | None) -> AsyncIterator[Clanker]:
    """The library for this machine, or for ``host`` (connected, and closed after)."""
    local = library()
    if host is None:
        async with local:
            yield local
        return
    with host_errors(), capability_errors():
        remote = await local.on_host(host)
    async with remote:
        yield remote


@contextmanager
def host_errors() -> Iterator[None]:
    """A :class:`~clanker.hosts.HostError` is exit 40, kind ``host``."""
    from clanker.hosts import HostError

    try:
        yield
    except HostError as exc:
        raise Failure(str(exc), EXIT_HOST, kind="host") from exc


@click.group()
def hosts() -> None:
    """Register SSH hosts and check what runs there.

    A host is a name for an OpenSSH destination (user@box, or a Host alias of
    ~/.ssh/config): ports, keys, agents and jump hosts stay in your OpenSSH
    configuration.
    """


def _record(name: str, target: str) -> dict[str, str]:
    return {"name": name, "target": target}


@hosts.command("add")
@click.argument("name")
@click.argument("target")
@json_option
def add(name: str, target: str, as_json: bool) -> None:
    """Register TARGET (an OpenSSH destination) as NAME. Nothing is contacted."""
    with host_errors():
        host = library().add_host(name, target)
    if as_json:
        echo_json(_record(host.name, host.target))
    else:
        click.echo(f"added {host.name} ({host.target}); `clanker hosts check {host.name}` tries it")


@hosts.command("remove")
@click.argument("name")
@json_option
def remove(name: str, as_json: bool) -> None:
    """Forget the host NAME (nothing on the host is touched)."""
    with host_errors():
        host = library().remove_host(name)
    if as_json:
        echo_json(_record(host.name, host.target))
    else:
        click.echo(f"removed {host.name}")


@hosts.command("list")
@json_option
def list_hosts(as_json: bool) -> None:
    """List the registered hosts."""
    with host_errors():
        found = library().hosts()
    if as_json:
        echo_json([_record(h.name, h.target) for h in found])
        return
    if not found:
        click.echo("no hosts (clanker hosts add NAME TARGET)")
        return
    echo_table(["NAME", "TARGET"], [[h.name, h.target] for h in found])


@hosts.command("check")
@click.argument("name")
@json_option
def check(name: str, as_json: bool) -> None:
    """Reach NAME and list the harnesses installed there, with versions.

    Exits 41 when the host cannot be reached or used.
    """
    from clanker.cli.harnesses import installation_record, installation_state

    with host_errors():
        result = run_async(library().check_host(name))
    error = None if result.error is None else {
        "kind": result.error.kind.value, "message": result.error.message}
    harnesses = [installation_record(found) for found in result.installations]
    if as_json:
        echo_json({**_record(result.host.name, result.host.target), "reachable": result.reachable,
                   "error": error, "harnesses": harnesses})
    elif result.error is not None:
        click.echo(f"clanker: {result.host.name}: {result.error.message}", err=True)
    else:
        click.echo(f"{result.host.name} ({result.host.target}): reachable")
        echo_table(["ID", "VERSION", "PATH"],
                   [[r["id"], installation_state(r), r["path"] or "-"] for r in harnesses])
    if result.error is not None:
        raise click.exceptions.Exit(EXIT_HOST_UNREACHABLE)
