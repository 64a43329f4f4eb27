"""The provider contract (clanker.testing), run on the OpenCode plugin with its captured
fixtures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

import clanker_opencode
from clanker.capabilities import Capability
from clanker.errors import ErrorKind
from clanker.execution import CommandExecutor, CommandRequest, CommandResult
from clanker.testing import HarnessProviderContract, ReplayDouble, ScriptedExecutor
from clanker.testing.commit import install_replay_double, json_lines
from clanker_opencode.commit import COMMIT_CONFIG
from tests.plugins.opencode.test_commit import (
    EVENTS,
    EXIT_CODES,
    STREAM_REFUSALS,
    finish,
    start,
    text,
)
from tests.plugins.opencode.test_opencode import SESSION_IDS, SOURCE_ID, replayed_opencode
from tests.plugins.opencode.test_sessions import GLOBAL

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode"
COMMIT = FIXTURES / "commit"
ANSWER = ("feat: add retry to the sync client\n\n"
          "Retry failed sync requests up to three times with backoff.")
LISTING = "session-list.json"
"""Where the double of `opencode session list` keeps its store: in the home."""


class TestOpenCodeContract(HarnessProviderContract):
    plugin = clanker_opencode.plugin
    harness_id = "opencode"
    capabilities = frozenset({Capability.LAUNCH, Capability.MODELS, Capability.SESSIONS,
                              Capability.ATTENTION, Capability.COMMIT,
                              Capability.AGENT_BRIDGE, Capability.GUIDANCE, Capability.ACP,
                              Capability.CHECKOUT_REHOME})

    # launch
    valid_session_ids = (*SESSION_IDS, "ses_dd492bd1fffecAWp6ORPt8WKIi")
    invalid_session_ids = (
        *HarnessProviderContract.invalid_session_ids,
        "notasession",  # opencode itself refuses it: "Invalid session ID"
        "ses_DD477E2CAFFERx4w8c0S7Feig0",  # the time stamp part is lowercase hex
        "msg_dd477e2caffeRx4w8c0S7Feig0",  # a message id
        "ses-dd477e2caffeRx4w8c0S7Feig0",
        SOURCE_ID[:-1],
        SOURCE_ID + "0",
        SOURCE_ID + "\n",
        "ses_dd477e2caffeRx4w8c0S7Feig_",
        f"/home/u/.local/share/opencode/storage/session/global/{SOURCE_ID}.json",
    )

    version_outputs = ((CommandResult((FIXTURES / "version.txt").read_text(), "", 0), "1.18.33"),)

    # models
    def models_executor(self, exit_code: int) -> CommandExecutor:
        return replayed_opencode(exit_code=exit_code)

    # sessions: OpenCode lists them itself; its double prints the listing kept in the home
    # (nothing at all when there is none, as opencode does without sessions).
    damaged_store_kinds = frozenset({ErrorKind.PARSE_FAILURE})

    def sessions_executor(self, environ: Mapping[str, str]) -> CommandExecutor:
        listing = Path(environ["HOME"], LISTING)

        def respond(request: CommandRequest) -> CommandResult:
            if request.command == "git":  # where the caller is: outside any repository
                return CommandResult("", "fatal: not a git repository", 128)
            assert request.args[:2] == ("session", "list")
            stdout = listing.read_bytes().decode(errors="replace") if listing.exists() else ""
            return CommandResult(stdout, "", 0)

        return ScriptedExecutor(respond)

    def write_sessions(self, environ: Mapping[str, str]) -> None:
        # Where OpenCode keeps them (its data directory: a listing is not run without
        # one when opencode is not on PATH either), and what its double then prints.
        data = Path(environ["HOME"], ".local", "share", "opencode")
        data.mkdir(parents=True, exist_ok=True)
        (data / "opencode.db").write_bytes(b"")
        Path(environ["HOME"], LISTING).write_bytes(GLOBAL.read_bytes())

    # attention
    attention_by_hook_command = False
    attention_resume_keeps_the_id = True

    # commit
    commit_events = EVENTS
    commit_fixtures = COMMIT
    commit_outputs = "*.jsonl"
    commit_decorated = "built-decorated.jsonl"
    commit_start_up_errors = ("run-no-message-devnull.stderr.txt", "run-rejected-flag.stderr.txt",
                              "run-format-invalid.stderr.txt")
    commit_model = "loop/m1"
    commit_args = ("run", "--pure", "--format", "json", "--agent", "clanker-commit",
                   "--title", "clanker commit message")
    commit_env: ClassVar[Mapping[str, str]] = {
        "OPENCODE_CONFIG_CONTENT": (
            '{"agent":{"clanker-commit":{"mode":"primary","permission":"deny"}},'
            '"permission":"deny","snapshot":false,"share":"disabled"}'
        ),
        "OPENCODE_DB": ":memory:",
        "PWD": "",
        "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
    }
    commit_models = ("loop/m1", "openrouter/~anthropic/claude-fable-latest", "-tricky",
                     "opencode/big-pickle")
    commit_answers = tuple((name, ANSWER) for name in (
        "built-success.jsonl", "built-success-multi-step.jsonl",
        "built-duplicate-text-update.jsonl"))
    # The stream alone (exit 0), and with the status it exited with: the stream's reason.
    commit_refusals = (
        *((name, 0, kind, detail) for name, kind, detail in STREAM_REFUSALS),
        *((name, EXIT_CODES[name], kind, detail) for name, kind, detail in STREAM_REFUSALS
          if name in EXIT_CODES),
    )
    commit_empty_detail = "printed no step"

    def commit_model_args(self, model: str) -> Sequence[str]:
        return (f"--model={model}",)

    def commit_output_answering(self, answer: str) -> str:
        return json_lines(start(), text(answer), finish())
    commit_successes = (("built-success-multi-step.jsonl", ANSWER),
                        ("built-success.jsonl", ANSWER))
    commit_failures = (
        ("built-decorated.jsonl", 0, ErrorKind.PARSE_FAILURE),  # the normalizer's refusal
        ("built-thinking-only.jsonl", 0, ErrorKind.PARSE_FAILURE),
        ("built-tool-call-only.jsonl", 0, ErrorKind.PARSE_FAILURE),
        ("run-http-401-recommended.jsonl", 1, ErrorKind.UNAUTHENTICATED),
        ("run-provider-without-key.jsonl", 1, ErrorKind.UNAUTHENTICATED),
        ("run-refused-retries-exhausted.jsonl", 1, ErrorKind.COMMAND_FAILED),
        ("built-incomplete.jsonl", 143, ErrorKind.COMMAND_FAILED),
    )

    def commit_double(self, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> ReplayDouble:
        # It records the variables clanker sets, and PWD; a user's own
        # OPENCODE_CONFIG_CONTENT is replaced for the one run.
        monkeypatch.setenv("OPENCODE_CONFIG_CONTENT", '{"permission":"allow"}')
        return install_replay_double(bin_dir, "opencode", record_env=(
            "OPENCODE_CONFIG_CONTENT", "OPENCODE_DB", "PWD", "OPENCODE_DISABLE_PROJECT_CONFIG"))

    def check_commit_call(self, call: dict[str, Any], repo: Path) -> None:
        assert call["env"] == {
            "OPENCODE_CONFIG_CONTENT": COMMIT_CONFIG,
            "OPENCODE_DB": ":memory:",
            "PWD": "",  # not clanker's own directory
            "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
        }
