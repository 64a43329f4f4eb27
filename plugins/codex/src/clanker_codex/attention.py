"""Codex attention: session-flag command hooks injected with ``-c hooks.<Event>=...``.

Checked against Codex CLI 0.171.0 (docs/harnesses/codex.md, "Attention"):

- ``-c hooks.<Event>=[{hooks=[{type="command",command=...,timeout=3}]}]`` adds a
  *session-flags* hook layer (``hooks/list`` reports ``source: sessionFlags``,
  key ``/<session-flags>/config.toml:<event>:0:0``) that runs alongside the
  user's, project and plugin hooks.
- Codex runs such a hook only once the user has trusted it (at start-up
  Codex asks "Hooks need review", or in ``/hooks``), and records the trust in
  the user's ``config.toml`` as ``[hooks.state."<key>"] trusted_hash =
  "sha256:..."``, a hash of the definition (``enabled = false`` when the user
  turns one off there). The definition is therefore the same for every
  launch: the command is the literal ``"$CLANKER_ATTENTION_COMMAND"``, which
  Codex's shell (``$SHELL -lc``) expands from the launch's environment, so one
  review persists. ``--dangerously-bypass-hook-trust`` would skip that review;
  clanker never passes it: whether to run a hook stays the user's decision.
- That record is read (the same bounded read of ``config.toml``, never a
  write): until every one of clanker's hooks is trusted with its current hash,
  the launch carries a notice saying so, since until then no event arrives and
  the agent shows as unknown; one the user turned off gets a notice too.
- The user's own hook configuration decides instead of clanker: a ``[hooks]``
  table with events in ``$CODEX_HOME/config.toml``, a ``$CODEX_HOME/hooks.json``,
  a ``profile`` (config key or ``-p/--profile``), a ``-c hooks.*`` / ``-c
  profile=`` override, hooks disabled as a feature, or an administrator who
  allows only managed hooks. Each is a conflict: attention is unavailable for
  that launch. ``[hooks.state]`` alone is Codex's record of the user's reviews
  (clanker's own hooks included) and is not a conflict. The user's files are
  only read, bounded, through the launch host's files (on an SSH host, the
  host's own configuration decides), never written; one that cannot be read
  is a conflict.
- The hooks are arguments only: nothing is written, so the same plan wires a
  launch on an SSH host, where ``$CLANKER_ATTENTION_COMMAND`` names the hook
  command installed there and the definitions (and so the user's one review)
  stay the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from clanker.attention.capability import AttachmentContext, AttachmentPlan, Declined, hook_command
from clanker.stores import HostFiles
from clanker_codex.overrides import (
    CONFIG_FLAGS,
    PROFILE_FLAGS,
    Unreadable,
    insert_top_level,
    option_values,
    override_key,
    read_config,
    toml_string,
    words_before_prompt,
)
from clanker_codex.sessions import codex_home

__all__ = [
    "HOOK_COMMAND",
    "HOOK_EVENTS",
    "HOOK_TIMEOUT_SECONDS",
    "REVIEW_NOTICE",
    "TRUSTED_HASHES",
    "CodexAttention",
    "hook_arguments",
    "hook_key",
    "review_notice",
]

INTERPRETER: Final = Path(__file__).with_name("attention_interpreter.py")

HOOK_EVENTS: Final = (
    "SessionStart", "UserPromptSubmit", "PermissionRequest", "PreToolUse", "PostToolUse",
    "Stop", "Interrupt", "SessionEnd",
)
"""Every native event the interpreter reads (``Interrupt`` exists in 0.171.0)."""

HOOK_TIMEOUT_SECONDS: Final = 3
HOOK_COMMAND: Final = '"$CLANKER_ATTENTION_COMMAND"'
"""The command, verbatim: the variable, never a path, so the definition never changes."""

TRUSTED_HASHES: Final = {
    "SessionStart": "sha256:b6a59f80095a947f975652172d53d039e2729749fcdd93d08d334212bcd18292",
    "UserPromptSubmit": "sha256:6fe822ef611891a829a9752759c63ba3563a51bd560e6343788c1c997c3b3072",
    "PermissionRequest": "sha256:4c91c7495bc8b4f4d9debd3f37d9edf9da11d98e5b10507e6d5d6d1b6bdbf35e",
    "PreToolUse": "sha256:2b0ba79623543bf5c6394529c10732bcb29880a72616df20c273779e27704286",
    "PostToolUse": "sha256:4d8de80ce5c1505394728bf0ea2745a347215e2ef9fb6d21821ed7d53e4407cb",
    "Stop": "sha256:8ae21fd53d57187a5595d8c3b75a067728561bb680f945e1a8aae8e4c2bf6813",
    "Interrupt": "sha256:931afdd1c3ba794aef85e694a6f7ceb836b7e0baae2865d589caa867c2a190b2",
    "SessionEnd": "sha256:8931bd768b0f191f80a76229f527bfd17ad1cecfafa5adeb1d72f1c94996afd2",
}
"""The hash Codex 0.171.0 gives each of :func:`hook_arguments`' definitions (``hooks/list``
``currentHash``; the same in every home). A review records it as ``trusted_hash``; the
definitions never change, so neither do these (a test pins both together)."""

REVIEW_NOTICE: Final = (
    "Codex runs clanker's hooks only once you trust them: choose \"Trust all and continue\" "
    "when Codex asks (or trust them in /hooks), or this agent shows as unknown"
)
"""Said at launch until every hook is trusted with its current hash."""

POLICY_FILE: Final = Path("/etc/codex/requirements.toml")

_DISABLE_FLAG: Final = "--disable"
_HOOKS_FEATURE: Final = "hooks"
_BYPASS_TRUST_FLAG: Final = "--dangerously-bypass-hook-trust"
_SESSION_FLAGS_SOURCE: Final = "/<session-flags>/config.toml"


def hook_key(event: str) -> str:
    """The key Codex files ``event``'s one session-flag hook under in ``[hooks.state]``.

    ``/<session-flags>/config.toml:<event in snake case>:<group>:<handler>``: one group
    with one handler per event (``hooks/list`` in 0.171.0).
    """
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in event).lstrip("_")
    return f"{_SESSION_FLAGS_SOURCE}:{snake}:0:0"


def review_notice(config: Mapping[str, object] | None) -> str | None:
    """What to tell the person about Codex's trust in clanker's hooks, from ``config.toml``.

    ``None`` when every hook is trusted with its current hash and none is turned
    off. A missing or malformed record counts as not reviewed: Codex would ask.
    """
    hooks = config.get("hooks") if config is not None else None
    state = hooks.get("state") if isinstance(hooks, Mapping) else None
    entries: Mapping[str, object] = state if isinstance(state, Mapping) else {}
    off = []
    for event in HOOK_EVENTS:
        entry = entries.get(hook_key(event))
        if not isinstance(entry, Mapping) or entry.get("trusted_hash") != TRUSTED_HASHES[event]:
            return REVIEW_NOTICE
        if entry.get("enabled", True) is not True:
            off.append(event)
    if not off:
        return None
    hooks_named = ", ".join(off)
    if len(off) == 1:
        return (f"clanker's {hooks_named} hook is turned off in Codex's /hooks: turn it back "
                "on there, or this agent's state can be wrong")
    return (f"clanker's {hooks_named} hooks are turned off in Codex's /hooks: turn them back "
            "on there, or this agent's state can be wrong")


def hook_arguments() -> tuple[str, ...]:
    """The ``-c`` arguments: one command hook per event, identical for every launch."""
    handler = (
        f'{{type="command",command={toml_string(HOOK_COMMAND)},'
        f"timeout={HOOK_TIMEOUT_SECONDS}}}"
    )
    arguments: list[str] = []
    for event in HOOK_EVENTS:
        arguments += ["-c", f"hooks.{event}=[{{hooks=[{handler}]}}]"]
    return tuple(arguments)


class _Conflict(Exception):
    """The user's (or the administrator's) configuration decides the hooks."""


class CodexAttention:
    """Adds clanker's session-flag hooks to a Codex launch, unless the user owns hooks."""

    def __init__(self, *, policy_file: Path | None = None) -> None:
        self.interpreter: Path | None = INTERPRETER
        # `codex resume ID` keeps the session id (live: SessionStart with
        # source "resume" carries the same id; exec resume appends to the same
        # rollout), so a validated id may bind the root before the first event.
        self.resume_preserves_session_id = True
        # Reads through the launch's files and writes nothing: it wires a launch on an
        # SSH host the same way (clanker.launch.attention.SSH_ATTENTION).
        self.runs_over_ssh = True
        self._policy_file = policy_file if policy_file is not None else POLICY_FILE

    def prepare(self, context: AttachmentContext) -> AttachmentPlan | Declined:
        try:
            _check_flags(context.user_flags)
            _check_policy(context.files, self._policy_file)
            home = codex_home(context.env)
            if home is None:
                raise _Conflict("which configuration Codex reads cannot be told (a relative "
                                "CODEX_HOME, or no home directory)")
            config = _check_config(context.files, home / "config.toml")
            _check_absent(context.files, home / "hooks.json")
        except _Conflict as conflict:
            return Declined(reason=str(conflict))
        hook_command(context.env)  # the hooks name the variable, which must be set
        # The user's own bypass runs the hooks without any review: nothing to say.
        bypass = _BYPASS_TRUST_FLAG in words_before_prompt(context.user_flags)
        return AttachmentPlan(argv=insert_top_level(context.argv, hook_arguments()),
                              notice=None if bypass else review_notice(config))


