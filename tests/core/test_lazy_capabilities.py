"""Capabilities named by ``"module:attribute"`` references: made on first use, same contract."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clanker.capabilities import CONTRACTS, Capability
from clanker.cli import main
from clanker.descriptor import HarnessDescriptor
from clanker.ids import HarnessId
from clanker.plugin import EXPORT, MODULES, define_harness
from clanker.registry import CapabilityLoadError, Registry, override_registry
from tests.helpers import FakeLaunch, FakeModels

FAKE = HarnessId("fake-agent")


def _descriptor() -> HarnessDescriptor:
    return HarnessDescriptor(id=FAKE, display_name="Fake Agent", executable="fake-agent")


def _registry(**capabilities: object) -> Registry:
    plugin = define_harness(_descriptor(), **capabilities)  # type: ignore[arg-type]
    return Registry.from_plugins({"fake-agent": plugin}, environ={})


def test_a_reference_is_made_on_first_use_and_then_kept() -> None:
    registry = _registry(launch="tests.helpers:FakeLaunch", models=FakeModels)
    provider = registry.get_provider(FAKE)
    assert registry.problems == ()
    assert provider.capabilities == {Capability.LAUNCH, Capability.MODELS}
    assert isinstance(provider.launch, FakeLaunch)
    assert provider.launch is provider.launch
    assert provider.capability(Capability.LAUNCH) is provider.launch
    assert provider.sessions is None


def test_a_reference_to_a_missing_module_refuses_the_plugin() -> None:
    registry = _registry(launch="tests.no_such_module_here:FakeLaunch")
    assert registry.providers == {}
    (problem,) = registry.problems
    assert problem.name == "fake-agent"
    assert "tests.no_such_module_here cannot be found" in problem.reason


@pytest.mark.parametrize(
    ("reference", "reason"),
    [
        ("tests.helpers:NoSuchFactory", "clanker_launch raised AttributeError"),
        ("tests.helpers:FakeModels", "lacks the LaunchCapability interface"),
    ],
    ids=["missing attribute", "wrong interface"],
)
def test_a_bad_reference_is_a_typed_error_naming_the_plugin(reference: str, reason: str) -> None:
    provider = _registry(launch=reference).get_provider(FAKE)
    assert provider.capabilities == {Capability.LAUNCH}  # known without making it
    with pytest.raises(CapabilityLoadError) as raised:
        _ = provider.launch
    assert raised.value.harness == "fake-agent"
    assert raised.value.capability is Capability.LAUNCH
    assert reason in raised.value.reason
    assert str(raised.value).startswith("plugin fake-agent: its launch capability could not "
                                        "be loaded: ")
    with pytest.raises(CapabilityLoadError):  # asked again: the same answer
        provider.capability(Capability.LAUNCH)


@pytest.mark.parametrize("reference", ["tests.helpers", "tests.helpers:Fake Launch", ":x", ""])
def test_a_malformed_reference_is_refused_where_the_plugin_is_defined(reference: str) -> None:
    with pytest.raises(TypeError, match=r"define_harness\(fake-agent\): launch must be"):
        define_harness(_descriptor(), launch=reference)


def test_the_cli_names_the_broken_plugin_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CLANKER_DEBUG", raising=False)
    registry = _registry(launch=FakeLaunch, models="tests.helpers:NoSuchModels")
    with override_registry(registry), pytest.raises(SystemExit) as exited:
        main(["models", "fake-agent"])
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("clanker: plugin fake-agent: its models capability could not be "
                          "loaded: clanker_models raised AttributeError")
    assert "Traceback" not in err
    assert err.count("\n") == 1


_PROBE = textwrap.dedent("""
    import json, sys
    from clanker.capabilities import CONTRACTS
    from clanker.registry import Registry

    registry = Registry.from_entry_points({})
    imported = sorted(m for m in sys.modules
                      if m.startswith("clanker_") and m.count(".") == 1)
    declared = {h: sorted(c.value for c in p.capabilities) for h, p in registry.providers.items()}
    made = {h: sorted(c.value for c in CONTRACTS if p.capability(c) is not None)
            for h, p in registry.providers.items()}
    print(json.dumps({"imported": imported, "declared": declared, "made": made,
                      "problems": [p.name for p in registry.problems]}))
