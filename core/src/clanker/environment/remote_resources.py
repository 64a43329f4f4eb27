"""A launch's attention resources on an SSH host: installed, recorded, and removed.

A launch on a host needs there what a local launch has in its private
directory: the hook bridge (``hook.py`` and ``wire.py``), the provider's
interpreter, the hook command, the provider's generated configuration and a
state directory for the bridge. :meth:`RemoteResources.install` writes them,
in ONE execution of a standard-library ``python3`` program sent on stdin, into
a fresh launch directory under clanker's own directory on the host,
``~/.local/state/clanker/attention/<id>`` (:data:`HOST_ROOT`):

- clanker's directories (``clanker``, ``attention``, the launch's own) are real
  directories (never a link), owned by the remote user, mode 0700 (created so;
  an existing one that is not is refused, never repaired); the user's own
  ``~/.local`` and ``~/.local/state`` are only created when missing;
- every file is created afresh (``O_EXCL | O_NOFOLLOW``), 0600, or 0700 for an
  executable, and the hook command's ``@CLANKER_HOST_PYTHON@`` becomes the
  host's ``python3`` (the one running the installer, quoted);
- a resource's name may be a path below the launch directory: its directories
  are created 0700; a resource may also be a symbolic link (an absolute target,
  which is never followed or checked: a provider's mirror of a directory of the
  host's own);
- ``manifest.json`` (0600) records exactly what was written: each file's name,
  mode and SHA-256, each link's name and exact target, and the directories
  (the state directory among them).

:meth:`RemoteResources.cleanup` (again ONE execution) reads the manifest and
removes only what it lists, and of the state directory only the names the
hook bridge creates (:data:`clanker.attention.hook.STATE_FILES`), each after
checking it is still a regular file of the remote user with its recorded
mode; a link or other non-regular file planted in their place is refused and
left alone. A recorded link is removed only while it is still a link of the
remote user with exactly its recorded target (anything else there is refused);
a file or link is reached only through directories that are still real 0700
directories of the remote user (else it is refused), and the recorded
directories are removed deepest first, each only once it is empty. Unknown
files are never touched: while any is there (or a file
was refused) the launch directory and its manifest stay, so a later cleanup
can finish once they are gone. Both programs take an ``flock`` on
``attention/lock`` so installs and cleanups on one host do not interleave.

A provider whose harness finds hooks only in a plugin directory of its own
(Antigravity) also hands a :class:`HostPlugin`: installed or refreshed in the
same execution, under the same lock, before the launch directory. It is
persistent and clanker's alone: a fresh one is staged beside its place and
renamed into it; an existing one is refreshed only when it is a real directory
of the remote user holding clanker's exact ownership marker, and none of its
files is a link or another type; each changed file is replaced atomically and
files clanker does not know are kept. Anything else there is the user's: the
install then writes nothing at all and says so (:class:`UnownedPlugin`), and
the launch goes on without attention.

A launcher killed before it could clean up leaves its directory behind (its
credential is revoked by then: the grid retires the terminal of a dead
launcher). The manifest names the machine that launched (``owner``), and the
next install from that machine removes, in the same execution, each of its
directories that is not one of its running launches; another machine's are
never touched.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
from collections.abc import Iterable
from typing import Final

from attrs import field, frozen

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandExecutor, CommandRequest

__all__ = ["HOST_PYTHON", "HOST_ROOT", "Cleanup", "HostPlugin", "RemoteResources", "Resource",
           "UnownedPlugin"]

HOST_ROOT: Final = ".local/state/clanker/attention"
"""Where launch directories live on a host, below the remote user's home."""
HOST_PYTHON: Final = "@CLANKER_HOST_PYTHON@"
"""In an executable resource: replaced by the host's ``python3`` (shell-quoted)."""
MANIFEST: Final = "manifest.json"
STATE_DIR: Final = "state"

