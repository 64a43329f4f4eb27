"""This machine as an :class:`~clanker.environment.Environment`."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, TypeVar

from clanker.descriptor import Transport
from clanker.envvars import host_environ

if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

    from clanker.environment.files import Candidate, FileSample
    from clanker.environment.witness import FileStat, Witness
    from clanker.execution import LocalTransport

__all__ = ["LocalEnvironment", "LocalFiles", "ThisMachine", "host_environ", "which"]

_T = TypeVar("_T")


def which(command: str, search_path: str) -> str | None:
    """:func:`shutil.which` on this (POSIX) machine, without importing :mod:`shutil`
    (and its archive modules) for a lookup: the first ``search_path`` entry
    holding ``command`` as an executable that is not a directory; a command
    with a directory part is checked as it is."""
    if os.path.dirname(command):
        return command if _executable(command) else None
    if not search_path:
        return None
    seen: set[str] = set()
    for directory in search_path.split(os.pathsep):
        if directory in seen:
            continue
        seen.add(directory)
        candidate = os.path.join(directory, command)
        if _executable(candidate):
            return candidate
    return None


def _executable(path: str) -> bool:
    return os.path.exists(path) and os.access(path, os.F_OK | os.X_OK) and not os.path.isdir(path)


class LocalFiles:
    """This machine's files, read the bounded way every store reader shares."""

    def walk(
        self,
        root: str | os.PathLike[str],
        *,
        depth: int,
        accept_file: Callable[[str], bool],
        accept_dir: Callable[[int, str], bool] = lambda level, name: True,
        witness: Witness | None = None,
    ) -> tuple[list[Candidate], bool]:
        from pathlib import Path

        from clanker.environment.files import find_files

        return find_files(Path(root), depth=depth, accept_file=accept_file,
                          accept_dir=accept_dir, witness=witness)

    def sample(
        self,
        path: str | os.PathLike[str],
        *,
        head_bytes: int,
        tail_bytes: int,
        stat: os.stat_result | FileStat | None = None,
    ) -> FileSample:
        from pathlib import Path

        from clanker.environment.files import read_sample

        return read_sample(Path(path), head_bytes=head_bytes, tail_bytes=tail_bytes, stat=stat)

    def read_small(self, path: str | os.PathLike[str], limit: int) -> bytes | None:
        from pathlib import Path

        from clanker.storage import read_regular_file

        # Its refusals (not a regular file, over the limit, unreadable) all mean
        # "nothing to read" here.
        try:
            return read_regular_file(Path(path), max_bytes=limit)
        except (OSError, ValueError):
            return None

    def stat(self, path: str | os.PathLike[str], *, follow: bool = True) -> os.stat_result | None:
        try:
            return os.stat(path, follow_symlinks=follow)
        except (OSError, ValueError):
            return None

    def realpath(self, path: str | os.PathLike[str]) -> str:
        return os.path.realpath(path)

    def confined(self, path: str | os.PathLike[str], roots: Iterable[os.PathLike[str]]) -> bool:
        from pathlib import Path

        from clanker.environment.files import confined

        return confined(Path(path), tuple(Path(root) for root in roots))

    def sqlite(
        self, path: str | os.PathLike[str], *, harness: str
    ) -> AbstractContextManager[sqlite3.Connection]:
        from pathlib import Path

        from clanker.environment.sqlite import open_readonly

        return open_readonly(Path(path), harness=harness)

    def which(self, command: str, search_path: str | None) -> str | None:
        return which(command, os.defpath if search_path is None else search_path)


class ThisMachine:
    """What every environment standing for this machine answers alike, whatever runs
    its commands: its files (in ``_files``) are read as they are asked for, caches
    stay where they are, and a path's canonical form is its real path."""

    name = "local"
    transport = Transport.LOCAL
    _files: LocalFiles

    @property
    def files(self) -> LocalFiles:
        return self._files

    async def gather(self, work: Callable[[], Awaitable[_T]], *, rounds: int | None = None,
                     complete: bool = False) -> _T:
        return await work()  # this machine's files are read as they are asked for

    def cache_dir(self, root: Path) -> Path:
        return root

    def canonical_path(self, path: str) -> str:
        return self._files.realpath(path)


class LocalEnvironment(ThisMachine):
    """Harnesses on this machine: child processes, local files, this terminal.

    ``environ`` is what children start from (default: this process's
    environment); clanker credentials in it are never passed on.
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = host_environ(os.environ if environ is None else environ)
        self._transport: LocalTransport | None = None  # made on first use: it needs asyncio
        self._files = LocalFiles()

    def __repr__(self) -> str:
        return "LocalEnvironment()"

    @property
    def executor(self) -> LocalTransport:
        if self._transport is None:
            from clanker.execution import LocalTransport

            self._transport = LocalTransport(self._environ)
        return self._transport

    @property
    def session_executor(self) -> LocalTransport:
        return self.executor

    @property
    def environ(self) -> Mapping[str, str]:
        return self._environ

    async def locate(self, commands: Iterable[str]) -> dict[str, str | None]:
        return self.locate_now(commands)

    def locate_now(self, commands: Iterable[str]) -> dict[str, str | None]:
        """:meth:`locate`, answered at once (this machine needs no round trip)."""
        search = self._environ.get("PATH", os.defpath)
        return {command: self._files.which(command, search) for command in commands}

    def run_interactive(self, argv: tuple[str, ...], env: Mapping[str, str], cwd: str) -> int:
        from clanker.environment.foreground import run_foreground

        return run_foreground(argv, env, cwd)
