"""The input declaration: one declaration, one schema, one parser, and they agree.

The schema is checked here by a small validator of its own (the subset of JSON
Schema the declaration emits, read the way the specification reads it), so
the test holds the parser to the *advertised* schema, not to itself. The one
documented difference: a JSON Schema validator takes ``1.0`` as an integer,
the parser does not (it never coerces).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clanker.bridge.input import (
    MAX_INTEGER,
    Flag,
    Input,
    Integer,
    InvalidArguments,
    Text,
)

# -- an independent reading of the emitted schema ---------------------------------------


def admits(schema: dict[str, Any], value: object) -> bool:
    """Whether ``value`` (decoded JSON) is valid against ``schema`` (our subset)."""
    if schema.get("type") == "object":
        if not isinstance(value, dict):
            return False
        properties = schema["properties"]
        if schema.get("additionalProperties") is False and set(value) - set(properties):
            return False
        if any(key not in value for key in schema.get("required", [])):
            return False
        return all(admits(properties[key], item) for key, item in value.items())
    kind = schema["type"]
    if kind == "boolean":
        return type(value) is bool
    if kind == "integer":
        # JSON Schema would also take 1.0; the parser's one stricter rule (see above).
        if type(value) is not int:
            return False
        return schema["minimum"] <= value <= schema["maximum"]
    if kind == "string":
        if type(value) is not str:
            return False
        if not schema["minLength"] <= len(value) <= schema["maxLength"]:
            return False
        if "enum" in schema and value not in schema["enum"]:
            return False
        # The ECMA pattern reads the same in Python (\uXXXX escapes, code points).
        return re.search(schema["pattern"], value) is not None
    raise AssertionError(f"an unexpected schema type {kind}")


# -- declarations, generated ----------------------------------------------------------

names = st.from_regex(r"[a-z][A-Za-z0-9]{0,8}", fullmatch=True).filter(
    lambda n: n not in {"constructor", "prototype", "valueOf", "toString"})


@st.composite
def text_fields(draw: st.DrawFn) -> Text:
    low = draw(st.integers(0, 8))
    high = draw(st.integers(low, 12))
    enum = None
    if draw(st.booleans()):
        values = draw(st.lists(st.text(alphabet="abcxyz", min_size=low, max_size=high),
                               min_size=1, max_size=4, unique=True))
        enum = tuple(values)
    required = draw(st.booleans())
    default = None
    if not required and draw(st.booleans()):
        default = enum[0] if enum else "a" * low
    return Text("A text.", min_length=low, max_length=high, enum=enum, required=required,
                default=default)


@st.composite
def integer_fields(draw: st.DrawFn) -> Integer:
    low = draw(st.integers(-1000, 1000))
    high = draw(st.integers(low, 2000))
    required = draw(st.booleans())
    default = low if not required and draw(st.booleans()) else None
    return Integer("A count.", minimum=low, maximum=high, required=required, default=default)


@st.composite
def flag_fields(draw: st.DrawFn) -> Flag:
    required = draw(st.booleans())
    default = draw(st.booleans()) if not required and draw(st.booleans()) else None
    return Flag("A switch.", required=required, default=default)


inputs = st.dictionaries(names, st.one_of(text_fields(), integer_fields(), flag_fields()),
                         max_size=5).map(lambda fields: Input(**fields))

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3000, 3000), st.floats(allow_nan=False),
    st.text(max_size=14), st.sampled_from(["true", "false", "1", "", "abc", "x\n", "\x7f"]),
    st.just(1.0),
)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6)


@st.composite
def candidates(draw: st.DrawFn, declaration: Input) -> dict[str, object]:
    """Objects near the declaration: declared keys with good and bad values, missing
    ones, and undeclared keys (``__proto__`` and ``constructor`` among them)."""
    value: dict[str, object] = {}
    for name, spec in declaration.fields.items():
        if draw(st.integers(0, 4)) == 0:
            continue
        good: st.SearchStrategy[object]
        if isinstance(spec, Flag):
            good = st.booleans()
        elif isinstance(spec, Integer):
            good = st.integers(spec.minimum - 2, spec.maximum + 2)
        else:
            good = st.sampled_from(spec.enum) if spec.enum else st.text(
                max_size=spec.max_length + 1)
        value[name] = draw(st.one_of(good, good, json_values))
    extra = draw(st.lists(st.sampled_from(["__proto__", "constructor", "extra", "prototype",
                                            "x y", "\u0000"]), max_size=2))
    for key in extra:
        value[key] = draw(json_values)
    return value


@settings(max_examples=400)
@given(st.data())
def test_the_parser_admits_exactly_what_the_advertised_schema_admits(data: st.DataObject) -> None:
    declaration = data.draw(inputs)
    schema = json.loads(json.dumps(declaration.schema()))  # what a client actually reads
    value = data.draw(candidates(declaration))
    try:
        parsed = declaration.parse(value)
    except InvalidArguments:
        assert not admits(schema, value)
        return
    assert admits(schema, value)
    # Nothing undeclared reaches run: the parsed value holds the declared fields only,
    # each as given or at its default.
    assert set(parsed) == set(declaration.fields)
    for name, spec in declaration.fields.items():
        assert parsed[name] == value.get(name, spec.default)


@given(inputs)
def test_the_schema_is_a_closed_flat_object(declaration: Input) -> None:
    schema = declaration.schema()
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["required"] == [n for n, s in declaration.fields.items() if s.required]
    assert all(p["type"] in ("boolean", "string", "integer") for p in schema["properties"].values())


NOTIFY = Input(message=Text("What to say.", max_length=20),
               count=Integer("How many.", minimum=1, maximum=5, required=False, default=1),
               loud=Flag("Ring.", required=False))


@pytest.mark.parametrize(("value", "problem"), [
    ({}, "message: is required"),
    ({"message": True}, "message: must be a string"),
    ({"message": "x" * 21}, "message: must be 1 to 20 characters"),
    ({"message": ""}, "message: must be 1 to 20 characters"),
    ({"message": "two\nlines"}, "message: must not contain control characters"),
    ({"message": "hi", "count": True}, "count: must be an integer from 1 to 5"),
    ({"message": "hi", "count": 1.0}, "count: must be an integer from 1 to 5"),
    ({"message": "hi", "count": "2"}, "count: must be an integer from 1 to 5"),
    ({"message": "hi", "count": 6}, "count: must be an integer from 1 to 5"),
    ({"message": "hi", "loud": "true"}, "loud: must be true or false"),
    ({"message": "hi", "loud": 1}, "loud: must be true or false"),
    ({"message": "hi", "loud": None}, "loud: must be true or false"),
    ({"message": ["hi"]}, "message: must be a string"),
    ({"message": {"nested": "hi"}}, "message: must be a string"),
    ({"message": "hi", "__proto__": {}}, "__proto__: is not an argument of this capability"),
    ({"message": "hi", "constructor": 1}, "constructor: is not an argument of this capability"),
    ({"message": "hi", "bad key\u0007": 1},
     "(a key that cannot be shown): is not an argument of this capability"),
])
def test_each_refusal_names_the_field_and_the_rule(value: dict[str, object], problem: str) -> None:
    with pytest.raises(InvalidArguments) as refused:
        NOTIFY.parse(value)
    assert refused.value.problems == (problem,)


def test_a_refusal_never_quotes_the_value() -> None:
    secret = "hunter2-hunter2-hunter2"
    with pytest.raises(InvalidArguments) as refused:
        NOTIFY.parse({"message": secret, "count": secret, "loud": secret})
    assert secret not in str(refused.value)


def test_not_an_object_is_refused() -> None:
    for value in ([], "x", None, 1):
        with pytest.raises(InvalidArguments, match="arguments: must be an object"):
            NOTIFY.parse(value)


def test_the_command_line_form_types_values_by_the_declaration() -> None:
    parsed = NOTIFY.parse_text({"message": "true", "count": "3", "loud": "true"})
    assert dict(parsed) == {"message": "true", "count": 3, "loud": True}
    for value, problem in [({"message": "m", "loud": "yes"}, "loud: must be true or false"),
                           ({"message": "m", "loud": "True"}, "loud: must be true or false"),
                           ({"message": "m", "count": "3.0"}, "count: must be an integer"),
                           ({"message": "m", "count": "+3"}, "count: must be an integer")]:
        with pytest.raises(InvalidArguments, match=problem):
            NOTIFY.parse_text(value)


def test_the_json_form_never_coerces() -> None:
    with pytest.raises(InvalidArguments):
        NOTIFY.parse({"message": "m", "count": "3"})
    with pytest.raises(InvalidArguments):
        NOTIFY.parse({"message": "m", "loud": "true"})


@pytest.mark.parametrize("bad", [
    lambda: Input(constructor=Flag("x")),
    lambda: Input(__proto__=Flag("x")),
    lambda: Input(Bad=Flag("x")),
    lambda: Input(x=Text("x", min_length=3, max_length=2)),
    lambda: Input(x=Text("x", max_length=5000)),
    lambda: Input(x=Text("x", enum=("toolong",), max_length=3)),
    lambda: Input(x=Integer("x", minimum=0, maximum=MAX_INTEGER + 1)),
    lambda: Input(x=Flag("x", default=True)),  # a default on a required field
    lambda: Input(x=Integer("x", minimum=0, maximum=3, required=False, default=9)),
    lambda: Input(x="not a field"),  # type: ignore[arg-type]
    lambda: Input(**{f"f{i}": Flag("x") for i in range(33)}),
])
def test_declarations_outside_the_rules_are_refused(bad: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        bad()
