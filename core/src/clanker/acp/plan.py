"""The spawn plan cache: how ``clanker coder --harness ID`` last started that
harness's ACP server, so that the next run's early start (:mod:`clanker.acp.early`)
can start it with the standard library alone, as it does an ``--agent-command``.

The full path (:meth:`CoderService.open`) writes the plan once the server has
answered ``initialize``: the argv, the environment's difference from the host's
(:func:`clanker.envvars.host_environ` with ``PWD``), the working directory when
either names it, and what proves it current without the registry: clanker's
version, the stat (``mtime_ns``, size) of every module of clanker and of the
harness's plugin that run had loaded, the resolved executable's path and stat
(device, inode, ``mtime_ns``, size), the accounts file's and the configuration
file's stat (or their absence), and ``PATH``, ``HOME`` and the plugin lists
(``CLANKER_LOAD_PLUGINS``, ``CLANKER_DISABLE_PLUGINS``). It is never written for
an agent with stored secrets, nor where the launch path added anything beyond the
server's own variables (a managed account's home, say).

The file is ``coder-plan-ID.json`` in clanker's cache directory, private
(0600, written whole and renamed into place), strict JSON with a version.
:func:`read` ignores one that is not a regular file of this user's with no
access for others, larger than :data:`MAX_BYTES`, not this version's, or not
exactly this shape, and any key that no longer holds: never an error. Its
directory is found the way ``clanker_paths`` places it on Linux; elsewhere the
early start finds no plan, and the harness starts through the library.

A plan is only a guess: :func:`clanker.acp.early.take` still compares the argv,
the final environment, the directory and the first line before the run takes
the agent over, and stops it otherwise. A stale plan costs the head start,
never a different agent.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

__all__ = ["MAX_BYTES", "VERSION", "Plan", "plan_path", "read", "write"]

VERSION: Final = 1
MAX_BYTES: Final = 256 * 1024
KEYED_VARIABLES: Final = ("PATH", "HOME", "CLANKER_LOAD_PLUGINS", "CLANKER_DISABLE_PLUGINS")
"""The variables a plan holds only under: they choose the executable and the plugin."""
_HARNESS_ID: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_FIELDS: Final = frozenset({"version", "clanker", "harness", "account", "argv", "set",
                            "unset", "cwd", "files", "executable", "variables"})


class Plan:
    """A harness's server start, as read back: its argv and environment in ``cwd``."""

    def __init__(self, argv: tuple[str, ...], env: dict[str, str]) -> None:
        self.argv = argv
        self.env = env


def cache_directory(environ: Mapping[str, str]) -> str:
    """clanker's cache directory, where ``clanker_paths`` puts it on Linux."""
    home = environ.get("CLANKER_HOME")
    if home:
        return os.path.join(os.path.abspath(os.path.expanduser(home)), "cache")
    base = environ.get("XDG_CACHE_HOME", "").strip() or os.path.expanduser("~/.cache")
    return os.path.join(base, "clanker")


def plan_path(directory: str, harness: str) -> str | None:
    """The plan file of ``harness`` in ``directory`` (``None`` for an id unfit for a
    file name)."""
    if not _HARNESS_ID.fullmatch(harness):
        return None
    return os.path.join(directory, f"coder-plan-{harness}.json")


def _version() -> str:
    import clanker

    return str(clanker.__version__)


def _file_key(path: str) -> list[Any]:
    try:
        found = os.stat(path)
    except (OSError, ValueError):  # gone, unreadable, or not a path at all
        return [path, None, None]
    return [path, found.st_mtime_ns, found.st_size]


def _executable_key(path: str) -> list[Any] | None:
    try:
        found = os.stat(path)
    except (OSError, ValueError):  # gone, unreadable, or not a path at all
        return None
    return [path, found.st_dev, found.st_ino, found.st_mtime_ns, found.st_size]


def loaded_modules(prefixes: Iterable[str]) -> list[str]:
    """The files of the loaded modules of clanker and of the packages ``prefixes``."""
    tops = {"clanker", *prefixes}
    files = set()
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in tops:
            path = getattr(module, "__file__", None)
            if isinstance(path, str):
                files.add(path)
    return sorted(files)


