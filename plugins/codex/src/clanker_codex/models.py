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

from collections.abc import Mapping
from typing import Any, Final

from clanker.errors import ErrorKind
from clanker.execution import LineSession
from clanker.execution.jsonlines import end_cleanly, send
from clanker.models.capability import Model, ModelsContext, model_text
from clanker_codex.appserver import (
    answer,
    app_server_request,
    fail,
    parse_initialize_response,
    result_of,
    start,
)

__all__ = ["MAX_PAGES", "CodexModels", "parse_initialize_response", "parse_model_list_page"]

MAX_PAGES: Final = 20
"""More pages than this is a server that keeps paginating: a parse failure."""

_FIRST_LIST_ID: Final = 2


def parse_model_list_page(response: Mapping[str, Any]) -> tuple[tuple[Model, ...], str | None]:
    """Return one ``model/list`` page's models and its ``nextCursor``.

    ``Model.id`` is the entry's ``model`` (the slug ``-m`` takes; ``id`` names
    the catalog preset and is the same text in 0.171.0). ``isDefault`` marks
    Codex's own default.
    """
    result = result_of(response, "model/list")
    data, cursor = result.get("data"), result.get("nextCursor")
    if not isinstance(data, list):
        raise fail(ErrorKind.PARSE_FAILURE, "model/list result has no data list")
    if cursor is not None and not (isinstance(cursor, str) and cursor):
        # Opaque (a decimal offset in 0.171.0); it only travels back in the next request.
        raise fail(ErrorKind.PARSE_FAILURE, "model/list nextCursor is not text")
    models = []
    for entry in data:
        if not isinstance(entry, dict):
            raise fail(ErrorKind.PARSE_FAILURE, "a model entry is not an object")
        slug, name = model_text(entry.get("model")), entry.get("displayName")
        default = entry.get("isDefault")
        if slug is None:
            raise fail(ErrorKind.PARSE_FAILURE, "a model entry has no model slug")
        if name is not None and not isinstance(name, str):
            raise fail(ErrorKind.PARSE_FAILURE, "a model displayName is not text")
        if default is not None and not isinstance(default, bool):
            raise fail(ErrorKind.PARSE_FAILURE, "a model isDefault is not a boolean")
        models.append(Model(id=slug, label=model_text(name), is_default=default is True))
    return tuple(models), cursor


class CodexModels:
    """Listing through ``codex app-server``; Codex keeps its own catalog cache."""

    cache_ttl = 3600.0
    fallback: tuple[Model, ...] = ()  # a static list would go stale with every release

    async def discover(self, context: ModelsContext) -> tuple[Model, ...]:
        async with await context.require_sessions("codex").open(app_server_request()) as session:
            await start(session)
            models = await self._pages(session)
            await end_cleanly(session, harness="codex", process="app-server")
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
            found, cursor = parse_model_list_page(await answer(session, request_id))
            models += found
            if cursor is None:
                return models
            params = {"cursor": cursor}
        raise fail(ErrorKind.PARSE_FAILURE, f"model/list went on past {MAX_PAGES} pages")

implementation = CodexModels
