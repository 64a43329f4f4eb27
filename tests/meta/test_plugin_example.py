"""The plugin of docs/hooks.md, built out of the tree from the page itself: it passes
`mypy --strict`, its entry point names it, and the shared contract suite passes on it,
run the way a third-party author runs it (pytest in its own directory)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from clanker.registry import ENTRY_POINT_GROUP, Registry

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "hooks.md"
FILES = ("pyproject.toml", "src/clanker_acme/__init__.py", "tests/test_contract.py")
# A fenced block whose first line is a comment naming a file is that file, verbatim.
_BLOCK = re.compile(r"^```(?:toml|python)\n# (?P<path>[\w./-]+)\n(?P<body>.*?)^```$",
                    re.MULTILINE | re.DOTALL)


def example_files() -> dict[str, str]:
    """The files the page shows, by relative path, with their first comment line."""
    found = {m["path"]: f"# {m['path']}\n{m['body']}" for m in _BLOCK.finditer(DOC.read_text())}
    assert set(found) == set(FILES), f"docs/hooks.md shows {sorted(found)}"
    return found


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("clanker-acme")
    for name, text in example_files().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MYPY"))}
    return subprocess.run(argv, cwd=cwd, env={**environ, **env}, capture_output=True,
                          text=True, timeout=300, check=False)


def test_every_type_the_page_names_is_where_it_says() -> None:
    text = DOC.read_text()
    table = text[text.index("| capability | module |"):text.index("## Rules")]
    rows = [line.split("|") for line in table.splitlines() if line.startswith("| ")][2:]
    assert len(rows) == 10
    for row in rows:
        modules = [importlib.import_module(m) for m in re.findall(r"`(clanker[\w.]*)`", row[2])]
        if row[1].strip() == "sessions":
            modules.append(importlib.import_module("clanker.stores"))
        for name in re.findall(r"`(\w+)`", row[3]):
            assert any(hasattr(module, name) for module in modules), (row[1], name)


def test_every_fixture_the_page_lists_is_one_the_contract_reads() -> None:
    from clanker.testing import HarnessProviderContract

    text = DOC.read_text()
    table = text[text.index("| part | class attributes | methods |"):]
    table = table[:table.index("\n\n")]
    names = set(re.findall(r"`(\w+)(?:\([^`]*\))?`", table))
    assert len(names) > 40
    declared = {n for c in HarnessProviderContract.__mro__ for n in vars(c).get(
        "__annotations__", {})}
    for name in names:
        assert hasattr(HarnessProviderContract, name) or name in declared, name


def test_the_entry_point_names_the_plugin_object(project: Path) -> None:
    meta = tomllib.loads((project / "pyproject.toml").read_text())
    assert "build-system" in meta
    [(name, target)] = meta["project"]["entry-points"][ENTRY_POINT_GROUP].items()
    module_name, attribute = target.split(":")
    spec = importlib.util.spec_from_file_location(
        module_name, project / "src" / module_name / "__init__.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    registry = Registry.from_plugins({name: getattr(module, attribute)}, environ={})
    assert registry.problems == ()
    assert registry.ids() == (name,)


def test_the_example_passes_mypy_strict(project: Path) -> None:
    done = run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(project / ".mypy"),
                "src", "tests"], project, MYPYPATH=str(ROOT / "core" / "src"))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_contract_suite_passes_on_the_example(project: Path) -> None:
    done = run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                "-W", "error", "tests"], project, PYTHONPATH=str(project / "src"))
    assert done.returncode == 0, done.stdout + done.stderr
    summary = done.stdout.strip().splitlines()[-1]
    passed = int(re.search(r"(\d+) passed", summary)[1])  # type: ignore[index]
    assert passed >= 25, summary
    assert "failed" not in summary and "error" not in summary
    # The parts the example implements ran; the others were skipped by capability.
    assert "acme has no attention capability" in done.stdout
    for supplied in ("(write_sessions)", "(summarize)", "no session_paths",
                     "no session_documents"):
        assert supplied not in done.stdout
