"""Antigravity commit messages, against synthetic stream-json fixtures (tests/fixtures/agy/commit).

agy cannot be installed here, so nothing below was captured from it: the
fixtures and the agy double follow the formats the spec and public reports
describe (/tmp/research/commit-agy.md at the time; docs/harnesses/agy.md,
"Commit messages"). For the same reason there is no ``real_cli`` test: no
``agy`` exists on this machine to run one against.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import strategies as st

from clanker.cli import cli
from clanker.commit.prompt import PROMPT_LIMIT
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, CommandResult, LocalTransport
from clanker.execution.request import MAX_STDIN
from clanker.registry import Registry, override_registry
from clanker.testing.commit import (
    ReplayDouble,
    change_repository,
    commit_failure,
    install_replay_double,
    json_lines,
    repository_state,
)
from clanker.testing.doubles import prepend_to_path
from clanker.testing.strategies import json_values
from clanker_agy.commit import COMMIT_ARGS, AgyCommit, commit_stdin, parse_commit_stream

COMMIT = Path(__file__).resolve().parents[2] / "fixtures" / "agy" / "commit"
ANSWER = (
    "feat: add retry to the sync client\n\n"
    "Retry transient network failures with exponential backoff so a\n"
    "flaky connection no longer aborts a sync."
)
PROMPT = "Write a commit message for the staged change."  # the stdin fixtures' prompt
STREAMS = sorted(p.name for p in COMMIT.glob("*.stdout.jsonl"))
# How each built stream's run would exit (tests/fixtures/agy/commit/README.md); 0 if absent.
EXIT_CODES = {
    "synthetic-error.stdout.jsonl": 3,  # quota, as reported for 1.2.11
    "synthetic-interrupted.stdout.jsonl": 1,  # SIGTERM mid-answer
    "synthetic-no-result.stdout.jsonl": -9,  # killed: nothing more is written
    # Signed out: no report gives the exit status; 1 is assumed.
    "synthetic-signed-out.stdout.jsonl": 1,
    "synthetic-auth-timed-out.stdout.jsonl": 1,
}
CONVERSATION = "00000000-0000-4000-8000-00000000c0de"


def stream(name: str) -> str:
    return (COMMIT / name).read_text()


def built(name: str, stderr: str = "") -> CommandResult:
    return CommandResult(stdout=stream(name), stderr=stderr, exit_code=EXIT_CODES.get(name, 0))


def failure(stdout: str, exit_code: int = 0, stderr: str = "") -> HarnessCapabilityError:
    return commit_failure(AgyCommit(), "agy", stdout, exit_code, stderr)


def init() -> dict[str, object]:
    return {"event": "init", "conversation_id": CONVERSATION,
            "init": {"cwd": "/w", "permission_mode": "request-review", "tools": ["view_file"]}}


def delta(text: str) -> dict[str, object]:
    return {"event": "step_update", "step_update": {
        "conversation_id": CONVERSATION, "step_index": 1, "state": "ACTIVE",
        "step_type": "agent_response", "text_delta": text}}


def result(**fields: object) -> dict[str, object]:
    body: dict[str, object] = {"conversation_id": CONVERSATION, "status": "SUCCESS",
                               "response": "Fix it", "duration_seconds": 1.2,
                               "num_turns": 1, "usage": {"total_tokens": 3}}
    body.update(fields)
    return {"event": "result", "result": {k: v for k, v in body.items() if v is not _ABSENT}}


_ABSENT = object()


# -- the invocation ---------------------------------------------------------------------


def test_the_stdin_is_byte_for_byte_the_fixture() -> None:
    # One user line, then EOF (the rest of the invocation: the contract's).
    request = AgyCommit().build_invocation(None, PROMPT)
    assert request.stdin == (COMMIT / "synthetic-stdin-user-message.jsonl").read_bytes()
    assert request.stdin == b'{"event":"user","message":{"content":"' + PROMPT.encode() + b'"}}\n'


def test_every_value_flag_is_bound_and_nothing_interactive_or_permissive_is_passed() -> None:
    args = AgyCommit().build_invocation("m", "p").args
    for arg in args:
        assert arg.startswith("--")
        assert "=" in arg or arg in ("--sandbox", "--disable-slash-commands")
    for forbidden in ("-p", "--print", "--prompt", "-i", "--prompt-interactive", "-c",
                      "--continue", "--conversation", "--dangerously-skip-permissions",
                      "--mode=accept-edits", "--new-project"):
        assert not any(arg == forbidden or arg.startswith(forbidden + "=") for arg in args)


@pytest.mark.parametrize(
    "prompt",
    [
        "line one\nline two\r\n\n",
        'quotes " and \\ backslashes \\n',
        "diff --git a/x b/x\n+" + json.dumps({"event": "user", "message": {"content": "rm"}}),
        "unicode é ✓ 🙂 and separators \u2028 \u2029 \x85",
        "controls \x00 \x1b[31m \x7f \t",
        "/review a prompt that starts like a slash command",
        "",
    ],
)
def test_the_prompt_is_exactly_one_json_line_whatever_it_holds(prompt: str) -> None:
    stdin = AgyCommit().build_invocation(None, prompt).stdin
    assert stdin is not None
    assert stdin.endswith(b"\n") and stdin.count(b"\n") == 1 and b"\r" not in stdin
    assert json.loads(stdin) == {"event": "user", "message": {"content": prompt}}


def test_the_largest_prompt_fits_the_stdin_cap_even_when_every_character_is_escaped() -> None:
    for worst in ("\x01", "\U0001f642", '"'):  # 6 bytes escaped, 4 bytes UTF-8, 2 bytes
        prompt = worst * PROMPT_LIMIT
        request = AgyCommit().build_invocation(None, prompt)
        assert request.stdin is not None and len(request.stdin) <= MAX_STDIN
        assert json.loads(request.stdin)["message"]["content"] == prompt


def test_the_stdin_fixture_in_the_other_reported_form_is_not_what_clanker_sends() -> None:
    other = json.loads((COMMIT / "synthetic-stdin-user-message.content-array.jsonl").read_text())
    assert other["message"]["content"] == [{"type": "text", "text": PROMPT}]
    assert json.loads(commit_stdin(PROMPT))["message"] == {"content": PROMPT}


# -- the built streams ------------------------------------------------------------------

# Every stdout fixture, what the parser must make of it (README's table).
EXPECTED: dict[str, tuple[ErrorKind | None, str]] = {
    "synthetic-success.stdout.jsonl": (None, ANSWER),
    "synthetic-decorated.stdout.jsonl": (None, "Here is a commit message"),
    "synthetic-empty-response.stdout.jsonl": (ErrorKind.PARSE_FAILURE, "empty"),
    "synthetic-tool-denied.stdout.jsonl": (ErrorKind.PARSE_FAILURE, "denied_actions"),
    "synthetic-error.stdout.jsonl": (ErrorKind.COMMAND_FAILED, "status ERROR"),
    "synthetic-interrupted.stdout.jsonl": (ErrorKind.COMMAND_FAILED, "status ERROR"),
    "synthetic-no-result.stdout.jsonl": (ErrorKind.PARSE_FAILURE, "no result"),
    "synthetic-two-results.stdout.jsonl": (ErrorKind.PARSE_FAILURE, "more than one result"),
    # The usage probe's phrase rule (spec): a signed-out phrase in the result's own error.
    "synthetic-signed-out.stdout.jsonl": (ErrorKind.UNAUTHENTICATED, "sign in with `agy`"),
    # ... and the login wait's end, which the spec does not take as proof of it.
    "synthetic-auth-timed-out.stdout.jsonl": (ErrorKind.COMMAND_FAILED, "status ERROR"),
}


def test_every_stdout_fixture_has_an_expectation() -> None:
    assert sorted(EXPECTED) == STREAMS


def test_the_fixtures_say_they_are_built_from_documentation_and_now_used() -> None:
    readme = (COMMIT / "README.md").read_text()
    assert "Nothing in this directory was captured" in readme
    assert "Not used by a capability" not in readme
    assert "tests/plugins/agy/test_commit.py" in readme


def test_the_answer_is_the_single_results_response() -> None:
    assert parse_commit_stream(stream("synthetic-success.stdout.jsonl")) == ANSWER
    assert AgyCommit().parse_output(built("synthetic-success.stdout.jsonl",
                                          stderr="AGY_ERROR: ignored")) == ANSWER


def test_the_answer_is_never_assembled_from_text_deltas() -> None:
    out = json_lines(init(), delta("feat: from the deltas"),
                     result(response="fix: from the result"))
    assert parse_commit_stream(out) == "fix: from the result"


@pytest.mark.parametrize("name", [n for n, (kind, _) in EXPECTED.items() if kind is not None])
def test_streams_without_an_answer_fail_typed(name: str) -> None:
    kind, detail = EXPECTED[name]
    with pytest.raises(HarnessCapabilityError) as caught:
        parse_commit_stream(stream(name))
    assert caught.value.kind is kind
    assert detail in (caught.value.detail or "")
    error = failure(stream(name), exit_code=EXIT_CODES.get(name, 0))
    if EXIT_CODES.get(name, 0):
        reported = kind in (ErrorKind.COMMAND_FAILED, ErrorKind.UNAUTHENTICATED)
        assert error.kind is (kind if reported else ErrorKind.COMMAND_FAILED)
        if reported:
            assert error.detail == caught.value.detail  # the stream's reason, not the status
        else:
            assert error.detail == f"exit status {EXIT_CODES[name]}"
    else:
        assert (error.kind, error.detail) == (kind, caught.value.detail)


@pytest.mark.parametrize(
    "error",
    ["Authentication required", "you are NOT AUTHENTICATED", "login required",
     "credentials revoked", "token revoked", "token expired: sign in again"],
)
@pytest.mark.parametrize("status", ["ERROR", "FAILURE", "CANCELLED", "TIMEOUT"])
def test_a_signed_out_phrase_in_a_failed_results_error_is_unauthenticated(
    error: str, status: str
) -> None:
    failed = failure(json_lines(init(), result(status=status, response="", error=error)), 1)
    assert failed.kind is ErrorKind.UNAUTHENTICATED
    assert failed.exit_code == 6
    assert error not in failed.message


@pytest.mark.parametrize(
    "fields",
    [{"status": "SUCCESS", "error": "authentication required"},  # only a failed status
     {"status": "ERROR", "error": "authentication failed or timed out"},
     {"status": "ERROR", "response": "login required", "error": "quota"},  # never the response
     {"status": "ERROR", "error": 7}],
)
def test_anything_else_is_not_unauthenticated(fields: dict[str, object]) -> None:
    failed = failure(json_lines(init(), result(**{"response": "", **fields})), 1)
    assert failed.kind is not ErrorKind.UNAUTHENTICATED


def test_the_interrupted_streams_deltas_are_not_an_answer_even_with_exit_0() -> None:
    error = failure(stream("synthetic-interrupted.stdout.jsonl"))
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert "feat" not in error.message


def test_the_two_result_stream_fails_even_though_each_result_succeeded() -> None:
    out = stream("synthetic-two-results.stdout.jsonl")
    assert [json.loads(x)["event"] for x in out.splitlines()].count("result") == 2
    assert failure(out).kind is ErrorKind.PARSE_FAILURE


def test_provider_text_and_stderr_never_reach_the_message() -> None:
    quota = "Your quota will reset after 2h3m4s."
    stderr = 'AGY_ERROR: {"error":"quota exhausted for sk-secret at https://example.test"}'
    for name in STREAMS:
        try:
            AgyCommit().parse_output(CommandResult(stdout=stream(name), stderr=stderr,
                                                   exit_code=EXIT_CODES.get(name, 0)))
        except HarnessCapabilityError as exc:
            assert quota not in exc.message and "interrupted" not in exc.message
            assert "AGY_ERROR" not in exc.message and "sk-secret" not in exc.message
    error = failure(json_lines(init(), result(status="SUCCESS", error="boom sk-secret")))
    assert "sk-secret" not in error.message


# -- the rule's edges -------------------------------------------------------------------


@pytest.mark.parametrize("status", ["ERROR", "FAILURE", "CANCELLED", "TIMEOUT"])
def test_a_failed_status_is_command_failed_even_with_a_response_and_exit_0(status: str) -> None:
    error = failure(json_lines(init(), result(status=status, response="feat: partial")))
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert error.detail == f"the turn ended with status {status}"


@pytest.mark.parametrize("status", ["OK", "success", "Success", "", None, 7, ["SUCCESS"],
                                    {"SUCCESS": 1}, _ABSENT])
def test_only_success_is_a_success(status: object) -> None:
    error = failure(json_lines(init(), result(status=status)))
    assert error.kind is ErrorKind.PARSE_FAILURE
    assert "status" in (error.detail or "")


@pytest.mark.parametrize("error_field", [_ABSENT, None, ""])
def test_no_error_means_absent_null_or_empty(error_field: object) -> None:
    assert parse_commit_stream(json_lines(init(), result(error=error_field))) == "Fix it"


def test_an_error_beside_success_is_command_failed() -> None:
    error = failure(json_lines(init(), result(error="context canceled")))
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert "error" in (error.detail or "")


@pytest.mark.parametrize("error_field", [7, {"message": "x"}, ["x"], True])
def test_an_error_that_is_not_text_is_a_parse_failure(error_field: object) -> None:
    assert failure(json_lines(init(), result(error=error_field))).kind is ErrorKind.PARSE_FAILURE


@pytest.mark.parametrize("denied", [_ABSENT, None, []])
def test_no_denied_actions_means_absent_null_or_empty(denied: object) -> None:
    assert parse_commit_stream(json_lines(init(), result(denied_actions=denied))) == "Fix it"


@pytest.mark.parametrize("denied", [[{"action": "mcp"}], [{}], ["write_file"], "mcp", {"a": 1},
                                    7, True])
def test_any_denied_action_fails_even_beside_an_answer(denied: object) -> None:
    error = failure(json_lines(init(), result(denied_actions=denied)))
    assert error.kind is ErrorKind.PARSE_FAILURE
    assert "denied_actions" in (error.detail or "")


@pytest.mark.parametrize("response", [_ABSENT, None, 7, ["Fix it"], "", "   \n\t", True])
def test_an_absent_or_blank_response_is_a_parse_failure(response: object) -> None:
    error = failure(json_lines(init(), result(response=response)))
    assert error.kind is ErrorKind.PARSE_FAILURE
    assert "response" in (error.detail or "") or "empty" in (error.detail or "")


def test_a_result_that_is_not_the_last_event_is_a_parse_failure() -> None:
    for after in (delta("more"), {"event": "future_event"}, init()):
        error = failure(json_lines(init(), result(), after))
        assert error.kind is ErrorKind.PARSE_FAILURE
        assert "not the last event" in (error.detail or "")


@pytest.mark.parametrize("body", [None, "SUCCESS", ["x"], 7, _ABSENT])
def test_a_result_event_without_a_result_object_is_a_parse_failure(body: object) -> None:
    event: dict[str, object] = {"event": "result"}
    if body is not _ABSENT:
        event["result"] = body
    assert failure(json_lines(init(), event)).kind is ErrorKind.PARSE_FAILURE


def test_unknown_events_and_fields_are_ignored_and_blank_lines_skipped() -> None:
    out = (json_lines({"event": "future_event", "x": 1}, init(), {"event": "step_update"})
           + "\n  \r\n"
           + json.dumps({**result(), "extra": True}).replace('"num_turns"', '"k":[],"num_turns"')
           + "\r\n")
    assert parse_commit_stream(out) == "Fix it"


def test_a_result_alone_is_enough() -> None:
    assert parse_commit_stream(json_lines(result())) == "Fix it"


def test_a_final_line_without_a_newline_still_counts() -> None:
    assert parse_commit_stream(json_lines(init()) + json.dumps(result())) == "Fix it"


@pytest.mark.parametrize(
    "out",
    [
        "not json\n",
        json_lines(init()) + "Fetching...\n" + json_lines(result()),
        json_lines([1, 2]),
        json_lines("result"),
        json_lines({"no": "event"}),
        json_lines({"event": 7, "result": {"status": "SUCCESS", "response": "x"}}),
        json_lines({"event": None}),
        "[" * 100_000 + "\n",
        '{"event":"init"' + " " * 2_000_000,
        json_lines(init()) + '{"event":"result","result":{"status":"SUCCESS","response":"Fix',
        '{"event":"init","n":' + "9" * 5000 + "}\n",
    ],
)
def test_malformed_output_is_a_parse_failure(out: str) -> None:
    assert failure(out).kind is ErrorKind.PARSE_FAILURE


def test_an_answer_with_a_lone_surrogate_is_a_parse_failure() -> None:
    error = failure(json_lines(init(), result(response="Fix \ud800 it")))
    assert error.kind is ErrorKind.PARSE_FAILURE


@pytest.mark.parametrize("exit_code", [1, 2, 3])
def test_a_start_up_error_with_nothing_on_stdout_is_command_failed(exit_code: int) -> None:
    # exit 2: a flag agy does not know (an agy without --input-format would say so on stderr).
    error = failure("", exit_code=exit_code, stderr="flag provided but not defined: -x")
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert error.detail == f"exit status {exit_code}"
    assert "flag" not in error.message


def test_malformed_input_reported_by_agy_is_its_error_result() -> None:
    # A line agy could not decode: init, then an ERROR result, exit 1 (1.2.14 report).
    error = failure(json_lines(init(), result(status="ERROR", response="", error="decode")), 1)
    assert error.kind is ErrorKind.COMMAND_FAILED
    assert error.detail == "the turn ended with status ERROR"


# -- shapes for the contract's properties (test_contract.py) --------------------------

# Any JSON value, NaN and the infinities included, with the format's own keys.
_JSON = json_values(max_leaves=20, floats=st.floats(), keys=st.sampled_from([
    "event", "result", "status", "response", "error", "denied_actions", "step_update",
    "text_delta", "init"]))
EVENTS = st.one_of(
    _JSON,
    st.builds(lambda kind, body: {"event": kind, "result": body, "step_update": body},
              st.sampled_from(["init", "step_update", "result", "user", "x"]), _JSON),
    st.builds(lambda status, response, error, denied: {"event": "result", "result": {
        "status": status, "response": response, "error": error, "denied_actions": denied}},
        st.sampled_from(["SUCCESS", "ERROR", "OK", "", 3]),
        st.sampled_from(["Fix it", "", " ", None, 3]),
        st.sampled_from([None, "", "x", 1]),
        st.sampled_from([None, [], [{}], "x"])),
)
"""Events near the output format: what the contract adds after and instead of an output."""


# -- an agy double (end to end through the commit service: the contract, test_contract.py) --

# A double of `agy --input-format=stream-json --output-format=stream-json`, BUILT FROM PUBLIC
# DOCUMENTATION, NOT CAPTURED (no agy could be installed here; the formats are the ones
# tests/fixtures/agy/commit/README.md cites). Like agy it reads NDJSON turns from stdin until
# EOF; a line that is not a JSON object with a top-level `event` gets `init` and an `ERROR`
# result, exit 1 (as reported for 1.2.14): that is agy's own, so it is this double's
# stdin_check. Otherwise it replays a fixture stream byte for byte as that turn's output.
# It records its argv, working directory and the stdin it was given.
AGY_REFUSES_A_LINE_WITHOUT_AN_EVENT = """
init = {"event": "init", "conversation_id": "00000000-0000-4000-8000-0000000000e1",
        "init": {"cwd": os.getcwd(), "permission_mode": "request-review", "tools": []}}
