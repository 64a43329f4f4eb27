"""The exit codes of a refused checkout request, shared by ``worktree`` and ``resume``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from clanker.cli.common import Failure, capability_errors
from clanker.errors import (
    EXIT_BUSY,
    EXIT_CHECKOUT_REFUSED,
    EXIT_NOT_A_REPOSITORY,
    EXIT_REMOVAL_FAILED,
    EXIT_USAGE,
)

__all__ = ["checkout_errors"]

_EXITS: Final = {
    "invalid-branch": EXIT_USAGE,
    "invalid-base": EXIT_USAGE,
    "not-a-repository": EXIT_NOT_A_REPOSITORY,
    "busy": EXIT_BUSY,
    "removal-failed": EXIT_REMOVAL_FAILED,
    "git-failed": EXIT_REMOVAL_FAILED,
}


@contextmanager
def checkout_errors() -> Iterator[None]:
    """Turn a :class:`~clanker.checkouts.types.CheckoutError` into its exit code."""
    from clanker.checkouts.types import CheckoutError

    with capability_errors():
        try:
            yield
        except CheckoutError as exc:
            code = _EXITS.get(exc.reason.value, EXIT_CHECKOUT_REFUSED)
            raise Failure(exc.message, code, kind=exc.reason.value) from exc
