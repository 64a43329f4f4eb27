"""The shape of a commit invocation: the prompt on stdin, bounded inference."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from clanker.execution import INFERENCE_TIMEOUT, CommandRequest

__all__ = ["inference_request"]


def inference_request(
    command: str, args: Sequence[str], stdin: bytes, *, env: Mapping[str, str] | None = None
) -> CommandRequest:
    """The command that writes a commit message: ``stdin`` (the prompt, or the harness's
    framing of it) is written whole and closed, and nothing from the change is ever
    an argument. The commit service sets where it runs, its time and its caps."""
    return CommandRequest(command=command, args=tuple(args), env=dict(env or {}), stdin=stdin,
                          timeout=INFERENCE_TIMEOUT, inference=True)
