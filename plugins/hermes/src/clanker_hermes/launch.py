"""Hermes command lines: ``hermes [-m MODEL [--provider SLUG]] --tui [--resume ID] FLAGS``."""

from __future__ import annotations

import re
from typing import Final

from clanker.launch.capability import (
    LaunchPlan,
    LaunchRequest,
)
from clanker.launch.harness import HarnessLaunch

__all__ = ["PROVIDER_SEPARATOR", "HermesLaunch", "split_model"]

# A listed Hermes model is "<provider slug>::<model>": model ids may contain
# "/" and ":" (openrouter, ollama), provider slugs contain neither, and "::"
# occurs in no model id Hermes lists. A plain id launches without --provider.
PROVIDER_SEPARATOR: Final = "::"
_SLUG: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SESSION_ID: Final = re.compile(r"\d{8}_\d{6}_[0-9a-f]{6}")
_VERSION: Final = re.compile(r"^Hermes Agent v(\S+) \(", re.MULTILINE)


def split_model(model: str) -> tuple[str | None, str]:
    """Return ``(provider, model)`` for a possibly provider-qualified model."""
    provider, sep, rest = model.partition(PROVIDER_SEPARATOR)
    if sep and rest and _SLUG.fullmatch(provider):
        return provider, rest
    return None, model


class HermesLaunch(HarnessLaunch):
    """Hermes's launch: the modern TUI (the bare command starts the classic REPL)."""

    executable = "hermes"
    # Hermes also resumes by title; clanker resumes by id only, so a
    # session can never be picked by a lookalike title.
    session_id = _SESSION_ID
    session_id_problem = "a Hermes session id looks like 20261130_081830_cec5d8"
    version = _VERSION

    def build(self, request: LaunchRequest) -> LaunchPlan:
        argv = ["hermes"]
        if request.model is not None:
            provider, model = split_model(request.model)
            argv += ["-m", model]
            if provider is not None:
                argv += ["--provider", provider]
        argv.append("--tui")
        if request.session is not None:  # resume: the descriptor declares no fork
            argv += ["--resume", request.session.native_id]
        argv += request.user_flags
        return LaunchPlan(argv=tuple(argv))


implementation = HermesLaunch
