"""The Oh My Pi plugin, against output captured from omp 18.2.3 (tests/fixtures/omp)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

import clanker_omp
from clanker.environment.local import LocalFiles
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import MAX_OUTPUT, CommandRequest, CommandResult, LocalTransport
from clanker.launch.planning import plan_launch
from clanker.launch.request import LaunchRequest, SessionTarget
from clanker.models.capability import ModelsContext
from clanker.models.types import Model
from clanker.testing import ScriptedExecutor, launch_argv, registered
from clanker_omp.launch import OmpLaunch
from clanker_omp.models import OmpModels, listing_args, parse_models_json

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "omp"
[FORK_FILE] = FIXTURES.glob("session-loopback-fork--*.jsonl")


def session_header(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return next(r for r in map(json.loads, lines) if r["type"] == "session")


# Real ids from the captured fork: its own, and the session it was forked from.
FORK_ID = session_header(FORK_FILE)["id"]
SOURCE_ID = session_header(FORK_FILE)["parentSession"]
# A session file as the sessions capability would re-find it (the project dir name is made up).
STORE_PATH = f"/home/dev/.omp/agent/sessions/example-project/{FORK_FILE.name}"


PROVIDER = registered(clanker_omp.plugin, "omp")


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# -- launch ----------------------------------------------------------------------------


def plan(**fields: object) -> tuple[str, ...]:
    return launch_argv(PROVIDER, **fields)


def test_fresh_launch_names_the_launch_command() -> None:
    assert plan() == ("omp", "launch")


def test_the_model_is_the_selector() -> None:
    assert plan(model="anthropic/claude-sonnet-4-5") == (
        "omp", "launch", "--model", "anthropic/claude-sonnet-4-5"
    )


def test_resume_by_id_and_fork_by_id() -> None:
    session = SessionTarget(native_id=SOURCE_ID)
    assert plan(operation="resume", session=session) == ("omp", "launch", "--resume", SOURCE_ID)
    assert plan(operation="fork", session=session) == ("omp", "launch", "--fork", SOURCE_ID)


def test_a_trusted_store_path_is_preferred_over_the_id() -> None:
    session = SessionTarget(native_id=FORK_ID, store_path=STORE_PATH)
    assert plan(operation="resume", session=session) == ("omp", "launch", "--resume", STORE_PATH)
    assert plan(operation="fork", session=session) == ("omp", "launch", "--fork", STORE_PATH)


def test_user_flags_come_last_and_a_subcommand_word_among_them_stays_a_prompt() -> None:
    session = SessionTarget(native_id=SOURCE_ID)
    flags = ("--thinking", "high", "models", "--json")
    assert plan(operation="resume", session=session, model="loopback/probe-model",
                user_flags=flags) == (
        "omp", "launch", "--model", "loopback/probe-model", "--resume", SOURCE_ID, *flags
    )


def test_no_environment_is_set_for_omp() -> None:
    # An inherited PI_CODING_AGENT_DIR also moves omp's state; that is the user's setting.
    provider = PROVIDER
    assert dict(plan_launch(provider, LaunchRequest(cwd="/w")).env) == {}


@pytest.mark.parametrize(
    ("result", "kind"),
    [
        (CommandResult("", fixture("unknown-flag.stderr.txt"), 2), ErrorKind.COMMAND_FAILED),
        # The first line of `omp --help` names the version but is not --version output.
        (CommandResult(fixture("help.txt"), "", 0), ErrorKind.PARSE_FAILURE),
        (CommandResult("", fixture("version.txt"), 0), ErrorKind.PARSE_FAILURE),
    ],
)
def test_version_failures(result: CommandResult, kind: ErrorKind) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        OmpLaunch().parse_version(result)
    assert caught.value.kind is kind


# -- models: the parser ------------------------------------------------------------------


def test_dummy_key_catalog_uses_the_selectors() -> None:
    stdout = fixture("models-json-dummy-anthropic-openai.trimmed.json")
    models = parse_models_json(stdout)
    assert [(m.id, m.provider) for m in models] == [
        ("anthropic/claude-3-5-sonnet-20240620", "anthropic"),
        ("anthropic/claude-fable-5", "anthropic"),
        ("anthropic/claude-sonnet-4-5", "anthropic"),
        ("openai/gpt-4o", "openai"),
        ("openai/gpt-5.1-codex", "openai"),
        ("openai/o3", "openai"),
    ]
    assert [m.label for m in models] == [e["name"] for e in json.loads(stdout)["models"]]
    assert not any(m.is_default for m in models)


def test_refresh_catalog() -> None:
    stdout = fixture("models-refresh-json-dummy-anthropic.json")
    models = parse_models_json(stdout)
    assert len(models) == 25
    assert [m.id for m in models] == [e["selector"] for e in json.loads(stdout)["models"]]
    assert {m.provider for m in models} == {"anthropic"}


def test_loopback_provider() -> None:
    assert parse_models_json(fixture("models-json-loopback.json")) == (
        Model(id="loopback/probe-model", label="probe-model", provider="loopback"),
    )


@pytest.mark.parametrize(
    "capture", ["models-json-no-credentials.json", "models-json-bad-models-yml.stdout.json"]
)
def test_no_credentials_is_a_valid_empty_listing(capture: str) -> None:
    assert parse_models_json(fixture(capture)) == ()


def with_kinds(*kinds: object) -> str:
    """The loopback entry, once per kind: the spec's newer omp tags entries with a kind."""
    [entry] = json.loads(fixture("models-json-loopback.json"))["models"]
    entries = []
    for index, kind in enumerate(kinds):
        tagged = dict(entry, id=f"m{index}", selector=f"loopback/m{index}", kind=kind)
        entries.append(tagged)
    return json.dumps({"models": entries})


