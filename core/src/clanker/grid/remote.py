"""Attention from an SSH host: frames handed to the grid, and which host a terminal is on.

The hook bridge on a host writes its ``deliver`` requests to its terminal as
OSC frames (:mod:`clanker.attention.frames`); the launcher that owns that
terminal's PTY takes them out and hands each to :class:`RemoteDelivery`, which
accepts one only when it is a ``deliver`` request for the launcher's own
registered terminal carrying that terminal's credential, and then sends it to
the grid, which checks the credential again. A frame for any other terminal,
or with any other token, is dropped and counted. A delivery is made before the
terminal output that follows its frame is shown (the grid answers a local
socket within its bound), so what the person sees never runs ahead of what
``clanker status`` says. A grid that fails :data:`MAX_FAILURES` deliveries in a
row is given no more (the terminal's output would stall on each), and the rest
of the launch's frames are dropped and counted.

:class:`HostIndex` records, for each terminal launched on a host, the host's
name, the launch's directory id there and its launcher's pid (one 0600 file
per terminal in a private runtime directory), so ``clanker status --host
NAME`` lists that host's terminals and an install on the host knows which of
this machine's launch directories there are still in use
(:func:`machine_identity` names this machine to the host). A terminal the grid
no longer lists is forgotten when the index is read.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast

from clanker._logging import get_logger

if TYPE_CHECKING:
    from clanker.grid.client import GridClient

__all__ = ["HostIndex", "RemoteDelivery", "machine_identity"]

log = get_logger(__name__)

_KEYS: Final = frozenset({"v", "op", "terminal", "token", "envelopes", "failedClosed"})
MAX_FAILURES: Final = 3


class RemoteDelivery:
    """Hands one terminal's frames to the grid (see the module notes)."""

    def __init__(self, client: GridClient, terminal: str, token: str) -> None:
        self._client = client
        self._terminal = terminal
        self._token = token
        self.refused = 0
        """Frames that were not this terminal's deliveries."""
        self.failed = 0
        """Deliveries the grid did not take (it refused them, or could not be reached)."""
        self.delivered = 0
        self._in_a_row = 0

    def __repr__(self) -> str:  # never the token
        return f"RemoteDelivery({self._terminal!r})"

    def __call__(self, payload: bytes) -> bool:
        """Take one frame's payload; say whether the grid took it."""
        request = self._parse(payload)
        if request is None:
            self.refused += 1
            return False
        envelopes, failed = request
        if self._in_a_row >= MAX_FAILURES:
            self.failed += 1
            return False
        try:
            self._client.deliver(self._terminal, self._token, envelopes, failed_closed=failed)
        except Exception:
            self.failed += 1
            self._in_a_row += 1
            log.debug("attention: the grid did not take a delivery from the host")
            return False
        self._in_a_row = 0
        self.delivered += 1
        return True

    def _parse(self, payload: bytes) -> tuple[list[dict[str, object]], int | None] | None:
        try:
            request = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return None
        if not (isinstance(request, dict) and set(request) <= _KEYS
                and request.get("v") == 1 and request.get("op") == "deliver"):
            return None
        terminal, token = request.get("terminal"), request.get("token")
        if not (isinstance(terminal, str) and isinstance(token, str)):
            return None
        # Both compared, always: a frame of another launch proves nothing here.
        same_terminal = hmac.compare_digest(terminal.encode(), self._terminal.encode())
        same_token = hmac.compare_digest(token.encode(), self._token.encode())
        envelopes = request.get("envelopes")
        failed = request.get("failedClosed")
        well_formed = (
            isinstance(envelopes, list) and all(isinstance(e, dict) for e in envelopes)
            and (failed is None or (isinstance(failed, int) and not isinstance(failed, bool)))
        )
        if not (same_terminal and same_token and well_formed):
            return None
        return cast("list[dict[str, object]]", envelopes), cast("int | None", failed)


_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_IDENTITY: Final = re.compile(r"[0-9a-f]{32}")


def machine_identity(state: Path) -> str:
    """This machine's (this user's) launcher identity on hosts: 128 random bits kept
    in ``state/launcher-id`` (0600), made the first time."""
    import secrets

    path = state / "launcher-id"
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(secrets.token_hex(16))
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "r", encoding="ascii") as file:
        identity = file.read(64).strip()
    if not _IDENTITY.fullmatch(identity):
        raise ValueError(f"{path} does not hold a launcher identity")
    return identity


class HostIndex:
    """Which host each terminal launched on a host runs on (see the module notes)."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory

    def record(self, terminal: str, host: str, launch: str) -> None:
        """Record that ``terminal`` runs on ``host`` in its launch directory ``launch``,
        launched by this process."""
        from clanker.grid.daemon import secure_directory

        secure_directory(self._directory)
        path = self._path(terminal)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump({"host": host, "launch": launch, "pid": os.getpid()}, file)

    def forget(self, terminal: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            os.unlink(self._path(terminal))

    def terminals(self, host: str, live: Iterable[str]) -> set[str]:
        """The terminals among ``live`` launched on ``host``; records of terminals not
        among ``live`` are removed."""

        alive = set(live)
        found: set[str] = set()
        for terminal, record in self._records():
            if terminal not in alive:
                self.forget(terminal)
            elif record.get("host") == host:
                found.add(terminal)
        return found

    def running_launches(self, host: str) -> set[str]:
        """The launch directory ids on ``host`` of launches whose launcher still runs."""
        running: set[str] = set()
        for _, record in self._records():
            pid, launch = record.get("pid"), record.get("launch")
            if record.get("host") != host or not isinstance(launch, str) \
                    or not isinstance(pid, int) or pid <= 0:
                continue
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            except OSError:
                pass  # alive, whoever's it is now: kept rather than guessed
            running.add(launch)
        return running

    def _records(self) -> list[tuple[str, dict[str, object]]]:
        from clanker.grid.daemon import secure_directory

        try:
            if not secure_directory(self._directory, create=False):
                return []
            names = os.listdir(self._directory)
        except Exception:  # not a private directory of ours: nothing is trusted there
            return []
        records = []
        for name in names:
            if not name.endswith(".host"):
                continue
            try:
                fd = os.open(self._directory / name, os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(fd, "rb") as file:
                    record = json.loads(file.read(1024).decode("utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(record, dict):
                records.append((name[: -len(".host")], record))
        return records

    def _path(self, terminal: str) -> Path:
        if not _NAME.fullmatch(terminal):
            raise ValueError("terminal: not a terminal id")
        return self._directory / f"{terminal}.host"
