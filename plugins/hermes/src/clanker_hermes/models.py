"""Hermes models, from its TUI gateway's ``model.options`` JSON-RPC method.

Hermes has no non-interactive listing command (``hermes model`` is a picker).
Its TUI starts ``<hermes python> -m tui_gateway.entry`` and asks it over
newline-delimited JSON-RPC; clanker does the same, with ``explicit_only`` so
only providers the user configured are listed. No model call is made.
"""

from __future__ import annotations

import posixpath
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest
from clanker.execution.jsonlines import read_matching, send
from clanker.models.capability import Model, ModelsContext, model_text
from clanker.stores import HostFiles, home_directory
from clanker_hermes.launch import PROVIDER_SEPARATOR

__all__ = ["HermesModels", "gateway_interpreter", "parse_model_options"]

_REQUEST_ID: Final = 1
_SHEBANG_LIMIT: Final = 512
_LAUNCHER_LIMIT: Final = 64 * 1024


def _from_path(interpreter: str) -> tuple[str, str | None]:
    path = Path(interpreter)
    return path.name, str(path.parent)


def gateway_interpreter(environ: Mapping[str, str], files: HostFiles) -> tuple[str, str | None]:
    """Return ``(command, directory to put first on PATH)`` for Hermes's Python.

    In order: ``HERMES_PYTHON``; the official installer's venv under
    ``HERMES_HOME`` (default ``~/.hermes``); the interpreter named in the
    ``hermes`` script's shebang (pip, pipx and uv installs).
    """
    explicit = environ.get("HERMES_PYTHON")
    if explicit and posixpath.isabs(explicit):
        return _from_path(explicit)
    home = environ.get("HERMES_HOME") or posixpath.join(home_directory(environ) or "~", ".hermes")
    bundled = posixpath.join(home, "hermes-agent", "venv", "bin", "python")
    found = files.stat(bundled) if posixpath.isabs(bundled) else None
    if found is not None and stat.S_ISREG(found.st_mode):
        return _from_path(bundled)
    script = files.which("hermes", environ.get("PATH"))
    if script is None:
        raise HarnessCapabilityError(ErrorKind.BINARY_UNAVAILABLE, "hermes", harness="hermes")
    # A launcher script is small; a binary launcher's first bytes are no shebang.
    head = files.read_small(script, _LAUNCHER_LIMIT) or b""
    if not head:
        raise HarnessCapabilityError(
            ErrorKind.NOT_CONFIGURED, "cannot read the hermes launcher", harness="hermes"
        )
    first = head[:_SHEBANG_LIMIT].split(b"\n", 1)[0].decode("utf-8", errors="replace").strip()
    words = first.removeprefix("#!").split()
    if not first.startswith("#!") or not words:
        raise HarnessCapabilityError(
            ErrorKind.NOT_CONFIGURED, "the hermes launcher names no Python", harness="hermes"
        )
    if Path(words[0]).name == "env" and len(words) == 2:
        return words[1], None
    if len(words) == 1 and posixpath.isabs(words[0]):
        return _from_path(words[0])
    raise HarnessCapabilityError(
        ErrorKind.NOT_CONFIGURED, "unrecognized hermes launcher", harness="hermes"
    )


def _parse_failure(detail: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(ErrorKind.PARSE_FAILURE, detail, harness="hermes")


def parse_model_options(response: Mapping[str, Any]) -> tuple[Model, ...]:
    """Turn a ``model.options`` response into models ``<provider>::<model>``.

    Rows the gateway marks unauthenticated, or that list no model, are not
    launchable and are left out. The current default is marked.
    """
    if "error" in response:
        error = response["error"]
        code = error.get("code") if isinstance(error, dict) else None
        raise HarnessCapabilityError(
            ErrorKind.COMMAND_FAILED, f"model.options error {code}", harness="hermes"
        )
    result = response.get("result")
    if not isinstance(result, dict) or not isinstance(result.get("providers"), list):
        raise _parse_failure("model.options result has no providers list")
    current_model = result.get("model")
    current_provider = result.get("provider")
    models: dict[str, Model] = {}
    for row in result["providers"]:
        if not isinstance(row, dict):
            raise _parse_failure("a provider row is not an object")
        slug, names = row.get("slug"), row.get("models")
        if not isinstance(slug, str) or not isinstance(names, list):
            raise _parse_failure("a provider row lacks slug or models")
        if row.get("authenticated") is False or PROVIDER_SEPARATOR in slug:
            continue
        if model_text(slug) is None:
            raise _parse_failure("a provider slug is not text")
        for name in names:
            if model_text(name) is None:
                raise _parse_failure("a model name is not text")
            model_id = f"{slug}{PROVIDER_SEPARATOR}{name}"
            models.setdefault(model_id, Model(
                id=model_id, label=name, provider=slug,
                is_default=(name == current_model and slug == current_provider),
            ))
    return tuple(models.values())


class HermesModels:
    """Listing through the gateway; Hermes keeps its own one-hour provider caches."""

    cache_ttl = 3600.0
    fallback: tuple[Model, ...] = ()  # any fallback would guess at the user's providers

    async def discover(self, context: ModelsContext) -> tuple[Model, ...]:
        command, directory = gateway_interpreter(context.environ, context.files)
        env = {"HERMES_DISABLE_LAZY_INSTALLS": "1"}  # never pip-install while listing
        if directory is not None:
            env["PATH"] = directory + ":" + context.environ.get("PATH", "/usr/bin:/bin")
        request = CommandRequest(
            command=command,
            args=("-m", "tui_gateway.entry"),
            env=env,
            # A cold catalog cache makes Hermes ask its catalog sites first.
            timeout=30.0 if context.refresh else 20.0,
        )
        params: dict[str, bool] = {"explicit_only": True}
        if context.refresh:
            params["refresh"] = True
        async with await context.require_sessions("hermes").open(request) as session:
            await read_matching(
                session,
                lambda m: m.get("method") == "event"
                and isinstance(m.get("params"), dict)
                and m["params"].get("type") == "gateway.ready",
                harness="hermes",
            )
            await send(session, {"jsonrpc": "2.0", "id": _REQUEST_ID,
                                 "method": "model.options", "params": params})
            response = await read_matching(
                session, lambda m: m.get("id") == _REQUEST_ID, harness="hermes"
            )
            await session.close_input()
            await session.wait()
        return parse_model_options(response)

implementation = HermesModels
