"""The canonical lifecycle envelope: what a provider's interpreter says happened.

An envelope is one JSON object with camelCase keys (``event``, ``scope``,
``sessionId``, ``turnId``, ``inputId``, ``continuesSessionId``, ``cwd``,
``nativeEvent``). Its schema has one definition, :mod:`~clanker.attention.wire`,
which the hook bridge sanitizes with too: this module turns it into
:class:`Envelope` (each field validated by the schema's own rule) and a strict
parser. An envelope crosses a trust boundary, so :func:`parse_envelope`
structures it through a strict converter: unknown keys, wrong types and
out-of-range values raise :class:`EnvelopeError`, never a guess.

The split between this module and the broker is one rule: **parsing checks the
shape of every field on its own; whether an event carries what it needs to be
applied is the broker's decision.** So an ``input_requested`` without a
``turnId``, a ``session_continued`` without a ``continuesSessionId`` or a
``location_changed`` without a ``cwd`` parse, and the broker answers
``rejected-ambiguous``. The one cross-field rule enforced here is the wire
contract's: ``continuesSessionId`` appears only on ``session_continued``.

A ``cwd`` that is present must be printable, absolute and at most 1024 UTF-8
bytes (the hook bridge drops any other one before delivery, so reaching the
broker with one is malformed input). Error messages name fields, never values.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from typing import Any, Final, TypeVar

import attrs
import cattrs
from attrs import field, frozen
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.preconf.json import JsonConverter

from clanker.attention import wire
from clanker.converters import BoundaryError, make_boundary_converter

__all__ = [
    "MAX_CWD_BYTES",
    "MAX_ID_LENGTH",
    "MAX_NATIVE_EVENT_LENGTH",
    "TURN_EVENTS",
    "Envelope",
    "EnvelopeError",
    "LifecycleEvent",
    "Scope",
    "camel",
    "check_id",
    "parse_envelope",
    "register_camel_case",
    "register_enum",
    "structure_wire",
]

MAX_ID_LENGTH: Final = wire.MAX_ID_CHARS
MAX_CWD_BYTES: Final = wire.MAX_CWD_BYTES
MAX_NATIVE_EVENT_LENGTH: Final = wire.MAX_NATIVE_EVENT_CHARS

T = TypeVar("T")
ErrorT = TypeVar("ErrorT", bound=BoundaryError)


class EnvelopeError(BoundaryError):
    """An envelope was malformed (a :class:`ValueError`; the text names fields only)."""


class LifecycleEvent(enum.StrEnum):
    """The events of :data:`clanker.attention.wire.EVENTS` (a test holds the two equal)."""

    SESSION_STARTED = "session_started"  # identity only: binds an unbound registration
    TURN_STARTED = "turn_started"
    TURN_COMPLETED = "turn_completed"
    TURN_INTERRUPTED = "turn_interrupted"
    TURN_FAILED = "turn_failed"
    INPUT_REQUESTED = "input_requested"
    INPUT_RESOLVED = "input_resolved"
    SESSION_CONTINUED = "session_continued"  # sessionId = new root, continuesSessionId = old
    SESSION_ENDED = "session_ended"  # an in-process boundary: the registration stays
    LOCATION_CHANGED = "location_changed"  # sessionId + cwd, no turn
    AGENT_EXITED = "agent_exited"  # only clanker's own launcher emits it


TURN_EVENTS: Final = frozenset(
    {
        LifecycleEvent.TURN_STARTED,
        LifecycleEvent.TURN_COMPLETED,
        LifecycleEvent.TURN_INTERRUPTED,
        LifecycleEvent.TURN_FAILED,
        LifecycleEvent.INPUT_REQUESTED,
        LifecycleEvent.INPUT_RESOLVED,
    }
)
"""The events that need a ``turnId`` to be applied."""


class Scope(enum.StrEnum):
    """Whose event it is, as the provider asserts it (absent: unknown subject).

    The values of :data:`clanker.attention.wire.SCOPES`.
    """

    ROOT = "root"
    CHILD = "child"


def check_id(value: str, name: str) -> str:
    """Return ``value`` if it is a usable identifier, else raise naming ``name``."""
    if not isinstance(value, str):
        raise EnvelopeError(f"{name} must be a string")
    reason = wire.identifier_problem(name, value)
    if reason is not None:
        raise EnvelopeError(reason)
    return value


def _rule(key: str) -> Callable[[Any, Any, Any], None]:
    """The attrs validator of wire key ``key``: the schema's own rule (``None`` is absent)."""

    def validate(_: Any, __: Any, value: object) -> None:
        if value is not None:
            reason = wire.problem(key, value)
            if reason is not None:
                raise EnvelopeError(reason)

    return validate


