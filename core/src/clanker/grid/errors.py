"""The grid's typed errors. Messages are fixed, safe sentences: no token, no payload."""

from __future__ import annotations

__all__ = [
    "GridAlreadyRunningError",
    "GridError",
    "GridPathError",
    "GridProtocolError",
    "GridRequestError",
    "GridStartError",
    "GridUnavailableError",
]


class GridError(Exception):
    """Something about the grid failed; the message is safe to show a person."""


class GridUnavailableError(GridError):
    """The grid is not running, or did not answer in time."""


class GridPathError(GridError):
    """The socket path or its directory cannot be used safely (too long, not ours, wrong mode)."""


class GridAlreadyRunningError(GridError):
    """Another grid already answers on this socket."""


class GridStartError(GridError):
    """The daemon could not be started (its log file says why)."""


class GridProtocolError(GridError):
    """The grid answered something that is not a valid protocol reply."""


class GridRequestError(GridError):
    """The grid refused a request with one of the protocol's fixed error words.

    ``message`` is the grid's one safe sentence, where the op carries one (the
    capability plane's do).
    """

    def __init__(self, word: str, op: str | None = None, *, message: str | None = None) -> None:
        self.word = word
        self.op = op
        self.message = message
        where = f"{op}: " if op else ""
        said = f": {message}" if message else ""
        super().__init__(f"the grid refused the request ({where}{word}){said}")
