"""``clanker doctor``: what is there, what is missing, what is broken, what to do."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import click

from clanker.cli.common import echo_json, json_option, library, run_async
from clanker.cli.harnesses import installation_record
from clanker.cli.plugins import refused_record

__all__ = ["doctor"]

EXIT_BROKEN = 1


def _directory_problem(path: Path) -> str | None:
    """Say why clanker could not write under ``path``, or ``None`` if it can."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".doctor-"):
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def _print(
    harnesses: list[dict[str, Any]], problems: list[dict[str, str | None]],
    directories: dict[str, dict[str, str | None]], *, plugins: bool,
) -> None:
    for record in harnesses:
        if record["error"]:
            mark, text = "✗", f"{record['name']}: {record['error']['message']}"
        elif record["installed"]:
            mark, text = "✓", f"{record['name']} {record['version']} ({record['path']})"
        else:
            hint = record["install_hint"] or "see its documentation"
            mark, text = "-", f"{record['name']}: not installed; to install: {hint}"
        click.echo(f"{mark} {text}")
    for problem in problems:
        click.echo(f"✗ plugin {problem['name']}: {problem['reason']}")
    for name, info in directories.items():
        if info["problem"]:
            click.echo(f"✗ {name} directory {info['path']}: {info['problem']}")
    if not plugins and not problems:
        click.echo("- no harness plugins are installed")


@click.command()
@json_option
def doctor(as_json: bool) -> None:
    """Check every harness and clanker's own directories.

    Exits 1 only when something is broken (a plugin that failed to load, a
    binary that does not answer, an unwritable directory); a harness that is
    simply not installed is reported with how to install it.
    """
    clanker = library()
    registry = clanker.registry
    found = run_async(clanker.installations())
    harness_records = [installation_record(f) for f in found]
    paths = clanker.paths
    directories = {
        name: {"path": str(path), "problem": _directory_problem(path)}
        for name, path in (("config", paths.config), ("cache", paths.cache), ("state", paths.state))
    }
    problems = [refused_record(p) for p in registry.problems]
    broken = (
        bool(problems)
        or any(r["error"] for r in harness_records)
        or any(d["problem"] for d in directories.values())
    )
    if as_json:
        echo_json({"ok": not broken, "harnesses": harness_records, "refused": problems,
                   "directories": directories})
    else:
        _print(harness_records, problems, directories, plugins=bool(registry.providers))
        if broken:
            click.echo("broken: see the lines marked ✗")
        elif not any(r["installed"] for r in harness_records):
            # Nothing is wrong, and nothing can run yet either: "ok" would mislead.
            click.echo("no harness installed: install one with its line above, then run "
                       "`clanker doctor` again")
        else:
            click.echo("ok")
    if broken:
        raise SystemExit(EXIT_BROKEN)
