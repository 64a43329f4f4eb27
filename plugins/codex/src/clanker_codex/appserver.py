"""The ``codex app-server`` conversation every stdio probe starts with.

Newline-delimited JSON-RPC without the ``"jsonrpc"`` field, over
``codex app-server`` (stdio is its default listener; plain, so it works on
every version and matches upstream's own test client)::

    -> {"id": 1, "method": "initialize", "params": {"clientInfo": ..., "capabilities": null}}
    <- {"id": 1, "result": {...}}      (notifications may come before or after)
    -> {"method": "initialized"}

after which the probe sends its own requests. Models and usage both open the
server through :func:`app_server_request` and :func:`start`, and read answers
with :func:`answer`: the handshake lives here only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import clanker
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, LineSession
from clanker.execution.jsonlines import read_matching, send

__all__ = [
    "INITIALIZE_ID",
    "MAX_SKIPPED",
    "answer",
    "app_server_request",
    "error_code",
    "fail",
    "parse_initialize_response",
    "result_of",
    "start",
]

INITIALIZE_ID: Final = 1
# The app server interleaves notifications (config warnings, remote-control
# status, account updates) and may send requests of its own; none of them
# answers ours, and none is ever answered.
MAX_SKIPPED: Final = 2000
_TIMEOUT: Final = 30.0


def fail(kind: ErrorKind, detail: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(kind, detail, harness="codex")


def app_server_request(timeout: float = _TIMEOUT) -> CommandRequest:
    """Return the one command every app-server probe runs: ``codex app-server``."""
    return CommandRequest(command="codex", args=("app-server",), timeout=timeout)


def error_code(response: Mapping[str, Any]) -> int | None:
    """The JSON-RPC ``error.code`` of a response, when it is an integer."""
    error = response.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def result_of(response: Mapping[str, Any], method: str) -> dict[str, Any]:
    """Return the ``result`` object of a response; an ``error`` is command-failed."""
    if "error" in response:
        # The server's message can quote config or account details: only the code leaves.
        code = error_code(response)
        suffix = f" {code}" if code is not None else ""
        raise fail(ErrorKind.COMMAND_FAILED, f"{method} error{suffix}")
    result = response.get("result")
    if not isinstance(result, dict):
        raise fail(ErrorKind.PARSE_FAILURE, f"{method} answered without a result object")
    return result


def parse_initialize_response(response: Mapping[str, Any]) -> None:
    """Check an ``initialize`` response; its content (user agent, paths) is not needed."""
    result_of(response, "initialize")


def _is_response_to(request_id: int) -> Callable[[dict[str, Any]], bool]:
    # A server request carries an id of its own numbering and a method; a response has none.
    return lambda message: message.get("id") == request_id and "method" not in message


async def answer(session: LineSession, request_id: int) -> dict[str, Any]:
    """Read up to the response to ``request_id``, skipping (never answering) the rest."""
    return await read_matching(
        session, _is_response_to(request_id), harness="codex", max_skipped=MAX_SKIPPED
    )


async def start(session: LineSession) -> None:
    """``initialize`` -> its response -> ``initialized``."""
    await send(session, {
        "id": INITIALIZE_ID,
        "method": "initialize",
        "params": {
            "clientInfo": {"name": "clanker", "title": "clanker", "version": clanker.__version__},
            "capabilities": None,
        },
    })
    parse_initialize_response(await answer(session, INITIALIZE_ID))
    await send(session, {"method": "initialized"})
