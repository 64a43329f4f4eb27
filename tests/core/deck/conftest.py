"""Deck fixtures: the grid tests' CLANKER_HOME on a short path (sockets fit)."""

from __future__ import annotations

from tests.core.grid.conftest import home

__all__ = ["home"]
