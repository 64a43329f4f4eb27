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
Module-level ``@hookimpl`` functions work the same way. Beside this module a
plugin imports only from the documented surface: :mod:`clanker.execution`,
:mod:`clanker.stores`, each capability's ``clanker.<capability>.capability``
module and, in its tests, :mod:`clanker.testing` (``docs/hooks.md``).
"""

from __future__ import annotations

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
    # Each capability's contract module: where its protocol is defined.
    *(row.protocol.__module__ for row in CONTRACTS.values()),
})
"""The core modules a plugin may import (each one's ``__all__`` is what it offers).

A plugin's tests may import :mod:`clanker.testing` as well. Anything else
(services, the registry, the CLI, private helpers) may change without notice;
a meta-test holds the bundled plugins to this list.
"""

_ATTRIBUTES = {row.attribute: row.hook for row in CONTRACTS.values()}


class HarnessPlugin:
    """A plugin object whose hook implementations were made by :func:`define_harness`."""

    def __init__(self, descriptor: HarnessDescriptor,
                 factories: dict[str, Callable[[], object]]) -> None:
        self.descriptor = descriptor
        self.clanker_descriptor = hookimpl(lambda: descriptor)
        for attribute, factory in factories.items():
            setattr(self, _ATTRIBUTES[attribute], hookimpl(_once(factory)))

    def __repr__(self) -> str:
        return f"HarnessPlugin({self.descriptor.id!r})"


def _once(factory: Callable[[], object]) -> Callable[[], object]:
    made: list[object] = []

    def build() -> object:
        if not made:
            made.append(factory())
        return made[0]

    return build


def define_harness(
    descriptor: HarnessDescriptor, **capabilities: Callable[[], Any]
) -> HarnessPlugin:
    """Return a plugin for ``descriptor`` with one hook per capability given.

    Each keyword is a capability's provider field (``launch``, ``models``,
    ``sessions``, ``attention``, ``usage``, ``commit``, ...) and its value
    builds the implementation object (a class, usually). A capability not
    given is one the harness does not have. An unknown keyword is a
    :class:`TypeError` here, not a plugin that silently lacks a capability.
    """
    unknown = sorted(set(capabilities) - set(_ATTRIBUTES))
    if unknown:
        raise TypeError(f"define_harness: unknown capabilities {', '.join(unknown)} "
                        f"(known: {', '.join(sorted(_ATTRIBUTES))})")
    return HarnessPlugin(descriptor, dict(capabilities))
