"""Terminal credentials: random, digest-only, constant-time, revocable."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clanker.grid.credentials import TOKEN_PATTERN, CredentialStore, digest


def test_a_minted_token_verifies_for_its_terminal_only() -> None:
    store = CredentialStore()
    token = store.mint("t-1")
    other = store.mint("t-2")
    assert TOKEN_PATTERN.fullmatch(token)
    assert token != other
    assert store.verify("t-1", token)
    assert not store.verify("t-2", token)
    assert not store.verify("t-3", token)


def test_the_store_keeps_no_raw_token() -> None:
    store = CredentialStore()
    token = store.mint("t-1")
    assert token not in repr(store)
    assert token.encode() not in repr(vars(store)).encode()
    assert digest(token) in vars(store)["_digests"].values()


def test_a_revoked_token_no_longer_verifies() -> None:
    store = CredentialStore()
    token = store.mint("t-1")
    assert store.revoke("t-1")
    assert not store.verify("t-1", token)
    assert not store.revoke("t-1")
    assert "t-1" not in store


def test_a_terminal_has_one_credential() -> None:
    store = CredentialStore()
    store.mint("t-1")
    with pytest.raises(ValueError, match="already"):
        store.mint("t-1")


@given(forged=st.one_of(st.text(max_size=80), st.none(), st.integers(), st.binary()))
def test_nothing_but_the_token_verifies(forged: object) -> None:
    store = CredentialStore()
    token = store.mint("t-1")
    if forged != token:
        assert not store.verify("t-1", forged)


def test_an_uppercase_copy_does_not_verify() -> None:
    store = CredentialStore()
    token = store.mint("t-1")
    assert not store.verify("t-1", token.upper()) or token.upper() == token
