"""The registry: discovery, validation, refusal, lookup."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from clanker import hookimpl
from clanker.capabilities import CONTRACTS, Capability
from clanker.descriptor import HarnessDescriptor, OperationSupport, Support
from clanker.ids import HarnessId
from clanker.registry import (
    HarnessProvider,
    Registry,
    UnknownHarnessError,
    get_registry,
    override_registry,
)
from tests.helpers import FakeLaunch, FakeModels, make_plugin


def only_problem(registry: Registry) -> str:
    assert len(registry.problems) == 1, registry.problems
    return registry.problems[0].reason


def test_a_valid_plugin_becomes_a_frozen_provider() -> None:
    registry = Registry.from_plugins({"fake-agent": make_plugin()}, environ={})
    provider = registry.get_provider(HarnessId("fake-agent"))
    assert isinstance(provider.launch, FakeLaunch)
    assert isinstance(provider.models, FakeModels)
    assert provider.sessions is None
    assert provider.capability(Capability.MODELS) is provider.models
    assert "clanker_launch" in provider.hooks
    with pytest.raises(AttributeError):
        provider.launch = None  # type: ignore[misc]


def test_the_capabilities_are_exactly_the_hooks_implemented() -> None:
    registry = Registry.from_plugins(
        {"fake-agent": make_plugin(capabilities=(Capability.LAUNCH,))}, environ={})
    provider = registry.get_provider(HarnessId("fake-agent"))
    assert provider.capabilities == {Capability.LAUNCH}
    assert provider.models is None


def test_resume_or_fork_support_without_launch_is_refused() -> None:
    class NoLaunch:
        @hookimpl
        def clanker_descriptor(self) -> HarnessDescriptor:
            return HarnessDescriptor(id=HarnessId("fake-agent"), display_name="F",
                                     executable="fake-agent",
                                     resume=OperationSupport(Support.NATIVE))

    registry = Registry.from_plugins({"fake-agent": NoLaunch()}, environ={})
    assert "clanker_launch is not implemented" in only_problem(registry)


def test_a_helper_a_plugin_module_imports_is_not_taken_for_a_hook(
    site: Path,
) -> None:
    # `clanker_paths` is named like a hook but is core's helper: importing it
    # says nothing about the plugin. A function it defines itself would.
    install_fake_distribution(site, "clanker-zed", {"zed": "zed_plugin"}, "zed_plugin",
                              "    from clanker.paths import clanker_paths\n"
                              + GOOD_PLUGIN.format(id="zed"))
    registry = Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": "zed"})
    assert registry.problems == ()
    assert registry.ids() == ("zed",)


def test_a_plugin_module_defining_an_unmarked_hook_is_refused(site: Path) -> None:
    source = GOOD_PLUGIN.format(id="zed") + "\n    def clanker_launch():\n        return None\n"
    install_fake_distribution(site, "clanker-zed", {"zed": "zed_plugin"}, "zed_plugin", source)
    registry = Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": "zed"})
    assert "missing @hookimpl: clanker_launch" in only_problem(registry)


def test_descriptor_id_must_match_the_registration_name() -> None:
    registry = Registry.from_plugins({"other-agent": make_plugin("fake-agent")}, environ={})
    assert "differs from its entry-point name" in only_problem(registry)


@pytest.mark.parametrize("name", ["Fake", "x", "9lives", "has space", "a" * 40, "under_score"])
def test_malformed_ids_are_refused(name: str) -> None:
    registry = Registry.from_plugins({name: make_plugin()}, environ={})
    assert "not a valid harness id" in only_problem(registry)


def test_misspelled_hookimpl_is_refused() -> None:
    class Misspelled:
        @hookimpl
        def clanker_descriptor(self) -> HarnessDescriptor:
            return HarnessDescriptor(id=HarnessId("fake-agent"), display_name="F",
                                     executable="fake-agent")

        @hookimpl
        def clanker_lanch(self) -> object:
            return FakeLaunch()

    registry = Registry.from_plugins({"fake-agent": Misspelled()}, environ={})
    assert "unknown hooks clanker_lanch" in only_problem(registry)


def test_hook_without_marker_is_refused() -> None:
    class Unmarked:
        @hookimpl
        def clanker_descriptor(self) -> HarnessDescriptor:
            return HarnessDescriptor(id=HarnessId("fake-agent"), display_name="F",
                                     executable="fake-agent")

        def clanker_launch(self) -> object:
            return FakeLaunch()

    registry = Registry.from_plugins({"fake-agent": Unmarked()}, environ={})
    assert "missing @hookimpl: clanker_launch" in only_problem(registry)


def test_hookimpl_with_unknown_argument_is_refused() -> None:
    class ExtraArgument:
        @hookimpl
        def clanker_descriptor(self, surprise: object) -> None:
            return None

    registry = Registry.from_plugins({"fake-agent": ExtraArgument()}, environ={})
    assert "hook validation failed" in only_problem(registry)


def test_a_hook_that_raises_is_refused_without_taking_others_down() -> None:
    class Exploding:
        @hookimpl
        def clanker_descriptor(self) -> HarnessDescriptor:
            raise RuntimeError("boom")

    registry = Registry.from_plugins(
        {"broken-agent": Exploding(), "fake-agent": make_plugin()}, environ={}
    )
    assert registry.ids() == ("fake-agent",)
    assert "clanker_descriptor raised RuntimeError" in only_problem(registry)


def test_capability_object_must_have_the_interface() -> None:
    plugin = make_plugin(capabilities=(Capability.LAUNCH,))
    type(plugin).clanker_launch = hookimpl(lambda self: object())  # type: ignore[attr-defined]
    registry = Registry.from_plugins({"fake-agent": plugin}, environ={})
    assert "lacks the LaunchCapability interface" in only_problem(registry)


def test_capability_hook_returning_none_is_refused() -> None:
    plugin = make_plugin(capabilities=(Capability.LAUNCH,))
    type(plugin).clanker_launch = hookimpl(lambda self: None)  # type: ignore[attr-defined]
    registry = Registry.from_plugins({"fake-agent": plugin}, environ={})
    assert "returned NoneType" in only_problem(registry)


def test_unknown_ids_never_fall_through() -> None:
    registry = Registry.from_plugins({"fake-agent": make_plugin()}, environ={})
    for raw in ["fake", "FAKE-AGENT", "fake-agent ", "", None, 3, "fake-agent\0", "../fake-agent"]:
        assert registry.find_provider(raw) is None
    with pytest.raises(UnknownHarnessError) as caught:
        registry.get_provider(HarnessId("fake"))
    assert caught.value.known == ("fake-agent",)


def test_tracing_reports_hook_calls(capsys: pytest.CaptureFixture[str]) -> None:
    Registry.from_plugins({"fake-agent": make_plugin()}, environ={"CLANKER_TRACE_HOOKS": "1"})
    err = capsys.readouterr().err
    assert "hook clanker_descriptor -> fake-agent" in err
    assert "hook clanker_models ok" in err


def test_override_registry_restores_the_previous_one() -> None:
    before = get_registry()
    replacement = Registry.from_plugins({"fake-agent": make_plugin()}, environ={})
    with override_registry(replacement):
        assert get_registry() is replacement
    assert get_registry() is before


# -- real entry points from fake installed distributions ---------------------------


def install_fake_distribution(
    site: Path, dist: str, entries: dict[str, str], module: str, source: str
) -> None:
    info = site / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    lines = "\n".join(f"{name} = {target}" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[clanker.harnesses]\n{lines}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(source))


GOOD_PLUGIN = """
    from clanker import hookimpl
    from clanker.descriptor import HarnessDescriptor

    @hookimpl
    def clanker_descriptor():
        return HarnessDescriptor(id="{id}", display_name="{id}", executable="{id}")
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    directory = tmp_path / "site"
    directory.mkdir()
    monkeypatch.syspath_prepend(str(directory))
    before = set(sys.modules)
    yield directory
    for name in set(sys.modules) - before:  # fake plugin modules must not leak
        del sys.modules[name]


