"""Small files clanker owns: written atomically, read with a bound and tolerance."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Final

__all__ = ["MAX_STATE_FILE", "read_json", "write_json_atomic"]

MAX_STATE_FILE: Final = 4 * 1024 * 1024


def write_json_atomic(path: Path, data: object) -> None:
    """Replace ``path`` with ``data`` as JSON: a reader sees the old or the new file, never half.

    Parent directories are created private (0700). The file is 0600.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, separators=(",", ":"), ensure_ascii=False)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: Path, *, max_bytes: int = MAX_STATE_FILE) -> object | None:
    """Return the JSON in ``path``, or ``None`` if it is missing, oversized or corrupt.

    Callers that must distinguish corruption from absence should not use this;
    it is for caches, where either just means "nothing usable".
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read(max_bytes + 1)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
        return None
    if len(raw) > max_bytes:
        return None
    try:
        data: object = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data
