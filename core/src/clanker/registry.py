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
import importlib.util
import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

import pluggy
from attrs import frozen
from pluggy import HookImpl, Result

from clanker import hookspecs
from clanker._logging import get_logger
from clanker.capabilities import CONTRACTS, Capability, CapabilityContract
from clanker.descriptor import HarnessDescriptor
from clanker.entrypoints import FoundEntryPoint, entry_points
from clanker.ids import HarnessId, is_harness_id
from clanker.plugin import HarnessPlugin

if TYPE_CHECKING:
    # The contract modules are imported when a capability object is made, not
    # with the registry (see HarnessProvider).
    from clanker.accounts.capability import AccountsCapability
    from clanker.acp.capability import AcpCapability
    from clanker.attention.capability import AttentionCapability
    from clanker.bridge.capability import AgentBridgeCapability
    from clanker.checkouts.capability import CheckoutRehomeCapability
    from clanker.commit.capability import CommitCapability
    from clanker.guidance.capability import GuidanceCapability
    from clanker.launch.capability import LaunchCapability
    from clanker.models.capability import ModelsCapability
    from clanker.sessions.capability import SessionsCapability
    from clanker.usage.capability import UsageCapability

__all__ = [
    "ENTRY_POINT_GROUP",
    "CapabilityLoadError",
    "Distribution",
    "HarnessProvider",
    "PluginProblem",
    "Registry",
    "UnknownHarnessError",
    "find_provider",
    "get_provider",
    "get_registry",
    "loaded_registry",
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


class CapabilityLoadError(Exception):
    """A capability a plugin named by reference could not be made on first use.

    The plugin registered (its reference's module exists) but importing it, the
    attribute, building the object or the object's interface failed. The
    message names the harness, the capability and why.
    """

    def __init__(self, harness: str, capability: Capability, reason: str) -> None:
        self.harness = harness
        self.capability = capability
        self.reason = reason
        super().__init__(f"plugin {harness}: its {capability.value} capability "
                         f"could not be loaded: {reason}")


class _Deferred:
    """A capability object a plugin named by reference, made the first time it is asked for.

    Made through the plugin's own hook (so tracing sees the call) and checked
    against its protocol exactly as an eagerly made one is at registration.
    """

    __slots__ = ("_candidate", "_lock", "_made", "_manager", "_row")

    def __init__(self, manager: pluggy.PluginManager, candidate: _Candidate,
                 row: CapabilityContract) -> None:
        self._manager = manager
        self._candidate = candidate
        self._row = row
        self._lock = threading.Lock()
        self._made: object | None = None

    def get(self) -> object:
        if self._made is None:
            with self._lock:
                if self._made is None:
                    try:
                        self._made = _made(self._manager, self._candidate, self._row)
                    except PluginError as exc:
                        log.warning("plugin %s: %s", self._candidate.name, exc)
                        raise CapabilityLoadError(self._candidate.name, self._row.capability,
                                                  str(exc)) from exc
        return self._made

    def __repr__(self) -> str:
        return f"<{self._row.capability.value} of {self._candidate.name}, made on first use>"


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
    # Each is the object, a _Deferred one made on first use, or None (not implemented);
    # the properties below resolve them (the constructor takes `launch=` and so on).
    _launch: LaunchCapability | _Deferred | None = None
    _models: ModelsCapability | _Deferred | None = None
    _sessions: SessionsCapability | _Deferred | None = None
    _attention: AttentionCapability | _Deferred | None = None
    _usage: UsageCapability | _Deferred | None = None
    _accounts: AccountsCapability | _Deferred | None = None
    _agent_bridge: AgentBridgeCapability | _Deferred | None = None
    _guidance: GuidanceCapability | _Deferred | None = None
    _checkout_rehome: CheckoutRehomeCapability | _Deferred | None = None
    _commit: CommitCapability | _Deferred | None = None
    _acp: AcpCapability | _Deferred | None = None

    @property
    def id(self) -> HarnessId:
        return self.descriptor.id

    @property
    def capabilities(self) -> frozenset[Capability]:
        """The capabilities this harness has: exactly the hooks its plugin implements.

        Known without making any capability object (nothing is imported for it).
        """
        return frozenset(c for c, row in CONTRACTS.items()
                         if getattr(self, "_" + row.attribute) is not None)

    def capability(self, capability: Capability) -> object | None:
        """Return the implementation of ``capability``, or ``None``.

        Raises :class:`CapabilityLoadError` when the plugin named it by a
        reference that cannot be made into a valid object.
        """
        found: object | None = self._resolved(CONTRACTS[capability].attribute)
        return found

    def _resolved(self, attribute: str) -> Any:
        value = getattr(self, "_" + attribute)
        return value.get() if isinstance(value, _Deferred) else value

    @property
    def launch(self) -> LaunchCapability | None:
        return self._resolved("launch")  # type: ignore[no-any-return]

    @property
    def models(self) -> ModelsCapability | None:
        return self._resolved("models")  # type: ignore[no-any-return]

    @property
    def sessions(self) -> SessionsCapability | None:
        return self._resolved("sessions")  # type: ignore[no-any-return]

    @property
    def attention(self) -> AttentionCapability | None:
        return self._resolved("attention")  # type: ignore[no-any-return]

    @property
    def usage(self) -> UsageCapability | None:
        return self._resolved("usage")  # type: ignore[no-any-return]

    @property
    def accounts(self) -> AccountsCapability | None:
        return self._resolved("accounts")  # type: ignore[no-any-return]

    @property
    def agent_bridge(self) -> AgentBridgeCapability | None:
        return self._resolved("agent_bridge")  # type: ignore[no-any-return]

    @property
    def guidance(self) -> GuidanceCapability | None:
        return self._resolved("guidance")  # type: ignore[no-any-return]

    @property
    def checkout_rehome(self) -> CheckoutRehomeCapability | None:
        return self._resolved("checkout_rehome")  # type: ignore[no-any-return]

    @property
    def commit(self) -> CommitCapability | None:
        return self._resolved("commit")  # type: ignore[no-any-return]

    @property
    def acp(self) -> AcpCapability | None:
        return self._resolved("acp")  # type: ignore[no-any-return]


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
    def from_entry_points(cls, environ: Mapping[str, str] | None = None, *,
                          only: str | None = None) -> Registry:
        """Load every plugin of the ``clanker.harnesses`` group, honouring the
        ``CLANKER_LOAD_PLUGINS`` / ``CLANKER_DISABLE_PLUGINS`` lists.

        With ``only``, just the entry points named ``only`` are loaded (for a caller
        that needs one harness now and must not pay for importing the others): the
        same lists, the same validation, so its provider is the one a full load
        makes, or absent where a full load would refuse or skip it; another
        plugin, broken or not, is listed but never imported."""
        environ = os.environ if environ is None else environ
        allow = _env_list(environ, "CLANKER_LOAD_PLUGINS")
        deny = _env_list(environ, "CLANKER_DISABLE_PLUGINS") or frozenset()
        candidates: list[_Candidate] = []
        problems: list[PluginProblem] = []
        for ep in sorted(entry_points(ENTRY_POINT_GROUP), key=lambda e: e.name):
            if only is not None and ep.name != only:
                continue
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
        manager = _Manager("clanker")
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


class _Manager(pluggy.PluginManager):
    """pluggy's manager, told where a :class:`HarnessPlugin`'s hooks can be.

    pluggy looks at every name ``dir()`` gives (some fifty a plugin, most of them
    ``object``'s), each through :func:`inspect.getattr_static`: some 40% of what
    building the registry costs. :func:`define_harness` puts every hook of its
    plugin on the instance, and the class itself defines none, so for exactly
    that class only the instance's own names are looked at: the same hooks, the
    same refusals. Any other plugin object (a subclass included) is searched as
    pluggy always does."""

    def parse_hookimpl_opts(self, plugin: object, name: str) -> pluggy.HookimplOpts | None:
        if type(plugin) is HarnessPlugin and name not in vars(plugin):
            return None
        return super().parse_hookimpl_opts(plugin, name)


def _distribution(ep: FoundEntryPoint) -> Distribution | None:
    if ep.distribution is None:
        return None
    name, version = ep.distribution
    return Distribution(name=name, version=version)  # type: ignore[arg-type]


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
    plugin = candidate.plugin
    deferred = plugin.references if isinstance(plugin, HarnessPlugin) else {}
    located = plugin.found if isinstance(plugin, HarnessPlugin) else frozenset()
    objects: dict[str, Any] = {}
    for row in rows:
        if row.hook in located:
            objects[row.attribute] = _Deferred(manager, candidate, row)
        elif row.hook in deferred:
            # Proved to exist without running it: a mistyped module refuses the
            # plugin now, as a broken eager one is; the rest is checked on first use.
            module = deferred[row.hook].partition(":")[0]
            try:
                found = importlib.util.find_spec(module)
            except (ImportError, ValueError) as exc:
                raise PluginError(f"{row.hook}: module {module} cannot be found "
                                  f"({type(exc).__name__})") from exc
            if found is None:
                raise PluginError(f"{row.hook}: module {module} cannot be found")
            objects[row.attribute] = _Deferred(manager, candidate, row)
        else:
            objects[row.attribute] = _made(manager, candidate, row)
    return HarnessProvider(
        descriptor=descriptor, distribution=candidate.distribution, hooks=hooks, **objects
    )


def _made(manager: pluggy.PluginManager, candidate: _Candidate,
          row: CapabilityContract) -> object:
    impl = _call_own(manager, candidate.plugin, row.hook)
    protocol = row.protocol
    if not isinstance(impl, protocol):
        raise PluginError(
            f"{row.hook} returned {type(impl).__name__}, "
            f"which lacks the {protocol.__name__} interface"
        )
    return impl


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


def loaded_registry() -> Registry | None:
    """The process-wide registry when it is loaded (or overridden) already; ``None``
    otherwise, loading nothing."""
    return _ProcessRegistry.current


def get_provider(harness: HarnessId) -> HarnessProvider:
    """Return the provider of a known id (see :meth:`Registry.get_provider`)."""
    return get_registry().get_provider(harness)


def find_provider(raw: object) -> HarnessProvider | None:
    """Look up an untrusted string (see :meth:`Registry.find_provider`)."""
    return get_registry().find_provider(raw)