def test_entry_points_are_discovered_with_their_distribution(site: Path) -> None:
    install_fake_distribution(site, "clanker-zed", {"zed": "zed_plugin"}, "zed_plugin",
                              GOOD_PLUGIN.format(id="zed"))
    registry = Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": "zed"})
    provider = registry.get_provider(HarnessId("zed"))
    assert isinstance(provider, HarnessProvider)
    assert provider.distribution is not None
    assert (provider.distribution.name, provider.distribution.version) == ("clanker-zed", "1.2.3")


def test_a_plugin_that_fails_to_import_is_logged_and_skipped(
    site: Path, caplog: pytest.LogCaptureFixture
) -> None:
    install_fake_distribution(site, "clanker-broken", {"broken": "broken_plugin"},
                              "broken_plugin", "raise ImportError('missing dependency')")
    install_fake_distribution(site, "clanker-zed", {"zed": "zed_plugin"}, "zed_plugin",
                              GOOD_PLUGIN.format(id="zed"))
    registry = Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": "broken,clanker-zed"})
    assert registry.ids() == ("zed",)
    assert "import failed: missing dependency" in only_problem(registry)
    assert registry.problems[0].distribution is not None
    assert "skipping plugin broken" in caplog.text


def test_duplicate_ids_are_refused_for_every_claimant(site: Path) -> None:
    install_fake_distribution(site, "clanker-zed-a", {"zed": "zed_a"}, "zed_a",
                              GOOD_PLUGIN.format(id="zed"))
    install_fake_distribution(site, "clanker-zed-b", {"zed": "zed_b"}, "zed_b",
                              GOOD_PLUGIN.format(id="zed"))
    registry = Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": "zed"})
    assert registry.providers == {}
    assert [p.reason for p in registry.problems] == [
        "harness id 'zed' is claimed by several plugins"
    ] * 2


