"""Reading a harness's JSON-lines event stream, the way every commit parser does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from clanker.commit.failures import CommitFailures

__all__ = ["typed_events"]


def typed_events(
    stdout: str, *, harness: str, key: str = "type", skip: tuple[str, ...] = ()
) -> Iterator[dict[str, Any]]:
    """Yield each line of ``stdout`` as a JSON object naming its event under ``key``.

    Only ``\\n`` ends a line (JSON text may hold U+2028 unescaped); blank lines
    and lines starting with one of ``skip`` (bulky partial updates a parser
    never reads) are passed over. Anything else, even one line, is not the
    harness's stream: a ``parse-failure``.
    """
    for raw in stdout.split("\n"):
        line = raw.strip()
        if not line or (skip and line.startswith(skip)):
            continue
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: absurdly nested input
            raise CommitFailures(harness).parse("a line that is not JSON") from None
        if not isinstance(event, dict) or not isinstance(event.get(key), str):
            raise CommitFailures(harness).parse("a line that is not a typed event")
        yield event
