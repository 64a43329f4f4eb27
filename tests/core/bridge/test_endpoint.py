"""The bridge endpoint a provider is handed checks its own values, so no provider
has to: a loopback HTTP URL, a plain server name, a variable name for the token."""

from __future__ import annotations

import pytest
from attrs import evolve

from clanker.bridge.capability import BridgeEndpoint

ENDPOINT = BridgeEndpoint(url="http://127.0.0.1:41234/mcp", server_name="clanker",
                          token_variable="CLANKER_BRIDGE_TOKEN")


def test_plain_values_are_an_endpoint() -> None:
    assert evolve(ENDPOINT, url="http://localhost:1/mcp?a=b", server_name="clanker.grid-2",
                  token_variable="_T0").token_variable == "_T0"


@pytest.mark.parametrize("url", ["http://192.0.2.1:80/mcp", "https://127.0.0.1:1/mcp",
                                 "http://127.0.0.1/mcp", "http://127.0.0.1:1/mcp\nX: y",
                                 "http://localhost.evil:1/mcp"])
def test_an_endpoint_that_is_not_loopback_cannot_even_be_named(url: str) -> None:
    with pytest.raises(ValueError, match="loopback"):
        evolve(ENDPOINT, url=url)


@pytest.mark.parametrize("variable", ["", "A-B", "A}B", "${A}", "A B", "1A"])
def test_a_token_variable_that_is_no_name_cannot_be_named(variable: str) -> None:
    with pytest.raises(ValueError, match="variable name"):
        evolve(ENDPOINT, token_variable=variable)


@pytest.mark.parametrize("name", ["", "-x", "a b", "a/b", "x" * 65])
def test_a_server_name_that_is_not_plain_cannot_be_named(name: str) -> None:
    with pytest.raises(ValueError, match="plain name"):
        evolve(ENDPOINT, server_name=name)
