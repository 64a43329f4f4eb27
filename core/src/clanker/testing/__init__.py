"""Reusable tests for harness plugins: the provider contract, strategies, doubles.

Needs the ``testing`` extra (pytest and hypothesis): ``pip install clanker[testing]``.
"""

from __future__ import annotations

from clanker.testing.contract import HarnessProviderContract
from clanker.testing.doubles import (
    FailingExecutor,
    ScriptedExecutor,
    ScriptedSession,
    ScriptedSessionExecutor,
)

__all__ = [
    "FailingExecutor",
    "HarnessProviderContract",
    "ScriptedExecutor",
    "ScriptedSession",
    "ScriptedSessionExecutor",
]
