"""OpenCode's configuration layers, as the bridge and guidance attachments need them.

Read from opencode-ai 1.18.33's own loader (``Config.loadInstanceState``,
``ConfigPaths``; docs/harnesses/opencode.md, "Agent bridge"). In the order
OpenCode merges them (a later layer wins key by key, except that ``plugin``
and ``instructions`` lists are concatenated):

1. ``$XDG_CONFIG_HOME/opencode/{config.json,opencode.json,opencode.jsonc}``;
2. the file ``OPENCODE_CONFIG`` names;
3. ``opencode.jsonc`` / ``opencode.json`` in every directory from the
   project's root down to the working directory (skipped with
   ``OPENCODE_DISABLE_PROJECT_CONFIG``);
4. ``opencode.json{,c}`` in every ``.opencode`` directory from the project's
   root down (skipped the same way), in ``~/.opencode`` and in
   ``OPENCODE_CONFIG_DIR``;
5. ``OPENCODE_CONFIG_CONTENT``, the one layer a launch can own;
6. ``/etc/opencode/opencode.json{,c}`` (managed, wins over everything).

Remote layers (a ``.well-known/opencode`` of a signed-in organisation) need
the network and the user's credentials: they are not read here.

Every file is JSON with comments and trailing commas; ``{env:NAME}`` and
``{file:PATH}`` are replaced in the text before it is parsed.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator, Mapping
from typing import Any, Final

from clanker.launch.capability import AttachmentContext

__all__ = ["CONFIG_VARIABLE", "encode", "launch_document", "parse_jsonc", "user_layers"]

CONFIG_VARIABLE: Final = "OPENCODE_CONFIG_CONTENT"
_MAX_FILE: Final = 1 << 20
"""OpenCode reads its files whole; clanker reads at most this much of one."""
_MAX_DEPTH: Final = 64
"""Directories walked up from the working directory, at most."""
_NAMES: Final = ("opencode.jsonc", "opencode.json")
_GLOBAL_NAMES: Final = ("config.json", "opencode.json", "opencode.jsonc")
_MANAGED: Final = "/etc/opencode"
_TRUE: Final = frozenset({"1", "true"})


class Unreadable(ValueError):
    """A configuration layer that clanker cannot read with certainty."""


def parse_jsonc(text: str) -> Any:
    """Parse OpenCode's configuration syntax: JSON with ``//`` and ``/* */`` comments
    and trailing commas. Raise :class:`Unreadable` on anything else."""
    try:
        return json.loads(_strip(text))
    except (ValueError, RecursionError) as exc:
        raise Unreadable("not JSON with comments") from exc


def _strip(text: str) -> str:
    """``text`` without comments and trailing commas (strings kept as they are)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ValueError("an unterminated comment")
            out.append(" ")
            i = end + 2
        elif c == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            # A comma before a closing bracket is a trailing one (a comment
            # between them is rare enough to fail closed on).
            if j < n and text[j] in "]}":
                i += 1
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def launch_document(env: Mapping[str, str]) -> dict[str, Any]:
    """The document ``OPENCODE_CONFIG_CONTENT`` holds so far (attention's, the user's
    own inherited one, or nothing: ``{}``); raise :class:`Unreadable` when it is not
    one object clanker can rewrite without losing anything."""
    raw = env.get(CONFIG_VARIABLE, "")
    if not raw:  # OpenCode reads only a non-empty value
        return {}
    document = parse_jsonc(raw)
    if not isinstance(document, dict):
        raise Unreadable(f"{CONFIG_VARIABLE} is not an object")
    return document


def encode(document: Mapping[str, Any]) -> str:
    """The value of ``OPENCODE_CONFIG_CONTENT`` for ``document``."""
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


def user_layers(context: AttachmentContext) -> Iterator[tuple[str, Any]]:
    """Each configuration file of the user's that OpenCode would read for this launch,
    parsed: ``(path, document)``. Raise :class:`Unreadable` for one that exists but
    cannot be read or parsed (what it holds is then unknown)."""
    for path in _candidates(context.env, context.cwd, context):
        data = context.files.read_small(path, _MAX_FILE + 1)
        if data is None:
            if context.files.stat(path) is not None:
                raise Unreadable(f"{path} cannot be read")
            continue
        if len(data) > _MAX_FILE:
            raise Unreadable(f"{path} is larger than clanker reads")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise Unreadable(f"{path} is not UTF-8") from exc
        if not text.strip():
            continue  # OpenCode skips an empty file too
        yield path, parse_jsonc(text)


def _candidates(env: Mapping[str, str], cwd: str, context: AttachmentContext) -> Iterator[str]:
    home = env.get("HOME", "")
    config_home = env.get("XDG_CONFIG_HOME") or (posixpath.join(home, ".config") if home else "")
    if config_home:
        for name in _GLOBAL_NAMES:
            yield posixpath.join(config_home, "opencode", name)
    if env.get("OPENCODE_CONFIG"):
        yield posixpath.join(cwd, env["OPENCODE_CONFIG"])
    project = env.get("OPENCODE_DISABLE_PROJECT_CONFIG", "").strip().lower() not in _TRUE
    directories = list(_up(cwd, context)) if project else []
    for directory in reversed(directories):  # the project's root first, as OpenCode
        for name in _NAMES:
            yield posixpath.join(directory, name)
    dot_dirs = [posixpath.join(d, ".opencode") for d in reversed(directories)]
    if home:
        dot_dirs.append(posixpath.join(home, ".opencode"))
    if env.get("OPENCODE_CONFIG_DIR"):
        dot_dirs.append(env["OPENCODE_CONFIG_DIR"])
    for directory in dot_dirs:
        for name in ("opencode.json", "opencode.jsonc"):
            yield posixpath.join(directory, name)
    for name in ("opencode.json", "opencode.jsonc"):
        yield posixpath.join(_MANAGED, name)


def _up(cwd: str, context: AttachmentContext) -> Iterator[str]:
    """The working directory and its parents, up to the git worktree's root (OpenCode's
    project root) or, outside git, the filesystem root."""
    directory = posixpath.normpath(cwd)
    for _ in range(_MAX_DEPTH):
        yield directory
        if context.files.stat(posixpath.join(directory, ".git"), follow=False) is not None:
            return
        parent = posixpath.dirname(directory)
        if parent == directory:
            return
        directory = parent
