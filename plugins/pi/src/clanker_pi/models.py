"""Pi models, from its RPC mode's ``get_available_models`` command.

``pi --list-models`` prints a padded text table, on stderr whenever stdin is
not a terminal. The RPC mode answers with full model objects as JSON on the
real stdout, and makes no model call. clanker starts it without a session
file, sends one request, reads the response with the same id, closes stdin
and waits for pi's clean exit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import MAX_OUTPUT, CommandRequest
from clanker.execution.jsonlines import read_matching, send
from clanker.models.capability import Model, ModelsContext, model_text

__all__ = ["LISTING_ARGS", "PiModels", "parse_available_models"]

_COMMAND: Final = "get_available_models"
_REQUEST_ID: Final = "clanker-models"
# --no-session: no session directory or file is written. --offline: pi does not
# install missing extension packages or check for updates while it lists.
LISTING_ARGS: Final = ("--mode", "rpc", "--no-session", "--offline")
# A start takes 2-4 s; pi reads its catalog from disk, so this is slack, not a fetch.
_TIMEOUT: Final = 20.0


def _parse_failure(detail: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(ErrorKind.PARSE_FAILURE, detail, harness="pi")


def _answers_request(message: Mapping[str, Any]) -> bool:
    if message.get("type") != "response":
        return False
    # Pi drops the id from its "unknown command" answer; that still answers us.
    return message.get("id") == _REQUEST_ID or (
        "id" not in message and message.get("command") in (_COMMAND, "parse")
    )


def parse_available_models(response: Mapping[str, Any]) -> tuple[Model, ...]:
    """Turn a ``get_available_models`` response into models ``<provider>/<id>``.

    ``<provider>/<id>`` is the form ``pi --model`` resolves exactly. Pi only
    lists models it has credentials for, so an empty list is a valid answer.
    """
    if response.get("success") is not True:
        # Pi's error text is vendor text: it stays out of the message.
        raise HarnessCapabilityError(
            ErrorKind.COMMAND_FAILED, f"{_COMMAND} was refused", harness="pi"
        )
    data = response.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise _parse_failure(f"{_COMMAND} response has no models list")
    models: dict[str, Model] = {}
    for entry in data["models"]:
        if not isinstance(entry, dict):
            raise _parse_failure("a model entry is not an object")
        provider, model_id = model_text(entry.get("provider")), model_text(entry.get("id"))
        if provider is None or model_id is None:
            raise _parse_failure("a model entry lacks a provider or id")
        qualified = f"{provider}/{model_id}"
        models.setdefault(
            qualified, Model(id=qualified, label=model_text(entry.get("name")), provider=provider)
        )
    return tuple(models.values())


class PiModels:
    """Listing through ``pi --mode rpc``; pi's catalog is local, so refresh changes nothing."""

    cache_ttl = 3600.0
    fallback: tuple[Model, ...] = ()  # any fallback would guess at the user's providers

    async def discover(self, context: ModelsContext) -> tuple[Model, ...]:
        request = CommandRequest(
            command="pi",
            args=LISTING_ARGS,
            timeout=_TIMEOUT,
            # Full model objects are ~300 bytes each, all on one line.
            max_output_bytes=MAX_OUTPUT,
        )
        async with await context.require_sessions("pi").open(request) as session:
            await send(session, {"id": _REQUEST_ID, "type": _COMMAND})
            try:
                response = await read_matching(session, _answers_request, harness="pi")
            except RecursionError as exc:  # a pathologically nested line
                raise _parse_failure("a line that is not a JSON object") from exc
            await session.close_input()
            finished = await session.wait()
        if finished.exit_code != 0:
            raise HarnessCapabilityError(
                ErrorKind.COMMAND_FAILED, f"exit status {finished.exit_code}", harness="pi"
            )
        return parse_available_models(response)

implementation = PiModels
