"""Claude Code attention: launch-owned command hooks loaded with ``--settings``.

Checked against Claude Code 2.1.197 (docs/harnesses/claude.md, "Attention"):

- ``--settings <file>`` adds a *flag settings* source whose hooks run alongside
  the user's, project and local hooks (merged, never replacing them), and
  ``--setting-sources`` never removes it.
- Hooks do not run at all with ``--bare`` (``CLAUDE_CODE_SIMPLE``),
  ``--safe-mode`` (``CLAUDE_CODE_SAFE_MODE``), or ``disableAllHooks: true`` in
  any settings source that is loaded; managed policy can also keep only its own
  hooks (``allowManagedHooksOnly``, ``strictPluginOnlyCustomization``).

Each of those is the user's (or the administrator's) configuration, so attention
is declined for that launch rather than fought with: the user's files are only
read (bounded, through the launch host's files, so on an SSH host the host's
own settings and policy decide), never written.
"""

from __future__ import annotations

import json
import os
import posixpath
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from clanker.attention.capability import (
    AttachmentContext,
    AttachmentPlan,
    Declined,
    hook_command,
    private_file,
)
from clanker.stores import HostFiles
from clanker_claude.sessions import config_dir

__all__ = [
    "HOOK_EVENTS",
    "HOOK_TIMEOUT_SECONDS",
    "SETTINGS_FILE",
    "ClaudeAttention",
    "hook_settings",
]

INTERPRETER: Final = Path(__file__).with_name("attention_interpreter.py")

HOOK_EVENTS: Final = (
    "SessionStart", "UserPromptSubmit", "PermissionRequest", "PostToolBatch",
    "Stop", "StopFailure", "SessionEnd", "CwdChanged",
)
"""Every native event the interpreter reads. PostToolUse is deliberately absent: an
unrelated parallel tool finishing must not clear a permission wait."""

HOOK_TIMEOUT_SECONDS: Final = 3
SETTINGS_FILE: Final = "claude-settings.json"

MAX_SETTINGS_BYTES: Final = 1 << 20
"""A settings file larger than this is not read: attention is declined."""
MAX_POLICY_FILES: Final = 64

# Flags after which Claude runs no hooks, or that take the settings over.
_NO_HOOKS_FLAGS: Final = frozenset({"--bare", "--safe-mode"})
_SETTINGS_FLAG: Final = "--settings"
_SOURCES_FLAG: Final = "--setting-sources"
_ALL_SOURCES: Final = frozenset({"user", "project", "local"})
# Claude's own reading of a boolean variable.
_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_NO_HOOKS_VARIABLES: Final = ("CLAUDE_CODE_SIMPLE", "CLAUDE_CODE_SAFE_MODE")


_POLICY_DIRS: Final = (Path("/etc/claude-code"), Path("/Library/Application Support/ClaudeCode"))
"""Where Claude Code reads managed settings on Linux and on macOS. Both are looked at:
the launch host (an SSH host, say) need not be this machine's platform, and each is
absent on the other platform."""


def hook_settings(command: str) -> dict[str, object]:
    """The settings document: one command hook per event, nothing else."""
    hook = {"type": "command", "command": shlex.quote(command),
            "timeout": HOOK_TIMEOUT_SECONDS}
    return {"hooks": {event: [{"hooks": [dict(hook)]}] for event in HOOK_EVENTS}}


class _Conflict(Exception):
    """The user's (or the administrator's) configuration decides the hooks."""


class ClaudeAttention:
    """Adds ``--settings <launch-owned file>`` holding clanker's hooks to a launch."""

    def __init__(self, *, policy_dir: Path | None = None) -> None:
        self.interpreter: Path | None = INTERPRETER
        # Claude may answer a resume with a new session id, so a validated id
        # never binds the root in advance: the first native event does.
        self.resume_preserves_session_id = False
        # Writes only its settings file in the private directory and reads the user's
        # and the administrator's settings through the launch's files: it wires a
        # launch on an SSH host the same way (clanker.launch.attention.SSH_ATTENTION).
        self.runs_over_ssh = True
        self._policy_dirs = (policy_dir,) if policy_dir is not None else _POLICY_DIRS

    def prepare(self, context: AttachmentContext) -> AttachmentPlan | Declined:
        try:
            sources = _check_flags(context.user_flags)
            _check_environment(context.env)
            for directory in self._policy_dirs:
                _check_policy(context.files, directory)
            for path in _settings_files(context, sources):
                _check_settings(context.files, path)
        except _Conflict as conflict:
            return Declined(reason=str(conflict))
        settings = json.dumps(hook_settings(hook_command(context.env)), indent=1) + "\n"
        path = private_file(context, SETTINGS_FILE, settings.encode("utf-8"))
        # Right after the executable: clanker's own options and the user's
        # flags keep their order, and no variadic user option can swallow it.
        executable, *rest = context.argv
        return AttachmentPlan(argv=(executable, _SETTINGS_FLAG, str(path), *rest))


