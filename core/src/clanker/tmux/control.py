"""The tmux commands clanker runs: find tmux, open a window, jump to a pane.

Every command is bounded in time and its output in size; a failure is a
:class:`TmuxError` naming the tmux command and tmux's own one-line complaint
(tmux prints no secrets: clanker never passes one on its command line).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from typing import Final

from clanker.errors import EXIT_TMUX_FAILED, EXIT_TMUX_UNAVAILABLE

__all__ = ["DEFAULT_SESSION", "Tmux", "TmuxError", "TmuxUnavailableError"]

DEFAULT_SESSION: Final = "clanker"
_TIMEOUT: Final = 15.0
_MAX_SAID: Final = 200


class TmuxError(Exception):
    """tmux refused or failed a command (exit 46)."""

    exit_code = EXIT_TMUX_FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TmuxUnavailableError(TmuxError):
    """No ``tmux`` executable on PATH (exit 45)."""

    exit_code = EXIT_TMUX_UNAVAILABLE


def _check_session(name: str) -> str:
    # tmux reads ':' and '.' in a target as window and pane separators.
    if not name or len(name) > 64 or not name.isprintable() or any(c in name for c in ":.") \
            or name != name.strip():
        raise ValueError("session: printable text of at most 64 characters, without ':' or '.'")
    return name


class Tmux:
    """One tmux server: the one ``$TMUX`` names (inside tmux), else ``socket_name``'s
    (``tmux -L``), else tmux's default."""

    def __init__(self, environ: Mapping[str, str] | None = None, *,
                 socket_name: str | None = None) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        self.socket_name = socket_name
        self.executable = shutil.which("tmux", path=self._environ.get("PATH"))

    @property
    def inside(self) -> bool:
        """Whether this process runs inside a tmux client (``$TMUX`` is set)."""
        return bool(self._environ.get("TMUX"))

    def unavailable(self) -> str | None:
        """Why tmux cannot be used here (one line), or ``None``."""
        return None if self.executable else "tmux is not on PATH"

    def command(self, *args: str) -> list[str]:
        if self.executable is None:
            raise TmuxUnavailableError("tmux is not on PATH (install it to launch in tmux)")
        socket = ["-L", self.socket_name] if self.socket_name else []
        return [self.executable, *socket, *args]

    def run(self, *args: str) -> str:
        """Run one tmux command; return its stdout (stripped)."""
        argv = self.command(*args)
        try:
            done = subprocess.run(argv, env=self._environ, stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=_TIMEOUT, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TmuxError(f"tmux {args[0]} failed ({type(exc).__name__})") from None
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            reason = said[0][:_MAX_SAID] if said else f"exit status {done.returncode}"
            raise TmuxError(f"tmux {args[0]} failed ({reason})")
        return done.stdout.decode(errors="replace").strip()

    def has_session(self, session: str) -> bool:
        try:
            self.run("has-session", "-t", f"={_check_session(session)}")
        except TmuxUnavailableError:
            raise
        except TmuxError:
            return False
        return True

    def new_window(self, session: str, argv: Sequence[str], *, cwd: str,
                   name: str | None = None) -> str:
        """Run ``argv`` in a new window of ``session`` (created when missing); return
        the new pane's id (``%N``). Nothing in ``argv`` may be secret: any local user
        who can list processes reads it."""
        _check_session(session)
        shape = ["-P", "-F", "#{pane_id}", "-c", cwd, *(["-n", name] if name else [])]
        if self.has_session(session):
            return self.run("new-window", "-d", *shape, "-t", f"={session}:", "--", *argv)
        return self.run("new-session", "-d", "-s", session, *shape, "--", *argv)

    def jump(self, pane: str) -> list[str] | None:
        """Bring ``pane`` forward: inside tmux, select its window and switch this client
        to it (``None``: done); outside, the ``attach`` command to run in this terminal."""
        self.run("select-window", "-t", pane)
        self.run("select-pane", "-t", pane)
        if not self.inside:
            return self.command("attach-session", "-t", pane)
        self.run("switch-client", "-t", pane)
        return None
