"""The Antigravity plugin, against synthetic fixtures (tests/fixtures/agy, see its README).

agy could not be installed here, so no output below was captured from it: the
fixtures follow the formats the spec and public reports describe.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

import clanker_agy
from clanker.descriptor import Support, Transport
from clanker.environment.local import LocalFiles
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import CommandRequest, CommandResult, LocalTransport
from clanker.launch.planning import InvalidSessionIdError, plan_launch
from clanker.launch.request import LaunchRequest, SessionTarget
from clanker.models.capability import ModelsContext
from clanker.models.types import Model
from clanker.testing import ScriptedExecutor, launch_argv, registered
from clanker_agy.launch import AgyLaunch
from clanker_agy.models import FALLBACK, AgyModels, parse_models_listing

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agy"
# A conversation id as a public stream-json capture shows it.
CONVERSATION = "d6b9f466-8d4d-4b93-adbe-9bdb0b6df587"


PROVIDER = registered(clanker_agy.plugin, "agy")


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# -- launch ----------------------------------------------------------------------------


def plan(**fields: object) -> tuple[str, ...]:
    return launch_argv(PROVIDER, **fields)


def test_fresh_launch_is_the_bare_tui() -> None:
    assert plan() == ("agy",)


def test_the_model_is_bound_with_an_equals_sign() -> None:
    assert plan(model="gemini-3.1-pro-low") == ("agy", "--model=gemini-3.1-pro-low")
    # Two tokens would let a value that looks like a flag be read as one.
    assert plan(model="-p") == ("agy", "--model=-p")


def test_resume_names_the_conversation() -> None:
    session = SessionTarget(native_id=CONVERSATION)
    assert plan(operation="resume", session=session, model="gemini-3.8-flash-high") == (
        "agy", "--model=gemini-3.8-flash-high", f"--conversation={CONVERSATION}"
    )


def test_the_emulated_fork_is_the_resume_command() -> None:
    session = SessionTarget(native_id=CONVERSATION)
    assert plan(operation="fork", session=session) == plan(operation="resume", session=session)
    fork = PROVIDER.descriptor.fork
    assert fork is not None and fork.support is Support.EMULATED


def test_resume_works_over_ssh_but_fork_does_not() -> None:
    session = SessionTarget(native_id=CONVERSATION)
    assert plan(operation="resume", session=session, transport=Transport.SSH) == (
        "agy", f"--conversation={CONVERSATION}"
    )
    with pytest.raises(HarnessCapabilityError) as caught:
        plan(operation="fork", session=session, transport=Transport.SSH)
    assert caught.value.kind is ErrorKind.UNSUPPORTED


def test_an_uppercase_id_is_launched_in_canonical_lowercase() -> None:
    session = SessionTarget(native_id=CONVERSATION.upper())
    assert plan(operation="resume", session=session) == ("agy", f"--conversation={CONVERSATION}")
    assert AgyLaunch().validate_session_id(CONVERSATION.upper()) == CONVERSATION


def test_a_store_path_is_never_passed() -> None:
    path = f"/home/u/.gemini/antigravity-cli/conversations/{CONVERSATION}.db"
    session = SessionTarget(native_id=CONVERSATION, store_path=path)
    assert plan(operation="resume", session=session) == ("agy", f"--conversation={CONVERSATION}")


def test_a_path_as_the_id_is_refused() -> None:
    session = SessionTarget(native_id=f"/tmp/{CONVERSATION}")
    with pytest.raises(InvalidSessionIdError):
        plan(operation="resume", session=session)


def test_user_flags_come_last_in_order() -> None:
    session = SessionTarget(native_id=CONVERSATION)
    flags = ("--add-dir", "/srv/other", "--effort=high", "--conversation=x")
    assert plan(operation="fork", session=session, model="gemini-3.1-pro-high",
                user_flags=flags) == (
        "agy", "--model=gemini-3.1-pro-high", f"--conversation={CONVERSATION}", *flags
    )


def test_no_environment_is_set_for_agy() -> None:
    provider = PROVIDER
    assert dict(plan_launch(provider, LaunchRequest(cwd="/w", model="m")).env) == {}


@pytest.mark.parametrize(
    "stdout",
    [
        "1.1.11-rc.1\n",  # a prerelease: the spec's usage probe must not read it as 1.1.11
        "agy 1.2.12\n",
        "1.2.12\n1.2.13\n",
        "1.2.12\n\n",
        " 1.2.12\n",
        "1.2.12 \n",
        "1.2.12\r\n",
        "V1.2.12\n",
        "1.2\n",
        "Fetching update...\n1.2.12\n",
    ],
)
def test_anything_but_one_exact_version_line_is_a_parse_failure(stdout: str) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        AgyLaunch().parse_version(CommandResult(stdout, "", 0))
    assert caught.value.kind is ErrorKind.PARSE_FAILURE


def test_a_failed_version_run_is_a_command_failure() -> None:
    # What a report shows for `agy -v`: the flag wants a value.
    result = CommandResult("", "flag needs an argument: -v\nUsage of agy:\n", 2)
    with pytest.raises(HarnessCapabilityError) as caught:
        AgyLaunch().parse_version(result)
    assert caught.value.kind is ErrorKind.COMMAND_FAILED


# -- models: the parser ------------------------------------------------------------------


def test_rows_become_ids_with_labels() -> None:
    models = parse_models_listing(fixture("models.txt"))
    assert len(models) == 7
    assert models[0] == Model(id="gemini-3.8-flash-high", label="Gemini 3.8 Flash (High)")
    assert models[-1] == Model(id="gpt-oss-120b-medium", label="GPT-OSS 120B (Medium)")
    assert not any(m.provider or m.is_default for m in models)


def test_a_status_line_on_stdout_is_skipped() -> None:
    models = parse_models_listing(fixture("models-status-on-stdout.txt"))
    assert [m.id for m in models] == [
        "gemini-3.6-flash-high", "gemini-3.1-pro-high", "gemini-3.1-pro-low",
        "claude-sonnet-4-6", "gpt-oss-120b-medium",
    ]


def test_rows_are_split_at_the_first_tab_and_trimmed() -> None:
    stdout = " m-1 \t Label One \r\nm-2\t\nm-3\tA\tB\nm-4\t\x1b[1mbold\x1b[0m\n"
    assert parse_models_listing(stdout) == (
        Model(id="m-1", label="Label One"),
        Model(id="m-2"),
        Model(id="m-3"),  # a label with a tab or escape codes in it is dropped, the row kept
        Model(id="m-4"),
    )


def test_duplicate_ids_keep_the_first_row() -> None:
    stdout = fixture("models.txt") + "gemini-3.1-pro-low\tSomething else\n"
    models = parse_models_listing(stdout)
    assert len(models) == 7
    assert Model(id="gemini-3.1-pro-low", label="Gemini 3.1 Pro (Low)") in models


def test_rows_with_an_implausible_id_are_skipped() -> None:
    stdout = "Error:\tsigned out\n-x\tdash\n.hidden\tdot\nid with space\tx\nm.1_a-b\tok\n"
    assert parse_models_listing(stdout) == (Model(id="m.1_a-b", label="ok"),)


@pytest.mark.parametrize(
    "stdout",
    [
        "",
        "\n",
        fixture("models.stderr.txt"),
        fixture("models-bare-ids.txt"),
        "You are not signed in. Run agy to sign in.\n",  # any prose, as signed-out builds print
        "Error:\tnot signed in\n",
        "\t\n\t\n",
    ],
)
def test_no_usable_row_is_a_parse_failure(stdout: str) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        parse_models_listing(stdout)
    assert caught.value.kind is ErrorKind.PARSE_FAILURE


def test_the_fallback_is_gemini_ids_the_parser_would_read() -> None:
    rows = "".join(f"{m.id}\t{m.label}\n" for m in FALLBACK)
    assert parse_models_listing(rows) == FALLBACK
    assert AgyModels.fallback == FALLBACK
    assert all(m.id.startswith("gemini-") for m in FALLBACK)


# -- models: the command, replayed from the synthetic fixtures --------------------------------


def replayed_agy(exit_code: int = 0) -> ScriptedExecutor:
    """Answer as the spec says agy 1.2.12 does (synthetic, not a capture):
    `agy models` prints clean rows on stdout and its status on stderr;
    anything else fails like Go's flag parser with its usage on stderr."""

    def respond(request: CommandRequest) -> CommandResult:
        if request.argv != ("agy", "models"):
            return CommandResult("", "Usage of agy:\n", 2)
        return CommandResult(fixture("models.txt"), fixture("models.stderr.txt"), exit_code)

    return ScriptedExecutor(respond)


