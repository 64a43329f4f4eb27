"""The commit contract: what a provider implements to write a commit message
through its harness's non-interactive structured mode.

A plugin imports its commit types (and the shared answer checks) from here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import ClassVar, Protocol, runtime_checkable

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
from clanker.errors import ErrorKind
from clanker.execution import CommandRequest, CommandResult

__all__ = [
    "CommitCapability",
    "CommitFailures",
    "HarnessCommit",
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


class HarnessCommit:
    """A commit capability from a harness's facts: ``command ARGS [MODEL]``, the
    prompt on stdin, the answer read by :func:`answer_by_exit`.

    A provider subclasses it, states the facts as class attributes and writes
    ``parse_stream`` (the one part that is each harness's own)::

        class ZedCommit(HarnessCommit):
            command = "zed"
            args = ("--print", "--output=json")
            model_bound = True

            def parse_stream(self, stdout: str) -> str: ...

    ``stdin`` turns the prompt into what the harness reads (the prompt in UTF-8
    unless overridden); a harness whose exit status means more than
    :func:`answer_by_exit` knows writes ``parse_output`` itself.
    """

    command: ClassVar[str]
    """The bare command the invocation runs (failures name it as the harness)."""
    args: ClassVar[Sequence[str]]
    """Its arguments, before the model option (:func:`with_model`)."""
    model_bound: ClassVar[bool]
    """Whether the model is one ``--model=MODEL`` token rather than two."""
    env: ClassVar[Mapping[str, str] | None] = None
    """Variables the invocation sets, if any."""
    reported: ClassVar[Collection[ErrorKind]] = (
        ErrorKind.COMMAND_FAILED, ErrorKind.UNAUTHENTICATED)
    """The output's own failures a non-zero exit raises as they are (:func:`answer_by_exit`)."""

    def stdin(self, prompt: str) -> bytes:
        """Return what the harness reads: ``prompt`` in UTF-8, written whole and closed."""
        return prompt.encode("utf-8")

    def parse_stream(self, stdout: str) -> str:
        """Return the answer in the harness's structured output, or raise a typed failure."""
        raise NotImplementedError(f"{type(self).__name__} reads no output")

    def build_invocation(self, model: str | None, prompt: str) -> CommandRequest:
        args = with_model(self.args, model, bound=self.model_bound)
        return inference_request(self.command, args, self.stdin(prompt), env=self.env)

    def parse_output(self, result: CommandResult) -> str:
        return answer_by_exit(result, self.parse_stream, harness=self.command,
                              reported=self.reported)
