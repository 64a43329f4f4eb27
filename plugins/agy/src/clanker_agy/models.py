"""Antigravity models, from ``agy models``.

Each model is one ``<id>\\t<label>`` row on stdout; ``--model=<id>`` takes the
id. The listing comes from the signed-in account, over the network, on every
run (there is nothing to refresh). Some versions print a status line
(``Fetching available models...``) on stdout, others on stderr; older ones
printed bare ids. Only rows with a tab and a plausible id count, so status
lines and prose are skipped; a listing with no such row is a parse failure
(every account has models, and a signed-out agy prints prose).
"""

from __future__ import annotations

import re
from typing import Final

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest
from clanker.models.capability import Model, ModelsContext, model_text

__all__ = ["FALLBACK", "AgyModels", "parse_models_listing"]

_MODEL_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# The spec's bound: the listing is one network round trip for a signed-in account.
_TIMEOUT: Final = 8.0

# Gemini ids seen in public `agy models` captures (agy 1.1.12 to 1.2.7, up to
# September 2026; sources on docs/harnesses/agy.md), newest first, not an
# official list. Display only: agy ignores an unknown --model silently, so
# this list never validates a model a user asks for.
FALLBACK: Final = (
    Model(id="gemini-3.8-flash-high", label="Gemini 3.8 Flash (High)"),
    Model(id="gemini-3.8-flash-medium", label="Gemini 3.8 Flash (Medium)"),
    Model(id="gemini-3.8-flash-low", label="Gemini 3.8 Flash (Low)"),
    Model(id="gemini-3.1-pro-high", label="Gemini 3.1 Pro (High)"),
    Model(id="gemini-3.1-pro-low", label="Gemini 3.1 Pro (Low)"),
)


def parse_models_listing(stdout: str) -> tuple[Model, ...]:
    """Turn ``agy models`` stdout into models, the first row of each id kept."""
    models: dict[str, Model] = {}
    for line in stdout.splitlines():
        model_id, tab, label = line.partition("\t")
        model_id = model_id.strip()
        if not tab or _MODEL_ID.fullmatch(model_id) is None:
            continue  # a status line, prose, or a bare id from an old build
        models.setdefault(model_id, Model(id=model_id, label=model_text(label.strip())))
    if not models:
        raise HarnessCapabilityError(
            ErrorKind.PARSE_FAILURE, "agy models printed no <id>\\t<label> row", harness="agy"
        )
    return tuple(models.values())


class AgyModels:
    """Listing through ``agy models``, bounded at 8 s as in the spec."""

    cache_ttl = 3600.0
    fallback: tuple[Model, ...] = FALLBACK

    async def discover(self, context: ModelsContext) -> tuple[Model, ...]:
        # agy fetches the account's list on every run, so a refresh is the same command.
        request = CommandRequest(command="agy", args=("models",), timeout=_TIMEOUT)
        result = await context.executor.run(request)
        result.require_success("agy")
        return parse_models_listing(result.stdout)

implementation = AgyModels