def _check_flags(flags: Iterable[str]) -> frozenset[str]:
    """Refuse flags that own the settings; return the setting sources Claude loads."""
    sources = _ALL_SOURCES
    words = list(flags)
    for index, word in enumerate(words):
        if word == "--":
            break  # the rest are prompt words, as Claude itself reads them
        name, _, inline = word.partition("=")
        if name in _NO_HOOKS_FLAGS:
            raise _Conflict(f"Claude Code runs no hooks with {name}; launch without it "
                            "to see this agent's state")
        if name == _SETTINGS_FLAG:
            raise _Conflict(f"your own {name} owns Claude Code's settings; launch without it "
                            "(put what it holds in .claude/settings.json) to see this "
                            "agent's state")
        if name == _SOURCES_FLAG:
            value = inline if "=" in word else (
                words[index + 1] if index + 1 < len(words) else None
            )
            sources = _ALL_SOURCES if value is None else _parse_sources(value)
    return sources


def _parse_sources(value: str) -> frozenset[str]:
    named = {part.strip() for part in value.split(",") if part.strip()}
    # A name clanker does not know: read every source rather than guess.
    return frozenset(named) if named <= _ALL_SOURCES else _ALL_SOURCES


def _check_environment(env: Mapping[str, str]) -> None:
    for name in _NO_HOOKS_VARIABLES:
        if env.get(name, "").strip().lower() in _TRUE:
            raise _Conflict(f"{name} is set, so Claude Code runs no hooks; unset it to see "
                            "this agent's state")


def _check_policy(files: HostFiles, directory: Path) -> None:
    """Managed settings that keep only the administrator's hooks, or none."""
    paths = [directory / "managed-settings.json"]
    drop_ins = directory / "managed-settings.d"
    try:
        found, cut = files.walk(
            drop_ins, depth=0,
            accept_file=lambda n: n.endswith(".json") and not n.startswith("."))
    except OSError:
        raise _Conflict(f"{drop_ins} cannot be read, so whether the administrator allows "
                        "hooks cannot be told") from None
    names = sorted(os.path.basename(candidate.path) for candidate in found)
    if cut or len(names) > MAX_POLICY_FILES:
        raise _Conflict(f"{drop_ins} holds more than {MAX_POLICY_FILES} policy files")
    paths += [drop_ins / name for name in names]
    for path in paths:
        settings = _read_settings(files, path)
        if settings is None:
            continue
        restriction = settings.get("strictPluginOnlyCustomization")
        if (
            settings.get("disableAllHooks", False) is not False
            or settings.get("allowManagedHooksOnly", False) is not False
            or restriction is True
            or (isinstance(restriction, list) and "hooks" in restriction)
        ):
            raise _Conflict(f"the administrator's {path.name} allows no hooks but theirs")


def _settings_files(context: AttachmentContext, sources: frozenset[str]) -> list[Path]:
    paths = []
    if "user" in sources:
        paths.append(_user_config_dir(context) / "settings.json")
    project = Path(context.cwd) / ".claude"
    if "project" in sources:
        paths.append(project / "settings.json")
    if "local" in sources:
        paths.append(project / "settings.local.json")
    return paths


def _user_config_dir(context: AttachmentContext) -> Path:
    value = context.env.get("CLAUDE_CONFIG_DIR")
    if value is not None and not posixpath.isabs(value):
        # Claude resolves a relative directory against its own cwd: the launch's.
        return Path(posixpath.normpath(posixpath.join(context.cwd, value)))
    directory = config_dir(context.env)
    if directory is None:
        raise _Conflict("which user settings Claude Code reads cannot be told (no home "
                        "directory)")
    return directory


def _check_settings(files: HostFiles, path: Path) -> None:
    settings = _read_settings(files, path)
    if settings is not None and settings.get("disableAllHooks", False) is not False:
        raise _Conflict(f"{path} sets disableAllHooks; remove it to see this agent's state")


def _read_settings(files: HostFiles, path: Path) -> dict[str, object] | None:
    """A settings object, or ``None`` when the file does not exist.

    Anything that cannot be read as a small JSON object is a conflict: whether
    it would disable hooks cannot be told.
    """
    unreadable = f"{path} cannot be read as settings, so whether it turns hooks off cannot be told"
    if files.stat(path) is None:
        return None  # not there (dotfiles may be links: followed)
    data = files.read_small(path, MAX_SETTINGS_BYTES)
    if data is None:
        raise _Conflict(unreadable)
    try:
        settings = json.loads(data)
    except (ValueError, RecursionError):
        raise _Conflict(unreadable) from None
    if not isinstance(settings, dict):
        raise _Conflict(unreadable)
    return settings

implementation = ClaudeAttention
