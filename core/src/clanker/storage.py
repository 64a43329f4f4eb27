"""Small files: clanker's own, written atomically and read with a bound and
tolerance; and other programs' configuration, read with a bound and suspicion.

clanker's own files (caches, ``config.toml``, state) live in directories
another program, or a mistake, can put anything into. Each is read through
:func:`read_own_file`: opened without following a final symbolic link and
without blocking (a FIFO opens at once and is refused, rather than waiting for
a writer that never comes), checked to be a regular file, and bounded in
size; JSON is bounded in nesting depth by the interpreter's recursion limit,
and a document that reaches it is refused like any other corrupt one. Writes
go to a fresh temporary file (``O_EXCL``: never an existing link or FIFO)
renamed over the target, which replaces whatever was there (a link itself,
not what it points to), or fails on a directory; callers treat a failed
write of a cache as a cache they do not have.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Final

__all__ = [
    "MAX_STATE_FILE",
    "UnusableFileError",
    "file_kind",
    "not_regular",
    "open_failure",
    "parse_json",
    "read_json",
    "read_own_file",
    "read_regular_file",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_text_atomic",
]

MAX_STATE_FILE: Final = 4 * 1024 * 1024
_OWN_FLAGS: Final = (
    os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
)
_KINDS: Final = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISREG, "a regular file"),
)
LINK_REFUSED: Final = "is a symbolic link, which clanker does not follow for its own files"


class UnusableFileError(ValueError):
    """One of clanker's own files cannot be used as one; the message names it and says why."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} {reason}")
        self.path = path
        self.reason = reason


def write_json_atomic(path: Path, data: object, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` as JSON: a reader sees the old or the new file, never half.

    Parent directories are created private (0700). The file is 0600. With
    ``fsync=False`` the bytes are not forced to the disk before the rename: for
    a cache that is rebuilt when lost, where a crash may leave the old copy, an
    empty one or a truncated one (which its reader refuses as corrupt), but
    never costs a disk flush per save.
    """
    # `dumps` (not `dump`) so the C encoder writes it: `dump` streams through the
    # pure-Python one, several times slower on a large cache.
    write_text_atomic(path, (json.dumps(data, separators=(",", ":"), ensure_ascii=False),),
                      fsync=fsync)


def write_text_atomic(path: Path, pieces: Iterable[str], *, fsync: bool = True) -> None:
    """Replace ``path`` with the concatenation of ``pieces``, as :func:`write_json_atomic`
    does (same modes, same ``fsync``), writing each piece as it comes: a large
    document made in pieces is never one string in memory."""
    write_bytes_atomic(path, (piece.encode("utf-8") for piece in pieces), fsync=fsync)


def write_bytes_atomic(path: Path, pieces: Iterable[bytes], *, fsync: bool = True) -> None:
    """:func:`write_text_atomic` for pieces already encoded."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    import tempfile  # on first write: `sessions` over unchanged stores writes nothing

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            for piece in pieces:
                handle.write(piece)
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def open_failure(error: OSError) -> str:
    """Why one of clanker's own files could not be opened without following a link
    (``O_NOFOLLOW``, ``O_NONBLOCK``), for a message that names the file first."""
    if error.errno in (errno.ELOOP, errno.EMLINK):  # EMLINK: FreeBSD's answer to O_NOFOLLOW
        return LINK_REFUSED
    if error.errno == errno.ENXIO:
        return "is a socket or a device, not a regular file"
    if error.errno == errno.ENOTDIR:
        return "is below something that is not a directory"
    return f"cannot be opened ({error.strerror})"


def file_kind(mode: int) -> str:
    """What a file of ``mode`` is, for a message: ``a FIFO``, ``a regular file``..."""
    return next((name for test, name in _KINDS if test(mode)), "not a file")


def not_regular(mode: int) -> str | None:
    """Why a file of ``mode`` is not one clanker may use as its own regular file,
    or ``None`` when it is one."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return LINK_REFUSED
    kind = file_kind(mode)
    return "is not a regular file" if kind == "not a file" else f"is {kind}, not a regular file"


def read_own_file(path: Path, *, max_bytes: int) -> bytes | None:
    """Return the bytes of clanker's own file ``path``, or ``None`` if there is none.

    Raises :class:`UnusableFileError` for anything else: a symbolic link (never
    followed), a FIFO, socket, device or directory, a file over ``max_bytes``,
    or one that cannot be read. Never blocks.
    """
    try:
        fd = os.open(path, _OWN_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnusableFileError(path, open_failure(exc)) from exc
    try:
        info = os.fstat(fd)
        if (reason := not_regular(info.st_mode)) is not None:
            raise UnusableFileError(path, reason)
        if info.st_size > max_bytes:
            raise UnusableFileError(path, f"is larger than {max_bytes} bytes")
        chunks: list[bytes] = []
        total = 0
        while total <= max_bytes and (chunk := os.read(fd, max_bytes + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise UnusableFileError(path, f"cannot be read ({exc.strerror})") from exc
    finally:
        os.close(fd)
    if total > max_bytes:  # it grew while we read
        raise UnusableFileError(path, f"is larger than {max_bytes} bytes")
    return b"".join(chunks)


def parse_json(raw: bytes) -> object:
    """Parse ``raw`` as JSON; raise ``ValueError`` when it is not, or nests too deeply.

    The parser recurses once per level: a document nested deeper than the
    interpreter's recursion limit raises ``RecursionError``, which is a
    corrupt document here, not a crash.
    """
    try:
        data: object = json.loads(raw)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc
    return data


def read_json(path: Path, *, max_bytes: int = MAX_STATE_FILE) -> object | None:
    """Return the JSON in clanker's own file ``path``, or ``None`` if it is missing,
    unusable (see :func:`read_own_file`), oversized or corrupt.

    For caches, where any of those just means "nothing usable": the caller
    rebuilds and writes a fresh file. Callers that must tell corruption from
    absence use :func:`read_own_file` and :func:`parse_json`.
    """
    try:
        raw = read_own_file(path, max_bytes=max_bytes)
    except UnusableFileError:
        return None
    if raw is None:
        return None
    try:
        return parse_json(raw)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors too
        return None


def read_regular_file(path: Path, *, max_bytes: int) -> bytes | None:
    """Return the bytes of the regular file ``path``, or ``None`` if it does not exist.

    For a file clanker must understand before it acts (a harness's settings):
    raises ``ValueError`` when it is not a regular file (a FIFO would block, a
    device never ends) or holds more than ``max_bytes``, and ``OSError`` when
    it cannot be read. Links are followed: such files are the user's, and
    dotfiles are often links.
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
