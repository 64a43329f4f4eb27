"""Antigravity attention: a persistent, inert plugin of clanker's in agy's plugin directory.

**Never run against a real agy**: agy cannot be installed on this machine. Built
from the spec (agy 1.2.12/1.2.14: the Agy notes, "Authoritative events per
provider", "Remaining limitations") and public descriptions of agy's plugins and
hooks (docs/harnesses/agy.md, "Attention"):

- agy reads lifecycle hooks from installed plugins: a directory under
  ``~/.gemini/config/plugins/<name>/`` holding a ``hooks.json`` (and the
  ``plugin.json`` manifest the official plugin page requires). agy has no
  launch-scoped hook flag or variable, so the plugin is **persistent**: it stays
  installed and every agy the user runs loads it.
- It is **inert** outside clanker's launches: each hook runs the plugin's own
  guard (``/bin/sh guard.sh <Event>``), which forwards the payload to
  ``$CLANKER_ATTENTION_COMMAND`` only when every ``CLANKER_ATTENTION_*``
  variable is set, names clanker's agy interpreter and its files still exist;
  otherwise, and always after forwarding, it prints ``{}`` and exits 0.
- :meth:`AgyAttention.prepare` installs or refreshes it (atomically,
  idempotently) before each attention launch and adds nothing to the launch:
  the attachment already puts the variables in agy's environment. It refuses
  (attention unavailable, never a failed launch) when the directory exists and
  is not clanker's: ownership is an exact marker file. clanker never removes the
  plugin (on release, shutdown or startup): agy sessions outlive the launch that
  refreshed it, and every clanker process shares it. Files it does not know in
  the directory are left alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path, PurePath, PurePosixPath
from typing import TYPE_CHECKING, Final

from clanker.attention.capability import (
    TRANSPORT_VARIABLE,
    AttachmentContext,
    AttachmentPlan,
    Declined,
    hook_command,
)
from clanker.stores import home_directory

if TYPE_CHECKING:
    from clanker.attention.capability import HostPlugin

__all__ = [
    "GUARD",
    "HOOK_EVENTS",
    "HOOK_TIMEOUT_SECONDS",
    "INTERPRETER",
    "MARKER",
    "MARKER_FILE",
    "PLUGIN_NAME",
    "PLUGIN_PATH",
    "AgyAttention",
    "install_plugin",
    "plugin_dir",
    "plugin_files",
]

INTERPRETER: Final = Path(__file__).with_name("attention_interpreter.py")
GUARD: Final = Path(__file__).with_name("attention_guard.sh")

PLUGIN_NAME: Final = "clanker-grid-attention"
"""The plugin's directory and manifest name (the spec's)."""
MARKER_FILE: Final = ".clanker-owned"
MARKER: Final = b"clanker-grid-attention: installed and refreshed by clanker; safe to delete\n"
"""The ownership marker: a directory without exactly this file is never touched."""
GUARD_FILE: Final = "guard.sh"
HOOKS_FILE: Final = "hooks.json"
MANIFEST_FILE: Final = "plugin.json"

HOOK_EVENTS: Final = ("PreInvocation", "PreToolUse", "PostToolUse", "Stop")
"""Every native event the interpreter reads."""
ASK_MATCHER: Final = "^(ask_question|ask_permission|notify_user)$"
"""Tool events run the hook only for the tools that wait for the user; every other
tool keeps agy's own permission handling untouched."""
HOOK_TIMEOUT_SECONDS: Final = 5
"""The bridge ends within about 2.5 s; the rest is room for starting two processes."""

_TOOL_EVENTS: Final = frozenset({"PreToolUse", "PostToolUse"})


PLUGIN_PATH: Final = f".gemini/config/plugins/{PLUGIN_NAME}"
"""The plugin's directory, relative to the home directory."""


def plugin_dir(environ: Mapping[str, str]) -> Path | None:
    """``~/.gemini/config/plugins/clanker-grid-attention``; ``None`` without a home."""
    home = home_directory(environ)
    return None if home is None else Path(home) / PLUGIN_PATH


def _hooks(guard: PurePath) -> dict[str, object]:
    """``hooks.json``: one named hook; tool events as matcher groups, the rest flat."""
    events: dict[str, object] = {}
    for event in HOOK_EVENTS:
        handler = {
            "type": "command",
            "command": f"/bin/sh {shlex.quote(str(guard))} {event}",
            "timeout": HOOK_TIMEOUT_SECONDS,
        }
        if event in _TOOL_EVENTS:
            events[event] = [{"matcher": ASK_MATCHER, "hooks": [handler]}]
        else:
            events[event] = [handler]
    return {PLUGIN_NAME: events}


def _json(document: object) -> bytes:
    return (json.dumps(document, indent=2) + "\n").encode("utf-8")


def plugin_files(directory: PurePath) -> dict[str, bytes]:
    """Every file of the plugin installed at ``directory``, in the order they are written:
    the marker first (ownership before content), ``hooks.json`` last (what it runs
    exists before agy can read it)."""
    manifest = {
        "name": PLUGIN_NAME,
        "description": "clanker attention: reports agent state to clanker's grid during "
                       "clanker launches; inert otherwise.",
    }
    return {
        MARKER_FILE: MARKER,
        GUARD_FILE: GUARD.read_bytes(),
        MANIFEST_FILE: _json(manifest),
        HOOKS_FILE: _json(_hooks(directory / GUARD_FILE)),
    }


_MODES: Final = {GUARD_FILE: 0o755}
_FILE_MODE: Final = 0o644
_DIR_MODE: Final = 0o755


