"""``clanker harnesses``: every harness, installed or not."""

from __future__ import annotations

from typing import Any

import click

from clanker.cli.common import echo_json, echo_table, json_option, library, run_async
from clanker.environment import TRANSPORTS
from clanker.installation import Installation, installations_at_once

__all__ = ["harnesses", "installation_record", "installation_state"]


def installation_record(found: Installation) -> dict[str, Any]:
    """The JSON shape shared by ``harnesses`` and ``doctor``."""
    descriptor = found.provider.descriptor
    operations = {}
    for name in ("resume", "fork"):
        support = getattr(descriptor, name)
        operations[name] = (
            None
            if support is None
            # Only where clanker can run it today, whatever else the harness supports.
            else {"support": support.support.value,
                  "transports": sorted(t.value for t in support.transports & TRANSPORTS)}
        )
    return {
        "id": descriptor.id,
        "name": descriptor.display_name,
        "executable": descriptor.executable,
        "installed": found.installed,
        "path": found.path,
        "version": found.version,
        "error": None if found.error is None else {
            "kind": found.error.kind.value, "message": found.error.message
        },
        "capabilities": sorted(c.value for c in found.provider.capabilities),
        "operations": operations,
        "install_hint": descriptor.install_hint,
    }


def installation_state(record: dict[str, Any]) -> str:
    """The VERSION column of an :func:`installation_record`."""
    if not record["installed"]:
        return "not installed"
    if record["error"]:
        return f"broken ({record['error']['kind']})"
    return str(record["version"] or "?")


@click.command()
@json_option
def harnesses(as_json: bool) -> None:
    """List every known harness: installed or not, version, path, capabilities."""
    clanker = library()
    # Nothing installed to ask a version of: the answer needs no event loop.
    found = installations_at_once(clanker.harnesses(), clanker.environment)
    if found is None:
        found = run_async(clanker.installations())
    records = [installation_record(f) for f in found]
    if as_json:
        echo_json(records)
        return
    rows = [[record["id"], record["name"], installation_state(record), record["path"] or "-",
             ", ".join(record["capabilities"])] for record in records]
    echo_table(["ID", "NAME", "VERSION", "PATH", "CAPABILITIES"], rows)
