"""Library logging: silent unless the application configures handlers.

:mod:`logging` is imported when something is first logged, not when a module asks
for its logger: most commands log nothing, and the import is about a fortieth of
a command's start-up (``benchmarks/startup.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import logging


def _logger(name: str) -> logging.Logger:
    import logging

    package = logging.getLogger("clanker")
    if not any(isinstance(handler, logging.NullHandler) for handler in package.handlers):
        # Without a handler on the package logger, Python's last-resort handler
        # would print warnings to stderr; a library leaves that choice to the
        # application.
        package.addHandler(logging.NullHandler())
    return logging.getLogger(name)


class _Deferred:
    """A module's logger, looked up on its first use; every attribute is the logger's."""

    __slots__ = ("_logger", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: logging.Logger | None = None

    def __getattr__(self, attribute: str) -> Any:
        logger = self._logger
        if logger is None:
            logger = self._logger = _logger(self._name)
        return getattr(logger, attribute)


def get_logger(name: str) -> logging.Logger:
    """The logger ``name``, as :func:`logging.getLogger` gives it, found when first used."""
    return cast("logging.Logger", _Deferred(name))
