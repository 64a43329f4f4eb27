"""The deck's seen watermark: per terminal, the highest revision the person has seen.

The only state the deck keeps that the grid does not have. It lives in one
small JSON file in clanker's state directory (written whole, atomically), so it
survives a restart of the deck and two decks read the same marks. It never
reaches the grid: seeing a completion never changes an agent's lifecycle.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

__all__ = ["SeenMarks"]

_MAX_MARKS: Final = 4096
_MAX_FILE: Final = 1024 * 1024


class SeenMarks:
    """Seen watermarks, read from and saved to ``path``.

    A missing or unreadable file is an empty watermark (nothing seen): the
    deck then shows every completion, which loses nothing.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._marks: dict[str, int] = self._read()

    def _read(self) -> dict[str, int]:
        try:
            with self.path.open("rb") as handle:
                data = json.loads(handle.read(_MAX_FILE))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items()
                if isinstance(k, str) and type(v) is int and v > 0}

    def reload(self) -> None:
        """Take up what another deck saved (marks only ever rise)."""
        for terminal, revision in self._read().items():
            self._marks[terminal] = max(revision, self._marks.get(terminal, 0))

    @property
    def marks(self) -> Mapping[str, int]:
        return dict(self._marks)

    def mark(self, terminal: str, revision: int, *, live: Iterable[str] = ()) -> bool:
        """Record that ``terminal`` was seen up to ``revision``; forget terminals not in
        ``live`` (retired agents) when given. Say whether anything changed."""
        if revision <= self._marks.get(terminal, 0):
            return False
        self.reload()
        self._marks[terminal] = max(revision, self._marks.get(terminal, 0))
        keep = set(live)
        if keep:
            self._marks = {k: v for k, v in self._marks.items() if k in keep or k == terminal}
        if len(self._marks) > _MAX_MARKS:  # bounded: the oldest ids are dropped first
            self._marks = dict(list(self._marks.items())[-_MAX_MARKS:])
        self._save()
        return True

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".deck-seen-")
        try:
            with os.fdopen(descriptor, "w") as handle:
                json.dump(self._marks, handle)
            os.replace(temporary, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