def test_disable_list_wins_and_matches_distribution_names(site: Path) -> None:
    install_fake_distribution(site, "clanker-zed", {"zed": "zed_plugin"}, "zed_plugin",
                              GOOD_PLUGIN.format(id="zed"))
    install_fake_distribution(site, "clanker-yak", {"yak": "yak_plugin"}, "yak_plugin",
                              GOOD_PLUGIN.format(id="yak"))
    registry = Registry.from_entry_points(
        {"CLANKER_LOAD_PLUGINS": "zed,yak", "CLANKER_DISABLE_PLUGINS": "clanker-yak"}
    )
    assert registry.ids() == ("zed",)


def test_an_empty_load_list_loads_nothing(site: Path) -> None:
    install_fake_distribution(site, "clanker-zed", {"zed": "zed_plugin"}, "zed_plugin",
                              GOOD_PLUGIN.format(id="zed"))
    assert Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": ""}).providers == {}


# -- every capability hook reaches its provider attribute ---------------------------


class _Anything:
    """Satisfies every capability protocol structurally (a test value, not a stub
    shipped anywhere): the registry only checks the interface."""

    cache_ttl = 1.0
    fallback = ()
    strategy = "after-turn"
    home_variable = "FAKE_AGENT_HOME"
    resumes_without_original_directory = False
    interpreter = None
    resume_preserves_session_id = False

    def build(self, request: object) -> object: ...
    def validate_session_id(self, raw: str) -> str: ...
    def version_request(self) -> object: ...
    def parse_version(self, result: object) -> str: ...
    async def discover(self, *args: object) -> object: ...
    def store_roots(self, environ: object, files: object) -> tuple[()]: ...
    def prepare(self, *args: object) -> object: ...
    policy = None
    async def probe(self, context: object) -> object: ...
    def build_invocation(self, model: object, prompt: str) -> object: ...
    def parse_output(self, result: object) -> str: ...
    def server(self) -> object: ...
    def resume_flags(self, target: str, user_flags: object) -> object: ...
    def is_transient_contention(self, output: str) -> bool: ...
    async def authenticate(self, context: object, show_url: object) -> object: ...
    async def verify(self, context: object) -> object: ...
    async def sign_out(self, context: object) -> object: ...


