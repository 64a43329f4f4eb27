"""The accounts contract's shared reader of identity fields."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from clanker.accounts.capability import IDENTITY_LIMIT, identity_text


@given(st.text(max_size=IDENTITY_LIMIT + 20))
def test_identity_text_keeps_printable_text_as_given_or_nothing(value: str) -> None:
    kept = identity_text(value)
    usable = bool(value.strip()) and value.isprintable() and len(value) <= IDENTITY_LIMIT
    assert kept == (value if usable else None)


def test_identity_text_refuses_what_is_not_text() -> None:
    for value in (None, 3, b"a@b.c", ["a@b.c"], {"email": "a@b.c"}):
        assert identity_text(value) is None
    assert identity_text("a" * IDENTITY_LIMIT) == "a" * IDENTITY_LIMIT
    assert identity_text("a" * (IDENTITY_LIMIT + 1)) is None
    assert identity_text("   ") is None
    assert identity_text("a\nb") is None
