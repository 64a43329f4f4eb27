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


def test_readme_has_exactly_two_setup_commands_and_an_install_line() -> None:
    assert setup_commands()[:2] == ["uv run clanker doctor",
                                  "uv run --group dev pytest -n auto"]
    [install] = setup_commands()[2:]
    assert install.startswith("uv tool install --from ./core clanker")
    bundled = sorted(p.name for p in (ROOT / "plugins").iterdir()
                     if (p / "pyproject.toml").exists())
    assert sorted(re.findall(r"--with \./plugins/([a-z]+)", install)) == bundled


def test_running_the_cli_does_not_install_the_dev_tools() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["tool"]["uv"]["default-groups"] == []
    assert "pytest" in " ".join(project["dependency-groups"]["dev"])


def test_ci_runs_the_readme_test_command_after_a_locked_sync() -> None:
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line.strip() for line in script if line.strip() and not line.startswith("#")]
    assert commands[-1] == setup_commands()[1]
    assert "uv sync --locked --group dev" in commands
    assert "uv pip check" in commands


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_command_a_document_names_exists() -> None:
    from click.testing import CliRunner

    from clanker.cli import cli

    # In inline code, or at the start of a line of a code block.
    words = r"(?:uv run )?clanker ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?"
    inline, in_block = re.compile("`" + words), re.compile(r"^(?:\$ )?" + words)
    named: set[tuple[str, ...]] = set()
    for path in _documents():
        fenced = False
        for line in path.read_text().splitlines():
            if line.startswith("```"):
                fenced = not fenced
                continue
            for match in (in_block.finditer(line) if fenced else inline.finditer(line)):
                named.add(tuple(w for w in match.groups() if w))
    assert named
    missing = []
    for words in sorted(named):
        command = cli.get_command(None, words[0])  # type: ignore[arg-type]
        if command is None:
            missing.append(" ".join(words))
            continue
        if len(words) == 2 and hasattr(command, "commands") and words[1] not in command.commands:
            # A second word is a subcommand only where the command is a group of them.
            missing.append(" ".join(words))
    assert missing == []
    assert CliRunner().invoke(cli, ["--help"]).exit_code == 0


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