# -- the user's flags ---------------------------------------------------------------------------


def _check_flags(flags: Iterable[str]) -> None:
    words = list(flags)
    if any(True for _ in option_values(words, PROFILE_FLAGS)):
        raise _Conflict("a Codex profile (--profile) may set its own hooks; launch without "
                        "it to see this agent's state")
    for value in option_values(words, CONFIG_FLAGS):
        key = override_key(value)
        if key[0] in ("hooks", "profile") or key[:2] == ["features", _HOOKS_FEATURE]:
            raise _Conflict(f"your -c {'.'.join(key)} override owns Codex's hooks; launch "
                            "without it to see this agent's state")
    if _HOOKS_FEATURE in option_values(words, (_DISABLE_FLAG,)):
        raise _Conflict("--disable hooks turns Codex's hooks off; launch without it to see "
                        "this agent's state")


# -- the user's and the administrator's files ---------------------------------------------------


def _check_config(files: HostFiles, path: Path) -> dict[str, object] | None:
    """Return the user's configuration (``None``: no file), unless it owns the hooks."""
    config = _read_toml(files, path)
    if config is None:
        return None
    hooks = config.get("hooks")
    # [hooks.state] alone is Codex's review bookkeeping, not the user's own hooks.
    if hooks is not None and (not isinstance(hooks, dict) or set(hooks) - {"state"}):
        raise _Conflict(f"{path} defines its own [hooks]; clanker adds none beside them, so "
                        "this agent's state is not shown")
    if "profile" in config:
        raise _Conflict(f"{path} selects a profile, which may set its own hooks")
    features = config.get("features")
    if isinstance(features, Mapping) and features.get(_HOOKS_FEATURE, True) is not True:
        raise _Conflict(f"{path} turns the hooks feature off; turn it on to see this agent's "
                        "state")
    return config


def _check_policy(files: HostFiles, path: Path) -> None:
    requirements = _read_toml(files, path)
    if requirements is None:
        return
    if requirements.get("allow_managed_hooks_only", False) is not False:
        raise _Conflict(f"the administrator's {path} allows managed hooks only")


def _check_absent(files: HostFiles, path: Path) -> None:
    if files.stat(path, follow=False) is None:
        return
    raise _Conflict(f"{path} defines your own hooks; clanker adds none beside them, so this "
                    "agent's state is not shown")


def _read_toml(files: HostFiles, path: Path) -> dict[str, object] | None:
    """A TOML document, or ``None`` when the file does not exist.

    Anything that cannot be read as a small TOML document is a conflict: what
    it says about hooks cannot be told.
    """
    try:
        return read_config(files, path)
    except Unreadable:
        raise _Conflict(f"{path} cannot be read as TOML, so what it says about hooks cannot "
                        "be told") from None

implementation = CodexAttention