@pytest.mark.parametrize("capability", list(Capability), ids=lambda c: c.value)
def test_each_capability_hook_is_assembled_into_the_provider(capability: Capability) -> None:
    implementation = _Anything()

    class Plugin:
        @hookimpl
        def clanker_descriptor(self) -> HarnessDescriptor:
            return HarnessDescriptor(id=HarnessId("fake-agent"), display_name="F",
                                     executable="fake-agent")

    setattr(Plugin, CONTRACTS[capability].hook, hookimpl(lambda self: implementation))
    registry = Registry.from_plugins({"fake-agent": Plugin()}, environ={})
    assert registry.problems == ()
    provider = registry.get_provider(HarnessId("fake-agent"))
    assert provider.capability(capability) is implementation
    others = [c for c in Capability if c is not capability]
    assert all(provider.capability(c) is None for c in others)
    assert CONTRACTS[capability].hook in provider.hooks
    assert provider.capabilities == {capability}


@pytest.mark.parametrize("capability", list(Capability), ids=lambda c: c.value)
def test_each_capability_hook_refuses_an_object_without_its_interface(
    capability: Capability,
) -> None:
    class Plugin:
        @hookimpl
        def clanker_descriptor(self) -> HarnessDescriptor:
            return HarnessDescriptor(id=HarnessId("fake-agent"), display_name="F",
                                     executable="fake-agent")

    setattr(Plugin, CONTRACTS[capability].hook, hookimpl(lambda self: object()))
    registry = Registry.from_plugins({"fake-agent": Plugin()}, environ={})
    assert "lacks the" in only_problem(registry)


def test_hooks_on_a_define_harness_subclass_are_found_as_pluggy_finds_them() -> None:
    """Only a plain define_harness plugin is searched among its own names; a subclass's
    class-level hooks still count, and a misspelled one is still refused."""
    from clanker.plugin import HarnessPlugin, define_harness

    descriptor = HarnessDescriptor(id=HarnessId("fake-agent"), display_name="F",
                                   executable="fake-agent")

    class WithModels(HarnessPlugin):
        @hookimpl
        def clanker_models(self) -> object:
            return FakeModels()

    plugin = WithModels(descriptor, {"launch": FakeLaunch})
    provider = Registry.from_plugins({"fake-agent": plugin}, environ={}).get_provider(
        HarnessId("fake-agent"))
    assert provider.capabilities == {Capability.LAUNCH, Capability.MODELS}

    class Misspelled(HarnessPlugin):
        @hookimpl
        def clanker_modles(self) -> object:
            return FakeModels()

    registry = Registry.from_plugins({"fake-agent": Misspelled(descriptor, {})}, environ={})
    assert "unknown hooks clanker_modles" in only_problem(registry)
    plain = define_harness(descriptor, launch=FakeLaunch)
    provider = Registry.from_plugins({"fake-agent": plain}, environ={}).get_provider(
        HarnessId("fake-agent"))
    assert provider.capabilities == {Capability.LAUNCH}


# -- one plugin alone (``only=``: the early start of ``clanker coder --harness``) ----


