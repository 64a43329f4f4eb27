"""Capabilities named by ``"module:attribute"`` references: made on first use, same contract."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from clanker.capabilities import CONTRACTS, Capability
from clanker.cli import main
from clanker.descriptor import HarnessDescriptor
from clanker.ids import HarnessId
from clanker.plugin import define_harness
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
