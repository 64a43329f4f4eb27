"""The ACP contract: how a harness serves the Agent Client Protocol on stdio.

A plugin returns an :class:`AcpServer`: the exact argv and the environment
additions it needs. clanker builds the rest of the child's environment through
its launch path (the account's home, inherited ``CLANKER_*`` credentials
stripped) and owns the process, its stderr log and the protocol.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from attrs import field, frozen

from clanker.envvars import ENV_NAME_PATTERN, is_credential_variable

__all__ = ["AcpCapability", "AcpServer"]


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


def _freeze(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(value or {}))


def _json_object(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    # A copy through JSON: what is sent is exactly what was checked, and a caller's
    # later change to its own dictionary changes nothing here.
    return MappingProxyType(json.loads(json.dumps(dict(value or {}), allow_nan=False)))


@frozen(kw_only=True, hash=False)
class AcpServer:
    """The command that speaks ACP on stdin/stdout.

    ``argv[0]`` is a bare executable name looked up on the child's ``PATH``
    (an adapter may be another executable than the harness's own).
    ``install_hint`` is what to run when it is not installed.
    ``session_meta`` is the ``_meta`` object sent with ``session/new``,
    ``session/resume`` and ``session/load``: settings of the server's own that it
    documents there (a JSON object; empty sends none).
    """

    argv: tuple[str, ...] = field(converter=_strings)
    env: Mapping[str, str] = field(default=None, converter=_freeze)
    install_hint: str | None = None
    session_meta: Mapping[str, Any] = field(default=None, converter=_json_object)

    @argv.validator
    def _check_argv(self, _: object, value: tuple[str, ...]) -> None:
        if not value or not all(isinstance(a, str) and a and "\0" not in a for a in value):
            raise ValueError("argv: must be non-empty strings without NUL")
        if "/" in value[0] or value[0].startswith("-"):
            raise ValueError("argv[0]: must be a bare executable name, not a path or an option")

    @env.validator
    def _check_env(self, _: object, value: Mapping[str, str]) -> None:
        for name, val in value.items():
            if ENV_NAME_PATTERN.fullmatch(name) is None or is_credential_variable(name):
                raise ValueError(f"env: {name!r} cannot be set by a provider")
            if not isinstance(val, str) or "\0" in val:
                raise ValueError(f"env[{name}]: must be a string without NUL")


@runtime_checkable
class AcpCapability(Protocol):
    """Starts the harness (or its adapter) speaking ACP on stdin/stdout."""

    def server(self) -> AcpServer:
        """Return the ACP server command. The model and mode are chosen over the
        protocol afterwards (``session/set_config_option``), not on the command line."""
        ...
