"""The one owner of the plugin manager.

Harness plugins are found through the entry-point group ``clanker.harnesses``
(the entry-point name is the harness id). Each is validated, and assembled
into one frozen :class:`HarnessProvider`. A plugin that fails to import, or
fails validation, is logged and skipped: one broken plugin never takes the
host down, and it never silently shadows another.

Services never touch ``pm.hook``; they ask for a provider and call its
capability objects.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any, Final

import pluggy
from attrs import frozen
from pluggy import HookImpl, Result

from clanker import hookspecs
from clanker._logging import get_logger
from clanker.accounts.capability import AccountsCapability
from clanker.acp.capability import AcpCapability
from clanker.attention.capability import AttentionCapability
from clanker.bridge.capability import AgentBridgeCapability
from clanker.capabilities import CONTRACTS, Capability
from clanker.checkouts.capability import CheckoutRehomeCapability
from clanker.commit.capability import CommitCapability
from clanker.descriptor import HarnessDescriptor
from clanker.guidance.capability import GuidanceCapability
from clanker.ids import HarnessId, is_harness_id
from clanker.launch.capability import LaunchCapability
from clanker.models.capability import ModelsCapability
from clanker.sessions.capability import SessionsCapability
from clanker.usage.capability import UsageCapability

__all__ = [
    "ENTRY_POINT_GROUP",
    "Distribution",
    "HarnessProvider",
    "PluginProblem",
    "Registry",
    "UnknownHarnessError",
    "find_provider",
    "get_provider",
    "get_registry",
    "override_registry",
]

ENTRY_POINT_GROUP: Final = "clanker.harnesses"
log = get_logger(__name__)

_BY_HOOK: Final = {row.hook: row for row in CONTRACTS.values()}
_DESCRIPTOR_HOOK: Final = "clanker_descriptor"


class UnknownHarnessError(LookupError):
    """No loaded plugin provides this harness id."""

    def __init__(self, harness: str, known: tuple[str, ...]) -> None:
        self.harness = harness
        self.known = known
        names = ", ".join(known) or "none"
        super().__init__(f"unknown harness {harness!r} (known: {names})")


class PluginError(Exception):
    """A plugin failed validation; the message says why, for a person."""


@frozen(kw_only=True)
class Distribution:
    """The installed distribution a plugin came from."""

    name: str
    version: str


@frozen(kw_only=True)
class PluginProblem:
    """A plugin that was not loaded, and why."""

    name: str
    reason: str
    distribution: Distribution | None = None


@frozen(kw_only=True)
class HarnessProvider:
    """One harness: its descriptor and the capability objects it implements.

    A capability attribute is ``None`` exactly when the plugin does not
    implement that hook; :attr:`capabilities` is the set that are not.
    """

    descriptor: HarnessDescriptor
    distribution: Distribution | None = None
    hooks: tuple[str, ...] = ()
    launch: LaunchCapability | None = None
    models: ModelsCapability | None = None
    sessions: SessionsCapability | None = None
    attention: AttentionCapability | None = None
    usage: UsageCapability | None = None
    accounts: AccountsCapability | None = None
    agent_bridge: AgentBridgeCapability | None = None
    guidance: GuidanceCapability | None = None
    checkout_rehome: CheckoutRehomeCapability | None = None
    commit: CommitCapability | None = None
    acp: AcpCapability | None = None

    @property
    def id(self) -> HarnessId:
        return self.descriptor.id

    @property
    def capabilities(self) -> frozenset[Capability]:
        """The capabilities this harness has: exactly the hooks its plugin implements."""
        return frozenset(c for c, row in CONTRACTS.items() if getattr(self, row.attribute))

    def capability(self, capability: Capability) -> object | None:
        """Return the implementation of ``capability``, or ``None``."""
        implementation: object | None = getattr(self, CONTRACTS[capability].attribute)
        return implementation


def _env_list(environ: Mapping[str, str], name: str) -> frozenset[str] | None:
    raw = environ.get(name)
    if raw is None:
        return None
    return frozenset(item.strip() for item in raw.split(",") if item.strip())


def _trace_enabled(environ: Mapping[str, str]) -> bool:
    return environ.get("CLANKER_TRACE_HOOKS", "") not in ("", "0")


@frozen(kw_only=True)
class _Candidate:
    name: str
    plugin: object
    distribution: Distribution | None = None


@frozen
class Registry:
    """Validated providers, keyed by harness id, plus the plugins that were refused."""

    providers: Mapping[HarnessId, HarnessProvider]
    problems: tuple[PluginProblem, ...] = ()

    # -- building ----------------------------------------------------------

    @classmethod
    def from_entry_points(cls, environ: Mapping[str, str] | None = None) -> Registry:
        """Load every plugin of the ``clanker.harnesses`` group, honouring the
        ``CLANKER_LOAD_PLUGINS`` / ``CLANKER_DISABLE_PLUGINS`` lists."""
        environ = os.environ if environ is None else environ
        allow = _env_list(environ, "CLANKER_LOAD_PLUGINS")
        deny = _env_list(environ, "CLANKER_DISABLE_PLUGINS") or frozenset()
        candidates: list[_Candidate] = []
        problems: list[PluginProblem] = []
        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = _distribution(ep)
            keys = {ep.name} | ({dist.name} if dist else set())
            if (allow is not None and not keys & allow) or keys & deny:
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken plugin must not take the host down
                log.warning("skipping plugin %s: import failed: %s", ep.name, exc)
                problems.append(PluginProblem(name=ep.name, reason=f"import failed: {exc}",
                                              distribution=dist))
                continue
            candidates.append(_Candidate(name=ep.name, plugin=plugin, distribution=dist))
        return cls._assemble(candidates, problems, trace=_trace_enabled(environ))

    @classmethod
    def from_plugins(
        cls,
        plugins: Mapping[str, object],
        *,
        environ: Mapping[str, str] | None = None,
    ) -> Registry:
        """Build a registry from ``{harness_id: plugin}`` through the same validation
        as entry points (for tests and embedding applications)."""
        environ = os.environ if environ is None else environ
        candidates = [_Candidate(name=n, plugin=p) for n, p in plugins.items()]
        return cls._assemble(candidates, [], trace=_trace_enabled(environ))

    @classmethod
    def _assemble(
        cls, candidates: list[_Candidate], problems: list[PluginProblem], *, trace: bool
    ) -> Registry:
        manager = pluggy.PluginManager("clanker")
        manager.add_hookspecs(hookspecs)
        if trace:
            _install_tracer(manager)
        claimed: dict[str, int] = {}
        for candidate in candidates:
            claimed[candidate.name] = claimed.get(candidate.name, 0) + 1
        providers: dict[HarnessId, HarnessProvider] = {}
        accepted: list[_Candidate] = []
        for candidate in candidates:
            try:
                if claimed[candidate.name] > 1:
                    raise PluginError(
                        f"harness id {candidate.name!r} is claimed by several plugins"
                    )
                _register(manager, candidate)
            except PluginError as exc:
                log.warning("skipping plugin %s: %s", candidate.name, exc)
                problems.append(PluginProblem(name=candidate.name, reason=str(exc),
                                              distribution=candidate.distribution))
                continue
            accepted.append(candidate)
        for candidate in accepted:
            try:
                provider = _assemble_provider(manager, candidate)
            except PluginError as exc:
                manager.unregister(candidate.plugin)
                log.warning("skipping plugin %s: %s", candidate.name, exc)
                problems.append(PluginProblem(name=candidate.name, reason=str(exc),
                                              distribution=candidate.distribution))
                continue
            providers[provider.id] = provider
        manager.check_pending()
        ordered = dict(sorted(providers.items()))
        return cls(ordered, tuple(problems))

    # -- lookup ------------------------------------------------------------

    def ids(self) -> tuple[HarnessId, ...]:
        return tuple(self.providers)

    def get_provider(self, harness: HarnessId) -> HarnessProvider:
        """Return the provider of a trusted, known id; raise :class:`UnknownHarnessError`."""
        try:
            return self.providers[harness]
        except KeyError:
            raise UnknownHarnessError(str(harness), self.ids()) from None

    def find_provider(self, raw: object) -> HarnessProvider | None:
        """Look up an untrusted string: ``None`` unless it is exactly a loaded id."""
        if not is_harness_id(raw):
            return None
        assert isinstance(raw, str)
        return self.providers.get(HarnessId(raw))


def _distribution(ep: EntryPoint) -> Distribution | None:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None
    return Distribution(name=dist.metadata["Name"], version=dist.version)


def _install_tracer(manager: pluggy.PluginManager) -> None:
    def before(hook_name: str, impls: Sequence[HookImpl], kwargs: Mapping[str, Any]) -> None:
        names = ", ".join(manager.get_name(i.plugin) or "?" for i in impls)
        print(f"clanker: hook {hook_name} -> {names}", file=sys.stderr)

    def after(
        outcome: Result[Any], hook_name: str, impls: Sequence[HookImpl], kwargs: Mapping[str, Any]
    ) -> None:
        exc = outcome.exception
        status = f"raised {type(exc).__name__}" if exc else "ok"
        print(f"clanker: hook {hook_name} {status}", file=sys.stderr)

    manager.add_hookcall_monitoring(before, after)


def _register(manager: pluggy.PluginManager, candidate: _Candidate) -> None:
    if not is_harness_id(candidate.name):
        raise PluginError(f"{candidate.name!r} is not a valid harness id")
    try:
        manager.register(candidate.plugin, name=candidate.name)
    except (ValueError, pluggy.PluginValidationError) as exc:
        raise PluginError(f"hook validation failed: {exc}") from exc
    hooks = manager.get_hookcallers(candidate.plugin) or []
    unknown = sorted(h.name for h in hooks if h.spec is None)
    implemented = {h.name for h in hooks}
    unmarked = sorted(
        name for name in _specified_functions(candidate.plugin) if name not in implemented
    )
    if unknown or unmarked:
        manager.unregister(candidate.plugin)
        parts = []
        if unknown:
            parts.append("unknown hooks " + ", ".join(unknown))
        if unmarked:
            parts.append("functions missing @hookimpl: " + ", ".join(unmarked))
        raise PluginError("; ".join(parts))


def _specified_functions(plugin: object) -> list[str]:
    """Names of hook specifications the plugin itself defines as plain functions.

    A function named like a hook that the plugin *defines* but did not mark is a
    forgotten ``@hookimpl`` (it would never run); one it merely imports (say
    ``clanker_paths``) is a helper and says nothing about the plugin.
    """
    own = getattr(plugin, "__name__", None) if isinstance(plugin, ModuleType) else None
    found = []
    for name in dir(plugin):
        if not hasattr(hookspecs, name) or not name.startswith("clanker_"):
            continue
        function = getattr(plugin, name, None)
        if callable(function) and (own is None or getattr(function, "__module__", None) == own):
            found.append(name)
    return found


def _call_own(manager: pluggy.PluginManager, plugin: object, hook_name: str) -> object:
    """Call ``hook_name`` on this one plugin only, through pluggy (so tracing sees it)."""
    others = [p for p in manager.get_plugins() if p is not plugin]
    caller = manager.subset_hook_caller(hook_name, remove_plugins=others)
    try:
        return caller()
    except Exception as exc:
        raise PluginError(f"{hook_name} raised {type(exc).__name__}: {exc}") from exc


def _assemble_provider(manager: pluggy.PluginManager, candidate: _Candidate) -> HarnessProvider:
    hooks = tuple(sorted(h.name for h in manager.get_hookcallers(candidate.plugin) or []))
    if _DESCRIPTOR_HOOK not in hooks:
        raise PluginError("does not implement clanker_descriptor")
    descriptor = _call_own(manager, candidate.plugin, _DESCRIPTOR_HOOK)
    if not isinstance(descriptor, HarnessDescriptor):
        raise PluginError("clanker_descriptor did not return a HarnessDescriptor")
    if descriptor.id != candidate.name:
        raise PluginError(
            f"descriptor id {descriptor.id!r} differs from its entry-point name {candidate.name!r}"
        )
    rows = [_BY_HOOK[h] for h in hooks if h in _BY_HOOK]
    if (descriptor.resume or descriptor.fork) and _BY_HOOK["clanker_launch"] not in rows:
        raise PluginError("resume/fork support is declared but clanker_launch is not implemented")
    objects: dict[str, Any] = {}
    for row in rows:
        impl = _call_own(manager, candidate.plugin, row.hook)
        if not isinstance(impl, row.protocol):
            raise PluginError(
                f"{row.hook} returned {type(impl).__name__}, "
                f"which lacks the {row.protocol.__name__} interface"
            )
        objects[row.attribute] = impl
    return HarnessProvider(
        descriptor=descriptor, distribution=candidate.distribution, hooks=hooks, **objects
    )


# -- the process-wide registry ------------------------------------------------

class _ProcessRegistry:
    lock = threading.Lock()
    current: Registry | None = None


def get_registry() -> Registry:
    """Return the process-wide registry, loading entry points on first use only."""
    if _ProcessRegistry.current is None:
        with _ProcessRegistry.lock:
            if _ProcessRegistry.current is None:
                _ProcessRegistry.current = Registry.from_entry_points()
    return _ProcessRegistry.current


@contextlib.contextmanager
def override_registry(registry: Registry) -> Iterator[Registry]:
    """Make ``registry`` the process-wide one for the duration of the block."""
    with _ProcessRegistry.lock:
        previous, _ProcessRegistry.current = _ProcessRegistry.current, registry
    try:
        yield registry
    finally:
        with _ProcessRegistry.lock:
            _ProcessRegistry.current = previous


def get_provider(harness: HarnessId) -> HarnessProvider:
    """Return the provider of a known id (see :meth:`Registry.get_provider`)."""
    return get_registry().get_provider(harness)


def find_provider(raw: object) -> HarnessProvider | None:
    """Look up an untrusted string (see :meth:`Registry.find_provider`)."""
    return get_registry().find_provider(raw)
