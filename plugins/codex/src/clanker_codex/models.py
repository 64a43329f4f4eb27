"""Codex models, from the app server's ``model/list`` method.

Not ``codex debug models`` (the spec's choice): in 0.171.0 it prints the whole
catalog, prompts included, as one 920 KB JSON line, close to clanker's 1 MiB
per-stream cap and growing by about 65 KB a model; a cut line is no JSON at
all. ``model/list`` answers with the picker's list (filtered, sorted,
paginated, the default marked) in about 13 KB. No model call is made.

The protocol is newline-delimited JSON-RPC without the ``"jsonrpc"`` field:
``initialize`` -> its response -> ``initialized`` -> ``model/list`` pages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import clanker
from clanker.capabilities import ModelsContext
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, LineSession
from clanker.models.types import Model, model_text
from clanker.protocols.jsonlines import read_matching, send

__all__ = ["MAX_PAGES", "CodexModels", "parse_initialize_response", "parse_model_list_page"]

MAX_PAGES: Final = 20
"""More pages than this is a server that keeps paginating: a parse failure."""

_INITIALIZE_ID: Final = 1
_FIRST_LIST_ID: Final = 2
# The app server interleaves notifications (config warnings, remote-control
# status) and may send requests of its own; none of them answers ours.
_MAX_SKIPPED: Final = 2000


def _fail(kind: ErrorKind, detail: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(kind, detail, harness="codex")


def _result(response: Mapping[str, Any], method: str) -> dict[str, Any]:
    """Return the ``result`` object of a response; an ``error`` is command-failed."""
    if "error" in response:
        error = response["error"]
        code = error.get("code") if isinstance(error, dict) else None
        # The server's message can quote config or account details: only the code leaves.
        suffix = f" {code}" if isinstance(code, int) and not isinstance(code, bool) else ""
        raise _fail(ErrorKind.COMMAND_FAILED, f"{method} error{suffix}")
    result = response.get("result")
    if not isinstance(result, dict):
        raise _fail(ErrorKind.PARSE_FAILURE, f"{method} answered without a result object")
    return result


def parse_initialize_response(response: Mapping[str, Any]) -> None:
    """Check an ``initialize`` response; its content (user agent, paths) is not needed."""
    _result(response, "initialize")


def parse_model_list_page(response: Mapping[str, Any]) -> tuple[tuple[Model, ...], str | None]:
    """Return one ``model/list`` page's models and its ``nextCursor``.

    ``Model.id`` is the entry's ``model`` (the slug ``-m`` takes; ``id`` names
    the catalog preset and is the same text in 0.171.0). ``isDefault`` marks
    Codex's own default.
    """
    result = _result(response, "model/list")
    data, cursor = result.get("data"), result.get("nextCursor")
    if not isinstance(data, list):
        raise _fail(ErrorKind.PARSE_FAILURE, "model/list result has no data list")
    if cursor is not None and not (isinstance(cursor, str) and cursor):
        # Opaque (a decimal offset in 0.171.0); it only travels back in the next request.
        raise _fail(ErrorKind.PARSE_FAILURE, "model/list nextCursor is not text")
    models = []
    for entry in data:
        if not isinstance(entry, dict):
            raise _fail(ErrorKind.PARSE_FAILURE, "a model entry is not an object")
        slug, name = model_text(entry.get("model")), entry.get("displayName")
        default = entry.get("isDefault")
        if slug is None:
            raise _fail(ErrorKind.PARSE_FAILURE, "a model entry has no model slug")
        if name is not None and not isinstance(name, str):
            raise _fail(ErrorKind.PARSE_FAILURE, "a model displayName is not text")
        if default is not None and not isinstance(default, bool):
            raise _fail(ErrorKind.PARSE_FAILURE, "a model isDefault is not a boolean")
        models.append(Model(id=slug, label=model_text(name), is_default=default is True))
    return tuple(models), cursor


def _is_response_to(request_id: int) -> Callable[[dict[str, Any]], bool]:
    # A server request carries an id of its own numbering and a method; a response has none.
    return lambda message: message.get("id") == request_id and "method" not in message


class CodexModels:
    """Listing through ``codex app-server``; Codex keeps its own catalog cache."""

    cache_ttl = 3600.0
    fallback: tuple[Model, ...] = ()  # a static list would go stale with every release

    async def discover(self, context: ModelsContext) -> tuple[Model, ...]:
        request = CommandRequest(command="codex", args=("app-server",), timeout=30.0)
        async with await context.require_sessions("codex").open(request) as session:
            await send(session, {
                "id": _INITIALIZE_ID,
                "method": "initialize",
                "params": {
                    "clientInfo": {
                        "name": "clanker", "title": "clanker", "version": clanker.__version__,
                    },
                    "capabilities": None,
                },
            })
            parse_initialize_response(await self._answer(session, _INITIALIZE_ID))
            await send(session, {"method": "initialized"})
            models = await self._pages(session)
            await session.close_input()
            ended = await session.wait()
        # A listing counts only once the server has also exited cleanly.
        if ended.exit_code != 0:
            raise _fail(ErrorKind.COMMAND_FAILED, f"app-server exited {ended.exit_code}")
        unique: dict[str, Model] = {}
        for model in models:
            unique.setdefault(model.id, model)
        return tuple(unique.values())

    async def _pages(self, session: LineSession) -> list[Model]:
        models: list[Model] = []
        params: dict[str, str] = {}  # the server requires params, even empty ones
        for page in range(MAX_PAGES):
            request_id = _FIRST_LIST_ID + page
            await send(session, {"id": request_id, "method": "model/list", "params": params})
            found, cursor = parse_model_list_page(await self._answer(session, request_id))
            models += found
            if cursor is None:
                return models
            params = {"cursor": cursor}
        raise _fail(ErrorKind.PARSE_FAILURE, f"model/list went on past {MAX_PAGES} pages")

    @staticmethod
    async def _answer(session: LineSession, request_id: int) -> dict[str, Any]:
        return await read_matching(
            session, _is_response_to(request_id), harness="codex", max_skipped=_MAX_SKIPPED
        )