def discover(executor: ScriptedExecutor, refresh: bool = False) -> tuple[Model, ...]:
    context = ModelsContext(files=LocalFiles(), environ={},
                            executor=executor, session_executor=None, refresh=refresh)
    return asyncio.run(AgyModels().discover(context))


def test_discovery_runs_agy_models_bounded_at_eight_seconds() -> None:
    executor = replayed_agy()
    assert discover(executor) == parse_models_listing(fixture("models.txt"))
    [request] = executor.requests
    assert request.argv == ("agy", "models")
    assert request.timeout == 8.0
    assert request.stdin is None


def test_refresh_runs_the_same_command() -> None:
    executor = replayed_agy()
    assert len(discover(executor, refresh=True)) == 7
    assert executor.requests[0].argv == ("agy", "models")


def test_a_failed_exit_is_a_command_failure_without_agy_text() -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        discover(ScriptedExecutor.returning("", "authentication failed or timed out\n", 1))
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    assert "authentication" not in caught.value.message


def test_a_clean_exit_without_rows_is_a_parse_failure() -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        discover(ScriptedExecutor.returning(fixture("models-bare-ids.txt")))
    assert caught.value.kind is ErrorKind.PARSE_FAILURE


# -- the real CLI, when it is installed ---------------------------------------------------


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("agy") is None, reason="agy is not installed")
def test_real_agy_version() -> None:
    launch = AgyLaunch()
    result = asyncio.run(LocalTransport().run(launch.version_request()))
    assert result.stdout.strip().removeprefix("v") == launch.parse_version(result)


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("agy") is None, reason="agy is not installed")
def test_real_agy_lists_models_or_fails_typed() -> None:
    """A signed-in agy lists rows; a signed-out or offline one must fail typed, not empty."""
    transport = LocalTransport()
    context = ModelsContext(files=LocalFiles(), environ={},
                            executor=transport, session_executor=transport)

    async def outcome() -> tuple[Model, ...] | HarnessCapabilityError:
        try:
            return await AgyModels().discover(context)
        except HarnessCapabilityError as exc:
            return exc

    result = asyncio.run(outcome())
    if isinstance(result, HarnessCapabilityError):
        assert result.kind in (ErrorKind.COMMAND_FAILED, ErrorKind.PARSE_FAILURE, ErrorKind.TIMEOUT)
    else:
        assert result
        assert all(m.id == m.id.strip() and "\t" not in m.id for m in result)