@frozen(kw_only=True)
class Envelope:
    """One canonical lifecycle event, valid by construction (see the module notes)."""

    # One attribute per wire key, in the schema's order; the two required keys have
    # no default. Each validator is the schema's rule for its key.
    event: LifecycleEvent = field(validator=attrs.validators.instance_of(LifecycleEvent))
    scope: Scope | None = field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(Scope))
    )
    session_id: str = field(validator=_rule("sessionId"))
    turn_id: str | None = field(default=None, validator=_rule("turnId"))
    input_id: str | None = field(default=None, validator=_rule("inputId"))
    continues_session_id: str | None = field(default=None, validator=_rule("continuesSessionId"))
    cwd: str | None = field(default=None, validator=_rule("cwd"))
    native_event: str | None = field(default=None, validator=_rule("nativeEvent"))

    def __attrs_post_init__(self) -> None:
        # The schema's cross-field rule (``continuesSessionId`` only on session_continued).
        if self.continues_session_id is not None:
            reason = wire.misplaced("continuesSessionId", self.event)
            if reason is not None:
                raise EnvelopeError(reason)

    def to_wire(self) -> dict[str, object]:
        """Return the JSON-able wire form (camelCase keys; absent fields left out)."""
        wire: dict[str, object] = _CONVERTER.unstructure(self)
        return wire


# ---------------------------------------------------------------- the converter


def camel(name: str) -> str:
    """``session_id`` -> ``sessionId``."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def register_camel_case(
    converter: JsonConverter, cls: type[Any], *, omit_if_default: bool = False
) -> None:
    """Make ``converter`` speak ``cls`` with camelCase keys, forbidding extra ones."""
    renames: dict[str, Any] = {a.name: override(rename=camel(a.name)) for a in attrs.fields(cls)}
    converter.register_structure_hook(
        cls, make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=True, **renames)
    )
    converter.register_unstructure_hook(
        cls,
        make_dict_unstructure_fn(
            cls, converter, _cattrs_omit_if_default=omit_if_default, **renames
        ),
    )


def register_enum(converter: JsonConverter, cls: type[enum.Enum]) -> None:
    """Structure ``cls`` from its exact string values only.

    The boundary converter's ``str`` hook would otherwise claim a ``StrEnum``
    (a ``str`` subclass) and pass any string through unchecked.
    """

    def hook(value: object, _: type[Any]) -> enum.Enum:
        if type(value) is not str:
            raise TypeError(f"expected a string, got {type(value).__name__}")
        return cls(value)

    converter.register_structure_hook(cls, hook)
    converter.register_unstructure_hook(cls, lambda member: member.value)


def _make_converter() -> JsonConverter:
    converter = make_boundary_converter()
    register_enum(converter, LifecycleEvent)
    register_enum(converter, Scope)
    register_camel_case(converter, Envelope, omit_if_default=True)
    return converter


_CONVERTER: Final = _make_converter()
_WIRE_KEYS: Final = frozenset(wire.KEYS)
_KEY_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")


def parse_envelope(obj: object) -> Envelope:
    """Structure one wire envelope, or raise :class:`EnvelopeError`."""
    if not isinstance(obj, dict):
        raise EnvelopeError("an envelope must be a JSON object")
    extra = [key for key in obj if key not in _WIRE_KEYS]
    if extra:
        # Name short identifier-like keys only: a key is provider text, never echoed raw.
        shown = sorted(k if isinstance(k, str) and _KEY_NAME.fullmatch(k) else "?" for k in extra)
        raise EnvelopeError(f"unexpected envelope keys: {', '.join(shown[:4])}")
    return structure_wire(_CONVERTER, obj, Envelope, EnvelopeError)


def structure_wire(
    converter: JsonConverter, obj: object, cls: type[T], error: type[ErrorT]
) -> T:
    """Structure camelCase ``obj`` as ``cls``; raise ``error`` naming wire keys only."""
    try:
        return converter.structure(obj, cls)
    except Exception as exc:
        own = _own_error(exc)
        if own is not None:
            raise error(str(own)) from None
        if isinstance(exc, cattrs.BaseValidationError):
            message = "; ".join(cattrs.transform_error(exc))
        else:
            message = "invalid value"
        # cattrs reports attribute names; the wire speaks camelCase.
        message = _ATTRIBUTE_PATH.sub(lambda m: "." + camel(m.group(1)), message)
        raise error(message) from None


_ATTRIBUTE_PATH: Final = re.compile(r"\.([a-z][a-z0-9]*(?:_[a-z0-9]+)+)")


def _own_error(exc: BaseException) -> BoundaryError | None:
    """Find a validator's own (value-free) message inside a cattrs error group."""
    if isinstance(exc, BoundaryError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _own_error(inner)
            if found is not None:
                return found
    return None
