"""OpenCode models, from ``opencode models``.

One ``<provider>/<model>`` line per model on stdout, sorted by opencode, and
nothing else; each line is exactly what ``opencode -m`` takes. The provider is
the text before the first ``/``: model keys may contain more (``openrouter/
~anthropic/claude-fable-latest``). opencode lists the providers it has
credentials or configuration for, from its cached or bundled catalog; without
any it lists its free ``opencode`` models. No model call is made.
"""

from __future__ import annotations

from typing import Final

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import MAX_OUTPUT, CommandRequest
from clanker.models.capability import Model, ModelsContext, model_text

__all__ = ["FALLBACK", "OpenCodeModels", "listing_args", "parse_models_listing"]

# A listing takes 4-10 s on two cores; `--refresh` offline took up to 60 s once.
_TIMEOUT: Final = 30.0

# The free models opencode-ai 1.18.33 lists with no credentials and no
# network, from the catalog bundled in its binary (tests/fixtures/opencode/
# models-offline.txt). Display only: the bundled catalog changes with every
# release, so this list never validates a model a user asks for.
FALLBACK: Final = tuple(
    Model(id=f"opencode/{key}", provider="opencode")
    for key in (
        "big-pickle",
        "ling-3.0-flash-fin-free",
        "longcat-2.5-preview-free",
        "mimo-v2.6-flash-free",
        "muse-spark-1.3-contributor-free",
        "nemotron-3-ultra-free",
        "nemotron-3.5-lightning-free",
        "space-bunny-free",
    )
)


def listing_args(refresh: bool) -> tuple[str, ...]:
    """Return the ``opencode`` arguments that list models.

    ``--refresh`` asks opencode to fetch its catalog first. It exits 0 and
    reports "Models cache refreshed" even when that fetch failed, so its
    success proves nothing: only the list it prints counts, as for a plain one.
    """
    return ("models", "--refresh") if refresh else ("models",)


def _parse_failure(detail: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(ErrorKind.PARSE_FAILURE, detail, harness="opencode")


def parse_models_listing(stdout: str) -> tuple[Model, ...]:
    """Turn ``opencode models`` stdout into models identified by ``provider/model``.

    Empty output is a valid empty listing. Any line that is not
    ``<provider>/<model>`` (a blank line, ``--verbose`` JSON, colour codes)
    means the format is not the one clanker knows: a parse failure.
    """
    text = stdout.removesuffix("\n")
    if not text:
        return ()
    models: dict[str, Model] = {}
    for line in text.split("\n"):
        provider, slash, key = line.partition("/")
        if model_text(line) is None or not slash:
            raise _parse_failure("a line is not <provider>/<model>")
        if model_text(provider) is None or model_text(key) is None:
            raise _parse_failure("a line has an empty provider or model")
        models.setdefault(line, Model(id=line, provider=provider))
    return tuple(models.values())


class OpenCodeModels:
    """Listing through ``opencode models``; opencode refreshes its own catalog hourly."""

    cache_ttl = 3600.0
    fallback: tuple[Model, ...] = FALLBACK

    async def discover(self, context: ModelsContext) -> tuple[Model, ...]:
        request = CommandRequest(
            command="opencode",
            args=listing_args(context.refresh),
            timeout=_TIMEOUT,
            # About 40 bytes a line; every provider of the catalog configured
            # at once comes to a few thousand lines.
            max_output_bytes=MAX_OUTPUT,
        )
        result = await context.executor.run(request)
        result.require_success("opencode")
        return parse_models_listing(result.stdout)

implementation = OpenCodeModels
