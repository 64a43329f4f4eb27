"""A capability's input, declared once: the JSON Schema it advertises and the parser.

An input is a flat, closed object. Each field is a boolean (:class:`Flag`), a
bounded single-line string (:class:`Text`, optionally one of an ``enum``) or a
bounded integer (:class:`Integer`), required or not::

    Input(
        message=Text("What to tell the person.", max_length=200),
        urgent=Flag("Ring the bell as well.", required=False, default=False),
    )

:meth:`Input.schema` is the advertised JSON Schema (``type: object``,
``additionalProperties: false``, ``required``), and :meth:`Input.parse` admits
exactly what that schema admits, and nothing else:

* an undeclared key (``__proto__`` and ``constructor`` included) is refused,
  and so is a missing required field;
* nothing is coerced: ``"true"`` is not a boolean, ``1`` is not a boolean,
  ``true`` is not an integer, ``1.0`` is not an integer (the one place where
  the parser is stricter than a JSON Schema validator, which would take
  ``1.0`` as an integer);
* strings are refused past their bounds, outside their ``enum``, or holding a
  control character (C0, DEL or C1: the schema's ``pattern``);
* ``null``, objects and arrays are never a field's value.

Every refusal is an :class:`InvalidArguments` naming each field and the rule
it broke, never the value. :meth:`Input.parse_text` is for the command line
only (``clanker cmd run --arg k=v``): it turns ``"true"``/``"false"`` and
decimal integers into the declared type first, then parses the same way. The
JSON path never coerces.

The parsed value is a read-only mapping holding every declared field: the
value given, or the field's default (``None`` unless declared) when an
optional field is absent.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from attrs import field, frozen

__all__ = [
    "MAX_FIELDS",
    "MAX_INTEGER",
    "MAX_TEXT",
    "Arguments",
    "Field",
    "Flag",
    "Input",
    "Integer",
    "InvalidArguments",
    "Text",
    "Value",
]

Value: TypeAlias = bool | int | str | None
Arguments: TypeAlias = Mapping[str, Value]
"""What ``run`` receives: every declared field, read-only."""

MAX_FIELDS: Final = 32
MAX_TEXT: Final = 4096
"""The longest string any field may declare."""
MAX_INTEGER: Final = 2**53 - 1
"""Integers stay within what every JSON reader holds exactly."""
MAX_DESCRIPTION: Final = 1024
MAX_PROBLEMS: Final = 8

_FIELD_NAME: Final = re.compile(r"[a-z][A-Za-z0-9]{0,63}")
_SHOWN_KEY: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]{0,63}")
# Names an object already has in JavaScript: a client that builds arguments in an
# object literal must never find one of them declared (or accepted).
_RESERVED: Final = frozenset({
    "constructor", "hasOwnProperty", "isPrototypeOf", "propertyIsEnumerable", "prototype",
    "toLocaleString", "toString", "valueOf",
})
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
PATTERN: Final = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"
"""The advertised rule of every string: no C0 or C1 control character, no DEL."""
_INTEGER_TEXT: Final = re.compile(r"-?[0-9]{1,16}")


class InvalidArguments(ValueError):
    """The arguments do not fit the declaration: each problem names a field and a rule."""

    def __init__(self, problems: list[str]) -> None:
        shown = problems[:MAX_PROBLEMS]
        more = len(problems) - len(shown)
        self.problems = tuple(shown)
        text = "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
        super().__init__(text)


def _description(_: object, __: object, value: str) -> None:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_DESCRIPTION \
            or _CONTROL.search(value.replace("\n", " ")):
        raise ValueError(f"description: at most {MAX_DESCRIPTION} characters of text")


@frozen
class Flag:
    """A boolean field: ``true`` or ``false`` and nothing else."""

    description: str = field(validator=_description)
    required: bool = field(default=True, kw_only=True)
    default: bool | None = field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        _check_default(self, lambda v: type(v) is bool)

    def schema(self) -> dict[str, Any]:
        return {"type": "boolean", "description": self.description}

    def problem(self, name: str, value: object) -> str | None:
        return None if type(value) is bool else f"{name}: must be true or false"

    def from_text(self, text: str) -> object:
        return {"true": True, "false": False}.get(text, text)


@frozen
class Text:
    """A single-line string of ``min_length`` to ``max_length`` characters, or one of ``enum``."""

    description: str = field(validator=_description)
    max_length: int = field(default=200, kw_only=True)
    min_length: int = field(default=1, kw_only=True)
    enum: tuple[str, ...] | None = field(default=None, kw_only=True)
    required: bool = field(default=True, kw_only=True)
    default: str | None = field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if type(self.max_length) is not int or type(self.min_length) is not int \
                or not 0 <= self.min_length <= self.max_length <= MAX_TEXT:
            raise ValueError(f"a Text field's lengths lie between 0 and {MAX_TEXT}")
        if self.enum is not None and (not self.enum or len(set(self.enum)) != len(self.enum)
                                      or not all(isinstance(v, str) and self._fits(v)
                                                 for v in self.enum)):
            raise ValueError("enum: distinct values that fit the field's own bounds")
        _check_default(self, lambda v: isinstance(v, str) and self._problem(v) is None)

    def _fits(self, value: str) -> bool:
        return self.min_length <= len(value) <= self.max_length and not _CONTROL.search(value)

    def _problem(self, value: str) -> str | None:
        if not self._fits(value):
            if _CONTROL.search(value):
                return "must not contain control characters"
            if self.min_length == self.max_length:
                return f"must be {self.max_length} characters"
            return f"must be {self.min_length} to {self.max_length} characters"
        if self.enum is not None and value not in self.enum:
            return "must be one of: " + ", ".join(self.enum)
        return None

    def schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string", "description": self.description,
                                  "minLength": self.min_length, "maxLength": self.max_length,
                                  "pattern": PATTERN}
        if self.enum is not None:
            schema["enum"] = list(self.enum)
        return schema

    def problem(self, name: str, value: object) -> str | None:
        if type(value) is not str:
            return f"{name}: must be a string"
        problem = self._problem(value)
        return None if problem is None else f"{name}: {problem}"

    def from_text(self, text: str) -> object:
        return text


@frozen
class Integer:
    """An integer from ``minimum`` to ``maximum`` (a JSON number without a fraction)."""

    description: str = field(validator=_description)
    minimum: int = field(kw_only=True)
    maximum: int = field(kw_only=True)
    required: bool = field(default=True, kw_only=True)
    default: int | None = field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if type(self.minimum) is not int or type(self.maximum) is not int \
                or not -MAX_INTEGER <= self.minimum <= self.maximum <= MAX_INTEGER:
            raise ValueError(f"an Integer field's bounds lie within ±{MAX_INTEGER}")
        _check_default(self, lambda v: type(v) is int and self.minimum <= v <= self.maximum)

    def schema(self) -> dict[str, Any]:
        return {"type": "integer", "description": self.description,
                "minimum": self.minimum, "maximum": self.maximum}

    def problem(self, name: str, value: object) -> str | None:
        if type(value) is not int or not self.minimum <= value <= self.maximum:
            return f"{name}: must be an integer from {self.minimum} to {self.maximum}"
        return None

    def from_text(self, text: str) -> object:
        return int(text) if _INTEGER_TEXT.fullmatch(text) else text


Field: TypeAlias = Flag | Text | Integer


def _check_default(spec: Field, fits: Any) -> None:
    if spec.default is not None:
        if spec.required:
            raise ValueError("a default belongs to an optional field (required=False)")
        if not fits(spec.default):
            raise ValueError("default: must satisfy the field's own rules")


def _shown(key: str) -> str:
    return key if _SHOWN_KEY.fullmatch(key) else "(a key that cannot be shown)"


class Input:
    """A flat, closed object of declared fields (keyword order is the advertised order)."""

    def __init__(self, **fields: Field) -> None:
        if len(fields) > MAX_FIELDS:
            raise ValueError(f"an input declares at most {MAX_FIELDS} fields")
        for name, spec in fields.items():
            if _FIELD_NAME.fullmatch(name) is None or name in _RESERVED:
                raise ValueError(f"field name {name!r}: [a-z][A-Za-z0-9]{{0,63}}, not reserved")
            if not isinstance(spec, Flag | Text | Integer):
                raise TypeError(f"field {name}: a Flag, Text or Integer")
        self._fields: Mapping[str, Field] = MappingProxyType(dict(fields))

    @property
    def fields(self) -> Mapping[str, Field]:
        return self._fields

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __repr__(self) -> str:
        return f"Input({', '.join(self._fields)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Input) and dict(self._fields) == dict(other._fields)

    def __hash__(self) -> int:
        return hash(tuple(self._fields.items()))

    def schema(self) -> dict[str, Any]:
        """The advertised JSON Schema (a fresh copy each time)."""
        properties: dict[str, Any] = {}
        for name, spec in self._fields.items():
            properties[name] = spec.schema()
            if spec.default is not None:
                properties[name]["default"] = spec.default
        return {
            "type": "object",
            "properties": properties,
            "required": [name for name, spec in self._fields.items() if spec.required],
            "additionalProperties": False,
        }

    def parse(self, value: object) -> Arguments:
        """Admit ``value`` (decoded JSON) or raise :class:`InvalidArguments`."""
        if type(value) is not dict:
            raise InvalidArguments(["arguments: must be an object"])
        problems = [f"{_shown(key)}: is not an argument of this capability"
                    for key in sorted(k for k in value if k not in self._fields)]
        parsed: dict[str, Value] = {}
        for name, spec in self._fields.items():
            if name not in value:
                if spec.required:
                    problems.append(f"{name}: is required")
                parsed[name] = spec.default
                continue
            problem = spec.problem(name, value[name])
            if problem is not None:
                problems.append(problem)
            else:
                parsed[name] = value[name]
        if problems:
            raise InvalidArguments(problems)
        return MappingProxyType(parsed)

    def parse_text(self, value: Mapping[str, str]) -> Arguments:
        """Admit ``key=value`` strings from a command line: each is typed by its field
        (``true``/``false``, decimal integers) and then parsed as :meth:`parse` does."""
        converted: dict[str, object] = {}
        for key, text in value.items():
            spec = self._fields.get(key)
            converted[key] = spec.from_text(text) if spec is not None and type(text) is str \
                else text
        return self.parse(converted)
