"""The provider contract (clanker.testing), run on the Hermes Agent plugin with its captured
fixtures."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest

import clanker_hermes
from clanker.capabilities import Capability
from clanker.execution import CommandResult, SessionExecutor
from clanker.sessions.types import HarnessSession
from clanker.testing import HarnessProviderContract, ScriptedSessionExecutor
from clanker_hermes.attention import BUNDLED_ENV
from tests.plugins.hermes.test_attention import fake_bundled
from tests.plugins.hermes.test_hermes import ReplayedGateway
from tests.plugins.hermes.test_sessions import build, check_types

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hermes"


class TestHermesContract(HarnessProviderContract):
    plugin = clanker_hermes.plugin
    harness_id = "hermes"
    capabilities = frozenset({Capability.LAUNCH, Capability.MODELS, Capability.SESSIONS,
                              Capability.ATTENTION, Capability.USAGE, Capability.ACP})

    @pytest.fixture(autouse=True)
    def known_interpreter(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Listing needs Hermes's Python; name one so tests never depend on an install."""
        monkeypatch.setenv("HERMES_PYTHON", sys.executable)

    # launch
    valid_session_ids = ("20261130_081830_cec5d8",)
    invalid_session_ids = (
        *HarnessProviderContract.invalid_session_ids,
        "20261130_081830_CEC5D8",
        "20261130_081830_cec5d",
        "my session title",
    )

    version_outputs = (
        (CommandResult((FIXTURES / "version.txt").read_text(), "", 0), "0.19.0"),
        (CommandResult("Hermes Agent v0.21.5+2453.gd0288be (2026.9.1) · upstream d0288be5\n",
                       "", 0), "0.21.5+2453.gd0288be"),  # a git checkout
    )

    # models: the gateway's model.options
    models_environ: ClassVar[Mapping[str, str]] = {"HERMES_PYTHON": sys.executable}

    def models_session_executor(self, exit_code: int) -> SessionExecutor | None:
        if exit_code != 0:
            # How the gateway exits after stdin EOF was never captured, so the listing
            # does not read its status: no failed-exit double.
            return None
        gateway = ReplayedGateway("gateway-model-options-custom-loopback.stdout.ndjson")
        return ScriptedSessionExecutor(gateway.session)

    # sessions: one SQLite database, state.db
    def write_sessions(self, environ: Mapping[str, str]) -> None:
        build(Path(environ["HOME"], ".hermes", "state.db"))

    def check_session(self, session: HarnessSession) -> None:
        check_types(session)

    # attention: a launch-owned mirror of Hermes's bundled plugins
    attention_by_hook_command = False
    attention_resume_keeps_the_id = False

    def attention_environ(self, home: Path) -> dict[str, str]:
        return {"HOME": str(home), "PATH": "/bin", BUNDLED_ENV: str(fake_bundled(home))}

    # usage
    usage_policy = (60, 60, 300)  # the spec's: TTL, minimum interval, backoff
    usage_fixtures = FIXTURES / "usage"
    usage_outputs = (
        "usage-json-built-codex.json", "usage-json-built-anthropic.json",
        "usage-json-built-openrouter.json", "usage-json-0.19.0-invalid-choice.stderr.txt",
    )