def test_only_chat_entries_are_kept_when_a_kind_is_given() -> None:
    models = parse_models_json(with_kinds("chat", "embedding", "image", "chat"))
    assert [m.id for m in models] == ["loopback/m0", "loopback/m3"]


def test_duplicates_are_listed_once() -> None:
    [entry] = json.loads(fixture("models-json-loopback.json"))["models"]
    stdout = json.dumps({"models": [entry, entry]})
    assert [m.id for m in parse_models_json(stdout)] == ["loopback/probe-model"]


@pytest.mark.parametrize(
    "stdout",
    [
        "",
        "{",
        "[]",
        "null",
        '{"models":{}}',
        '{"models":[1]}',
        '{"models":[{"provider":"x"}]}',
        '{"models":[{"provider":"x","selector":" x/m"}]}',
        '{"models":[{"provider":"","selector":"x/m"}]}',
        '{"models":[{"provider":"x","selector":"x/\\u0000"}]}',
        fixture("models-text-loopback.txt"),
        fixture("models-json-loopback.json") * 2,
        "[" * 100_000,
    ],
)
def test_malformed_output_is_a_parse_failure(stdout: str) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        parse_models_json(stdout)
    assert caught.value.kind is ErrorKind.PARSE_FAILURE


def test_a_kind_that_is_not_text_is_a_parse_failure() -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        parse_models_json(with_kinds(3))
    assert caught.value.kind is ErrorKind.PARSE_FAILURE


# -- models: the command, replayed from the capture -------------------------------------------


def replayed_omp(exit_code: int = 0) -> ScriptedExecutor:
    """Answer like omp 18.2.3 did with dummy keys: `models --json` and
    `models refresh --json` print the captured stdout; anything else fails
    the way omp rejects an unknown option."""
    captured = {
        ("models", "--json"): (fixture("models-json-dummy-anthropic-openai.trimmed.json"), ""),
        ("models", "refresh", "--json"): (fixture("models-refresh-json-dummy-anthropic.json"), ""),
    }

    def respond(request: CommandRequest) -> CommandResult:
        if request.command != "omp" or request.args not in captured:
            return CommandResult("", fixture("models-unknown-option.stderr.txt"), 1)
        stdout, stderr = captured[request.args]
        return CommandResult(stdout, stderr, exit_code)

    return ScriptedExecutor(respond)


def discover(executor: ScriptedExecutor, refresh: bool = False) -> tuple[Model, ...]:
    context = ModelsContext(files=LocalFiles(), environ={},
                            executor=executor, session_executor=None, refresh=refresh)
    return asyncio.run(OmpModels().discover(context))


def test_discovery_runs_models_json() -> None:
    executor = replayed_omp()
    assert len(discover(executor)) == 6
    [request] = executor.requests
    assert request.argv == ("omp", "models", "--json")
    assert request.stdin is None
    assert request.max_output_bytes == MAX_OUTPUT
    assert 7.0 < request.timeout <= 30.0


def test_refresh_forces_omp_to_fetch_catalogs() -> None:
    executor = replayed_omp()
    assert len(discover(executor, refresh=True)) == 25
    assert executor.requests[0].argv == ("omp", "models", "refresh", "--json")
    assert listing_args(True) == executor.requests[0].args


def test_warnings_on_stderr_do_not_spoil_the_listing() -> None:
    stdout, stderr = fixture("models-json-bad-models-yml.stdout.json"), fixture(
        "models-json-bad-models-yml.stderr.txt"
    )
    assert discover(ScriptedExecutor.returning(stdout, stderr)) == ()


def test_a_failed_exit_is_a_command_failure_without_omp_text() -> None:
    stderr = fixture("models-unknown-option.stderr.txt")
    with pytest.raises(HarnessCapabilityError) as caught:
        discover(ScriptedExecutor.returning("", stderr, 1))
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    assert "Unknown option" not in caught.value.message


# -- the real CLI, when it is installed ---------------------------------------------------


@pytest.fixture
def loopback_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh home whose only omp provider is a refused loopback port."""
    agent = tmp_path / ".omp" / "agent"
    agent.mkdir(parents=True)
    shutil.copy(FIXTURES / "loopback-models.yml", agent / "models.yml")
    shutil.copy(FIXTURES / "loopback-config.yml", agent / "config.yml")
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, str(tmp_path / "xdg" / name.lower()))
    # Pi's variables move omp's state too; this test wants omp's own default.
    for name in ("PI_CODING_AGENT_DIR", "PI_CODING_AGENT_SESSION_DIR", "PI_CONFIG_DIR",
                 "OMP_PROFILE", "PI_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("omp") is None, reason="omp is not installed")
def test_real_omp_lists_its_configured_provider(loopback_home: Path) -> None:
    transport = LocalTransport()
    models = asyncio.run(OmpModels().discover(ModelsContext(files=LocalFiles(), environ={},
                                                            executor=transport,
                                                            session_executor=transport)))
    assert Model(id="loopback/probe-model", label="probe-model", provider="loopback") in models


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("omp") is None, reason="omp is not installed")
def test_real_omp_version(loopback_home: Path) -> None:
    launch = OmpLaunch()
    result = asyncio.run(LocalTransport().run(launch.version_request()))
    assert f"omp/{launch.parse_version(result)}" in result.stdout
