"""Claude Code models, from the stream-json control protocol's ``initialize``.

Claude Code has no models command (``claude models`` would be a prompt), but
the ``initialize`` control response carries the model picker's list, offline
and without a model call. It is the list for the current environment and
account (an API key, ``ANTHROPIC_BASE_URL`` or Bedrock change it), not every
value ``--model`` accepts: aliases such as ``fable`` work but are not listed.

The probe is isolated the way the spec's usage adapter (and the Agent SDK's
probe) isolates it: no hooks, no MCP servers, no IDE, no session file. Only
the one ``initialize`` request is written; never a user message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest
from clanker.execution.jsonlines import end_cleanly, read_matching, send
from clanker.models.capability import Model, ModelsContext, model_text

__all__ = [
    "ISOLATION_ARGS",
    "ISOLATION_ENV",
    "PROBE_ARGS",
    "PROBE_ENV",
    "ClaudeModels",
    "answers",
    "parse_initialize_response",
    "probe_request",
]

# The spec's isolation for a Claude Code run clanker starts on its own (this
# probe, usage, and commit messages): no session file, no hooks, no MCP server,
# and only the user's own settings. A repository's `.claude/settings.json` is
# never read: it could otherwise run a command (`apiKeyHelper`) or redirect the
# run (`env.ANTHROPIC_BASE_URL`) just because clanker was started inside it;
# print and stream-json modes skip the workspace-trust dialog that would ask.
ISOLATION_ARGS: Final = (
    "--setting-sources", "user",
    "--no-session-persistence",
    "--settings", '{"disableAllHooks":true}',
    # `--mcp-config` is variadic: an option, never a bare word, must follow it.
    "--mcp-config", '{"mcpServers":{}}', "--strict-mcp-config",
)
ISOLATION_ENV: Final = {
    # No claude.ai connectors, no IDE connection or extension install.
    "ENABLE_CLAUDEAI_MCP_SERVERS": "false",
    "CLAUDE_CODE_AUTO_CONNECT_IDE": "0",
    "CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL": "1",
}
PROBE_ARGS: Final = (
    "--output-format", "stream-json", "--verbose", "--input-format", "stream-json",
    *ISOLATION_ARGS,
)
PROBE_ENV: Final = ISOLATION_ENV
_REQUEST_ID: Final = "clanker-models"
# Frames that only a turn produces, and requests that would want an answer
# (permission, hook, MCP): seeing one means the probe is not what it should be.
_TURN_FRAMES: Final = frozenset({"assistant", "user", "result", "stream_event"})
_DEFAULT_VALUE: Final = "default"


def _fail(kind: ErrorKind, detail: str) -> HarnessCapabilityError:
    return HarnessCapabilityError(kind, detail, harness="claude")


def answers(request_id: str, purpose: str) -> Callable[[dict[str, Any]], bool]:
    """Match the control response to ``request_id``; fail on any sign of a turn.

    Turn frames (``assistant``, ``user``, ``result``, ``stream_event``) and
    inbound ``control_request`` asks (permission, hook, MCP) are never
    answered: nothing is granted, and the probe fails. Other frames and
    responses to other ids are skipped.
    """

    def matches(message: dict[str, Any]) -> bool:
        kind = message.get("type")
        if isinstance(kind, str) and (kind in _TURN_FRAMES or kind == "control_request"):
            raise _fail(ErrorKind.COMMAND_FAILED, f"unexpected {kind} frame while {purpose}")
        response = message.get("response")
        return (
            kind == "control_response"
            and isinstance(response, dict)
            and response.get("request_id") == request_id
        )

    return matches


def probe_request(timeout: float = 30.0) -> CommandRequest:
    """The isolated control-protocol session every Claude probe runs."""
    return CommandRequest(
        command="claude",
        args=PROBE_ARGS,
        env=PROBE_ENV,
        timeout=timeout,
        # One line that also lists the user's commands, agents and skills.
        max_output_bytes=512 * 1024,
    )


def parse_initialize_response(message: Mapping[str, Any]) -> tuple[Model, ...]:
    """Turn an ``initialize`` control response into models.

    ``Model.id`` is the entry's ``value`` (what ``--model`` takes). The
    ``default`` entry stands for Claude Code's own default and is marked so.
    """
    response = message.get("response")
    if not isinstance(response, dict):
        raise _fail(ErrorKind.PARSE_FAILURE, "a control response without a response object")
    subtype = response.get("subtype")
    if subtype == "error":
        # The error text is Claude's; it never leaves the provider.
        raise _fail(ErrorKind.COMMAND_FAILED, "initialize was refused")
    payload = response.get("response")
    if subtype != "success" or not isinstance(payload, dict):
        raise _fail(ErrorKind.PARSE_FAILURE, "initialize answered without a result")
    entries = payload.get("models")
    if not isinstance(entries, list):
        raise _fail(ErrorKind.PARSE_FAILURE, "initialize result has no models list")
    models: dict[str, Model] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise _fail(ErrorKind.PARSE_FAILURE, "a model entry is not an object")
        value, name = model_text(entry.get("value")), entry.get("displayName")
        if value is None:
            raise _fail(ErrorKind.PARSE_FAILURE, "a model entry has no value")
        if name is not None and not isinstance(name, str):
            raise _fail(ErrorKind.PARSE_FAILURE, "a model displayName is not text")
        models.setdefault(value, Model(
            id=value, label=model_text(name), is_default=value == _DEFAULT_VALUE
        ))
    return tuple(models.values())


class ClaudeModels:
    """Listing through one isolated control-protocol ``initialize``."""

    cache_ttl = 3600.0
    fallback: tuple[Model, ...] = ()  # the list depends on provider and account: no guess

    async def discover(self, context: ModelsContext) -> tuple[Model, ...]:
        request = probe_request()
        async with await context.require_sessions("claude").open(request) as session:
            await send(session, {
                "type": "control_request",
                "request_id": _REQUEST_ID,
                "request": {"subtype": "initialize"},
            })
            response = await read_matching(
                session, answers(_REQUEST_ID, "listing"), harness="claude"
            )
            models = parse_initialize_response(response)
            await end_cleanly(session, harness="claude", process="claude")
        return models

implementation = ClaudeModels