_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_MARKER: Final = re.compile(r"\.[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""A plugin's ownership marker may be a dot file."""
_RESERVED: Final = frozenset({MANIFEST, STATE_DIR})
_PART: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
"""One component of a resource's path (a Python package's ``__init__.py`` included)."""
_MAX_PATH: Final = 1024
_MAX_TARGET: Final = 4096
_MAX_OUTPUT: Final = 64 * 1024
_TIMEOUT: Final = 20.0
_NO_PYTHON: Final = 97
_SHELL: Final = f"command -v python3 >/dev/null 2>&1 || exit {_NO_PYTHON}; exec python3 -"


def _name(_: object, __: object, value: str) -> None:
    parts = value.split("/")
    if (len(value) > _MAX_PATH or parts[0] in _RESERVED
            or not all(_PART.fullmatch(part) for part in parts)):
        raise ValueError(f"name: {value!r} is not a plain path clanker may install")


def _link(_: object, __: object, value: str | None) -> None:
    if value is not None and not (value.startswith("/") and 0 < len(value) <= _MAX_TARGET
                                  and "\x00" not in value):
        raise ValueError(f"link: {value!r} is not an absolute target")


@frozen
class Resource:
    """One file (or symbolic link) to install in the launch directory.

    ``name`` is a path below it (``a/b/file``): its directories are created 0700 and
    recorded too. With ``link``, a symbolic link to that absolute target is made
    instead of a file (``data`` empty); cleanup removes it only while it is still a
    link of the remote user with exactly that target.
    """

    name: str = field(validator=_name)
    data: bytes = field(repr=False)
    executable: bool = False
    link: str | None = field(default=None, validator=_link)

    def __attrs_post_init__(self) -> None:
        if self.link is not None and (self.data or self.executable):
            raise ValueError("link: a link carries no data and no mode")


def _plugin_path(_: object, __: object, value: str) -> None:
    parts = value.split("/")
    if not all(_NAME.fullmatch(part) or _MARKER.fullmatch(part) for part in parts):
        raise ValueError(f"path: {value!r} is not a plain path below the home directory")


def _plugin_files(_: object, __: object, value: tuple[tuple[str, bytes, int], ...]) -> None:
    names = [name for name, _, _ in value]
    if not value or len(set(names)) != len(names) or any(
            not _NAME.fullmatch(name) and not _MARKER.fullmatch(name) for name in names):
        raise ValueError("files: plain, distinct file names are required")
    if any(mode & ~0o755 for _, _, mode in value):
        raise ValueError("files: a mode beyond 0755")


@frozen(kw_only=True)
class HostPlugin:
    """A persistent plugin of clanker's on the host, installed or refreshed with a
    launch's resources (see the module notes).

    It outlives the launch (every later run of the harness on the host loads it),
    so it must be inert without a launch's credentials; clanker never removes it.
    """

    path: str = field(validator=_plugin_path)
    """Its directory, relative to the remote user's home."""
    marker: str
    """The name of the ownership marker among ``files``: a directory whose marker is
    not exactly clanker's is the user's, never touched."""
    files: tuple[tuple[str, bytes, int], ...] = field(validator=_plugin_files, repr=False)
    """``(name, data, mode)`` in the order a fresh install writes them: the marker
    first, what the harness reads last."""

    def __attrs_post_init__(self) -> None:
        if self.marker not in {name for name, _, _ in self.files}:
            raise ValueError("marker: not one of the plugin's files")


class UnownedPlugin(HarnessCapabilityError):
    """The host holds something else where the persistent plugin belongs (the user's
    own directory, a link, or a file clanker did not write in place of one of its
    own): nothing was written, attention is unavailable for the launch."""


@frozen(kw_only=True)
class Cleanup:
    """What a cleanup did: the names it removed, and what it left and why."""

    removed: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    """Listed files that are no longer what was written (a link, another type, owner
    or mode): left alone."""
    unknown: tuple[str, ...] = ()
    """Files clanker did not write: left alone (so is the launch directory)."""

    @property
    def complete(self) -> bool:
        return not (self.refused or self.unknown)


# Shared by both programs: the host's own directories, checked the same way.
_COMMON: Final = r'''
import base64, fcntl, hashlib, json, os, shlex, stat, sys

REQ = json.loads(base64.b64decode("__REQUEST__").decode("utf-8"))
UID = os.geteuid()
HOME = os.environ.get("HOME", "")
ROOT = os.path.join(HOME, "__ROOT__")
FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC


def fail(message):
    sys.stdout.write(json.dumps({"ok": False, "error": message}))
    sys.exit(3)


def ours(path, mode=0o700):
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != UID or stat.S_IMODE(info.st_mode) != mode:
        fail(path + " is not a private directory of this user (0700, not a link)")
    return info


def own_directory(path):
    if ours(path) is None:
        os.mkdir(path, 0o700)
        os.chmod(path, 0o700)
        ours(path)


def lock():
    if not os.path.isabs(HOME):
        fail("the host gives this user no home directory")
    parent = os.path.dirname(os.path.dirname(ROOT))  # ~/.local/state: the user's
    os.makedirs(parent, 0o700, exist_ok=True)
    if not os.path.isdir(parent):
        fail(parent + " is not a directory")
    own_directory(os.path.dirname(ROOT))
    own_directory(ROOT)
    fd = os.open(os.path.join(ROOT, "lock"), os.O_RDWR | os.O_CREAT | FLAGS, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def launch_directory():
    name = REQ["id"]
    if not (name.isascii() and name.isalnum() and 0 < len(name) <= 64):
        fail("not a launch directory")
    return os.path.join(ROOT, name)
'''

# Removes one launch directory as its manifest lists it (see the module notes).
_CLEAN: Final = r'''

def regular(path, mode):
    # 'gone', 'ok' (a regular file of ours with ``mode``), or 'refused'
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "gone"
    if stat.S_ISREG(info.st_mode) and info.st_uid == UID and (
            mode is None or stat.S_IMODE(info.st_mode) == mode):
        return "ok"
    return "refused"


def link_verdict(path, target):
    # 'gone', 'ok' (still a link of ours to exactly ``target``), or 'refused'
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "gone"
    if stat.S_ISLNK(info.st_mode) and info.st_uid == UID and os.readlink(path) == target:
        return "ok"
    return "refused"


def private_dir(path):
    # 'gone', 'ok' (a real 0700 directory of ours), or 'refused'
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "gone"
    if stat.S_ISDIR(info.st_mode) and info.st_uid == UID and stat.S_IMODE(info.st_mode) == 0o700:
        return "ok"
    return "refused"


def parents_ok(directory, name):
    # every directory between the launch directory and ``name`` is still a real 0700
    # directory of ours, so nothing below is reached through a link
    parts = name.split("/")[:-1]
    return all(private_dir(os.path.join(directory, *parts[:i + 1])) == "ok"
               for i in range(len(parts)))


def plain(name, top_reserved=True):
    if not isinstance(name, str) or not 0 < len(name) <= 1024:
        return False
    parts = name.split("/")
    if top_reserved and parts[0] in ("manifest.json", "state"):
        return False
    return all(part and part not in (".", "..") and part.isprintable()
               and len(part) <= 128 for part in parts)


def read_manifest(directory):
    path = os.path.join(directory, "manifest.json")
    if regular(path, 0o600) != "ok":
        return None
    fd = os.open(path, os.O_RDONLY | FLAGS)
    with os.fdopen(fd, "rb") as source:
        data = source.read(1048577)
    if len(data) > 1048576:
        return None
    try:
        manifest = json.loads(data.decode("utf-8"))
    except ValueError:
        return None
    if not (isinstance(manifest, dict) and isinstance(manifest.get("files"), list)
            and isinstance(manifest.get("dirs"), list)):
        return None
    for item in manifest["files"]:
        if not (isinstance(item, dict) and plain(item.get("name"))):
            return None  # a path outside the launch directory: nothing is trusted
        if "link" in item:
            if not (isinstance(item["link"], str) and item["link"].startswith("/")):
                return None
        elif not isinstance(item.get("mode"), int):
            return None
    for name in manifest["dirs"]:
        if not (name == "state" or plain(name)):
            return None
    return manifest


def clean(directory, state_files):
    manifest = read_manifest(directory)
    if manifest is None:
        fail("the launch directory's manifest is missing or not clanker's")
    removed, refused = [], []
    listed = set()
    for item in manifest["files"]:
        name = item["name"]
        listed.add(name)
        path = os.path.join(directory, name)
        if not parents_ok(directory, name):
            verdict = "refused"
        elif "link" in item:
            verdict = link_verdict(path, item["link"])
        else:
            verdict = regular(path, item["mode"])
        if verdict == "ok":
            os.unlink(path)
            removed.append(name)
        elif verdict == "refused":
            refused.append(name)
    unknown = []
    state = os.path.join(directory, "state")
    if "state" in manifest["dirs"]:
        listed.add("state")
        try:
            info = os.lstat(state)
        except FileNotFoundError:
            info = None
        if info is not None:
            if stat.S_ISDIR(info.st_mode) and info.st_uid == UID:
                for name in state_files:
                    path = os.path.join(state, name)
                    verdict = regular(path, None)
                    if verdict == "ok":
                        os.unlink(path)
                        removed.append("state/" + name)
                    elif verdict == "refused":
                        refused.append("state/" + name)
                left = sorted(os.listdir(state))
                unknown += ["state/" + name for name in left
                            if "state/" + name not in refused]
                if not left:
                    os.rmdir(state)
                    removed.append("state")
            else:
                refused.append("state")
    # The provider's directories, deepest first, each only once it is empty.
    nested = sorted((name for name in manifest["dirs"] if name != "state"),
                    key=lambda name: (-name.count("/"), name))
    listed.update(nested)
    for name in nested:
        path = os.path.join(directory, name)
        verdict = private_dir(path) if parents_ok(directory, name) else "refused"
        if verdict == "refused":
            refused.append(name)
            continue
        if verdict == "gone":
            continue
        left = sorted(os.listdir(path))
        unknown += [name + "/" + entry for entry in left
                    if name + "/" + entry not in listed]
        if not left:
            os.rmdir(path)
            removed.append(name)
    unknown += sorted(name for name in os.listdir(directory)
                      if name not in listed and name != "manifest.json")
    if not (refused or unknown):
        os.unlink(os.path.join(directory, "manifest.json"))
        os.rmdir(directory)
    return {"removed": removed, "refused": refused, "unknown": unknown}
'''

_INSTALL: Final = _COMMON + _CLEAN + r'''

def sweep(current):
    # This machine's launch directories whose launcher is gone: those whose manifest
    # names REQ["owner"] and that are not among REQ["keep"] are cleaned up.
    swept = []
    for name in sorted(os.listdir(ROOT)):
        if name == current or name in REQ["keep"] or not (name.isascii() and name.isalnum()):
            continue
        directory = os.path.join(ROOT, name)
        try:
            info = os.lstat(directory)
        except OSError:
            continue
        if not (stat.S_ISDIR(info.st_mode) and info.st_uid == UID):
            continue
        manifest = read_manifest(directory)
        if manifest is None or manifest.get("owner") != REQ["owner"]:
            continue  # another machine's launch, or not clanker's to judge
        result = clean(directory, REQ["state_files"])
        if not (result["unknown"] or result["refused"]):
            swept.append(name)
    return swept


def same(path, data, mode):
    # a regular file of ours (not a link) holding ``data`` with ``mode``
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | FLAGS)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not (stat.S_ISREG(info.st_mode) and info.st_uid == UID
                and stat.S_IMODE(info.st_mode) == mode and info.st_size == len(data)):
            return False
        return os.read(fd, len(data) + 1) == data
    finally:
        os.close(fd)


def write_new(path, data, mode):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | FLAGS, mode)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def plugin():
    # The persistent plugin: installed whole (staged beside it, renamed into place) or
    # refreshed file by file (each replaced atomically, in order); unknown files kept.
    # 'unowned' when its directory, marker or a file of it is not clanker's.
    spec = REQ.get("plugin")
    if spec is None:
        return None
    directory = os.path.join(HOME, spec["path"])
    files = [(f["name"], base64.b64decode(f["data"]), f["mode"]) for f in spec["files"]]
    marker = [(data, mode) for name, data, mode in files if name == spec["marker"]][0]
    parent = os.path.dirname(directory)
    os.makedirs(parent, 0o755, exist_ok=True)
    if not os.path.exists(directory) and not os.path.islink(directory):
        import tempfile
        staging = tempfile.mkdtemp(prefix="." + os.path.basename(directory) + ".",
                                   suffix=".tmp", dir=parent)
        try:
            os.chmod(staging, 0o755)
            for name, data, mode in files:
                write_new(os.path.join(staging, name), data, mode)
            os.rename(staging, directory)  # fails on a directory that appeared meanwhile
            return "installed"
        except OSError:
            for name, _, _ in files:
                try:
                    os.unlink(os.path.join(staging, name))
                except OSError:
                    pass
            try:
                os.rmdir(staging)
            except OSError:
                pass
    info = os.lstat(directory)
    if not (stat.S_ISDIR(info.st_mode) and info.st_uid == UID):
        return "unowned"
    if not same(os.path.join(directory, spec["marker"]), *marker):
        return "unowned"  # the user's own directory of that name (or a link to one)
    for name, _, _ in files:
        try:
            if not stat.S_ISREG(os.lstat(os.path.join(directory, name)).st_mode):
                return "unowned"  # a link or another type in place of clanker's file
        except FileNotFoundError:
            pass
    state = "current"
    for name, data, mode in files:
        path = os.path.join(directory, name)
        if same(path, data, mode):
            continue
        temporary = os.path.join(directory, "." + name + "." + os.urandom(6).hex() + ".tmp")
        try:
            write_new(temporary, data, mode)
            os.replace(temporary, path)
        except OSError:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise
        state = "refreshed"
    return state


def install():
    lock()
    try:
        installed = plugin()
    except OSError as error:
        fail("the host's plugin could not be written: " + (error.strerror or "error"))
    if installed == "unowned":
        sys.stdout.write(json.dumps({"ok": True, "plugin": "unowned"}))
        return
    directory = launch_directory()
    swept = sweep(REQ["id"])
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        fail(directory + " exists already")
    os.chmod(directory, 0o700)
    state = os.path.join(directory, "state")
    written = []  # (path, is a directory), in the order they were made
    recorded = []
    dirs = []
    try:
        python = shlex.quote(sys.executable)
        for item in REQ["files"]:
            parts = item["name"].split("/")
            for depth in range(1, len(parts)):
                relative = "/".join(parts[:depth])
                if relative in dirs:
                    continue
                path = os.path.join(directory, relative)
                os.mkdir(path, 0o700)
                written.append((path, True))
                os.chmod(path, 0o700)
                dirs.append(relative)
            path = os.path.join(directory, item["name"])
            if item.get("link") is not None:
                os.symlink(item["link"], path)
                written.append((path, False))
                recorded.append({"name": item["name"], "link": item["link"]})
                continue
            data = base64.b64decode(item["data"])
            mode = 0o700 if item["executable"] else 0o600
            if item["executable"]:
                data = data.replace(b"__PYTHON_MARK__", python.encode("utf-8"))
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | FLAGS, mode)
            written.append((path, False))
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                os.fchmod(out.fileno(), mode)
            recorded.append({"name": item["name"], "mode": mode,
                             "sha256": hashlib.sha256(data).hexdigest()})
        os.mkdir(state, 0o700)
        os.chmod(state, 0o700)
        written.append((state, True))
        manifest = json.dumps({"v": 1, "owner": REQ["owner"], "files": recorded,
                               "dirs": ["state", *dirs]})
        fd = os.open(os.path.join(directory, "manifest.json"),
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL | FLAGS, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(manifest)
    except OSError as error:
        for path, is_directory in reversed(written):  # only what this program created
            try:
                os.rmdir(path) if is_directory else os.unlink(path)
            except OSError:
                pass
        try:
            os.rmdir(directory)
        except OSError:
            pass
        fail("the launch directory could not be written: " + (error.strerror or "error"))
    sys.stdout.write(json.dumps({"ok": True, "directory": directory, "python": sys.executable,
                                 "swept": swept, "plugin": installed}))


install()
'''.replace("__PYTHON_MARK__", HOST_PYTHON)

_CLEANUP: Final = _COMMON + _CLEAN + r'''

def cleanup():
    lock()
    directory = launch_directory()
    if ours(directory) is None:
        sys.stdout.write(json.dumps({"ok": True, "removed": [], "refused": [], "unknown": []}))
        return
    sys.stdout.write(json.dumps({"ok": True, **clean(directory, REQ["state_files"])}))


cleanup()
'''


class RemoteResources:
    """Installs and removes launch directories on one host (see the module notes)."""

    def __init__(self, executor: CommandExecutor, home: str) -> None:
        """``home`` is the remote user's home as the host's login environment says."""
        if not home.startswith("/"):
            raise HarnessCapabilityError(ErrorKind.NOT_CONFIGURED,
                                         "the host gives this user no home directory")
        self._executor = executor
        self._home = home.rstrip("/") or "/"

    def new_directory(self) -> tuple[str, str]:
        """A fresh launch id and the directory :meth:`install` will create for it."""
        launch = secrets.token_hex(8)
        return launch, f"{self._home}/{HOST_ROOT}/{launch}"

    async def install(self, launch: str, resources: Iterable[Resource], *, owner: str,
                      keep: Iterable[str] = (), state_files: Iterable[str] = (),
                      plugin: HostPlugin | None = None) -> str:
        """Write ``resources`` into launch ``launch``'s new directory (one execution);
        return the host's ``python3`` that ran the installer.

        ``owner`` names the machine that launches (recorded in the manifest). The
        same execution first removes, as :meth:`cleanup` would (``state_files``
        being the hook bridge's names), every launch directory of that ``owner``
        not among ``keep`` (the ids of its launches still running): those of
        launchers killed before they could clean up.

        ``plugin``, when given, is installed or refreshed first, under the same lock;
        when the host holds something else in its place, nothing at all is written and
        :class:`UnownedPlugin` is raised.

        Raises ``not-configured`` without ``python3`` on the host, ``command-failed``
        when the directory could not be made safely (its message says why), and the
        transport's errors.
        """
        resources = list(resources)
        names = {r.name for r in resources}
        if len(names) != len(resources):
            raise ValueError("resources: two files of one name")
        directories = {name.rsplit("/", depth)[0] for name in names
                       for depth in range(1, name.count("/") + 1)}
        if names & directories:
            raise ValueError("resources: a file where another's directory would be")
        files = [{"name": r.name, "data": base64.b64encode(r.data).decode("ascii"),
                  "executable": r.executable, "link": r.link} for r in resources]
        request: dict[str, object] = {
            "id": launch, "files": files, "owner": owner, "keep": sorted(set(keep)),
            "state_files": list(state_files)}
        if plugin is not None:
            request["plugin"] = {"path": plugin.path, "marker": plugin.marker, "files": [
                {"name": name, "data": base64.b64encode(data).decode("ascii"), "mode": mode}
                for name, data, mode in plugin.files]}
        answer = await self._run(_INSTALL, request)
        if answer.get("plugin") == "unowned":
            assert plugin is not None
            raise UnownedPlugin(ErrorKind.NOT_CONFIGURED, (
                f"~/{plugin.path} on the host is not clanker's; it is left as it is, so "
                "this agent's state is not shown"))
        python = answer.get("python")
        if not isinstance(python, str) or not python.startswith("/"):
            raise HarnessCapabilityError(ErrorKind.PARSE_FAILURE,
                                         "the host's installer answered without its python3")
        return python

    async def cleanup(self, launch: str, state_files: Iterable[str]) -> Cleanup:
        """Remove launch ``launch``'s directory as its manifest lists it (one execution)."""
        answer = await self._run(_CLEANUP, {"id": launch, "state_files": list(state_files)})

        def names(key: str) -> tuple[str, ...]:
            value = answer.get(key)
            return tuple(str(v) for v in value) if isinstance(value, list) else ()

        return Cleanup(removed=names("removed"), refused=names("refused"),
                       unknown=names("unknown"))

    async def _run(self, program: str, request: dict[str, object]) -> dict[str, object]:
        payload = base64.b64encode(json.dumps(request).encode("utf-8")).decode("ascii")
        source = program.replace("__ROOT__", HOST_ROOT).replace("__REQUEST__", payload)
        result = await self._executor.run(CommandRequest(
            command="sh", args=("-c", _SHELL), stdin=source.encode("utf-8"),
            timeout=_TIMEOUT, max_output_bytes=_MAX_OUTPUT))
        if result.exit_code == _NO_PYTHON:
            raise HarnessCapabilityError(ErrorKind.NOT_CONFIGURED,
                                         "attention on this host needs python3 on its PATH")
        try:
            answer = json.loads(result.stdout)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise HarnessCapabilityError(ErrorKind.COMMAND_FAILED,
                                         "the host's attention directory could not be handled")
        if answer.get("ok") is not True:
            error = answer.get("error")
            raise HarnessCapabilityError(
                ErrorKind.COMMAND_FAILED,
                str(error)[:300] if isinstance(error, str) else "the host refused")
        return answer