def _same_provider(alone: HarnessProvider, full: HarnessProvider) -> None:
    """What a provider is, compared field by field (its capability objects are made by
    each registry's own plugin manager, so they are compared by what they are)."""
    assert (alone.descriptor, alone.distribution, alone.hooks, alone.capabilities) == (
        full.descriptor, full.distribution, full.hooks, full.capabilities)
    for capability in sorted(full.capabilities, key=lambda c: c.value):
        made, expected = alone.capability(capability), full.capability(capability)
        assert type(made) is type(expected), capability


def test_each_installed_plugin_loaded_alone_is_the_full_registrys_provider() -> None:
    full = Registry.from_entry_points({})
    assert full.ids(), "the workspace's plugins are installed"
    for harness in full.ids():
        alone = Registry.from_entry_points({}, only=harness)
        assert (alone.ids(), alone.problems) == ((harness,), ())
        _same_provider(alone.get_provider(harness), full.get_provider(harness))


def test_a_plugin_loaded_alone_never_imports_or_reports_another(site: Path) -> None:
    install_fake_distribution(site, "clanker-broken", {"broken": "broken_plugin"},
                              "broken_plugin", "raise ImportError('missing dependency')")
    install_fake_distribution(site, "clanker-zed", {"zed": "zed_plugin"}, "zed_plugin",
                              GOOD_PLUGIN.format(id="zed"))
    environ = {"CLANKER_LOAD_PLUGINS": "broken,zed"}
    full = Registry.from_entry_points(environ)
    del sys.modules["zed_plugin"]
    alone = Registry.from_entry_points(environ, only="zed")
    assert "broken_plugin" not in sys.modules
    assert (alone.ids(), alone.problems) == (("zed",), ())
    _same_provider(alone.get_provider(HarnessId("zed")), full.get_provider(HarnessId("zed")))
    # The broken one alone is refused as the full load refuses it.
    broken = Registry.from_entry_points(environ, only="broken")
    assert broken.providers == {}
    assert broken.problems == tuple(p for p in full.problems if p.name == "broken")
    assert Registry.from_entry_points(environ, only="nothing").providers == {}


def test_a_plugin_loaded_alone_honours_the_load_and_disable_lists(site: Path) -> None:
    install_fake_distribution(site, "clanker-zed", {"zed": "zed_plugin"}, "zed_plugin",
                              GOOD_PLUGIN.format(id="zed"))
    install_fake_distribution(site, "clanker-yak", {"yak": "yak_plugin"}, "yak_plugin",
                              GOOD_PLUGIN.format(id="yak"))
    both = {"CLANKER_LOAD_PLUGINS": "zed,yak"}
    assert Registry.from_entry_points(both, only="yak").ids() == ("yak",)
    assert Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": "zed"}, only="yak").ids() == ()
    disabled = {**both, "CLANKER_DISABLE_PLUGINS": "clanker-yak"}
    assert Registry.from_entry_points(disabled, only="yak").ids() == ()
    assert Registry.from_entry_points(disabled, only="zed").ids() == ("zed",)
    assert Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": ""}, only="zed").ids() == ()


def test_a_plugin_loaded_alone_is_refused_as_the_full_load_refuses_it(site: Path) -> None:
    install_fake_distribution(site, "clanker-zed-a", {"zed": "zed_a"}, "zed_a",
                              GOOD_PLUGIN.format(id="zed"))
    install_fake_distribution(site, "clanker-zed-b", {"zed": "zed_b"}, "zed_b",
                              GOOD_PLUGIN.format(id="zed"))
    install_fake_distribution(site, "clanker-yak", {"yak": "yak_plugin"}, "yak_plugin",
                              GOOD_PLUGIN.format(id="not-yak"))
    environ = {"CLANKER_LOAD_PLUGINS": "zed,yak"}
    full = Registry.from_entry_points(environ)
    for harness in ("zed", "yak"):
        alone = Registry.from_entry_points(environ, only=harness)
        assert alone.providers == {}
        assert alone.problems == tuple(p for p in full.problems if p.name == harness)
        assert alone.problems
