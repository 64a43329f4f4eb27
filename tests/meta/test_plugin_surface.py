"""Plugins import core only through its documented surface (`clanker.plugin.SURFACE`),
and never do what an environment owns: spawn processes, look up binaries or read the
process environment."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from clanker.plugin import SURFACE

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_SOURCES = sorted((ROOT / "plugins").glob("*/src/clanker_*/*.py"))
# These files run inside the harness's own process (an observer plugin) or as
# the hook bridge's standard-library interpreter: they are not providers, and
# import nothing of clanker at all.
IN_HARNESS = {"attention_interpreter.py", "attention_plugin.py"}
FORBIDDEN_CALLS = {
    ("subprocess", None), ("shutil", "which"), ("os", "environ"), ("os", "getenv"),
    ("asyncio", "create_subprocess_exec"), ("asyncio", "create_subprocess_shell"),
    ("pwd", None), ("os", "system"), ("os", "popen"),
    # Core's own transport: a provider is handed executors, it never builds one.
    ("clanker.execution", "LocalTransport"),
}


def _imports(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, ()) for alias in node.names)
    return found


def _own(path: Path) -> str:
    return path.parent.name


@pytest.mark.parametrize("path", PLUGIN_SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_plugin_imports_only_the_documented_surface(path: Path) -> None:
    offenders = []
    for line, module, names in _imports(path):
        top = module.split(".")[0]
        if top.startswith("clanker_"):
            if top != _own(path):
                offenders.append(f"{line}: imports another plugin ({module})")
            continue
        if top != "clanker":
            continue
        if module not in SURFACE:
            offenders.append(f"{line}: {module} is not part of the plugin surface")
            continue
        offered = set(getattr(importlib.import_module(module), "__all__", ()))
        # `from clanker import pistore`: a surface module, imported by its name.
        offenders += [f"{line}: {module} does not offer {name}"
                      for name in names
                      if name not in offered and f"{module}.{name}" not in SURFACE]
    assert offenders == []


@pytest.mark.parametrize(
    "path", [p for p in PLUGIN_SOURCES if p.name not in IN_HARNESS],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_a_provider_leaves_processes_and_the_environment_to_core(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    offenders = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            offenders += [f"{node.lineno}: import {a.name}" for a in node.names
                          if (a.name, None) in FORBIDDEN_CALLS]
        elif isinstance(node, ast.ImportFrom) and node.module:
            offenders += [f"{node.lineno}: from {node.module} import {a.name}"
                          for a in node.names
                          if (node.module, None) in FORBIDDEN_CALLS
                          or (node.module, a.name) in FORBIDDEN_CALLS]
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and (node.value.id, node.attr) in FORBIDDEN_CALLS):
            offenders.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    assert offenders == []


def test_the_surface_is_importable_and_declares_what_it_offers() -> None:
    for module in sorted(SURFACE):
        imported = importlib.import_module(module)
        if module != "clanker":
            assert getattr(imported, "__all__", None), f"{module} declares no __all__"


def test_the_in_harness_files_import_nothing_of_clanker() -> None:
    for path in PLUGIN_SOURCES:
        if path.name in IN_HARNESS:
            modules = [m for _, m, _ in _imports(path)]
            assert not [m for m in modules if m.split(".")[0].startswith("clanker")], path