class _Unowned(Exception):
    """The directory exists and is not clanker's."""


def _owned(directory: Path) -> bool:
    """Whether ``directory`` is a real directory holding clanker's exact marker.

    Raises :class:`_Unowned` when something else is there; ``False`` when nothing is.
    """
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise _Unowned
    try:
        fd = os.open(directory / MARKER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        raise _Unowned from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _Unowned
        marker = os.read(fd, len(MARKER) + 1)
    finally:
        os.close(fd)
    if marker != MARKER:
        raise _Unowned
    return True


def _current(path: Path, data: bytes, mode: int) -> bool:
    """Whether ``path`` is a regular file (not a link) holding ``data`` with ``mode``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or stat.S_IMODE(info.st_mode) != mode:
            return False
        if info.st_size != len(data):
            return False
        return os.read(fd, len(data) + 1) == data
    finally:
        os.close(fd)


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Create ``path`` (never through a link) holding ``data``, flushed to disk."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)  # the umask does not decide
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace(path: Path, data: bytes, mode: int) -> None:
    """Replace one file atomically: a temporary beside it, then a rename over it."""
    temporary = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")
    try:
        _write_new(temporary, data, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _install_fresh(directory: Path, files: dict[str, bytes]) -> bool:
    """Stage the whole plugin beside ``directory`` and rename it into place.

    ``True`` once clanker's plugin is there (ours, or an identical one another
    clanker installed first); raises :class:`_Unowned` when someone else's
    directory appeared meanwhile.
    """
    parent = directory.parent
    staging = Path(tempfile.mkdtemp(prefix=f".{PLUGIN_NAME}.", suffix=".tmp", dir=parent))
    moved = False
    try:
        os.chmod(staging, _DIR_MODE)
        for name, data in files.items():
            _write_new(staging / name, data, _MODES.get(name, _FILE_MODE))
        try:
            # Fails when a non-empty directory appeared meanwhile (another clanker's
            # finished install). rename(2) would replace an empty one created in the
            # instant since the check: nothing of anyone's is lost then.
            os.rename(staging, directory)
        except OSError:
            if not _owned(directory):
                raise
            return False  # another clanker got there first: refresh what it wrote
        moved = True
        return True
    finally:
        if not moved:
            for name in files:
                with contextlib.suppress(OSError):
                    os.unlink(staging / name)
            with contextlib.suppress(OSError):
                os.rmdir(staging)


def install_plugin(directory: Path) -> bool:
    """Install or refresh clanker's plugin at ``directory``; ``False`` if it is not ours.

    Idempotent: a current plugin is left as it is (nothing written). A missing one
    is staged in full beside it and renamed into place; a stale one of clanker's
    has each changed file replaced atomically, ``hooks.json`` last. Files clanker
    does not know are kept. Raises ``OSError`` for an operational failure.
    """
    files = plugin_files(directory)
    try:
        if not _owned(directory):
            directory.parent.mkdir(parents=True, exist_ok=True)
            if _install_fresh(directory, files):
                return True
        if any((directory / name).is_symlink() for name in files):
            raise _Unowned  # a link in place of clanker's file: someone else's now
        for name, data in files.items():
            mode = _MODES.get(name, _FILE_MODE)
            if not _current(directory / name, data, mode):
                _replace(directory / name, data, mode)
    except _Unowned:
        return False
    return True


class AgyAttention:
    """Keeps clanker's inert plugin installed; each launch only brings the environment."""

    def __init__(self) -> None:
        self.interpreter: Path | None = INTERPRETER
        # On an SSH host the attachment installs host_plugin's plugin there, beside
        # the launch's hook bridge (clanker.launch.attention.HOST_PLUGIN).
        self.runs_over_ssh = True
        # Not declared, though `--conversation=ID` is reported to continue the same
        # conversation id: unverified here, and a wrong declaration would bind the
        # root to an id agy never reports, blinding the whole launch. The first
        # PreInvocation #0 binds the conversation instead.
        self.resume_preserves_session_id = False

    def prepare(self, context: AttachmentContext) -> AttachmentPlan | Declined:
        hook_command(context.env)  # agy's hooks name the variable, which must be set
        if context.env.get(TRANSPORT_VARIABLE) == "tty":
            # On an SSH host: host_plugin's plugin is installed there with the launch's
            # resources (and refused there, with this launch left without attention,
            # when the directory is the user's); nothing is written on this machine.
            return AttachmentPlan()
        directory = plugin_dir(context.env)
        if directory is None:
            return Declined(reason="which configuration agy reads cannot be told (no home "
                                   "directory)")
        if not install_plugin(directory):
            # The user's own directory by that name: never overwritten.
            return Declined(reason=f"{directory} exists and is not clanker's; it is left as "
                                   "it is, so this agent's state is not shown")
        # Nothing to add: the attachment's CLANKER_ATTENTION_* variables are in
        # agy's environment, and agy passes them to its hook commands.
        return AttachmentPlan()

    def host_plugin(self, home: str) -> HostPlugin:
        """The plugin as it belongs in an SSH host's ``home`` (its hooks naming the
        guard there), for the attachment to install or refresh on the host."""
        from clanker.attention.capability import HostPlugin  # only SSH launches

        files = plugin_files(PurePosixPath(home) / PLUGIN_PATH)
        return HostPlugin(path=PLUGIN_PATH, marker=MARKER_FILE, files=tuple(
            (name, data, _MODES.get(name, _FILE_MODE)) for name, data in files.items()))

implementation = AgyAttention
