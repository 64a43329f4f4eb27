"""The SSH hosts a person registered: ``hosts.json`` in clanker's config directory.

A host is a short name and an OpenSSH destination (``user@box``, or an alias
of ``~/.ssh/config``): clanker never stores a port, a key or a jump host of
its own, so the person's OpenSSH configuration stays the one source of truth.
The file is clanker's alone (``config.toml`` is the person's and is never
rewritten); every change is a transaction: under an exclusive lock
(:mod:`clanker.locking`, waited for at most 10 s), read,
change, write a new file and rename it over the old one.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from attrs import frozen

from clanker.execution.ssh import validate_target
from clanker.locking import LockTimeoutError, UnsafeLockError, exclusive
from clanker.storage import UnusableFileError, parse_json, read_own_file, write_json_atomic

if TYPE_CHECKING:
    from clanker.errors import HarnessCapabilityError
    from clanker.installation import Installation

__all__ = ["HOSTS_FILE", "Host", "HostCheck", "HostError", "HostOutcome", "HostStore",
           "validate_host_name"]

T = TypeVar("T")

HOSTS_FILE: Final = "hosts.json"
MAX_HOSTS: Final = 256
_MAX_FILE: Final = 256 * 1024
_VERSION: Final = 1
_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
_RESERVED: Final = frozenset({"local"})
_LOCK_WAIT: Final = 10.0  # seconds another change of the hosts may hold the lock


class HostError(ValueError):
    """A host name is unknown, taken or malformed, or the hosts file cannot be used."""


def validate_host_name(name: str) -> str:
    """Return ``name`` if it can name a host: lower-case letters, digits, ``-``, ``_``."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise HostError(f"{name!r} is not a host name (a-z, 0-9, - and _, at most 32)")
    if name in _RESERVED:
        raise HostError(f"{name!r} is reserved for this machine")
    return name


@frozen
class Host:
    """A registered SSH host: its name in clanker and its OpenSSH destination."""

    name: str
    target: str


@frozen(kw_only=True)
class HostCheck:
    """What :meth:`clanker.api.Clanker.check_host` found on a host.

    ``error`` is why the host could not be reached (a ``transport-failure``),
    and then ``installations`` is empty; otherwise it holds each harness:
    its path on the host's login ``PATH`` (one batched lookup) and version.
    """

    host: Host
    error: HarnessCapabilityError | None
    installations: tuple[Installation, ...] = ()

    @property
    def reachable(self) -> bool:
        return self.error is None


@frozen(kw_only=True)
class HostOutcome(Generic[T]):
    """One place's answer in :meth:`clanker.api.Clanker.each_host`: ``host`` is
    ``None`` for this machine; exactly one of ``value`` and ``error`` is set."""

    host: str | None
    value: T | None = None
    error: HarnessCapabilityError | None = None


class HostStore:
    """The hosts of one config directory."""

    def __init__(self, config_dir: Path) -> None:
        self._dir = config_dir
        self._path = config_dir / HOSTS_FILE

    def list(self) -> list[Host]:
        """Every registered host, by name."""
        return sorted(self._read().values(), key=lambda host: host.name)

    def get(self, name: str) -> Host:
        """The host called ``name``; :class:`HostError` when there is none."""
        hosts = self._read()
        if name not in hosts:
            raise HostError(f"no host called {name!r} (clanker hosts add NAME TARGET)")
        return hosts[name]

    def add(self, name: str, target: str) -> Host:
        """Register ``name`` for ``target``; a taken name is an error, nothing changes."""
        validate_host_name(name)
        try:
            validate_target(target)
        except ValueError as exc:
            raise HostError(str(exc)) from exc
        with self._transaction() as hosts:
            if name in hosts:
                raise HostError(f"a host called {name!r} exists (remove it first)")
            if len(hosts) >= MAX_HOSTS:
                raise HostError(f"at most {MAX_HOSTS} hosts")
            hosts[name] = Host(name, target)
        return hosts[name]

    def remove(self, name: str) -> Host:
        """Forget ``name``; :class:`HostError` when there is no such host."""
        with self._transaction() as hosts:
            if name not in hosts:
                raise HostError(f"no host called {name!r}")
            return hosts.pop(name)

    # -- the file ------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[dict[str, Host]]:
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(exclusive(self._dir / f".{HOSTS_FILE}.lock",
                                              timeout=_LOCK_WAIT))
            except UnsafeLockError as exc:
                raise HostError(f"{self._dir}: the hosts cannot be changed ({exc})") from exc
            except LockTimeoutError as exc:
                raise HostError(f"the hosts cannot be changed now: {exc.message} "
                                "(another clanker is changing them)") from exc
            hosts = self._read()
            yield hosts  # an exception here leaves the file as it was
            try:
                write_json_atomic(self._path, {
                    "version": _VERSION,
                    "hosts": [{"name": h.name, "target": h.target}
                              for h in sorted(hosts.values(), key=lambda host: host.name)],
                })
            except OSError as exc:
                raise HostError(f"{self._path}: not saved ({exc.strerror})") from exc

    def _read(self) -> dict[str, Host]:
        try:
            raw = read_own_file(self._path, max_bytes=_MAX_FILE)
        except UnusableFileError as exc:
            raise HostError(str(exc)) from exc
        if raw is None:
            return {}
        try:
            data = parse_json(raw)
        except ValueError as exc:
            raise HostError(f"{self._path}: not valid JSON") from exc
        return self._hosts(data)

    def _hosts(self, data: object) -> dict[str, Host]:
        broken = HostError(f"{self._path}: not a hosts file this version understands")
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            raise broken
        entries = data.get("hosts")
        if not isinstance(entries, list) or len(entries) > MAX_HOSTS:
            raise broken
        hosts: dict[str, Host] = {}
        for entry in entries:
            if not isinstance(entry, dict) or set(entry) != {"name", "target"}:
                raise broken
            name, target = entry["name"], entry["target"]
            try:
                validate_host_name(name)
                validate_target(target)
            except ValueError as exc:
                raise broken from exc
            if name in hosts:
                raise broken
            hosts[name] = Host(name, target)
        return hosts
