"""Who is on the other end of a grid connection, and which launchers it may claim.

The kernel tells a Unix-socket server the pid and uid of the process that
connected (``SO_PEERCRED`` on Linux). A ``register`` names its launcher's pid;
the grid believes that claim only when the launcher is the caller itself or
one of the caller's ancestors (``clanker launch`` registers its own pid, and a
helper it starts may register it too). The parent chain is read from
``/proc/<pid>/stat``, a bounded number of steps. Init (pid 1) is everybody's
ancestor, so it proves nothing: only init itself may claim it.
"""

from __future__ import annotations

import os
import socket
import struct
from typing import Final, Protocol

from attrs import frozen

__all__ = ["MAX_ANCESTRY", "Peer", "peer_of", "process_alive", "vouches_for"]

MAX_ANCESTRY: Final = 64
"""How many parents :func:`vouches_for` walks before it gives up (and refuses)."""
_PEERCRED: Final = struct.Struct("3i")
_INIT: Final = 1
_STAT_BYTES: Final = 1024


@frozen
class Peer:
    """The connected process as the kernel reports it (``None``: the platform does not say)."""

    pid: int | None
    uid: int | None


UNKNOWN: Final = Peer(pid=None, uid=None)


class _Socket(Protocol):
    """What :func:`peer_of` needs of a socket (asyncio hands out a wrapper, not the socket)."""

    def getsockopt(self, level: int, option: int, size: int, /) -> bytes: ...


def peer_of(sock: _Socket | None) -> Peer:
    """The credentials of the process connected to ``sock``."""
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None:
        return UNKNOWN
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, _PEERCRED.size)
    except OSError:
        return UNKNOWN
    pid, uid, _ = _PEERCRED.unpack(raw)
    # A pid of 0 means the peer lives in another pid namespace: unknown here.
    return Peer(pid=int(pid) if pid > 0 else None, uid=int(uid))


def _stat_fields(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name, or ``None``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            status = handle.read(_STAT_BYTES)
    except OSError:
        return None
    # "pid (comm) S ppid ...": the command name may hold ')' itself, so split at the last.
    return status[status.rfind(b")") + 1:].split()


def process_alive(pid: int) -> bool:
    """Say whether ``pid`` runs (a zombie counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, and belongs to someone else
    fields = _stat_fields(pid)
    if fields is None:
        return True  # no procfs: kill() is all we know
    return not fields or fields[0] not in (b"Z", b"X")


def _parent(pid: int) -> int | None:
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 2:
        return None
    try:
        return int(fields[1])
    except ValueError:
        return None


def vouches_for(peer_pid: int, claimed: int) -> bool:
    """Say whether the process ``peer_pid`` may name ``claimed`` as its launcher.

    True when ``claimed`` is ``peer_pid`` or one of its first
    :data:`MAX_ANCESTRY` ancestors other than init; anything unreadable refuses.
    """
    if claimed == peer_pid:
        return True
    pid = peer_pid
    for _ in range(MAX_ANCESTRY):
        parent = _parent(pid)
        if parent is None or parent <= _INIT:
            return False  # the chain ends, leaves our pid namespace, or reaches init
        if parent == claimed:
            return True
        pid = parent
    return False
