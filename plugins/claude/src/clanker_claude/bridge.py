"""Claude Code and clanker's MCP endpoint: one more ``--mcp-config`` file, placed last.

Checked against Claude Code 2.1.197 (docs/harnesses/claude.md, "Agent bridge"):

- ``--mcp-config <file>`` adds its servers (scope ``dynamic``) beside the
  user's (``~/.claude.json``), project (``.mcp.json``) and local servers, and
  beside the servers of the user's own ``--mcp-config`` (given once with
  several values, or repeated).
- ``${VAR}`` in a server's ``headers`` is expanded from Claude's environment
  when it connects, so the file holds ``Bearer ${CLANKER_BRIDGE_TOKEN}``, never
  the token.
- The option is variadic: anything after it is read as another configuration,
  so it goes last, after the user's flags (a prompt word before it is still
  the prompt), and before a ``--`` after which every word is the prompt.
- A ``--mcp-config`` server replaces a user, project or local server of the
  same name, so nothing is attached when any of them (or the user's own
  ``--mcp-config``) already names the server; nor under ``--strict-mcp-config``
  (the user chose exactly which servers run), nor when the administrator's
  ``managed-mcp.json`` exists (it then decides every server).
- A file that would have to be read to tell, and cannot be (not a regular
  file, too big, not a JSON object), counts as naming the server.
"""

from __future__ import annotations

import json
import os
import posixpath
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from clanker.launch.capability import AttachmentPlan
from clanker.stores import home_directory
from clanker_claude.sessions import config_dir

if TYPE_CHECKING:
    from clanker.bridge.capability import BridgeEndpoint
    from clanker.launch.capability import AttachmentContext
    from clanker.stores import HostFiles

__all__ = ["MCP_CONFIG_FILE", "ClaudeBridge", "mcp_config"]

MCP_CONFIG_FILE: Final = "claude-mcp.json"
MAX_CONFIG_BYTES: Final = 1 << 20
"""An MCP configuration (``.mcp.json``, a ``--mcp-config`` file) larger than this is not read."""
MAX_STATE_BYTES: Final = 16 << 20
"""``.claude.json`` also holds Claude's per-project state, so it may be large."""
MAX_PROJECT_DEPTH: Final = 64

_MCP_CONFIG_FLAG: Final = "--mcp-config"
_STRICT_FLAG: Final = "--strict-mcp-config"


def _policy_dir() -> Path:
    if sys.platform == "darwin":
        return Path("/Library/Application Support/ClaudeCode")
    return Path("/etc/claude-code")


def mcp_config(endpoint: BridgeEndpoint) -> dict[str, object]:
    """The launch's MCP configuration: one HTTP server whose header names the variable."""
    return {"mcpServers": {endpoint.server_name: {
        "type": "http",
        "url": endpoint.url,
        "headers": {"Authorization": f"Bearer ${{{endpoint.token_variable}}}"},
    }}}


class _Owned(Exception):
    """The user (or the administrator) owns the server name or the MCP channel."""


class ClaudeBridge:
    """Adds ``--mcp-config <launch-owned file>`` naming clanker's endpoint to a launch."""

    def __init__(self, *, policy_dir: Path | None = None) -> None:
        self._policy_dir = policy_dir if policy_dir is not None else _policy_dir()

    def prepare(self, context: AttachmentContext, endpoint: BridgeEndpoint
                ) -> AttachmentPlan | None:
        if endpoint.token_variable not in context.env:
            raise ValueError("bridge: the launch environment has no bridge token")
        name = endpoint.server_name
        try:
            _check_flags(context, name)
            if context.files.stat(self._policy_dir / "managed-mcp.json") is not None:
                raise _Owned
            _check_user_state(context, name)
            for directory in _ancestors(context.cwd):
                _check_servers(_read_object(context.files, Path(directory) / ".mcp.json",
                                            MAX_CONFIG_BYTES), name)
        except _Owned:
            return None
        path = context.private_dir / MCP_CONFIG_FILE
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump(mcp_config(endpoint), file, indent=1)
            file.write("\n")
        return AttachmentPlan(argv=_append_option(context.argv, context.user_flags,
                                                  (_MCP_CONFIG_FLAG, str(path))))


