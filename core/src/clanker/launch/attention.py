"""The launch attachment that wires a harness's native events to the grid.

For one launch it makes sure the grid runs, registers the terminal there
(the grid answers with a fresh credential and keeps only its digest), creates a
launch-owned 0700 directory holding the hook command and the per-terminal
bridge state, and asks the provider to wire its hooks, plugin or extension to
them. The raw credential goes into the child environment and nowhere else.

It is an optional step: a grid that cannot start, or a provider that finds the
user owns the configuration it would need, leaves an ordinary launch.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from clanker._logging import get_logger
from clanker.attention.capability import AttachmentContext, AttentionCapability, Declined
from clanker.environment import HostFiles
from clanker.execution import CommandRequest, CommandResult
from clanker.launch.attachments import LaunchState, PreparedAttachment
from clanker.launch.scratch import (
    LAUNCHER_FILE,
    private_directory,
    remove_directory,
    sweep_orphans,
)
from clanker.paths import ClankerPaths, clanker_paths

if TYPE_CHECKING:
    from clanker.grid.client import GridClient, Registration

__all__ = ["HOOK_SCRIPT", "LAUNCHER_FILE", "SOCKET_VARIABLE", "TERMINAL_VARIABLE",
           "TOKEN_VARIABLE", "AttentionAttachment", "sweep_orphans", "write_hook_command"]

log = get_logger(__name__)

TOKEN_VARIABLE = "CLANKER_ATTENTION_TOKEN"  # noqa: S105 - a variable's name
"""Where the child finds its terminal's credential (present only when attention attached)."""
TERMINAL_VARIABLE = "CLANKER_ATTENTION_TERMINAL"
SOCKET_VARIABLE = "CLANKER_ATTENTION_SOCKET"

HOOK_SCRIPT = Path(__file__).resolve().parent.parent / "attention" / "hook.py"
"""The hook bridge: standard library only, so it starts as fast as Python can."""

def write_hook_command(directory: Path) -> Path:
    """Write ``directory/hook``, the executable a harness hook runs.

    ``-I -S``: no user site, no site-packages, no ``PYTHON*`` variables: the
    bridge sees the standard library and the one interpreter it loads by path.
    """
    path = directory / "hook"
    script = (
        "#!/bin/sh\n"
        f"exec {shlex.quote(sys.executable)} -I -S {shlex.quote(str(HOOK_SCRIPT))} \"$@\"\n"
    )
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
    with os.fdopen(descriptor, "w") as file:
        file.write(script)
    return path


class AttentionAttachment:
    """Attention for one launch of one harness (an optional attachment step)."""

    name = "attention"
    optional = True

    def __init__(
        self,
        harness: str,
        capability: AttentionCapability,
        *,
        cwd: str,
        files: HostFiles,
        run: Callable[[CommandRequest], CommandResult],
        user_flags: tuple[str, ...] = (),
        trusted_root_session_id: str | None = None,
        paths: ClankerPaths | None = None,
        on_registered: Callable[[GridClient, Registration], None] | None = None,
        account: str | None = None,
    ) -> None:
        """``on_registered`` hears of the terminal once the grid has registered it (the
        bridge step shares it); ``account`` names the managed account it runs under."""
        self._harness = harness
        self._capability = capability
        self._cwd = cwd
        self._files = files
        self._run = run
        self._user_flags = user_flags
        self._trusted_root = (
            trusted_root_session_id if capability.resume_preserves_session_id else None
        )
        self._paths = paths
        self._on_registered = on_registered
        self._account = account

    def prepare(self, state: LaunchState) -> PreparedAttachment | None:
        # Deferred: the grid client is only needed by launches that attach.
        from clanker.grid.client import GridClient
        from clanker.grid.daemon import ensure_running

        paths = self._paths or clanker_paths()
        socket = ensure_running(paths)
        client = GridClient(socket)
        # The harness runs the hook command put here.
        private_dir = private_directory(paths, self._harness)
        registration: Registration | None = None
        try:
            state_dir = private_dir / "state"
            state_dir.mkdir(mode=0o700)
            registration = client.register(
                harness=self._harness,
                workspace=self._cwd,
                cwd=self._cwd,
                launcher_pid=os.getpid(),
                trusted_root_session_id=self._trusted_root,
                account=self._account,
                tmux_pane=_tmux_pane(state.env),
            )
            if self._on_registered is not None:
                self._on_registered(client, registration)
            env = {
                "CLANKER_ATTENTION_COMMAND": str(write_hook_command(private_dir)),
                SOCKET_VARIABLE: str(socket),
                TERMINAL_VARIABLE: registration.terminal,
                TOKEN_VARIABLE: registration.token,
                "CLANKER_ATTENTION_STATE": str(state_dir),
            }
            if self._capability.interpreter is not None:
                env["CLANKER_ATTENTION_INTERPRETER"] = str(self._capability.interpreter)
            plan = self._capability.prepare(AttachmentContext(
                argv=state.argv,
                env={**state.env, **env},
                cwd=self._cwd,
                private_dir=private_dir,
                user_flags=self._user_flags,
                files=self._files,
                run=self._run,
            ))
            released = False

            def dispose() -> None:
                nonlocal released
                if not released:
                    released = True
                    _release(client, registration, private_dir)

            if isinstance(plan, Declined):
                # The agent still runs and is still listed, as one whose attention is
                # unavailable; the harness gets no credential it would not use.
                log.info("attention: declined for %s: %s", self._harness, plan.reason)
                client.decline(registration.terminal, registration.token, plan.reason)
                return PreparedAttachment(dispose=dispose, notice=plan.reason)
            # Inside the guard: a plan the attachment refuses must release everything too.
            return PreparedAttachment(dispose=dispose, argv=plan.argv, env={**env, **plan.env},
                                      notice=plan.notice)
        except BaseException:
            _release(client, registration, private_dir)
            raise


def _release(client: GridClient, registration: Registration | None, private_dir: Path) -> None:
    """Retire the terminal (revoking its credential) and remove the launch's files.

    Never raises: a grid that is gone has retired everything already, and the
    grid also retires a terminal whose launcher died.
    """
    if registration is not None:
        try:
            client.retire(registration.terminal, registration.token)
        except Exception:
            log.debug("attention: the grid did not confirm retirement")
    remove_directory(private_dir)


def _tmux_pane(env: Mapping[str, str]) -> str | None:
    """The tmux pane the launch runs in, as tmux set it; ``None`` outside tmux or when
    the variable is not a pane id (the grid would refuse the whole registration)."""
    from clanker.grid.protocol import is_tmux_pane

    pane = env.get("TMUX_PANE") if env.get("TMUX") else None
    return pane if is_tmux_pane(pane) else None
