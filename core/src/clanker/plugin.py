"""What a harness plugin is made of: the one core module every plugin starts from.

A plugin is a pluggy plugin registered under its harness id through the
``clanker.harnesses`` entry-point group. The shortest correct one is
:func:`define_harness`::

    from clanker.plugin import HarnessDescriptor, HarnessId, define_harness
    from clanker_zed.launch import ZedLaunch

    plugin = define_harness(
        HarnessDescriptor(id=HarnessId("zed"), display_name="Zed Agent", executable="zed"),
        launch=ZedLaunch,
    )

with ``[project.entry-points."clanker.harnesses"] zed = "clanker_zed:plugin"``.
A capability may also be named by a ``"module:attribute"`` reference
(``launch="clanker_zed.launch:ZedLaunch"``): its module is then imported the
first time the capability is used, not when the registry loads, so commands
that never use it do not pay for it. A plugin package can leave the naming to
the convention instead: ``define_harness(descriptor, package=__name__)`` gives
the package every capability whose module (:data:`MODULES`) it has, each made
from the module's :data:`EXPORT` on first use. Module-level ``@hookimpl``
functions work the same way. Beside this module a plugin imports only from the
documented surface: :mod:`clanker.execution`, :mod:`clanker.stores`,
:mod:`clanker.launch.harness`, each capability's ``clanker.<capability>.capability``
module and, in its tests, :mod:`clanker.testing` (``docs/hooks.md``).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final

from clanker.capabilities import CONTRACTS
from clanker.descriptor import (
    HarnessDescriptor,
    OperationSupport,
    SessionOperation,
    Support,
    Transport,
)
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.hookspecs import hookimpl
from clanker.ids import HarnessId

__all__ = [
    "EXPORT",
    "MODULES",
    "SURFACE",
    "ErrorKind",
    "HarnessCapabilityError",
    "HarnessDescriptor",
    "HarnessId",
    "HarnessPlugin",
    "OperationSupport",
    "SessionOperation",
    "Support",
    "Transport",
    "define_harness",
    "hookimpl",
]

SURFACE: Final = frozenset({
    "clanker",
    "clanker.plugin",
    "clanker.descriptor",
    "clanker.errors",
    "clanker.ids",
    "clanker.execution",
    "clanker.execution.jsonlines",
    "clanker.launch.harness",
    "clanker.stores",
    "clanker.pistore",
    "clanker.piplaces",
    "clanker.attention.extension_source",
    # Each capability's contract module: where its protocol is defined.
    *(row.module for row in CONTRACTS.values()),
})
"""The core modules a plugin may import (each one's ``__all__`` is what it offers).

A plugin's tests may import :mod:`clanker.testing` as well. Anything else
(services, the registry, the CLI, private helpers) may change without notice;
a meta-test holds the bundled plugins to this list.
"""

MODULES: Final[Mapping[str, str]] = MappingProxyType({
    "launch": "launch",
    "models": "models",
    "sessions": "sessions",
    "attention": "attention",
    "usage": "usage",
    "accounts": "accounts",
    "agent_bridge": "bridge",
    "guidance": "guidance",
    "checkout_rehome": "rehome",
    "commit": "commit",
    "acp": "acp",
})
"""Capability (its provider field) -> the module of a plugin package that implements it,
by convention (``define_harness(..., package=__name__)``)."""

EXPORT: Final = "implementation"
"""The name a conventional capability module exports: the class (or any callable taking
no arguments) that makes the capability's object, e.g. ``implementation = ZedLaunch``."""

_ATTRIBUTES = {row.attribute: row.hook for row in CONTRACTS.values()}
_REFERENCE: Final = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


class HarnessPlugin:
    """A plugin object whose hook implementations were made by :func:`define_harness`."""

    def __init__(self, descriptor: HarnessDescriptor,
                 factories: dict[str, Callable[[], object] | str],
                 found: frozenset[str] = frozenset()) -> None:
        self.descriptor = descriptor
        self.clanker_descriptor = hookimpl(lambda: descriptor)
        references = {}
        for attribute, given in factories.items():
            if isinstance(given, str):
                references[_ATTRIBUTES[attribute]] = given
            factory = _referenced(given) if isinstance(given, str) else given
            setattr(self, _ATTRIBUTES[attribute], hookimpl(_once(factory)))
        self.references: dict[str, str] = references
        """Hook name -> the ``"module:attribute"`` reference its object is made from,
        on first use."""
        self.found: frozenset[str] = frozenset(
            hook for hook, reference in references.items() if reference in found)
        """The hooks whose reference's module is already known to exist (found by the
        package convention), so the registry need not look for it again."""

    def __repr__(self) -> str:
        return f"HarnessPlugin({self.descriptor.id!r})"


def _once(factory: Callable[[], object]) -> Callable[[], object]:
    made: list[object] = []

    def build() -> object:
        if not made:
            made.append(factory())
        return made[0]

    return build


def _referenced(reference: str) -> Callable[[], object]:
    """The factory a ``"module:attribute"`` reference names, looked up when called."""
    module_name, _, attribute = reference.partition(":")

    def build() -> object:
        factory = getattr(importlib.import_module(module_name), attribute)
        return factory()

    return build


def _conventional(descriptor: HarnessDescriptor, package: str) -> dict[str, str]:
    """The references to every capability module ``package`` has, found without
    importing any of them."""
    try:
        importlib.import_module(package)
        return {attribute: f"{package}.{module}:{EXPORT}" for attribute, module in MODULES.items()
                if importlib.util.find_spec(f"{package}.{module}") is not None}
    except (ImportError, ValueError) as exc:
        raise TypeError(f"define_harness({descriptor.id}): package {package!r} is not an "
                        f"importable package ({type(exc).__name__})") from exc


def define_harness(
    descriptor: HarnessDescriptor, package: str | None = None,
    **capabilities: Callable[[], Any] | str,
) -> HarnessPlugin:
    """Return a plugin for ``descriptor`` with one hook per capability given.

    Each keyword is a capability's provider field (``launch``, ``models``,
    ``sessions``, ``attention``, ``usage``, ``commit``, ...) and its value
    builds the implementation object (a class, usually), or is a
    ``"module:attribute"`` reference to it, imported on the capability's
    first use. With ``package`` (a plugin package's ``__name__``), each
    capability whose module :data:`MODULES` names exists in the package is
    given as well, by the reference ``"<package>.<module>:implementation"``
    (a keyword given for the same capability wins). A capability not given is
    one the harness does not have. An unknown keyword, a reference that is not
    of that form or a ``package`` that is not a package is a
    :class:`TypeError` here, not a plugin that silently lacks a capability.
    """
    unknown = sorted(set(capabilities) - set(_ATTRIBUTES))
    if unknown:
        raise TypeError(f"define_harness: unknown capabilities {', '.join(unknown)} "
                        f"(known: {', '.join(sorted(_ATTRIBUTES))})")
    malformed = sorted(name for name, value in capabilities.items()
                       if isinstance(value, str) and not _REFERENCE.fullmatch(value))
    if malformed:
        raise TypeError(f"define_harness({descriptor.id}): {', '.join(malformed)} must be "
                        "a class or a 'module:attribute' reference")
    found = _conventional(descriptor, package) if package is not None else {}
    return HarnessPlugin(descriptor, {**found, **capabilities}, frozenset(found.values()))
