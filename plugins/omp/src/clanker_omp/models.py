"""Oh My Pi models, from ``omp models --json``.

One JSON document on stdout, ``{"models": [...]}``, listing the models omp
has credentials for, sorted by provider then id. Each entry's ``selector``
(``provider/id``) is what ``omp --model`` takes. No model call is made, but
omp refreshes provider catalogs it has not cached (``refresh`` forces that).
"""

from __future__ import annotations

from typing import Final

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import MAX_OUTPUT, CommandRequest
from clanker.execution.jsonlines import document_list
from clanker.models.capability import Model, ModelsContext, model_text

__all__ = ["OmpModels", "listing_args", "parse_models_json"]

# The spec's omp 18.4 entries carry a `kind` ("accept chat entries only");
# 18.2.3 has no such field, and every entry it lists is a chat model.
_CHAT: Final = "chat"
# Start-up is 3-7 s; a cold catalog cache adds one request per provider.
_TIMEOUT: Final = 30.0


def listing_args(refresh: bool) -> tuple[str, ...]:
    """Return the ``omp`` arguments that list models, forcing an online catalog on refresh."""
    return ("models", "refresh", "--json") if refresh else ("models", "--json")


def _parse_failure(detail: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(ErrorKind.PARSE_FAILURE, detail, harness="omp")


def parse_models_json(stdout: str) -> tuple[Model, ...]:
    """Turn ``omp models --json`` output into models identified by their selector.

    An empty list is a valid answer: omp lists nothing without credentials.
    """
    _, entries = document_list(stdout, "models", command="omp models --json", harness="omp")
    models: dict[str, Model] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise _parse_failure("a model entry is not an object")
        kind = entry.get("kind", _CHAT)
        if not isinstance(kind, str):
            raise _parse_failure("a model kind is not text")
        if kind != _CHAT:
            continue
        selector, provider = model_text(entry.get("selector")), model_text(entry.get("provider"))
        if selector is None or provider is None:
            raise _parse_failure("a model entry lacks a selector or provider")
        models.setdefault(
            selector, Model(id=selector, label=model_text(entry.get("name")), provider=provider)
        )
    return tuple(models.values())


class OmpModels:
    """Listing through ``omp models --json``; omp itself caches catalogs for 24 hours."""

    cache_ttl = 3600.0
    fallback: tuple[Model, ...] = ()  # any fallback would guess at the user's providers

    async def discover(self, context: ModelsContext) -> tuple[Model, ...]:
        request = CommandRequest(
            command="omp",
            args=listing_args(context.refresh),
            timeout=_TIMEOUT,
            # One line of ~300 bytes per model; the spec saw 561 models on one machine.
            max_output_bytes=MAX_OUTPUT,
        )
        result = await context.executor.run(request)
        result.require_success("omp")
        return parse_models_json(result.stdout)


implementation = OmpModels
