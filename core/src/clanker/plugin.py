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
that never use it do not pay for it. Module-level ``@hookimpl`` functions
work the same way. Beside this module a plugin imports only from the
documented surface: :mod:`clanker.execution`, :mod:`clanker.stores`, each
capability's ``clanker.<capability>.capability`` module and, in its tests,
:mod:`clanker.testing` (``docs/hooks.md``).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
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
    "clanker.stores",
    "clanker.pistore",
    # Each capability's contract module: where its protocol is defined.
    *(row.module for row in CONTRACTS.values()),
})
"""The core modules a plugin may import (each one's ``__all__`` is what it offers).

A plugin's tests may import :mod:`clanker.testing` as well. Anything else
(services, the registry, the CLI, private helpers) may change without notice;
a meta-test holds the bundled plugins to this list.
"""

_ATTRIBUTES = {row.attribute: row.hook for row in CONTRACTS.values()}
_REFERENCE: Final = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


class HarnessPlugin:
    """A plugin object whose hook implementations were made by :func:`define_harness`."""

    def __init__(self, descriptor: HarnessDescriptor,
                 factories: dict[str, Callable[[], object] | str]) -> None:
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


def define_harness(
    descriptor: HarnessDescriptor, **capabilities: Callable[[], Any] | str
) -> HarnessPlugin:
    """Return a plugin for ``descriptor`` with one hook per capability given.

    Each keyword is a capability's provider field (``launch``, ``models``,
    ``sessions``, ``attention``, ``usage``, ``commit``, ...) and its value
    builds the implementation object (a class, usually), or is a
    ``"module:attribute"`` reference to it, imported on the capability's
    first use. A capability not given is one the harness does not have. An
    unknown keyword, or a reference that is not of that form, is a
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
    return HarnessPlugin(descriptor, dict(capabilities))
