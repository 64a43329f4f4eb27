"""The launch attachment that hands an agent its bridge credential.

For one launch it asks the grid to mint the terminal's bridge credential,
carrying the capability names the launch grants, and puts the raw value in
the child environment and nowhere else (``CLANKER_BRIDGE_TOKEN``, beside
``CLANKER_BRIDGE_SOCKET``, the grid's socket that ``clanker cmd`` talks to,
and ``CLANKER_BRIDGE_URL``, the grid's loopback MCP endpoint, which the first
grant starts). A later step hands a harness the MCP endpoint through
:func:`bridge_endpoint`, which names the token's variable, never its value.
The step keeps no copy: its disposer holds the terminal's own credential,
with which it revokes the bridge credential first when the launch ends,
however it ends (the grid also revokes it when it retires the terminal, for
example when the launcher dies).

The credential belongs to the launch's terminal. When the attention step
registered one (:class:`TerminalHandle` hands it over), the bridge shares it;
otherwise (``--no-attention``, a harness without attention, attention that
failed) this step registers the terminal itself and lists it as running
without attention, and retires it when the launch ends.

The guidance tells the agent to run ``clanker cmd``. When the child's ``PATH``
finds no ``clanker`` (clanker run as ``python -m clanker`` or ``uv run``), the
step puts a two-line ``clanker`` in front of it that runs this interpreter's
``clanker``, so what the guidance says works as written.

It is an optional step: a grid that cannot start, or refuses, leaves an
ordinary launch without the bridge.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from clanker._logging import get_logger
from clanker.bridge import wire
from clanker.launch.attachments import LaunchState, PreparedAttachment
from clanker.paths import ClankerPaths, clanker_paths

if TYPE_CHECKING:
    from clanker.bridge.capability import BridgeEndpoint
    from clanker.grid.client import GridClient, Registration
    from clanker.launch.readopt import ReadoptionHandle

__all__ = ["BridgeAttachment", "TerminalHandle", "bridge_endpoint"]

log = get_logger(__name__)


class TerminalHandle:
    """Hands the terminal the attention step registered to the bridge step (once)."""

    def __init__(self) -> None:
        self._taken: tuple[GridClient, Registration] | None = None

    def offer(self, client: GridClient, registration: Registration) -> None:
        self._taken = (client, registration)

    def take(self) -> tuple[GridClient, Registration] | None:
        taken, self._taken = self._taken, None
        return taken


class BridgeAttachment:
    """The bridge for one launch of one harness (an optional attachment step)."""

    name = "bridge"
    optional = True

    def __init__(
        self,
        harness: str,
        *,
        cwd: str,
        grants: Sequence[str],
        handle: TerminalHandle,
        without_attention: str,
        paths: ClankerPaths | None = None,
        account: str | None = None,
        readoption: ReadoptionHandle | None = None,
    ) -> None:
        """``without_attention`` is the reason the terminal is listed with, when this
        step has to register it itself (one line for the person); ``account`` names
        the managed account the launch runs under; ``readoption`` hears of the
        credential granted to attention's terminal (so a next grid can carry it)."""
        self._harness = harness
        self._cwd = cwd
        self._grants = tuple(grants)
        self._handle = handle
        self._without_attention = without_attention
        self._paths = paths
        self._account = account
        self._readoption = readoption

    def prepare(self, state: LaunchState) -> PreparedAttachment | None:
        from clanker.grid.client import GridClient
        from clanker.grid.daemon import ensure_running
        from clanker.grid.errors import GridRequestError

        shared = self._handle.take()
        own = shared is None
        reason = self._without_attention
        if shared is not None:
            client, registration = shared
            try:
                granted = client.grant_bridge_endpoint(registration.terminal,
                                                       registration.token, self._grants)
            except GridRequestError as exc:
                if exc.word != "unauthorized":
                    raise
                # The attention step gave its terminal up (it failed): register one.
                own, reason = True, "attention is unavailable for this launch"
        if own:
            client = GridClient(ensure_running(self._paths or clanker_paths()))
            registration = client.register(harness=self._harness, workspace=self._cwd,
                                            cwd=self._cwd, launcher_pid=os.getpid(),
                                            account=self._account)
            try:
                client.decline(registration.terminal, registration.token, reason)
                granted = client.grant_bridge_endpoint(registration.terminal,
                                                       registration.token, self._grants)
            except BaseException:
                _release(client, registration, retire=True)
                raise
        elif self._readoption is not None:
            self._readoption.bridge(registration, granted.bridge_token, self._grants,
                                    granted.mcp_url)
        released = False

        def dispose() -> None:
            nonlocal released
            if not released:
                released = True
                _release(client, registration, retire=own)

        env = {wire.TOKEN_VARIABLE: granted.bridge_token,
               wire.SOCKET_VARIABLE: str(client.socket_path),
               **_reachable_clanker(state.env, self._paths or clanker_paths())}
        if granted.mcp_url is not None:
            env[wire.URL_VARIABLE] = granted.mcp_url
        return PreparedAttachment(dispose=dispose, env=env)


def bridge_endpoint(env: Mapping[str, str]) -> BridgeEndpoint | None:
    """The MCP endpoint a launch whose environment so far is ``env`` may hand its harness
    (the bridge step put it there), or ``None`` when the launch has none."""
    from clanker.bridge.capability import BridgeEndpoint

    url = env.get(wire.URL_VARIABLE)
    if not url or wire.TOKEN_VARIABLE not in env:
        return None
    return BridgeEndpoint(url=url, server_name=wire.MCP_SERVER_NAME,
                          token_variable=wire.TOKEN_VARIABLE)


def _reachable_clanker(env: Mapping[str, str], paths: ClankerPaths) -> dict[str, str]:
    """``{"PATH": ...}`` with a ``clanker`` for this interpreter first, when ``env``'s
    ``PATH`` finds none; nothing otherwise (the person's own ``clanker`` is kept)."""
    search = env.get("PATH", "")
    if shutil.which("clanker", path=search) is not None:
        return {}
    script = f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m clanker "$@"\n'
    # One directory per interpreter: two installations never overwrite each other's.
    tag = hashlib.sha256(sys.executable.encode()).hexdigest()[:12]
    directory = paths.runtime / f"bin-{tag}"
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    shim = directory / "clanker"
    if not _holds(shim, script):
        _write_executable(directory, shim, script)
    return {"PATH": f"{directory}{os.pathsep}{search}" if search else str(directory)}


def _holds(path: Path, text: str) -> bool:
    try:
        return not path.is_symlink() and path.read_text() == text
    except OSError:
        return False


def _write_executable(directory: Path, path: Path, text: str) -> None:
    """Replace ``path`` at once: a concurrent launch sees the old script or the new."""
    fd, name = tempfile.mkstemp(dir=directory, prefix=".clanker-")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(name, 0o700)
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise


def _release(client: GridClient, registration: Registration, *, retire: bool) -> None:
    """Revoke the bridge credential (first), then retire the terminal if it is ours.

    Never raises: a grid that is gone has revoked everything already, and the
    grid retires a terminal whose launcher died.
    """
    try:
        client.revoke_bridge(registration.terminal, registration.token)
    except Exception:
        log.debug("bridge: the grid did not confirm revocation")
    if retire:
        try:
            client.retire(registration.terminal, registration.token)
        except Exception:
            log.debug("bridge: the grid did not confirm retirement")
