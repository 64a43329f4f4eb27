"""A coder session's transcript: append-only JSON Lines, secrets redacted first.

One file per session (``<id>.jsonl``) in a 0700 directory, mode 0600, opened
``O_APPEND``: each record is one line with the wall time, a direction (``out``
to the agent, ``in`` from it, ``clanker`` for clanker's own events: approval
decisions and the rule that made them, cancels, failures) and the frame. Every
value clanker put into the agent's environment is a secret and is replaced by
``[redacted]`` before a line is written, and before anything is rendered.
Reading tolerates a torn last line (a crash mid-write).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

__all__ = ["MAX_TRANSCRIPT", "SESSION_ID", "Redactor", "Transcript", "read_transcript",
           "transcript_path"]

MAX_TRANSCRIPT: Final = 64 * 1024 * 1024
"""A transcript stops growing here (a record says so); reading stops here too."""
_MIN_SECRET: Final = 6  # shorter values (``1``, ``true``) would redact everything
SESSION_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
REDACTED: Final = "[redacted]"
_MAX_WAITING: Final = 1000


class Redactor:
    """Replaces every registered secret in text."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= _MIN_SECRET}, key=len,
                               reverse=True)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def value(self, data: object) -> object:
        """``data`` (JSON-shaped) with every secret replaced in its strings."""
        if not self._secrets:
            return data
        if isinstance(data, str):
            return self(data)
        if isinstance(data, dict):
            return {self(str(k)): self.value(v) for k, v in data.items()}
        if isinstance(data, list):
            return [self.value(v) for v in data]
        return data

    def data(self, raw: bytes) -> bytes:
        """``raw`` with every secret (as UTF-8) replaced."""
        for secret in self._secrets:
            raw = raw.replace(secret.encode("utf-8"), REDACTED.encode())
        return raw

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text


def transcript_path(directory: Path, session_id: str) -> Path:
    """``directory/<id>.jsonl``; raises :class:`ValueError` for an id that is not a file name."""
    if SESSION_ID.fullmatch(session_id) is None:
        raise ValueError("session id: letters, digits, '.', '_' and '-' only")
    return directory / f"{session_id}.jsonl"


class Transcript:
    """Appends records to one session's file.

    Until the session has an id (:meth:`bind`), records wait in memory (the
    ``initialize`` and ``session/new`` exchange); a run that never got one is
    written under ``unbound-<time>-<pid>`` by :meth:`close`.
    """

    def __init__(self, directory: Path, redact: Redactor) -> None:
        self.directory = directory
        self.path: Path | None = None
        self.redact = redact
        """What every record, and everything rendered from this session, goes through."""
        self._redact = redact
        self._fd = -1
        self._size = 0
        self._full = False
        self._waiting: list[bytes] = []

    def bind(self, session_id: str) -> Path:
        """Write to ``<session_id>.jsonl`` from now on (appending when it exists)."""
        if self._fd >= 0:
            raise RuntimeError("transcript: already bound")
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        self.path = transcript_path(self.directory, session_id)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW,
                           0o600)
        self._size = os.fstat(self._fd).st_size
        waiting, self._waiting = self._waiting, []
        for data in waiting:
            self._write(data)
        return self.path

    def record(self, direction: str, frame: object, at: float | None = None) -> None:
        """Append one record (never raises for a full disk: the session goes on);
        ``at``: when it was sent, for a frame written before it could be recorded
        (the first one, at the agent's start), else now."""
        when = time.time() if at is None else at
        line = json.dumps({"t": round(when, 3), "dir": direction, "frame": frame},
                          ensure_ascii=False, separators=(",", ":"))
        data = (self._redact(line) + "\n").encode("utf-8")
        if self._fd < 0:
            if len(self._waiting) < _MAX_WAITING:
                self._waiting.append(data)
            return
        self._write(data)

    def _write(self, data: bytes) -> None:
        if self._full:
            return
        if self._size + len(data) > MAX_TRANSCRIPT:
            self._full = True
            data = (json.dumps({"t": round(time.time(), 3), "dir": "clanker",
                                "frame": {"event": "transcript-full"}}) + "\n").encode()
        try:
            os.write(self._fd, data)
            self._size += len(data)
        except OSError:
            self._full = True

    def close(self) -> None:
        if self._fd < 0 and self._waiting:
            self.bind(f"unbound-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def read_transcript(path: Path) -> Iterator[dict[str, Any]]:
    """The records of ``path`` in order; a torn or corrupt line is skipped."""
    with path.open("rb") as handle:
        data = handle.read(MAX_TRANSCRIPT)
    for raw in data.split(b"\n"):
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict) and "dir" in record:
            yield record
