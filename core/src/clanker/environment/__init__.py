"""Where harness commands run and harness stores are read: the Environment seam.

Providers decide *what* to run and how to read their store; an
:class:`Environment` decides *where*. It hands a provider bound pieces only:

* ``executor`` / ``session_executor``: the two bounded execution forms;
* ``files``: read-only access to the host's files (:class:`HostFiles`), the
  only way a provider reads a harness's store or configuration;
* ``environ``: the host's environment variables as a harness started there
  would see them (clanker credentials removed, ``HOME`` always set when the
  host knows it).

The environment itself also locates binaries (:meth:`Environment.locate`)
and runs a harness in the user's terminal (:meth:`Environment.run_interactive`);
providers never do either. :class:`~clanker.environment.local.LocalEnvironment`
is this machine. A provider never learns which environment it runs in.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Final, Protocol, TypeVar, runtime_checkable

from attrs import field, frozen

from clanker.descriptor import Transport
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandExecutor, SessionExecutor

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

    from clanker.environment.files import Candidate, FileSample
    from clanker.environment.witness import FileStat, Witness

__all__ = ["TRANSPORTS", "Environment", "HostContext", "HostFiles", "LocatesAtOnce"]

_T = TypeVar("_T")

TRANSPORTS: Final = frozenset({Transport.LOCAL})
"""The transports clanker has an environment for. A descriptor may declare
more (what the harness itself supports); only these are offered."""


@runtime_checkable
class HostFiles(Protocol):
    """Read-only, bounded access to the files of the host a harness lives on.

    Paths are the host's absolute paths, as strings or :class:`~pathlib.Path`.
    Nothing here follows a link out of a walk, blocks on a FIFO or reads a
    file whole unless it is small. Every method is blocking: call them from
    offloaded work (:meth:`~clanker.sessions.capability.SessionsContext.offload`).
    """

    def walk(
        self,
        root: str | os.PathLike[str],
        *,
        depth: int,
        accept_file: Callable[[str], bool],
        accept_dir: Callable[[int, str], bool] = ...,
        witness: Witness | None = None,
    ) -> tuple[list[Candidate], bool]:
        """Return the regular files exactly ``depth`` directories below ``root``,
        and whether the walk stopped at its entry bound (see
        :func:`~clanker.environment.files.find_files`)."""
        ...

    def sample(
        self,
        path: str | os.PathLike[str],
        *,
        head_bytes: int,
        tail_bytes: int,
        stat: os.stat_result | FileStat | None = None,
    ) -> FileSample:
        """Return a bounded head and tail of a regular file; raise :class:`OSError`."""
        ...

    def read_small(self, path: str | os.PathLike[str], limit: int) -> bytes | None:
        """Return a small regular file's bytes (through links), or ``None`` when it is
        missing, not a regular file, unreadable or larger than ``limit``."""
        ...

    def stat(self, path: str | os.PathLike[str], *, follow: bool = True) -> os.stat_result | None:
        """Return the file's status, or ``None`` when it cannot be looked at."""
        ...

    def realpath(self, path: str | os.PathLike[str]) -> str:
        """Return the canonical path (links resolved as far as the path exists)."""
        ...

    def confined(self, path: str | os.PathLike[str], roots: Iterable[os.PathLike[str]]) -> bool:
        """Say whether ``path`` is a regular file that resolves inside one of ``roots``."""
        ...

    def sqlite(
        self, path: str | os.PathLike[str], *, harness: str
    ) -> AbstractContextManager[sqlite3.Connection]:
        """Open a harness's SQLite database read-only (see :mod:`clanker.environment.sqlite`)."""
        ...

    def which(self, command: str, search_path: str | None) -> str | None:
        """Return where ``command`` is found on ``search_path`` (``PATH`` syntax)."""
        ...


@runtime_checkable
class Environment(Protocol):
    """One place harnesses live: this machine or an SSH host."""

    @property
    def name(self) -> str:
        """Stable identity (``local``): keys caches, so readings never mix between hosts."""
        ...

    @property
    def transport(self) -> Transport:
        """The transport a launch over this environment declares to the provider."""
        ...

    def cache_dir(self, root: Path) -> Path:
        """Where this environment's rebuildable readings live under clanker's cache
        ``root``: a host's apart from this machine's, since the same path names
        another file there."""
        ...

    def canonical_path(self, path: str) -> str:
        """A directory of this host (absolute) in the one spelling sessions are
        matched by."""
        ...

    @property
    def executor(self) -> CommandExecutor: ...

    @property
    def session_executor(self) -> SessionExecutor | None: ...

    @property
    def files(self) -> HostFiles: ...

    @property
    def environ(self) -> Mapping[str, str]: ...

    async def locate(self, commands: Iterable[str]) -> Mapping[str, str | None]:
        """Find each command on the host's ``PATH`` (one batched lookup)."""
        ...

    async def gather(self, work: Callable[[], Awaitable[_T]], *, rounds: int | None = None,
                     complete: bool = False) -> _T:
        """Run ``work``, which reads this environment's files through :attr:`files`, and
        return its result: here at once; an SSH host answers the reads in bounded
        rounds, at most ``rounds`` (``None``: a scan's,
        :data:`~clanker.environment.ssh_scan.MAX_ROUNDS`; see
        :meth:`clanker.environment.ssh_scan.RemoteFiles.gather`). ``complete``: the
        work is a search, which must see every file a walk finds (on a host, a walk
        too large for one answer then takes further ones)."""
        ...

    def run_interactive(self, argv: tuple[str, ...], env: Mapping[str, str], cwd: str) -> int:
        """Run ``argv`` attached to the user's terminal and return its exit status.

        ``env`` is the complete child environment. Raises ``binary-unavailable``
        when ``argv[0]`` is not found. Call it from the main thread.
        """
        ...


@runtime_checkable
class LocatesAtOnce(Protocol):
    """An environment that finds commands without waiting (this machine): what
    needs only that, such as ``clanker harnesses`` with nothing to ask a version
    of, runs without an event loop."""

    def locate_now(self, commands: Iterable[str]) -> Mapping[str, str | None]:
        """:meth:`Environment.locate`, answered at once."""
        ...


@frozen(kw_only=True)
class HostContext:
    """The environment's bound pieces a provider call is handed: never a process,
    a target or a credential. Capability contexts extend it."""

    executor: CommandExecutor
    session_executor: SessionExecutor | None
    files: HostFiles = field(repr=False)
    environ: Mapping[str, str] = field(repr=False)

    def require_sessions(self, harness: str) -> SessionExecutor:
        """Return the session executor, or raise ``unsupported`` where the
        environment has none."""
        if self.session_executor is None:
            raise HarnessCapabilityError(
                ErrorKind.UNSUPPORTED, "this needs a stdio session", harness=harness
            )
        return self.session_executor
