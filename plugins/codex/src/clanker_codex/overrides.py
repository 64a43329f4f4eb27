"""Codex's ``-c key=value`` overrides: reading the user's, adding clanker's, and the
configuration layers a key may also come from.

Checked against Codex CLI 0.171.0 (docs/harnesses/codex.md):

- ``-c`` / ``--config`` values are TOML; an override beats every file, key by
  key (``-c mcp_servers.NAME.url=...`` changes only that key of the user's
  server of the same name, so it would take that server over).
- Top-level options go right after the executable: they apply to the TUI and
  to its ``resume`` / ``fork`` subcommands alike, and the user's own flags,
  which come last, keep their order (and win, for a repeated key).
- A profile is ``-p NAME`` / ``--profile NAME``, read from
  ``$CODEX_HOME/NAME.config.toml`` on top of ``config.toml``; a legacy
  ``profile = ...`` key is an error in 0.171.0.
- A project's ``.codex/config.toml`` is read for a trusted project.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from clanker_codex.sessions import codex_home

if TYPE_CHECKING:
    from clanker.launch.capability import AttachmentContext
    from clanker.stores import HostFiles

__all__ = [
    "CONFIG_FLAGS",
    "MAX_CONFIG_BYTES",
    "PROFILE_FLAGS",
    "SYSTEM_CONFIG",
    "Unreadable",
    "config_layers",
    "insert_top_level",
    "option_values",
    "override_key",
    "read_config",
    "toml_key",
    "toml_string",
    "user_sets",
    "words_before_prompt",
]

CONFIG_FLAGS: Final = ("-c", "--config")
PROFILE_FLAGS: Final = ("-p", "--profile")
MAX_CONFIG_BYTES: Final = 1 << 20
"""A configuration file larger than this is not read (what it says cannot be told)."""
SYSTEM_CONFIG: Final = Path("/etc/codex/config.toml")
MAX_PROJECT_DEPTH: Final = 64
"""The most directories looked at for a project's ``.codex/config.toml``."""

_BARE_KEY: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def option_values(words: Sequence[str], names: Sequence[str]) -> Iterator[str]:
    """Each value given to one of ``names`` (``-c V``, ``-cV``, ``--config V``, ``--config=V``)."""
    long_names = [n for n in names if n.startswith("--")]
    short_names = [n for n in names if not n.startswith("--")]
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word == "--":
            return  # the rest are prompt words, as Codex reads them
        if word in names:
            if index < len(words):
                yield words[index]
                index += 1
            continue
        for name in long_names:
            if word.startswith(name + "="):
                yield word[len(name) + 1:]
        for name in short_names:
            if word.startswith(name) and not word.startswith("--") and len(word) > len(name):
                value = word[len(name):]
                yield value[1:] if value.startswith("=") else value


def words_before_prompt(flags: Iterable[str]) -> list[str]:
    """The user's words up to ``--`` (after it they are prompt words, as Codex reads them)."""
    words = list(flags)
    return words[:words.index("--")] if "--" in words else words


def override_key(value: str) -> list[str]:
    """The dotted key of a ``-c key=value`` override, its parts unquoted."""
    key = value.partition("=")[0].strip()
    return [part.strip().strip("\"'") for part in key.split(".")]


def toml_string(value: str) -> str:
    """``value`` as a TOML basic string: quotes, backslashes and every control
    character escaped, so Codex reads back exactly ``value``."""
    out = ['"']
    for char in value:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def toml_key(name: str) -> str:
    """``name`` as one part of a dotted TOML key (bare when it can be)."""
    if name and set(name) <= _BARE_KEY:
        return name
    return toml_string(name)


def insert_top_level(argv: Sequence[str], arguments: Sequence[str]) -> tuple[str, ...]:
    """``argv`` with ``arguments`` right after the executable: before a ``resume`` /
    ``fork`` subcommand, so they apply to it too, and before the user's flags."""
    executable, *rest = argv
    return (executable, *arguments, *rest)


class Unreadable(Exception):
    """A configuration file exists but cannot be read as a small TOML document."""


def config_layers(home: Path, cwd: str, flags: Sequence[str], *,
                  system: Path = SYSTEM_CONFIG) -> list[Path]:
    """Every file a key of this launch's configuration may come from, besides ``-c``.

    The system file, ``config.toml``, the selected profile's file, and each
    ``.codex/config.toml`` from the launch directory up (whether Codex trusts
    that project is Codex's to decide; a key there is the user's either way).
    Raise :class:`Unreadable` for a profile name that is not a plain file name.
    """
    layers = [system, home / "config.toml"]
    profiles = list(option_values(words_before_prompt(flags), PROFILE_FLAGS))
    if profiles:
        name = profiles[-1]
        if not name or "/" in name or "\0" in name or name.startswith("."):
            raise Unreadable(f"profile {name!r}")
        layers.append(home / f"{name}.config.toml")
    directory = posixpath.normpath(cwd) if posixpath.isabs(cwd) else None
    for _ in range(MAX_PROJECT_DEPTH):
        if directory is None:
            break
        layers.append(Path(directory) / ".codex" / "config.toml")
        parent = posixpath.dirname(directory)
        directory = None if parent == directory else parent
    return layers


def read_config(files: HostFiles, path: Path) -> dict[str, object] | None:
    """A configuration document, or ``None`` when the file does not exist.

    Raise :class:`Unreadable` for one that exists but is not a regular file,
    cannot be read, is larger than :data:`MAX_CONFIG_BYTES` or is not TOML.
    """
    import tomllib  # only when a launch asks: plugin loading stays lean

    if files.stat(path) is None:
        return None
    data = files.read_small(path, MAX_CONFIG_BYTES)
    if data is None:
        raise Unreadable(str(path))
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        raise Unreadable(str(path)) from None


def user_sets(context: AttachmentContext, *, system: Path,
              override: Callable[[list[str]], bool],
              layer: Callable[[dict[str, object]], bool]) -> bool:
    """Whether the user's configuration may set what a launch would add.

    It does when a ``-c`` before the prompt has a key ``override`` takes, when a
    configuration layer (:func:`config_layers`) holds a document ``layer`` takes,
    and when that cannot be told: no Codex home to find the layers in, or a layer
    that cannot be read (Codex itself refuses to start on a malformed file).
    """
    words = words_before_prompt(context.user_flags)
    if any(override(override_key(value)) for value in option_values(words, CONFIG_FLAGS)):
        return True
    home = codex_home(context.env)
    if home is None:
        return True
    try:
        for path in config_layers(home, context.cwd, context.user_flags, system=system):
            config = read_config(context.files, path)
            if config is not None and layer(config):
                return True
    except Unreadable:
        return True
    return False
