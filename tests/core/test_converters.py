"""The strict boundary converter."""

from __future__ import annotations

import enum
from datetime import UTC, datetime

import pytest
from attrs import frozen
from hypothesis import given
from hypothesis import strategies as st

from clanker.converters import BoundaryError, make_boundary_converter, structure
from clanker.models.types import Model, model_text


@frozen
class Record:
    name: str
    count: int
    ratio: float
    enabled: bool
    at: datetime
    tags: tuple[str, ...] = ()
    note: str | None = None


records = st.builds(
    Record,
    name=st.text(),
    count=st.integers(),
    ratio=st.floats(allow_nan=False, allow_infinity=False),
    enabled=st.booleans(),
    at=st.datetimes(timezones=st.just(UTC)),
    tags=st.lists(st.text(), max_size=3).map(tuple),
    note=st.none() | st.text(),
)


@given(record=records)
def test_round_trip(record: Record) -> None:
    converter = make_boundary_converter()
    assert structure(converter, converter.unstructure(record), Record) == record


@given(
    model=st.builds(
        Model,
        id=st.text(min_size=1).filter(lambda s: model_text(s) is not None),
        label=st.none(),
        provider=st.none(),
        is_default=st.booleans(),
    )
)
def test_models_round_trip(model: Model) -> None:
    converter = make_boundary_converter()
    assert structure(converter, converter.unstructure(model), Model) == model


GOOD = {"name": "n", "count": 1, "ratio": 0.5, "enabled": True,
        "at": "2026-11-30T12:00:00+00:00", "tags": [], "note": None}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("count", "1"),
        ("count", True),
        ("count", 1.0),
        ("enabled", 1),
        ("enabled", "true"),
        ("name", 5),
        ("ratio", "0.5"),
        ("at", "2026-11-30T12:00:00"),
        ("at", 1796025320),
    ],
)
def test_no_coercion(field: str, value: object) -> None:
    with pytest.raises(BoundaryError) as caught:
        structure(make_boundary_converter(), GOOD | {field: value}, Record)
    assert field in str(caught.value)


def test_integers_are_accepted_as_floats() -> None:
    assert structure(make_boundary_converter(), GOOD | {"ratio": 1}, Record).ratio == 1.0


def test_extra_keys_are_refused() -> None:
    with pytest.raises(BoundaryError) as caught:
        structure(make_boundary_converter(), GOOD | {"surprise": 1}, Record)
    assert "surprise" in str(caught.value)


def test_model_validators_still_apply() -> None:
    with pytest.raises(BoundaryError):
        structure(make_boundary_converter(),
                  {"id": " ", "label": None, "provider": None, "is_default": False}, Model)


class Colour(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


@frozen
class Painted:
    colour: Colour


def test_a_str_enum_comes_back_as_its_member_never_as_plain_text() -> None:
    converter = make_boundary_converter()
    # Plain strings first: the str hook must not be the one a StrEnum field gets.
    assert structure(converter, {"value": "x"}, Named).value == "x"
    painted = structure(converter, {"colour": "red"}, Painted)
    assert painted.colour is Colour.RED
    assert converter.unstructure(painted) == {"colour": "red"}
    for wrong in ("green", 1, None, ["red"]):
        with pytest.raises(BoundaryError):
            structure(converter, {"colour": wrong}, Painted)


@frozen
class Named:
    value: str
