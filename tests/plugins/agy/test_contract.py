"""The provider contract (clanker.testing), run on the Antigravity plugin with its fixtures
(synthetic, from public documentation: see tests/fixtures/agy/README.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import clanker_agy
from clanker.capabilities import Capability
from clanker.errors import ErrorKind
from clanker.execution import (
    CommandExecutor,
    CommandRequest,
    CommandResult,
    SessionExecutor,
)
from clanker.sessions.types import HarnessSession
from clanker.testing import HarnessProviderContract, ReplayDouble, ScriptedExecutor
from clanker.testing.base import PROPERTY
from clanker.testing.commit import (
    check_prompt_shows_the_change,
    install_replay_double,
    json_lines,
)
from clanker.testing.strategies import model_ids
from clanker_agy.commit import AgyCommit
from tests.plugins.agy.test_agy import CONVERSATION, replayed_agy
from tests.plugins.agy.test_attention import PRIVATE_TEXTS, RUN, states, wrapped, wrapped_payloads
from tests.plugins.agy.test_commit import (
    AGY_REFUSES_A_LINE_WITHOUT_AN_EVENT,
    COMMIT,
    EVENTS,
    init,
    quoted_repository,
    result,
)
from tests.plugins.agy.test_sessions import build, check_types

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agy"
MESSAGE = ("feat: add retry to the sync client\n\n"
           "Retry transient network failures with exponential backoff so a\n"
           "flaky connection no longer aborts a sync.")


class TestAgyContract(HarnessProviderContract):
    plugin = clanker_agy.plugin
    harness_id = "agy"
    capabilities = frozenset({Capability.LAUNCH, Capability.MODELS, Capability.SESSIONS,
                              Capability.ATTENTION, Capability.USAGE, Capability.COMMIT})

    # launch
    valid_session_ids = (CONVERSATION, "01a22b8c-ca4c-72fc-ac3b-8d1148698ba1")
    invalid_session_ids = (
        *HarnessProviderContract.invalid_session_ids,
        CONVERSATION[:-1],
        CONVERSATION + "0",
        CONVERSATION + "\n",
        CONVERSATION.replace("-", ""),
        "{" + CONVERSATION + "}",
        "urn:uuid:" + CONVERSATION,
        CONVERSATION + ".db",
        f"/home/u/.gemini/antigravity-cli/conversations/{CONVERSATION}.db",
        CONVERSATION.replace("d", "\uff44"),  # fullwidth letters are no hex digits
    )

    version_outputs = ((CommandResult((FIXTURES / "version.txt").read_text(), "", 0), "1.2.12"),
                       (CommandResult("v1.2.14\n", "", 0), "1.2.14"),
                       (CommandResult("1.1.12", "", 0), "1.1.12"))

    # models
    def models_executor(self, exit_code: int) -> CommandExecutor:
        return replayed_agy(exit_code=exit_code)

    # sessions: an index database and one file per conversation
    sessions_written_skips = 4  # the synthetic index's malformed rows, on purpose

    def write_sessions(self, environ: Mapping[str, str]) -> None:
        build(Path(environ["HOME"]))

    def check_session(self, session: HarnessSession) -> None:
        check_types(session)

    # attention
    attention_by_hook_command = True
    attention_resume_keeps_the_id = False
    attention_state_shapes = states
    attention_payload_shapes = wrapped_payloads
    attention_max_state = 2048
    attention_private_texts = PRIVATE_TEXTS

    def attention_payloads(self) -> Sequence[object]:
        return [wrapped(name) for name in RUN]

    # usage: the probe checks the version first
    usage_policy = (60, 120, 300)  # the spec's: TTL, minimum interval, backoff
    usage_fixtures = FIXTURES / "usage"
    usage_outputs = (
        "usage-json-success.json", "usage-json-success-no-enabled-field.pretty.json",
        "usage-stdout-noise-then-envelope.txt", "usage-json-error-auth-required.json",
    )

    def usage_doubles(
        self, output: str, exit_code: int, stderr: str
    ) -> tuple[CommandExecutor, SessionExecutor | None]:
        version = (FIXTURES / "usage" / "version-1.2.12.txt").read_text()

        def respond(request: CommandRequest) -> CommandResult:
            if request.args == ("--version",):
                return CommandResult(version, "", 0)
            return CommandResult(output, stderr, exit_code)

        return ScriptedExecutor(respond), None

    # commit
    commit_events = EVENTS
    commit_fixtures = COMMIT
    commit_outputs = "*.stdout.jsonl"
    commit_decorated = "synthetic-decorated.stdout.jsonl"
    commit_model = "gemini-3.8-flash-high"
    commit_args = ("--mode=plan", "--sandbox", "--disable-slash-commands",
                   "--input-format=stream-json", "--output-format=stream-json")
    commit_models = ("gemini-3.8-flash-high", "gemini-3.1-pro-low", "-p", "--sandbox=false",
                     "a b", "provider/model:variant")
    commit_answers = (("synthetic-success.stdout.jsonl", MESSAGE),)
    commit_empty_detail = "no result"

    def commit_model_args(self, model: str) -> Sequence[str]:
        return (f"--model={model}",)

    def commit_stdin(self, prompt: str) -> bytes:
        # One user line, the prompt a JSON string (non-ASCII kept), then EOF.
        content = json.dumps(prompt, ensure_ascii=False)
        return f'{{"event":"user","message":{{"content":{content}}}}}\n'.encode()
    commit_successes = (("synthetic-success.stdout.jsonl", MESSAGE),)
    commit_failures = (
        ("synthetic-decorated.stdout.jsonl", 0, ErrorKind.PARSE_FAILURE),  # the normalizer
        ("synthetic-empty-response.stdout.jsonl", 0, ErrorKind.PARSE_FAILURE),
        ("synthetic-tool-denied.stdout.jsonl", 0, ErrorKind.PARSE_FAILURE),
        ("synthetic-two-results.stdout.jsonl", 0, ErrorKind.PARSE_FAILURE),
        ("synthetic-no-result.stdout.jsonl", 0, ErrorKind.PARSE_FAILURE),
        ("synthetic-error.stdout.jsonl", 3, ErrorKind.COMMAND_FAILED),
        ("synthetic-interrupted.stdout.jsonl", 1, ErrorKind.COMMAND_FAILED),
        ("synthetic-success.stdout.jsonl", 2, ErrorKind.COMMAND_FAILED),
    )

    def commit_output_answering(self, answer: str) -> str:
        # agy 1.1.12 answered "ok\n": the single result's response, as it is.
        return json_lines(init(), result(response=answer))

    def commit_double(self, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> ReplayDouble:
        # Like agy, it refuses a stdin line without a top-level `event`.
        return install_replay_double(bin_dir, "agy",
                                     stdin_check=AGY_REFUSES_A_LINE_WITHOUT_AN_EVENT)

    def commit_repository(self, tmp_path: Path) -> Path:
        return quoted_repository(tmp_path)

    def check_commit_prompt(self, stdin: bytes) -> None:
        assert stdin.count(b"\n") == 1 and stdin.endswith(b"\n")  # one turn, then EOF
        turn = json.loads(stdin)
        assert set(turn) == {"event", "message"} and turn["event"] == "user"
        assert set(turn["message"]) == {"content"}
        # The staged text keeps its quotes intact through the JSON message.
        check_prompt_shows_the_change(turn["message"]["content"],
                                      staged='return retry(fetch, note="a \\"b\\"")',
                                      untracked="def retry(f, note):")

    # Beyond the contract (which finds the prompt, escaped, in stdin): stdin is
    # exactly one JSON line whose content decodes to the prompt, unchanged.
    @PROPERTY
    @given(model=st.none() | model_ids(), prompt=st.text(max_size=200))
    def test_commit_stdin_is_exactly_one_json_user_message(
        self, model: str | None, prompt: str
    ) -> None:
        request = AgyCommit().build_invocation(model, prompt)
        assert request.stdin is not None
        assert request.stdin.endswith(b"\n") and request.stdin.count(b"\n") == 1
        assert json.loads(request.stdin) == {"event": "user", "message": {"content": prompt}}
        if model is not None:
            assert request.args[-1] == f"--model={model}"
