"""The provider contract (clanker.testing), run on the pi plugin with its captured fixtures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import clanker_pi
from clanker.capabilities import Capability
from clanker.errors import ErrorKind
from clanker.execution import CommandResult, SessionExecutor
from clanker.sessions.types import HarnessSession, SessionScan
from clanker.stores import FileSample
from clanker.testing import HarnessProviderContract
from clanker.testing.message_stream import assistant_message, message_run
from clanker_pi.summaries import HEAD_BYTES, TAIL_BYTES, summarize
from tests.plugins.pi.test_commit import EVENTS, HEADER
from tests.plugins.pi.test_pi import FORK_ID, SESSION_FILE, SESSION_ID, STORE_PATH, replayed_rpc
from tests.plugins.pi.test_sessions import (
    CAPTURED,
    FIXTURES,
    HUGE_SESSION_FILES,
    MAIN,
    PIREPO,
    SESSION_FILES,
    copy_store,
    iso,
    ms,
)

COMMIT = FIXTURES / "commit"
MESSAGE = ("feat: add retry to the sync client\n\n"
           "Retry transient network failures with exponential backoff so a\n"
           "flaky connection no longer aborts a sync.")


class TestPiContract(HarnessProviderContract):
    plugin = clanker_pi.plugin
    harness_id = "pi"
    capabilities = frozenset({Capability.LAUNCH, Capability.MODELS, Capability.SESSIONS,
                              Capability.ATTENTION, Capability.COMMIT, Capability.GUIDANCE})

    # launch
    valid_session_ids = (
        SESSION_ID,
        FORK_ID,
        "3f2c9a4e-8b1d-4c6e-9f0a-1b2c3d4e5f60",  # a v4 id, as pi wrote before 0.67.1
    )
    invalid_session_ids = (
        *HarnessProviderContract.invalid_session_ids,
        SESSION_ID.upper(),
        SESSION_ID[:8],  # pi accepts prefixes; clanker names whole sessions only
        SESSION_ID.replace("-", ""),
        "{" + SESSION_ID + "}",
        STORE_PATH,
        SESSION_FILE.name,
    )

    # On stderr when stdin is no terminal; with one, the same bytes on stdout.
    version_outputs = ((CommandResult("", (FIXTURES / "version.txt").read_text(), 0), "0.73.1"),
                       (CommandResult((FIXTURES / "version.txt").read_text(), "", 0), "0.73.1"))

    # models: the RPC mode's get_available_models
    def models_session_executor(self, exit_code: int) -> SessionExecutor:
        return replayed_rpc("rpc-get_available_models-loopback.jsonl", exit_code=exit_code)

    # sessions
    session_documents = SESSION_FILES
    session_samples = tuple(FIXTURES / row[0] for row in CAPTURED)
    session_expected = tuple((FIXTURES / n, (i, t, c, ms(u), iso(cr), m, k, p))
                             for n, i, t, c, u, cr, m, k, p in CAPTURED)
    session_cut_everywhere = MAIN
    session_read_bounds = (HEAD_BYTES, TAIL_BYTES)
    huge_session_files = HUGE_SESSION_FILES
    sessions_remembered = True

    def sessions_environ(self, home: Path) -> dict[str, str]:
        return {"HOME": str(home), "PI_CODING_AGENT_DIR": str(home / "agent"),
                "PI_CODING_AGENT_SESSION_DIR": str(home / "custom")}

    def write_sessions(self, environ: Mapping[str, str]) -> None:
        copy_store(Path(environ["PI_CODING_AGENT_DIR"]),
                   Path(environ["PI_CODING_AGENT_SESSION_DIR"]))

    def session_paths(self, environ: Mapping[str, str], name: str) -> Sequence[Path]:
        file = f"2026-11-30T00-00-00-000Z_{name}.jsonl"
        return [Path(environ["PI_CODING_AGENT_DIR"], "sessions", PIREPO.name, file),
                Path(environ["PI_CODING_AGENT_SESSION_DIR"], file)]

    def change_sessions(self, environ: Mapping[str, str], listed: SessionScan) -> None:
        # A new session file is noticed too (the contract's default removes one).
        [session] = Path(environ["PI_CODING_AGENT_SESSION_DIR"]).glob("*.jsonl")
        session.with_name("copy.jsonl").write_bytes(session.read_bytes())

    def summarize(self, sample: FileSample) -> HarnessSession | None:
        return summarize(sample)

    # attention
    attention_by_hook_command = False
    attention_resume_keeps_the_id = False

    # commit
    commit_events = EVENTS
    commit_stream_header = HEADER
    commit_fixtures = COMMIT
    commit_outputs = "*.stdout.jsonl"
    commit_decorated = "stub-decorated.stdout.jsonl"
    commit_start_up_errors = ("json-unknown-model.stderr.txt", "json-model-equals-form.stderr.txt")
    commit_model = "loopback/probe-model"
    commit_args = ("--print", "--mode", "json", "--no-session", "--no-tools", "--no-extensions",
                   "--no-skills", "--no-prompt-templates", "--no-context-files", "--offline",
                   "--thinking", "off")
    commit_models = ("loopback/probe-model", "anthropic/claude-sonnet-4-5:high", "--tricky",
                     "gpt-4o")
    commit_answers = tuple((name, MESSAGE) for name in (
        "stub-success.stdout.jsonl", "final-argv-stub-success.stdout.jsonl",
        "stub-thinking-then-text.stdout.jsonl", "stub-toolcall-then-text.stdout.jsonl",
        "stub-error-retry-then-success.stdout.jsonl"))
    # pi's JSON mode exits 0 for most of these: the stream decides.
    commit_refusals = (
        ("stub-thinking-only.stdout.jsonl", 0, ErrorKind.PARSE_FAILURE, "only reasoning"),
        ("stub-length.stdout.jsonl", 0, ErrorKind.PARSE_FAILURE, "cut off"),
        ("stub-toolcall-then-killed.stdout.jsonl", 0, ErrorKind.PARSE_FAILURE, "did not end"),
        ("json-empty-stdin.stdout.jsonl", 0, ErrorKind.PARSE_FAILURE, "no answer"),
        ("json-no-api-key.stdout.jsonl", 0, ErrorKind.PARSE_FAILURE, "no answer"),
        ("json-http-400.stdout.jsonl", 0, ErrorKind.COMMAND_FAILED, "stopReason error"),
        ("json-refused-port-default-retry.stdout.jsonl", 0, ErrorKind.COMMAND_FAILED, "error"),
        ("json-refused-port-retry-disabled.stdout.jsonl", 0, ErrorKind.COMMAND_FAILED, "error"),
        ("built-aborted.stdout.jsonl", 0, ErrorKind.COMMAND_FAILED, "stopReason aborted"),
        # killed, by a signal or the sandbox's timeout
        ("json-refused-port-sigterm.stdout.jsonl", 143, ErrorKind.COMMAND_FAILED,
         "exit status 143"),
        ("stub-toolcall-then-killed.stdout.jsonl", 124, ErrorKind.COMMAND_FAILED,
         "exit status 124"),
    )
    commit_refusal_stderr = "json-no-api-key.stderr.txt"
    commit_unsaid = ("stub", "400", "Connection error", "API key")
    commit_successes = (("stub-thinking-then-text.stdout.jsonl", MESSAGE),
                        ("stub-success.stdout.jsonl", MESSAGE))
    commit_failures = (
        ("stub-decorated.stdout.jsonl", 0, ErrorKind.PARSE_FAILURE),  # the normalizer's refusal
        ("stub-thinking-only.stdout.jsonl", 0, ErrorKind.PARSE_FAILURE),
        ("json-refused-port-retry-disabled.stdout.jsonl", 0, ErrorKind.COMMAND_FAILED),
        ("json-no-api-key.stdout.jsonl", 1, ErrorKind.UNAUTHENTICATED),
        ("final-argv-signed-out.stdout.jsonl", 1, ErrorKind.UNAUTHENTICATED),
    )

    def commit_output_answering(self, answer: str) -> str:
        return message_run(HEADER, assistant_message("stop", {"type": "text", "text": answer}))
