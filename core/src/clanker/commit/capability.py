"""The commit contract: what a provider implements to write a commit message
through its harness's non-interactive structured mode.

A plugin imports its commit types (and the shared answer checks) from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from clanker.commit.events import typed_events
from clanker.commit.exits import answer_by_exit
from clanker.commit.failures import CommitFailures, http_status
from clanker.commit.invocation import inference_request
from clanker.commit.message import text_answer
from clanker.commit.turns import (
    LastTurn,
    answer_text,
    events_after_header,
    last_turn,
    stopped_answer,
)
from clanker.execution import CommandRequest, CommandResult

__all__ = [
    "CommitCapability",
    "CommitFailures",
    "LastTurn",
    "answer_by_exit",
    "answer_text",
    "events_after_header",
    "http_status",
    "inference_request",
    "last_turn",
    "stopped_answer",
    "text_answer",
    "typed_events",
    "with_model",
]


def with_model(args: Sequence[str], model: str | None, *, bound: bool) -> list[str]:
    """Return ``args`` followed by the model option, last on the command line.

    ``bound`` gives one token, ``--model=MODEL``; otherwise two, ``--model MODEL``.
    Either way the value stays the model whatever it looks like, since nothing
    follows it. Without a model, ``args`` alone: the harness's own default.
    """
    if model is None:
        return list(args)
    if bound:
        return [*args, f"--model={model}"]
    return [*args, "--model", model]


@runtime_checkable
class CommitCapability(Protocol):
    """Writes a commit message through the harness's non-interactive structured mode."""

    def build_invocation(self, model: str | None, prompt: str) -> CommandRequest:
        """Return the bounded inference command (the service decides cwd, time and caps)."""
        ...

    def parse_output(self, result: CommandResult) -> str:
        """Return the authoritative message text, or raise ``parse-failure``
        (``unauthenticated`` when the output says the harness is signed out)."""
        ...
