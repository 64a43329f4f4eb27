"""The provider contract (clanker.testing), run on the Claude Code plugin with its captured
fixtures."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import clanker_claude
from clanker.capabilities import Capability
from clanker.errors import ErrorKind
from clanker.execution import CommandResult, LocalTransport, SessionExecutor
from clanker.sessions.types import HarnessSession
from clanker.stores import FileSample
from clanker.testing import HarnessProviderContract, ReplayDouble, install_replay_double
from clanker.testing.commit import check_prompt_shows_the_change
from clanker.testing.sessions import check_session_types
from clanker_claude.summaries import HEAD_BYTES, TAIL_BYTES, parse, summarize
from clanker_claude.usage import ClaudeUsage
from tests.plugins.claude.test_attention import PRIVATE_TEXTS, RUN, near_payloads, states
from tests.plugins.claude.test_claude import replayed
from tests.plugins.claude.test_commit import (
    ANSWER,
    ANSWERS,
    ARGV,
    COMMAND_FAILURES,
    ENV,
    PARSE_FAILURES,
    result_line,
)
from tests.plugins.claude.test_sessions import (
    HUGE_TRANSCRIPTS,
    PROJECTS,
    SID,
    TRANSCRIPTS,
    copy_store,
)
from tests.plugins.claude.test_usage import misbehaving_double

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "claude"
SESSION = "2bd84788-1866-4763-ad83-f2741628502f"
COMMIT = FIXTURES / "commit"
MESSAGE = ("feat: add retry to the sync client\n\n"
           "Retry transient network errors up to three times with backoff.")


class TestClaudeContract(HarnessProviderContract):
    plugin = clanker_claude.plugin
    harness_id = "claude"
    capabilities = frozenset({Capability.LAUNCH, Capability.MODELS, Capability.SESSIONS,
                              Capability.ATTENTION, Capability.USAGE, Capability.COMMIT,
                              Capability.AGENT_BRIDGE, Capability.GUIDANCE,
                              Capability.ACCOUNTS, Capability.ACP,
                              Capability.CHECKOUT_REHOME})

    # launch
    valid_session_ids = (SESSION,)
    invalid_session_ids = (
        *HarnessProviderContract.invalid_session_ids,
        SESSION.upper(),
        "nosuchname",
        SESSION[:-1],
        SESSION.replace("-", ""),
        f"/home/u/.claude/projects/-home-u-src-repo/{SESSION}.jsonl",
    )

    version_outputs = ((CommandResult((FIXTURES / "version.txt").read_text(), "", 0), "2.1.197"),)

    # models: the control protocol's initialize answer
    def models_session_executor(self, exit_code: int) -> SessionExecutor:
        return replayed(exit_code=exit_code)

    # sessions
    session_documents = TRANSCRIPTS
    session_samples = tuple(sorted(PROJECTS.glob("*/*.jsonl")))
    session_read_bounds = (HEAD_BYTES, TAIL_BYTES)
    session_sample_path = Path(f"/p/-w/{SID}.jsonl")  # a transcript is named by its id
    huge_session_files = HUGE_TRANSCRIPTS
    sessions_remembered = True

    def sessions_environ(self, home: Path) -> dict[str, str]:
        return {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")}

    def write_sessions(self, environ: Mapping[str, str]) -> None:
        copy_store(Path(environ["CLAUDE_CONFIG_DIR"]))

    def session_paths(self, environ: Mapping[str, str], name: str) -> Sequence[Path]:
        projects = Path(environ["CLAUDE_CONFIG_DIR"], "projects")
        file = f"{uuid.uuid5(uuid.NAMESPACE_URL, name)}.jsonl"
        return [projects / "-home-dev-src-app" / file, projects / "-home-dev-src-new" / file]

    def summarize(self, sample: FileSample) -> HarnessSession | None:
        parsed = parse(sample)
        check_session_types(None if parsed is None else parsed.session, "claude")
        return summarize(sample)

    # attention
    attention_by_hook_command = True
    attention_resume_keeps_the_id = False
    attention_state_shapes = states
    attention_payload_shapes = near_payloads
    attention_max_state = 1024
    attention_private_texts = PRIVATE_TEXTS
    attention_private_keys = ("prompt", "tool_input", "tool_calls", "tool_response", "message",
                              "error", "last_assistant_message", "transcript_path")

    def attention_payloads(self) -> Sequence[object]:
        def load(name: str) -> Any:
            return json.loads((FIXTURES / "attention" / f"{name}.json").read_text())
        others = sorted(p.stem for p in (FIXTURES / "attention").glob("*.json"))
        return [load(name) for name in (*RUN, *others)]

    # usage
    usage_policy = (60, 60, 180)  # the spec's: TTL, minimum interval, backoff
    usage_fixtures = FIXTURES / "usage"
    usage_outputs = (
        "control-usage-subscriber-out.jsonl",
        "control-usage-subscriber-telemetry-disabled-out.jsonl",
        "control-usage-signed-out-out.jsonl", "control-usage-bedrock-out.jsonl",
        "control-usage-subscriber-usage-429-out.jsonl",
    )

    def usage_process_double(self, directory: Path, behaviour: str) -> LocalTransport:
        return misbehaving_double(directory, behaviour)

    def usage_with_timeout(self, seconds: float) -> ClaudeUsage:
        return ClaudeUsage(timeout=seconds)

    # commit
    commit_fixtures = COMMIT
    commit_outputs = "*.stdout.json*"
    commit_decorated = "stub-decorated.stdout.json"
    commit_start_up_errors = ("empty-stdin.stderr.txt", "whitespace-stdin.stderr.txt",
                              "stdin-no-data-3s.stderr.txt", "stdin-too-large.stderr.txt",
                              "unknown-option.stderr.txt")
    commit_model = "haiku"
    commit_args = ARGV
    commit_env = ENV
    commit_models = ("sonnet", "opus[1m]", "claude-sonnet-5", "--tools", "default")
    commit_answers = tuple((name, ANSWER) for name in sorted(ANSWERS))
    commit_refusals = (
        *((name, code, ErrorKind.PARSE_FAILURE, detail)
          for name, (code, detail) in sorted(PARSE_FAILURES.items())),
        *((name, code, ErrorKind.COMMAND_FAILED, detail)
          for name, (code, detail) in sorted(COMMAND_FAILURES.items())),
    )
    commit_successes = (("stub-success.stdout.jsonl", MESSAGE),
                        ("stub-thinking-then-text.stdout.json", MESSAGE))
    commit_failures = (
        ("stub-decorated.stdout.json", 0, ErrorKind.PARSE_FAILURE),  # the normalizer's refusal
        ("stub-thinking-only.stdout.json", 0, ErrorKind.PARSE_FAILURE),
        ("stub-slash-command.stdout.json", 0, ErrorKind.PARSE_FAILURE),
        ("stub-sigint.stdout.jsonl", 0, ErrorKind.PARSE_FAILURE),
        ("final-argv-stub-toolcall.stdout.json", 1, ErrorKind.COMMAND_FAILED),
        ("json-not-logged-in.stdout.json", 1, ErrorKind.COMMAND_FAILED),
        ("final-argv-not-logged-in.stdout.jsonl", 1, ErrorKind.UNAUTHENTICATED),
        ("final-argv-stub-401-retries-off.stdout.jsonl", 1, ErrorKind.UNAUTHENTICATED),
        ("stub-max-tokens.stdout.json", 1, ErrorKind.COMMAND_FAILED),
    )

    def commit_output_answering(self, answer: str) -> str:
        return result_line(result=answer)

    def commit_double(self, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> ReplayDouble:
        # It records the variables clanker sets for the run.
        return install_replay_double(bin_dir, "claude",
                                     record_env=("CLAUDE_CODE_*", "ENABLE_CLAUDEAI_*"))

    def check_commit_call(self, call: dict[str, Any], repo: Path) -> None:
        assert call["env"] == ENV

    def check_commit_prompt(self, stdin: bytes) -> None:
        assert stdin.decode().startswith("Write a git commit message")
        check_prompt_shows_the_change(stdin.decode())
