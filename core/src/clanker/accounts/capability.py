"""The accounts contract, as far as it is settled: which variable points a
harness at an account home. Sign-in, verification and sign-out join it with
the accounts service; no service calls it yet.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["AccountsCapability"]


@runtime_checkable
class AccountsCapability(Protocol):
    """The account-home variable of one harness."""

    home_variable: str
    """The environment variable that points the harness at an account's home directory."""
