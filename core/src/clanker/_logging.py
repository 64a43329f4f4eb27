"""Library logging: silent unless the application configures handlers."""

from __future__ import annotations

import logging

# Without a handler on the package logger, Python's last-resort handler would
# print warnings to stderr; a library leaves that choice to the application.
logging.getLogger("clanker").addHandler(logging.NullHandler())


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)
