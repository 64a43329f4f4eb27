"""Hand a launch to a new tmux window that runs it exactly as a foreground launch.

The window runs ``python -m clanker.tmux.window FILE`` with this interpreter:
the ordinary foreground launch (:meth:`clanker.api.Clanker.launch`), so the
harness gets the same argv, environment and attention as in this terminal, and
its launcher's exit (the harness quit, or the window was closed) retires the
agent as any launch's does. Everything the launch needs, this process's
environment included (it may hold credentials), travels in ``FILE``: mode
0600 in a 0700 directory of clanker's state, read and deleted by the window
before anything else runs (one left unread for ten minutes is deleted by the
next hand-off). Neither tmux's command line nor ``new-window -e``
carries it (both are visible to every local user who lists processes).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from attrs import frozen

from clanker.launch.request import LaunchRequest, SessionTarget
from clanker.launch.service import LaunchOptions
from clanker.tmux.control import DEFAULT_SESSION, Tmux, _check_session

__all__ = ["TmuxTerminal", "TmuxWindow", "hand_off", "read_handoff"]

_FORMAT: Final = 1
_MAX_FILE: Final = 4 * 1024 * 1024
_STALE: Final = 600.0


@frozen(kw_only=True)
class TmuxTerminal:
    """Where a launch should run instead of this terminal: a new window of the tmux
    session ``session`` (created on demand) of the server ``socket_name`` names
    (``tmux -L``; ``None``: the one this process runs inside, else tmux's default)."""

    session: str = DEFAULT_SESSION
    socket_name: str | None = None

    def __attrs_post_init__(self) -> None:
        _check_session(self.session)


@frozen(kw_only=True)
class TmuxWindow:
    """The window a launch was handed to: its tmux session and pane id (``%N``, what
    the grid's terminal record carries once the launch registers)."""

    session: str
    pane: str


def _record(harness: str, request: LaunchRequest, options: LaunchOptions,
            environ: Mapping[str, str]) -> dict[str, Any]:
    session = request.session
    return {
        "format": _FORMAT, "harness": harness,
        "request": {"operation": request.operation.value, "model": request.model,
                    "session": None if session is None else
                    {"native_id": session.native_id, "store_path": session.store_path},
                    "user_flags": list(request.user_flags), "cwd": request.cwd},
        "options": {"attention": options.attention,
                    "trusted_session_id": options.trusted_session_id,
                    "bridge": options.bridge,
                    "grants": None if options.grants is None else list(options.grants),
                    "account": options.account},
        "environ": dict(environ),
    }


def _write_private(directory: Path, data: bytes) -> Path:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    _sweep(directory)
    path = directory / f"launch-{secrets.token_hex(8)}.json"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    return path


def _sweep(directory: Path) -> None:
    """Delete hand-off files no window read (tmux died first, say): they may hold
    credentials, and a window reads its file within moments of opening."""
    now = time.time()
    for old in directory.glob("launch-*.json"):
        with contextlib.suppress(OSError):
            if now - old.lstat().st_mtime > _STALE:
                old.unlink()


def hand_off(harness: str, request: LaunchRequest, options: LaunchOptions, *,
             terminal: TmuxTerminal, state_dir: Path,
             environ: Mapping[str, str]) -> TmuxWindow:
    """Open the window that runs this launch; return it once tmux has.

    Raises :class:`~clanker.tmux.control.TmuxUnavailableError` (no tmux; nothing
    was written) and :class:`~clanker.tmux.control.TmuxError` (the hand-off
    file is removed again).
    """
    if request.cwd is None:
        raise ValueError("cwd: a launch needs its directory")
    tmux = Tmux(environ, socket_name=terminal.socket_name)
    tmux.command()  # no tmux: refuse before writing anything
    data = json.dumps(_record(harness, request, options, environ)).encode()
    path = _write_private(state_dir / "tmux", data)
    argv = [sys.executable, "-m", "clanker.tmux.window", str(path)]
    try:
        pane = tmux.new_window(terminal.session, argv, cwd=request.cwd, name=harness)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return TmuxWindow(session=terminal.session, pane=pane)


def read_handoff(path: Path) -> tuple[str, LaunchRequest, LaunchOptions, dict[str, str]]:
    """Read and delete a hand-off file: the harness id, request, options and environment.

    Raises ``ValueError`` for a file that is not one :func:`hand_off` wrote
    (it is deleted all the same: it may hold credentials)."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(_MAX_FILE + 1)
    finally:
        path.unlink(missing_ok=True)
    if len(raw) > _MAX_FILE:
        raise ValueError("the hand-off file is too large")
    try:
        data = json.loads(raw)
        if data.get("format") != _FORMAT:
            raise ValueError("the hand-off file is of another format")
        req, opt = data["request"], data["options"]
        session = req["session"]
        request = LaunchRequest(
            operation=req["operation"], model=req["model"], user_flags=tuple(req["user_flags"]),
            cwd=req["cwd"], session=None if session is None else SessionTarget(**session))
        options = LaunchOptions(
            attention=bool(opt["attention"]), trusted_session_id=opt["trusted_session_id"],
            bridge=opt["bridge"], account=opt["account"],
            grants=None if opt["grants"] is None else tuple(opt["grants"]))
        environ = {str(k): str(v) for k, v in data["environ"].items()}
        return str(data["harness"]), request, options, environ
    except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the hand-off file is malformed ({type(exc).__name__})") from None
