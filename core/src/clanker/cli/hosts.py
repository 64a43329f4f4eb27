"""``clanker hosts``: the SSH hosts harnesses run on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from clanker.cli.common import (
    Failure,
    echo_json,
    echo_table,
    json_option,
    library,
    run_async,
)
from clanker.errors import EXIT_HOST, EXIT_HOST_UNREACHABLE

__all__ = ["hosts"]


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
    from clanker.cli.harnesses import installation_record

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
        echo_table(["ID", "VERSION", "PATH"], [_row(record) for record in harnesses])
    if result.error is not None:
        raise click.exceptions.Exit(EXIT_HOST_UNREACHABLE)


def _row(record: dict[str, Any]) -> list[str]:
    if not record["installed"]:
        state = "not installed"
    elif record["error"]:
        state = f"broken ({record['error']['kind']})"
    else:
        state = record["version"] or "?"
    return [record["id"], state, record["path"] or "-"]