def build(*, harness: str, account: str | None, argv: Sequence[str], env: Mapping[str, str],
          cwd: str, environ: Mapping[str, str], executable: str, modules: Iterable[str],
          files: Iterable[str]) -> dict[str, Any] | None:
    """The plan of ``argv`` started with ``env`` in ``cwd`` (``environ``: the host's
    variables it was built from), or ``None`` when the executable is gone."""
    from clanker.envvars import host_environ

    base = {**host_environ(environ), "PWD": cwd}
    changed = {name: value for name, value in env.items() if base.get(name) != value}
    unset = sorted(name for name in base if name not in env)
    executable_key = _executable_key(executable)
    if executable_key is None:
        return None
    named = any(cwd in value for value in (*argv, *changed.values())) and cwd != os.sep
    return {
        "version": VERSION, "clanker": _version(), "harness": harness, "account": account,
        "argv": list(argv), "set": changed, "unset": unset, "cwd": cwd if named else None,
        "files": [_file_key(path) for path in sorted({*modules, *files})],
        "executable": executable_key,
        "variables": {name: environ.get(name) for name in KEYED_VARIABLES},
    }


def write(path: str, plan: Mapping[str, Any]) -> bool:
    """Write ``plan`` at ``path`` unless it is there already (private, whole, renamed
    into place); return whether it was written. Errors are the caller's."""
    import json

    data = json.dumps(plan, sort_keys=True, separators=(",", ":")).encode()
    if len(data) > MAX_BYTES:
        return False
    if _read_bytes(path) == data:
        return False
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return True


def _read_bytes(path: str) -> bytes | None:
    """The file's bytes when it is a regular file of this user's, private and within
    :data:`MAX_BYTES`; else ``None``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        found = os.fstat(fd)
        if (not stat.S_ISREG(found.st_mode) or found.st_uid != os.getuid()
                or found.st_mode & 0o077 or found.st_size > MAX_BYTES):
            return None
        chunks = []
        size = 0
        while chunk := os.read(fd, MAX_BYTES + 1 - size):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_BYTES:
                return None
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def read(harness: str, account: str | None, cwd: str, environ: Mapping[str, str]
         ) -> Plan | None:
    """``harness``'s plan for a run in ``cwd`` with ``account`` and ``environ``, when
    every key still holds; else ``None`` (never raises for what the file holds)."""
    path = plan_path(cache_directory(environ), harness)
    raw = None if path is None else _read_bytes(path)
    if raw is None:
        return None
    return parse(raw, harness, account, cwd, environ)


def parse(raw: bytes, harness: str, account: str | None, cwd: str,
          environ: Mapping[str, str]) -> Plan | None:
    """:func:`read`'s check of the file's bytes ``raw``."""
    import json

    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not (isinstance(data, dict) and data.keys() == _FIELDS
            and _holds(data, harness, account, cwd, environ)):
        return None
    from clanker.envvars import host_environ

    env = {**host_environ(environ), "PWD": cwd, **data["set"]}
    for name in data["unset"]:
        env.pop(name, None)
    return Plan(tuple(data["argv"]), env)


def _holds(data: dict[str, Any], harness: str, account: str | None, cwd: str,
           environ: Mapping[str, str]) -> bool:
    """Whether the plan ``data`` is of this shape, for this run, and every key holds."""
    argv, changed, unset = data["argv"], data["set"], data["unset"]
    return (data["version"] == VERSION and data["clanker"] == _version()
            and data["harness"] == harness and data["account"] == account
            and isinstance(argv, list) and bool(argv) and _strings(argv, empty=False)
            and isinstance(changed, dict) and _strings(changed, empty=False)
            and _strings(changed.values(), empty=True)
            and isinstance(unset, list) and _strings(unset, empty=False)
            and data["cwd"] in (None, cwd)
            and data["variables"] == {name: environ.get(name) for name in KEYED_VARIABLES}
            and _files_hold(data["files"]) and _executable_holds(data["executable"]))


def _strings(values: Iterable[object], *, empty: bool) -> bool:
    return all(isinstance(value, str) and (empty or value) and "\0" not in value
               for value in values)


def _files_hold(files: object) -> bool:
    if not isinstance(files, list):
        return False
    for entry in files:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
                and "\0" not in entry[0]):
            return False
        if _file_key(entry[0]) != entry:
            return False
    return True


def _executable_holds(key: object) -> bool:
    if not (isinstance(key, list) and len(key) == 5 and isinstance(key[0], str)
            and "\0" not in key[0]):
        return False
    return _executable_key(key[0]) == key
