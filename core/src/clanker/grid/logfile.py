"""The daemon's log: bounded in size, quiet about repeats, never opened unsafely.

:class:`GridLogHandler` is the standard library's
:class:`~logging.handlers.RotatingFileHandler` (one previous file,
:data:`MAX_LOG` bytes each) with three things changed:

* the file is opened through :func:`~clanker.grid.files.open_regular` (no
  final symlink followed, no FIFO waited on, a regular file of ours only);
* whether to roll over is judged from the stream the handler holds, and a
  rollover only moves the file if it is still the one being written, truncating
  it when it cannot be moved: the standard checks look at the path, and would
  stop rotating (and let the log grow) once something else is put there;
* a line repeated within :data:`REPEAT_WINDOW` seconds is counted instead of
  written, then summarized as ``last message repeated N times``.

When the log cannot be reopened safely the handler writes nothing: the grid
keeps running, it never writes where it should not.
"""

from __future__ import annotations

import contextlib
import io
import logging
import logging.handlers
import os
from pathlib import Path
from typing import Final

from clanker.grid.errors import GridPathError
from clanker.grid.files import open_regular

__all__ = ["MAX_LOG", "REPEAT_WINDOW", "GridLogHandler"]

MAX_LOG: Final = 1024 * 1024
"""The most bytes in ``grid.log``, and in ``grid.log.1`` (the previous one)."""
REPEAT_WINDOW: Final = 30.0
"""How long identical lines are counted before the count is written."""
_FLAGS: Final = os.O_WRONLY | os.O_APPEND | os.O_CREAT


class GridLogHandler(logging.handlers.RotatingFileHandler):
    """Write log records to ``path`` as the module notes say.

    With ``capture_output`` the process's stdout and stderr follow the file
    across rotations (so a stray traceback lands in the bounded log too).
    Raises :class:`~clanker.grid.errors.GridPathError` when ``path`` cannot be
    opened safely at the start.
    """

    def __init__(
        self, path: Path, *, max_bytes: int = MAX_LOG, repeat_window: float = REPEAT_WINDOW,
        capture_output: bool = False,
    ) -> None:
        self._capture_output = capture_output
        self._repeat_window = repeat_window
        self._last: tuple[int, str, str] | None = None
        self._last_at = 0.0
        self._repeats = 0
        super().__init__(path, maxBytes=max_bytes, backupCount=1, encoding="utf-8",
                         errors="backslashreplace")

    # ---------------------------------------------------------------- the file

    def _open(self) -> io.TextIOWrapper:
        fd = open_regular(Path(self.baseFilename), _FLAGS)
        stream = os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace")
        if self._capture_output:
            for target in (1, 2):
                os.dup2(fd, target)
        return stream

    def shouldRollover(self, record: logging.LogRecord) -> bool:
        if self.stream is None:
            self.stream = self._open()
        self.stream.seek(0, os.SEEK_END)  # stdout and stderr may have written too
        return self.stream.tell() + len(self.format(record)) + 1 >= self.maxBytes

    def doRollover(self) -> None:
        stream, self.stream = self.stream, None
        identity = None
        if stream is not None:
            info = os.fstat(stream.fileno())
            identity = (info.st_dev, info.st_ino)
            stream.close()
        previous = self.baseFilename + ".1"
        with contextlib.suppress(OSError):
            here = os.lstat(self.baseFilename)
            if (here.st_dev, here.st_ino) == identity:
                os.replace(self.baseFilename, previous)
        self.stream = self._open()
        if self.stream.tell() >= self.maxBytes:
            self.stream.truncate(0)  # it could not be moved aside: stay bounded

    def handleError(self, record: logging.LogRecord) -> None:
        """Drop the record: there is nowhere safe to say so (stderr is this very file)."""

    # ----------------------------------------------------------------- repeats

    def emit(self, record: logging.LogRecord) -> None:
        try:
            key = (record.levelno, record.name, record.getMessage())
        except Exception:
            key = None
        if key is not None and key == self._last \
                and record.created - self._last_at < self._repeat_window:
            self._repeats += 1
            return
        self._summarize()
        self._last, self._last_at = key, record.created
        super().emit(record)

    def _summarize(self) -> None:
        if not self._repeats or self._last is None:
            return
        level, name, _ = self._last
        count, self._repeats = self._repeats, 0
        summary = logging.LogRecord(name, level, __file__, 0,
                                    "last message repeated %d times", (count,), None)
        super().emit(summary)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.acquire()
            try:
                self._summarize()
            finally:
                self.release()
        super().close()


def open_log(path: Path, *, capture_output: bool = False) -> GridLogHandler:
    """A :class:`GridLogHandler` on ``path``; its directory must exist."""
    try:
        return GridLogHandler(path, capture_output=capture_output)
    except FileNotFoundError:
        raise GridPathError(f"{path} cannot be created (its directory is missing)") from None
