"""What a harness is, as plain serializable metadata.

Which capabilities a harness has is not declared here: it is exactly the set
of capability hooks its plugin implements (the registry derives it). The
descriptor carries what is metadata: names, the executable, and how resume
and fork are supported.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from typing import Any

from attrs import field, frozen, validators

from clanker.ids import HarnessId, is_harness_id

__all__ = [
    "HarnessDescriptor",
    "OperationSupport",
    "SessionOperation",
    "Support",
    "Transport",
]


class Support(enum.StrEnum):
    """How a session operation is provided: by the harness itself, or emulated."""

    NATIVE = "native"
    EMULATED = "emulated"


class Transport(enum.StrEnum):
    """Where a command runs. Providers never see more than this name."""

    LOCAL = "local"
    SSH = "ssh"


class SessionOperation(enum.StrEnum):
    """A launch that continues an existing conversation."""

    RESUME = "resume"
    FORK = "fork"


_ALL_TRANSPORTS = frozenset(Transport)


def _transports(values: Iterable[Transport | str]) -> frozenset[Transport]:
    return frozenset(Transport(v) for v in values)


_EXECUTABLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def _id_validator(_: object, attribute: object, value: Any) -> None:
    if not is_harness_id(value):
        raise ValueError(f"descriptor.id: {value!r} is not a valid harness id")


def _executable_validator(_: object, attribute: object, value: Any) -> None:
    if not isinstance(value, str) or _EXECUTABLE.fullmatch(value) is None:
        raise ValueError(f"descriptor.executable: {value!r} must be a bare command name")


@frozen
class OperationSupport:
    """How a resume or fork is supported, and over which transports."""

    support: Support = field(converter=Support)
    transports: frozenset[Transport] = field(default=_ALL_TRANSPORTS, converter=_transports)

    @transports.validator
    def _non_empty(self, attribute: object, value: frozenset[Transport]) -> None:
        if not value:
            raise ValueError("operation support needs at least one transport")


@frozen(kw_only=True)
class HarnessDescriptor:
    """Serializable metadata of one harness.

    ``resume`` / ``fork`` are ``None`` when the harness cannot do them at all;
    an :class:`OperationSupport` says whether it is native or emulated.
    """

    id: HarnessId = field(validator=_id_validator)
    display_name: str = field(validator=validators.min_len(1))
    executable: str = field(validator=_executable_validator)
    resume: OperationSupport | None = None
    fork: OperationSupport | None = None
    install_hint: str | None = None
    homepage: str | None = None

    def operation(self, operation: SessionOperation) -> OperationSupport | None:
        """Return the support record for ``operation``, ``None`` if unsupported."""
        return self.resume if operation is SessionOperation.RESUME else self.fork