""")


def test_bundled_plugins_declare_their_capabilities_without_importing_them() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                          check=True)
    found = json.loads(done.stdout)
    assert found["problems"] == []
    assert set(found["declared"]) == {"agy", "claude", "codex", "hermes", "omp", "opencode",
                                      "pi"}
    # Loading the registry imported each plugin's package and none of its capability modules.
    assert found["imported"] == []
    # Every capability the registry declared is made into an object of its interface.
    assert found["made"] == found["declared"]
    assert all(found["declared"].values())
    assert {row.module for row in CONTRACTS.values()} == {
        row.protocol.__module__ for row in CONTRACTS.values()}


def _package(root: Path, name: str, modules: dict[str, str]) -> str:
    folder = root / name
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for module, text in modules.items():
        (folder / f"{module}.py").write_text(text)
    return name


def test_a_package_gets_each_capability_whose_module_it_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    name = _package(tmp_path, "conventional_fake", {
        "launch": "from tests.helpers import FakeLaunch\nimplementation = FakeLaunch\n",
        # The module is there but does not export the name: declared, and an error on use.
        "models": "from tests.helpers import FakeModels\n",
        "layers": "raise AssertionError('not a capability module')\n",
    })
    plugin = define_harness(_descriptor(), package=name)
    assert plugin.references == {"clanker_launch": f"{name}.launch:{EXPORT}",
                                 "clanker_models": f"{name}.models:{EXPORT}"}
    registry = Registry.from_plugins({"fake-agent": plugin}, environ={})
    provider = registry.get_provider(FAKE)
    assert registry.problems == ()
    assert provider.capabilities == {Capability.LAUNCH, Capability.MODELS}
    assert f"{name}.launch" not in sys.modules  # known without importing it
    assert isinstance(provider.launch, FakeLaunch)
    with pytest.raises(CapabilityLoadError) as raised:
        _ = provider.models
    assert raised.value.capability is Capability.MODELS
    assert f"has no attribute '{EXPORT}'" in raised.value.reason
    assert f"{name}.layers" not in sys.modules


def test_a_keyword_wins_over_the_convention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    name = _package(tmp_path, "conventional_keyword", {"launch": "", "models": ""})
    plugin = define_harness(_descriptor(), package=name, models=FakeModels,
                            launch="tests.helpers:FakeLaunch")
    assert plugin.references == {"clanker_launch": "tests.helpers:FakeLaunch"}
    provider = Registry.from_plugins({"fake-agent": plugin}, environ={}).get_provider(FAKE)
    assert isinstance(provider.models, FakeModels)
    assert isinstance(provider.launch, FakeLaunch)


@pytest.mark.parametrize("package", ["tests.helpers", "no_such_package_here"])
def test_a_package_that_is_not_one_is_refused_where_the_plugin_is_defined(package: str) -> None:
    with pytest.raises(TypeError, match=r"define_harness\(fake-agent\): package .* is not an "
                                        r"importable package"):
        define_harness(_descriptor(), package=package)


def test_every_capability_has_a_conventional_module() -> None:
    assert set(MODULES) == {row.attribute for row in CONTRACTS.values()}
    assert len(set(MODULES.values())) == len(MODULES)


def test_the_guide_shows_codexs_declaration_as_it_is() -> None:
    root = Path(__file__).resolve().parents[2]
    guide = (root / "docs" / "hooks.md").read_text()
    shown = re.search(r"```python\n(plugin = define_harness\(\n    HarnessDescriptor\(\n"
                      r"        id=HarnessId\(\"codex\"\).*?\n\))\n```", guide, re.DOTALL)
    assert shown is not None
    source = (root / "plugins" / "codex" / "src" / "clanker_codex" / "__init__.py").read_text()
    code = "\n".join(line for line in source.splitlines() if not line.strip().startswith("#"))
    assert shown[1] in code
