"""The provider contract (clanker.testing), run on the Codex plugin with its captured fixtures."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import clanker_codex
from clanker.capabilities import Capability
from clanker.errors import ErrorKind
from clanker.execution import CommandResult, LocalTransport, SessionExecutor
from clanker.sessions.types import HarnessSession
from clanker.stores import FileSample
from clanker.testing import HarnessProviderContract, ReplayDouble, install_replay_double
from clanker_codex.summaries import HEAD_BYTES, TAIL_BYTES, summarize
from clanker_codex.usage import CodexUsage
from tests.plugins.codex.test_attention import payloads, states
from tests.plugins.codex.test_codex import replayed_app_server
from tests.plugins.codex.test_commit import (
    EVENTS,
    EXIT_CODES,
    SIGNED_OUT,
    STREAM_REFUSALS,
    message,
    turn_of,
)
from tests.plugins.codex.test_sessions import CAPTURED, HUGE_ROLLOUTS, ROLLOUTS, iso, rollout
from tests.plugins.codex.test_usage import misbehaving_double

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "codex"
CODEX_HOME = FIXTURES / "sessions" / "codex-home"
COMMIT = FIXTURES / "commit"
SESSION = "01a22b86-c7d0-79e0-b3c0-03c56f3ce14a"
ANSWER = ("feat: add retry to the sync client\n\n"
          "Retry failed sync requests up to three times with backoff.")


class TestCodexContract(HarnessProviderContract):
    plugin = clanker_codex.plugin
    harness_id = "codex"
    capabilities = frozenset({Capability.LAUNCH, Capability.MODELS, Capability.SESSIONS,
                              Capability.ATTENTION, Capability.USAGE, Capability.COMMIT,
                              Capability.AGENT_BRIDGE, Capability.GUIDANCE,
                              Capability.ACCOUNTS, Capability.ACP,
                              Capability.CHECKOUT_REHOME})

    # launch
    valid_session_ids = (SESSION, SESSION.upper())
    invalid_session_ids = (
        *HarnessProviderContract.invalid_session_ids,
        "nosuchname",
        SESSION[:-1],
        SESSION.replace("-", ""),
        "{" + SESSION + "}",
        f"/home/u/.codex/sessions/2026/11/30/rollout-2026-11-30T08-15-17-{SESSION}.jsonl",
    )

    version_outputs = ((CommandResult((FIXTURES / "version.txt").read_text(), "", 0), "0.171.0"),)

    # models: the app server's paginated model/list
    def models_session_executor(self, exit_code: int) -> SessionExecutor:
        return replayed_app_server(exit_code=exit_code)

    # sessions
    session_documents = ROLLOUTS
    session_samples = tuple(sorted(CODEX_HOME.rglob("rollout-*.jsonl")))
    # A count needs the whole file: a rollout's summary has none.
    session_expected = tuple((rollout(i), (i, t, c, iso(u), iso(cr), m, p, None))
                             for i, t, c, u, cr, m, p in CAPTURED)
    session_expected_fields = ("native_id", "title", "cwd", "updated_at", "created_at",
                               "model", "parent_id", "message_count")
    session_read_bounds = (HEAD_BYTES, TAIL_BYTES)
    huge_session_files = HUGE_ROLLOUTS
    sessions_remembered = True

    def sessions_environ(self, home: Path) -> dict[str, str]:
        return {"HOME": str(home), "CODEX_HOME": str(home / ".codex")}

    def write_sessions(self, environ: Mapping[str, str]) -> None:
        shutil.copytree(CODEX_HOME, environ["CODEX_HOME"], ignore=shutil.ignore_patterns("sqlite"))

    def session_paths(self, environ: Mapping[str, str], name: str) -> Sequence[Path]:
        day = Path(environ["CODEX_HOME"], "sessions", "2026", "11", "30")
        return [day / f"rollout-2026-11-30T00-00-00-{name}.jsonl"]

    def summarize(self, sample: FileSample) -> HarnessSession | None:
        return summarize(sample)

    # attention
    attention_by_hook_command = True
    attention_resume_keeps_the_id = True
    attention_state_shapes = states
    attention_payload_shapes = payloads
    attention_private_keys = ("prompt", "tool_input", "tool_response", "transcript_path",
                              "last_assistant_message")
    attention_private_texts = ("echo hi", "echo plain", "run it", "probe", "sleep 20", "exec-",
                               "rollout-", "transcript")

    def attention_payloads(self) -> Sequence[object]:
        runs = ("live-app-server.json", "live-app-server-resume.json", "live-tui-resume.json")
        built: dict[str, Any] = json.loads((FIXTURES / "attention" / "schema-built.json")
                                           .read_text())
        return [p for name in runs for p in json.loads((FIXTURES / "attention" / name)
                                                       .read_text())] + list(built.values())

    # usage
    usage_policy = (60, 60, 120)  # the spec's: TTL, minimum interval, backoff
    usage_fixtures = FIXTURES / "usage"
    usage_outputs = (
        "app-server-chatgpt-out.jsonl", "app-server-chatgpt-edge-out.jsonl",
        "app-server-chatgpt-weekly-only-out.jsonl", "app-server-signed-out-out.jsonl",
        "app-server-api-key-out.jsonl", "app-server-chatgpt-backend-decode-error-out.jsonl",
    )

    def usage_process_double(self, directory: Path, behaviour: str) -> LocalTransport:
        return misbehaving_double(directory, behaviour)

    def usage_with_timeout(self, seconds: float) -> CodexUsage:
        return CodexUsage(timeout=seconds)

    # commit
    commit_events = EVENTS
    commit_fixtures = COMMIT
    commit_outputs = "*.jsonl"
    commit_decorated = "built-decorated.jsonl"
    commit_start_up_errors = ("exec-no-prompt-devnull.stderr.txt",
                              "exec-no-prompt-whitespace.stderr.txt",
                              "exec-invalid-utf8.stderr.txt", "exec-not-git.stderr.txt",
                              "exec-unknown-feature-flag.stderr.txt",
                              "exec-input-too-large.stderr.txt", "exec-rejected-flag.stderr.txt",
                              "exec-model-twice.stderr.txt")
    commit_model = "gpt-6.2-sol"
    commit_args = ("exec", "--json", "--ephemeral", "--sandbox", "read-only",
                   "-c", "features.unbounded_connection_retries=false",
                   "-c", "features.shell_snapshot=false",
                   "-c", "project_doc_max_bytes=0",
                   "-c", 'web_search="disabled"')
    commit_models = ("gpt-6.2-sol", "probe-model", "-tricky", "a=b", "org/x y")
    commit_answers = tuple((name, ANSWER) for name in (
        "built-success.jsonl", "built-success-after-retry-error.jsonl",
        "built-success-commentary-then-tool.jsonl", "built-warning-item-then-success.jsonl"))
    # The stream alone (exit 0), then each captured run with the status it exited with.
    commit_refusals = (
        *((name, 0, kind, detail) for name, kind, detail in STREAM_REFUSALS),
        *((name, code, ErrorKind.COMMAND_FAILED, "")
          for name, code in EXIT_CODES.items() if name not in SIGNED_OUT),
    )

    def commit_model_args(self, model: str) -> Sequence[str]:
        return (f"--model={model}",)
    commit_successes = (("built-success-commentary-then-tool.jsonl", ANSWER),
                        ("built-success.jsonl", ANSWER))
    commit_failures = (
        ("built-decorated.jsonl", 0, ErrorKind.PARSE_FAILURE),  # the normalizer's refusal
        ("built-thinking-only.jsonl", 0, ErrorKind.PARSE_FAILURE),
        ("built-tool-after-last-message.jsonl", 0, ErrorKind.PARSE_FAILURE),
        ("exec-http-401.jsonl", 1, ErrorKind.UNAUTHENTICATED),
        ("exec-signed-out-http-401.jsonl", 1, ErrorKind.UNAUTHENTICATED),
        ("exec-missing-env-key.jsonl", 1, ErrorKind.UNAUTHENTICATED),
        ("exec-sigterm.jsonl", 143, ErrorKind.COMMAND_FAILED),
    )

    def commit_output_answering(self, answer: str) -> str:
        return turn_of(message(answer))

    def commit_double(self, bin_dir: Path, monkeypatch: object) -> ReplayDouble:
        # Codex says on stderr that it reads the prompt from stdin.
        return install_replay_double(bin_dir, "codex", stderr="Reading prompt from stdin...\n")
