"""The README's set-up stays true: two commands, and CI runs the same test command."""

from __future__ import annotations

import re
from pathlib import Path

from clanker.errors import EXIT_CODES

ROOT = Path(__file__).resolve().parents[2]


def setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_readme_has_exactly_two_setup_commands() -> None:
    assert setup_commands() == ["uv run clanker doctor", "uv run pytest"]


def test_ci_runs_the_readme_test_command_after_a_locked_sync() -> None:
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line.strip() for line in script if line.strip() and not line.startswith("#")]
    assert commands[-1] == setup_commands()[1]
    assert "uv sync --locked" in commands
    assert "uv pip check" in commands


def test_exit_code_table_is_documented() -> None:
    table = (ROOT / "docs" / "exit-codes.md").read_text()
    for kind, code in EXIT_CODES.items():
        assert re.search(rf"^\| {code} \| `{kind.value}`", table, re.MULTILINE), kind


def test_every_command_has_a_user_guide() -> None:
    from clanker.cli import _COMMANDS

    guides = "\n".join(p.read_text() for p in (ROOT / "docs" / "guide").glob("*.md"))
    for command in _COMMANDS:
        assert f"clanker {command}" in guides, f"no guide mentions `clanker {command}`"


def test_every_cli_exit_code_constant_is_documented() -> None:
    from clanker import errors

    table = (ROOT / "docs" / "exit-codes.md").read_text()
    for name in dir(errors):
        if name.startswith("EXIT_") and isinstance(getattr(errors, name), int):
            assert re.search(rf"^\| {getattr(errors, name)} \|", table, re.MULTILINE), name
