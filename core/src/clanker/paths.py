"""Where clanker keeps its files.

Every directory comes from platformdirs, unless ``CLANKER_HOME`` is set: then
all of them live under it (``config``, ``cache``, ``state``, ``run``), so a
test or a script can isolate everything with one variable.

The runtime directory (the grid's socket, launch-owned hook directories) is
the one another local user could interfere with: without ``XDG_RUNTIME_DIR``
it falls back to a predictable name under the temporary directory, which
anyone can create first. So it is resolved only when it is used (a command
that never touches the grid never looks at it), and checked each time: a real
directory, ours, that neither group nor others can write to (what would let
them plant or replace an entry; what lives in it, the grid's directory and the
launch directories, must be 0700, which the grid checks). An unsafe one raises
:class:`UnsafeRuntimeDirectoryError`, a grid path error (exit 18), naming the
directory and what is wrong with it.
"""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Mapping
from pathlib import Path

from attrs import field, frozen

from clanker.grid.errors import GridPathError

__all__ = ["ClankerPaths", "UnsafeRuntimeDirectoryError", "clanker_paths", "runtime_directory"]

APP_NAME = "clanker"


class UnsafeRuntimeDirectoryError(GridPathError):
    """The runtime directory is not safe to use; the message names it and says why."""


@frozen(kw_only=True)
class ClankerPaths:
    """The directory roots clanker uses. None of them is created here.

    ``runtime`` is given explicitly, or (``None``) resolved through
    platformdirs when it is read; reading it checks it (see
    :func:`runtime_directory`).
    """

    config: Path
    cache: Path
    state: Path
    _runtime: Path | None = field(default=None, alias="runtime")

    @property
    def runtime(self) -> Path:
        """The runtime directory, checked but not created.

        Raises :class:`UnsafeRuntimeDirectoryError` when it exists and is not
        a private directory of ours, or when platformdirs refuses its fallback.
        """
        return runtime_directory(self, create=False)

    @property
    def grid_socket(self) -> Path:
        """Where a running grid listens (``<runtime>/grid/grid.sock``): known here, so
        asking whether a grid may run imports nothing of the grid."""
        return self.runtime / "grid" / "grid.sock"


def clanker_paths(environ: Mapping[str, str] | None = None) -> ClankerPaths:
    """Resolve the directory roots for ``environ`` (default: this process's)."""
    environ = os.environ if environ is None else environ
    home = environ.get("CLANKER_HOME")
    if home:
        root = Path(home).expanduser().absolute()
        return ClankerPaths(
            config=root / "config", cache=root / "cache", state=root / "state", runtime=root / "run"
        )
    import platformdirs  # deferred: only commands that touch files pay for it

    dirs = platformdirs.PlatformDirs(APP_NAME, appauthor=False)
    return ClankerPaths(
        config=Path(dirs.user_config_dir),
        cache=Path(dirs.user_cache_dir),
        state=Path(dirs.user_state_dir),
    )


def _platform_runtime(*, create: bool) -> Path:
    import platformdirs

    dirs = platformdirs.PlatformDirs(APP_NAME, appauthor=False, ensure_exists=create)
    with warnings.catch_warnings():
        # Without XDG_RUNTIME_DIR platformdirs warns and falls back to a per-user
        # directory under /tmp, which it refuses when it is not the user's.
        warnings.simplefilter("ignore")
        try:
            return Path(dirs.user_runtime_dir)
        except OSError as exc:
            raise UnsafeRuntimeDirectoryError(
                f"the runtime directory cannot be used: {exc}") from exc


def _problem(info: os.stat_result) -> str | None:
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    if info.st_uid != os.geteuid():
        return f"belongs to uid {info.st_uid}, not to you (uid {os.geteuid()})"
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        return f"has mode {mode:04o}: other users can write to it"
    return None


def runtime_directory(paths: ClankerPaths, *, create: bool) -> Path:
    """Return ``paths``'s runtime directory once it is safe to use.

    Safe means a real directory (not a link), owned by this user, that group
    and others cannot write to. With ``create`` a missing one is created 0700
    (and, without ``XDG_RUNTIME_DIR``, its per-user base under /tmp, by
    platformdirs); without it a missing directory is returned unchecked:
    whoever creates it must call this with ``create``. Raises
    :class:`UnsafeRuntimeDirectoryError` naming the directory and the problem.
    Nothing that exists is ever chmod-ed or chown-ed: clanker does not repair
    what it cannot vouch for.
    """
    explicit = paths._runtime
    directory = explicit or _platform_runtime(create=create)
    if create:
        try:
            directory.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise UnsafeRuntimeDirectoryError(
                f"the runtime directory {directory} cannot be created ({exc.strerror})") from exc
        else:
            os.chmod(directory, 0o700)  # ours, just made: the umask may have taken bits away
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        if create:
            raise UnsafeRuntimeDirectoryError(
                f"the runtime directory {directory} vanished as it was created") from None
        return directory
    except OSError as exc:
        raise UnsafeRuntimeDirectoryError(
            f"the runtime directory {directory} cannot be checked ({exc.strerror})") from exc
    problem = _problem(info)
    if problem is not None:
        advice = ("it must be a directory of yours that only you can write to" if explicit
                  is not None else "set XDG_RUNTIME_DIR to a directory of yours with mode 0700")
        raise UnsafeRuntimeDirectoryError(f"the runtime directory {directory} {problem}; {advice}")
    return directory
