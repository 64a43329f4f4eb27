"""Small files: clanker's own, written atomically and read with a bound and
tolerance; and other programs' configuration, read with a bound and suspicion."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Final

__all__ = ["MAX_STATE_FILE", "read_json", "read_regular_file", "write_json_atomic"]

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


def read_regular_file(path: Path, *, max_bytes: int) -> bytes | None:
    """Return the bytes of the regular file ``path``, or ``None`` if it does not exist.

    For a file clanker must understand before it acts (a harness's settings):
    raises ``ValueError`` when it is not a regular file (a FIFO would block, a
    device never ends) or holds more than ``max_bytes``, and ``OSError`` when
    it cannot be read.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise ValueError(f"{path} is not a regular file")
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"{path} holds more than {max_bytes} bytes")
    return data
