"""Meta-tests: the plugin surface is exhaustive, documented, discovered, and
shared code never branches on a harness name."""

from __future__ import annotations

import ast
import inspect
import re
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from clanker import hookspecs
from clanker.capabilities import CONTRACTS, Capability
from clanker.registry import ENTRY_POINT_GROUP, Registry

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "core" / "src" / "clanker"
PLUGIN_DIRS = sorted(p for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").exists())
BUNDLED_IDS = {p.name for p in PLUGIN_DIRS}
HOOKSPECS = sorted(
    name for name, obj in vars(hookspecs).items()
    if name.startswith("clanker_") and callable(obj)
)


def test_every_capability_has_exactly_one_hookspec() -> None:
    assert set(HOOKSPECS) == {row.hook for row in CONTRACTS.values()} | {"clanker_descriptor"}
    assert set(CONTRACTS) == set(Capability)


@pytest.mark.parametrize("name", HOOKSPECS)
def test_every_hookspec_is_documented_with_its_signature(name: str) -> None:
    docs = (ROOT / "docs" / "hooks.md").read_text()
    function = getattr(hookspecs, name)
    returns = inspect.signature(function).return_annotation
    assert f"`{name}() -> {returns}`" in docs, f"docs/hooks.md lacks {name}"
    assert function.__doc__ and function.__doc__.strip()[0].isupper()
    assert "Absent" in function.__doc__ or name == "clanker_descriptor"


def test_every_hookspec_is_exercised_by_a_test() -> None:
    """Each capability hook has a registry test case of its own (collected, not grepped)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         str(ROOT / "tests" / "core" / "test_registry.py")],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )
    collected = done.stdout
    for capability in Capability:
        for test in ("test_each_capability_hook_is_assembled_into_the_provider",
                     "test_each_capability_hook_refuses_an_object_without_its_interface"):
            assert f"{test}[{capability.value}]" in collected
    assert "test_descriptor_id_must_match_the_registration_name" in collected


@pytest.mark.parametrize("plugin_dir", PLUGIN_DIRS, ids=lambda p: p.name)
def test_every_bundled_plugin_entry_point_is_discovered(plugin_dir: Path) -> None:
    project = tomllib.loads((plugin_dir / "pyproject.toml").read_text())
    declared = project["project"]["entry-points"][ENTRY_POINT_GROUP]
    assert list(declared) == [plugin_dir.name]
    assert project["project"]["name"] == f"clanker-{plugin_dir.name}"
    assert "build-system" in project
    installed = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert plugin_dir.name in installed
    assert installed[plugin_dir.name].value == declared[plugin_dir.name]


def test_the_bundled_plugins_load_without_problems() -> None:
    registry = Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": ",".join(BUNDLED_IDS)})
    assert registry.problems == ()
    assert set(registry.ids()) == BUNDLED_IDS


def _string_literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
    return found


def test_no_core_module_names_a_bundled_harness() -> None:
    pattern = re.compile(r"\b(" + "|".join(sorted(BUNDLED_IDS)) + r")\b")
    offenders = []
    for path in sorted(CORE.rglob("*.py")):
        for line, value in _string_literals(path):
            if pattern.search(value):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {value[:60]!r}")
        # identifiers such as `if harness == codex` or `clanker_codex` imports
        source = path.read_text()
        if re.search(r"\bclanker_(" + "|".join(BUNDLED_IDS) + r")\b", source):
            offenders.append(f"{path.relative_to(ROOT)}: imports a bundled plugin")
    assert offenders == []


def test_importing_clanker_loads_no_plugin_and_no_pluggy() -> None:
    import subprocess
    import sys

    code = (
        "import sys, clanker, clanker.cli; "
        "bad = sorted(m for m in sys.modules if m.startswith('clanker_') or m == 'pluggy'); "
        "print(','.join(bad))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_the_version_matches_the_distribution() -> None:
    from importlib.metadata import version

    import clanker

    assert clanker.__version__ == version("clanker")


def test_every_plugin_has_a_contract_test_and_a_verified_contract_page() -> None:
    for plugin_dir in PLUGIN_DIRS:
        tests = ROOT / "tests" / "plugins" / plugin_dir.name
        assert any("HarnessProviderContract" in p.read_text() for p in tests.glob("test_*.py")), (
            f"{plugin_dir.name} has no contract test"
        )
        page = ROOT / "docs" / "harnesses" / f"{plugin_dir.name}.md"
        assert page.exists(), f"docs/harnesses/{plugin_dir.name}.md is missing"
        assert "2026-" in page.read_text(), "the page must record when it was verified"


@pytest.mark.parametrize("command", ["status", "grid"])
def test_commands_that_take_no_harness_never_load_the_registry(command: str) -> None:
    # `clanker status` sits in shell prompts: loading every plugin would cost it double.
    import subprocess
    import sys

    code = (
        f"import sys, clanker.cli.{command}; "
        "bad = sorted(m for m in sys.modules if m.startswith('clanker_') "
        "or m in ('pluggy', 'clanker.registry')); "
        "print(','.join(bad))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


# -- the one direction of imports -----------------------------------------------------


def _module_name(path: Path) -> str:
    parts = path.relative_to(CORE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _core_imports() -> dict[str, set[str]]:
    """Each core module's imports of other core modules, deferred ones included."""
    modules = {_module_name(p): p for p in CORE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            found: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            targets |= {f for f in found if f in modules and f != name}
        graph[name] = targets
    return graph


def test_core_has_no_import_cycle() -> None:
    graph = _core_imports()
    done: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            cycles.append([*path[path.index(node):], node])
            return
        if node in done:
            return
        for target in sorted(graph[node]):
            visit(target, [*path, node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])
    assert cycles == []


# What a contract module may build on: the ground floor of core, never a
# service, the registry, the grid, the library API or the CLI.
_CONTRACT_GROUND = ("clanker.attachment", "clanker.descriptor", "clanker.environment",
                    "clanker.errors", "clanker.execution", "clanker.ids", "clanker.envvars")


def test_capability_contracts_build_only_on_the_ground_floor() -> None:
    graph = _core_imports()
    offenders = []
    for name, targets in graph.items():
        if not name.endswith(".capability"):
            continue
        package = name.rsplit(".", 1)[0]
        for target in targets:
            own = target.startswith(package + ".") and not target.endswith(".service")
            if not own and not target.startswith(_CONTRACT_GROUND):
                offenders.append(f"{name} -> {target}")
    assert offenders == []
