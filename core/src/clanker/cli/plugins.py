"""``clanker plugins``: which distributions provide which harness hooks."""

from __future__ import annotations

import click

from clanker.cli.common import echo_json, echo_table, json_option
from clanker.registry import PluginProblem, get_registry

__all__ = ["plugins", "refused_record"]


def refused_record(problem: PluginProblem) -> dict[str, str | None]:
    """The JSON shape of a plugin that was not loaded (``plugins`` and ``doctor``)."""
    return {
        "name": problem.name,
        "distribution": problem.distribution.name if problem.distribution else None,
        "reason": problem.reason,
    }


@click.command()
@json_option
def plugins(as_json: bool) -> None:
    """List installed harness plugins, their versions and the hooks they implement."""
    registry = get_registry()
    loaded = [
        {
            "harness": provider.id,
            "distribution": provider.distribution.name if provider.distribution else None,
            "version": provider.distribution.version if provider.distribution else None,
            "hooks": list(provider.hooks),
        }
        for provider in registry.providers.values()
    ]
    refused = [refused_record(problem) for problem in registry.problems]
    if as_json:
        echo_json({"plugins": loaded, "refused": refused})
        return
    echo_table(
        ["HARNESS", "DISTRIBUTION", "VERSION", "HOOKS"],
        [
            [
                provider.id,
                provider.distribution.name if provider.distribution else "-",
                provider.distribution.version if provider.distribution else "-",
                ", ".join(provider.hooks),
            ]
            for provider in registry.providers.values()
        ],
    )
    for problem in refused:
        click.echo(f"refused {problem['name']}: {problem['reason']}", err=True)
