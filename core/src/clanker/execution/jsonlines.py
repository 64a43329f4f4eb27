"""JSON from a harness's output: one document, or one object per line.

A one-shot command that prints one JSON document (a usage report, a model
catalog) is read with :func:`document_list`: the root object and the list
under one key, or a ``parse-failure``, worded the same for every harness; a
whole recorded stdio transcript, with :func:`transcript_objects`.

Several harnesses speak a JSON-RPC-like protocol over stdio (app servers,
control protocols, gateways), over a :class:`~clanker.execution.LineSession`.
The provider owns the protocol: what to send, which message answers it. This
module only frames: it encodes one object per line, and reads lines until one
matches, skipping unrelated messages up to a bound so a chatty server cannot
keep us reading forever; :func:`end_cleanly` ends the exchange, so that an
answer counts only from a process that exited 0.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import LineSession

__all__ = [
    "DEFAULT_MAX_SKIPPED",
    "document_list",
    "end_cleanly",
    "read_matching",
    "send",
    "transcript_objects",
]

DEFAULT_MAX_SKIPPED: Final = 256

JsonObject = dict[str, Any]


def document_list(
    stdout: str, key: str, *, command: str, harness: str
) -> tuple[JsonObject, list[Any]]:
    """Return the one JSON object ``stdout`` holds and the list under ``key``.

    Output that is not one JSON document (or nests too deeply to decode), a
    root that is not an object, or no list under ``key`` is a
    ``parse-failure`` ("<command> did not print one JSON document", "the
    document has no <key> list"). The entries are the caller's to check.
    """
    try:
        document = json.loads(stdout)
    except (ValueError, RecursionError) as exc:  # RecursionError: absurdly nested input
        raise HarnessCapabilityError(
            ErrorKind.PARSE_FAILURE, f"{command} did not print one JSON document", harness=harness
        ) from exc
    entries = document.get(key) if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise HarnessCapabilityError(
            ErrorKind.PARSE_FAILURE, f"the document has no {key} list", harness=harness
        )
    return document, entries


def transcript_objects(stdout: str, *, harness: str) -> list[JsonObject]:
    """Return every line of a recorded stdio exchange (a probe's whole stdout) as
    a JSON object, in order; any line that is not one (a blank line too) is the
    ``parse-failure`` :func:`read_matching` gives it."""
    messages = []
    for line in stdout.splitlines():
        message = _object(line)
        if message is None:
            raise _not_an_object(harness)
        messages.append(message)
    return messages


def _object(line: str) -> JsonObject | None:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: absurdly nested input
        return None
    return message if isinstance(message, dict) else None


def _not_an_object(harness: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(
        ErrorKind.PARSE_FAILURE, "a line that is not a JSON object", harness=harness
    )


async def send(session: LineSession, message: Mapping[str, Any]) -> None:
    """Write ``message`` as one compact JSON line."""
    await session.write_line(json.dumps(message, separators=(",", ":"), ensure_ascii=False))


async def read_matching(
    session: LineSession,
    matches: Callable[[JsonObject], bool],
    *,
    harness: str,
    max_skipped: int = DEFAULT_MAX_SKIPPED,
    allow_non_json: bool = False,
) -> JsonObject:
    """Return the next JSON object for which ``matches`` is true.

    Other JSON objects are skipped, at most ``max_skipped`` of them. A line
    that is not a JSON object is a ``parse-failure`` unless ``allow_non_json``
    (some servers print banners on stdout). End of output before a match is
    ``command-failed``.
    """
    skipped = 0
    while True:
        line = await session.read_line()
        if line is None:
            raise HarnessCapabilityError(
                ErrorKind.COMMAND_FAILED, "the server ended before answering", harness=harness
            )
        message = _object(line)
        if message is None:
            if not allow_non_json:
                raise _not_an_object(harness)
        elif matches(message):
            return message
        skipped += 1
        if skipped > max_skipped:
            raise HarnessCapabilityError(
                ErrorKind.PARSE_FAILURE,
                f"no answer within {max_skipped} unrelated messages",
                harness=harness,
            )


async def end_cleanly(session: LineSession, *, harness: str, process: str) -> None:
    """Close the session's stdin and wait for it to exit; any exit but 0 is
    ``command-failed`` ("<process> exited <status>"), so what was read before counts
    only once the process has also ended cleanly."""
    await session.close_input()
    ended = await session.wait()
    if ended.exit_code != 0:
        raise HarnessCapabilityError(
            ErrorKind.COMMAND_FAILED, f"{process} exited {ended.exit_code}", harness=harness
        )