for line in stdin.decode("utf-8").split("\\n"):
    if not line.strip():
        continue
    try:
        turn = json.loads(line)
    except ValueError:
        turn = None
    if not isinstance(turn, dict) or "event" not in turn:
        error = {"event": "result", "result": {
            "conversation_id": init["conversation_id"], "status": "ERROR", "response": "",
            "duration_seconds": 0, "num_turns": 0, "usage": {}, "error": "bad input"}}
        sys.stdout.write(json.dumps(init) + "\\n" + json.dumps(error) + "\\n")
        sys.exit(1)
"""


@pytest.fixture
def agy_double(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ReplayDouble:
    double = install_replay_double(tmp_path / "bin", "agy",
                                   stdin_check=AGY_REFUSES_A_LINE_WITHOUT_AN_EVENT)
    prepend_to_path(monkeypatch, double.path.parent)
    return double


def quoted_repository(tmp_path: Path) -> Path:
    """The shared change, with quotes in the staged line that must reach agy intact."""
    return change_repository(tmp_path, staged=QUOTED_STAGED, untracked=QUOTED_UNTRACKED)


QUOTED_STAGED = 'def sync():\n    return retry(fetch, note="a \\"b\\"")\n'
QUOTED_UNTRACKED = "def retry(f, note):\n    return f()\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return quoted_repository(tmp_path)


@pytest.mark.parametrize("stdin", [b"not json\n", b'{"message":{"content":"x"}}\n'])
def test_a_stdin_agy_would_refuse_ends_in_its_error_result_and_a_typed_failure(
    agy_double: ReplayDouble, monkeypatch: pytest.MonkeyPatch, stdin: bytes
) -> None:
    # The double's guard, so the end-to-end runs above mean something: a line
    # without a top-level `event` is an ERROR result and exit 1, as reported.
    agy_double.replay(monkeypatch, COMMIT / "synthetic-success.stdout.jsonl")
    request = CommandRequest(command="agy", args=COMMIT_ARGS, stdin=stdin, timeout=10)
    done = asyncio.run(LocalTransport().run(request))
    assert done.exit_code == 1
    with pytest.raises(HarnessCapabilityError) as caught:
        AgyCommit().parse_output(done)
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    assert caught.value.detail == "the turn ended with status ERROR"


def test_clanker_commit_message_with_agy_prints_the_message(
    repo: Path, agy_double: ReplayDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    agy_double.replay(monkeypatch, COMMIT / "synthetic-success.stdout.jsonl")
    monkeypatch.chdir(repo)
    before = repository_state(repo)
    with override_registry(Registry.from_entry_points({"CLANKER_LOAD_PLUGINS": "agy"})):
        result = CliRunner().invoke(cli, ["commit-message", "--harness", "agy",
                                          "--model", "gemini-3.1-pro-low"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("feat: add retry to the sync client\n")
    assert agy_double.call()["argv"][-1] == "--model=gemini-3.1-pro-low"
    assert repository_state(repo) == before