def _append_option(argv: Sequence[str], user_flags: Sequence[str],
                   option: Sequence[str]) -> tuple[str, ...]:
    """``argv`` with ``option`` after every other option: before the user's ``--``
    (after it, every word is the prompt), else at the very end."""
    words = list(argv)
    start = len(words) - len(user_flags)
    # The user's flags are the argv's tail; should a step have put something after
    # them, the first `--` after the executable is still where the prompt begins.
    tail = start if tuple(words[start:]) == tuple(user_flags) else 1
    at = words.index("--", tail) if "--" in words[tail:] else len(words)
    return (*words[:at], *option, *words[at:])


def _flag_values(flags: Sequence[str]) -> Iterator[str]:
    """Each configuration the user's ``--mcp-config`` options name (up to ``--``).

    The option is variadic: it takes every following word up to the next one
    that starts with ``-``, as Claude's parser does.
    """
    index = 0
    while index < len(flags):
        word = flags[index]
        index += 1
        if word == "--":
            return
        if word.startswith(_MCP_CONFIG_FLAG + "="):
            yield word[len(_MCP_CONFIG_FLAG) + 1:]
        elif word == _MCP_CONFIG_FLAG:
            while index < len(flags) and not flags[index].startswith("-"):
                yield flags[index]
                index += 1


def _check_flags(context: AttachmentContext, name: str) -> None:
    flags = list(context.user_flags)
    before_prompt = flags[:flags.index("--")] if "--" in flags else flags
    if _STRICT_FLAG in before_prompt:
        raise _Owned
    for value in _flag_values(flags):
        if value.lstrip().startswith("{"):
            document: dict[str, object] | None = _json_object(value)
        else:
            path = value if posixpath.isabs(value) else posixpath.join(context.cwd, value)
            document = _read_object(context.files, Path(path), MAX_CONFIG_BYTES)
            if document is None:
                raise _Owned  # Claude refuses a missing file; what it meant cannot be told
        _check_servers(document, name)


def _check_user_state(context: AttachmentContext, name: str) -> None:
    """User-scope servers (``mcpServers``) and local-scope ones (``projects[dir].mcpServers``)."""
    if "CLAUDE_CONFIG_DIR" in context.env:
        configured = config_dir(context.env)
        if configured is None:
            raise _Owned  # a relative directory: which file Claude reads cannot be told
        path = configured / ".claude.json"
    else:
        home = home_directory(context.env)
        if home is None:
            raise _Owned
        path = Path(home) / ".claude.json"
    state = _read_object(context.files, path, MAX_STATE_BYTES)
    if state is None:
        return
    _check_servers(state, name)
    projects = state.get("projects")
    if projects is None:
        return
    if not isinstance(projects, dict):
        raise _Owned
    for directory in _ancestors(context.cwd):
        project = projects.get(directory)
        if project is not None:
            if not isinstance(project, dict):
                raise _Owned
            _check_servers(project, name)


def _check_servers(document: Mapping[str, object] | None, name: str) -> None:
    if document is None:
        return
    servers = document.get("mcpServers")
    if servers is None:
        return
    if not isinstance(servers, dict) or name in servers:
        raise _Owned


def _ancestors(cwd: str) -> list[str]:
    """The launch directory and each directory above it (bounded)."""
    if not posixpath.isabs(cwd):
        raise _Owned  # where Claude looks cannot be told
    directory = posixpath.normpath(cwd)
    found = []
    for _ in range(MAX_PROJECT_DEPTH):
        found.append(directory)
        parent = posixpath.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return found


def _read_object(files: HostFiles, path: Path, limit: int) -> dict[str, object] | None:
    """A JSON object, or ``None`` when the file does not exist; else :class:`_Owned`."""
    if files.stat(path) is None:
        return None
    data = files.read_small(path, limit)
    if data is None:
        raise _Owned
    return _json_object(data)


def _json_object(text: str | bytes) -> dict[str, object]:
    """``text`` as a JSON object; anything else is :class:`_Owned` (what it says cannot be told)."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        raise _Owned from None
    if not isinstance(document, dict):
        raise _Owned
    return document

implementation = ClaudeBridge
