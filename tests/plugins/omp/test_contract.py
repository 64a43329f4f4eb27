"""The provider contract (clanker.testing), run on the Oh My Pi plugin with its captured
fixtures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

import clanker_omp
from clanker.capabilities import Capability
from clanker.errors import ErrorKind
from clanker.execution import CommandExecutor, CommandResult
from clanker.sessions.types import HarnessSession
from clanker.stores import FileSample
from clanker.testing import HarnessProviderContract
from clanker.testing.message_stream import assistant_message, message_run
from clanker_omp.summaries import HEAD_BYTES, TAIL_BYTES, summarize
from tests.plugins.omp.test_commit import ANSWER, COMMIT, EVENTS, EXIT_CODES, HEADER
from tests.plugins.omp.test_omp import FORK_FILE, FORK_ID, SOURCE_ID, STORE_PATH, replayed_omp
from tests.plugins.omp.test_sessions import (
    CAPTURED,
    FIXTURES,
    HUGE_SESSION_FILES,
    MAIN,
    OMPREPO,
    SESSION_FILES,
    copy_store,
    ms,
)


class TestOmpContract(HarnessProviderContract):
    plugin = clanker_omp.plugin
    harness_id = "omp"
    capabilities = frozenset({Capability.LAUNCH, Capability.MODELS, Capability.SESSIONS,
                              Capability.ATTENTION, Capability.USAGE, Capability.COMMIT,
                              Capability.GUIDANCE, Capability.ACP})

    # launch
    valid_session_ids = (SOURCE_ID, FORK_ID, "3f2c9a4e-8b1d-4c6e-9f0a-1b2c3d4e5f60")
    invalid_session_ids = (
        *HarnessProviderContract.invalid_session_ids,
        FORK_ID.upper(),
        FORK_ID[:8],  # omp accepts prefixes; clanker names whole sessions only
        FORK_ID.replace("-", ""),
        STORE_PATH,
        FORK_FILE.name,
        "2026-11-30T08-23-26-947Z",  # omp would match this file-name prefix too
    )

    version_outputs = ((CommandResult((FIXTURES / "version.txt").read_text(), "", 0), "18.2.3"),)

    # models
    def models_executor(self, exit_code: int) -> CommandExecutor:
        return replayed_omp(exit_code=exit_code)

    # sessions
    session_documents = SESSION_FILES
    session_samples = tuple(FIXTURES / row[0] for row in CAPTURED)
    session_expected = tuple((FIXTURES / n, (i, t, c, ms(u), datetime.fromisoformat(cr), m, k, p))
                             for n, i, t, c, u, cr, m, k, p in CAPTURED)
    session_cut_everywhere = MAIN
    session_min_bytes = 256  # never without the header after the title slot
    session_read_bounds = (HEAD_BYTES, TAIL_BYTES)
    huge_session_files = HUGE_SESSION_FILES
    sessions_remembered = True

    def sessions_environ(self, home: Path) -> dict[str, str]:
        return {"HOME": str(home), "PI_CODING_AGENT_DIR": str(home / "agent"),
                "PI_CODING_AGENT_SESSION_DIR": str(home / "envsess")}

    def write_sessions(self, environ: Mapping[str, str]) -> None:
        copy_store(Path(environ["PI_CODING_AGENT_DIR"]),
                   Path(environ["PI_CODING_AGENT_SESSION_DIR"]))

    def session_paths(self, environ: Mapping[str, str], name: str) -> Sequence[Path]:
        file = f"2026-11-30T00-00-00-000Z_{name}.jsonl"
        return [Path(environ["PI_CODING_AGENT_DIR"], "sessions", OMPREPO.name, file),
                Path(environ["PI_CODING_AGENT_SESSION_DIR"], file)]

    def summarize(self, sample: FileSample) -> HarnessSession | None:
        return summarize(sample)

    # usage
    usage_policy = (60, 60, 120)  # the spec's: TTL, minimum interval, backoff
    usage_fixtures = FIXTURES / "usage"
    usage_outputs = (
        "usage-json-stub-upstream.json", "usage-json-built-edge-cases.json",
        "usage-json-no-credentials.json",
    )

    # attention
    attention_by_hook_command = False
    attention_resume_keeps_the_id = True

    # commit
    commit_events = EVENTS
    commit_stream_header = HEADER
    commit_reasoning_blocks = ({"type": "thinking", "thinking": "Fix it"},
                               {"type": "redactedThinking", "data": "opaque"})
    commit_fixtures = COMMIT
    commit_outputs = "*.stdout.jsonl"
    commit_failure_kinds = (ErrorKind.PARSE_FAILURE, ErrorKind.COMMAND_FAILED, ErrorKind.TIMEOUT)
    commit_decorated = "stub-decorated.stdout.jsonl"
    commit_start_up_errors = ("json-unknown-model.stderr.txt", "json-no-models.stderr.txt",
                              "unknown-flag-no-context-files.stderr.txt",
                              "open-stdin-waiting.stderr.txt", "final-argv-signed-out.stderr.txt")
    commit_model = "loopback/probe-model"
    commit_args = ("--print", "--mode", "json", "--no-session", "--no-tools", "--no-extensions",
                   "--no-skills", "--no-rules", "--no-title", "--max-time", "65")
    commit_models = ("loopback/probe-model", "opus", "openai/gpt-5.2", "--tricky")
    commit_answers = tuple((name, ANSWER) for name in (
        "stub-success.stdout.jsonl", "final-argv-stub-success.stdout.jsonl",
        "stub-thinking-then-text.stdout.jsonl", "stub-toolcall-then-text.stdout.jsonl",
        "stub-5xx-retried-then-success.stdout.jsonl"))
    commit_refusals = tuple((name, EXIT_CODES.get(name, 0), kind, detail)
                            for name, kind, detail in (
        # omp re-prompts a thinking-only answer once, then ends with isTerminal false; exit 0
        ("stub-thinking-only.stdout.jsonl", ErrorKind.PARSE_FAILURE, "only reasoning"),
        ("stub-length.stdout.jsonl", ErrorKind.PARSE_FAILURE, "cut off"),
        ("json-empty-stdin.stdout.jsonl", ErrorKind.PARSE_FAILURE, "no answer"),
        # exit 1, and the stream says why
        ("json-http-400.stdout.jsonl", ErrorKind.COMMAND_FAILED, "stopReason error, HTTP 400"),
        ("json-refused-port-retry-disabled.stdout.jsonl", ErrorKind.COMMAND_FAILED,
         "stopReason error"),
        ("json-refused-port-max-time-10.stdout.jsonl", ErrorKind.TIMEOUT, "--max-time"),
        ("final-argv-refused-port-default-retry.stdout.jsonl", ErrorKind.TIMEOUT, "--max-time"),
        # killed (by the sandbox's timeout or a signal)
        ("json-refused-port-default-retry-killed.stdout.jsonl", ErrorKind.COMMAND_FAILED,
         "stopReason aborted"),
        ("json-refused-port-sigterm.stdout.jsonl", ErrorKind.COMMAND_FAILED, "exit status 143"),
        ("stub-toolcall-then-killed.stdout.jsonl", ErrorKind.COMMAND_FAILED, "exit status 124"),
        ("json-no-api-key.stdout.jsonl", ErrorKind.COMMAND_FAILED, "exit status 1"),
    ))
    commit_refusal_stderr = "json-no-api-key.stderr.tail.txt"
    # the provider's text and the path of the request omp saves
    commit_unsaid = ("stub", "API key", "raw-http-request", ".omp")
    commit_successes = (("stub-toolcall-then-text.stdout.jsonl", ANSWER),
                        ("stub-success.stdout.jsonl", ANSWER))
    commit_failures = tuple((name, EXIT_CODES.get(name, 0), kind) for name, kind in (
        ("stub-decorated.stdout.jsonl", ErrorKind.PARSE_FAILURE),  # the normalizer's refusal
        ("stub-thinking-only.stdout.jsonl", ErrorKind.PARSE_FAILURE),
        ("json-http-400.stdout.jsonl", ErrorKind.COMMAND_FAILED),
        ("json-refused-port-max-time-10.stdout.jsonl", ErrorKind.TIMEOUT),
    ))

    def commit_output_answering(self, answer: str) -> str:
        return message_run(HEADER, assistant_message("stop", {"type": "text", "text": answer}))
