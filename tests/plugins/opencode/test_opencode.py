"""The OpenCode plugin, against captures from opencode-ai 1.18.33 (tests/fixtures/opencode)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

import clanker_opencode
from clanker.environment.local import LocalFiles
from clanker.errors import ErrorKind, HarnessCapabilityError
from clanker.execution import MAX_OUTPUT, CommandRequest, CommandResult, LocalTransport
from clanker.launch.planning import plan_launch
from clanker.launch.request import LaunchRequest, SessionTarget
from clanker.models.capability import ModelsContext
from clanker.models.types import Model
from clanker.testing import ScriptedExecutor, launch_argv, registered
from clanker_opencode.launch import OpenCodeLaunch
from clanker_opencode.models import OpenCodeModels, listing_args, parse_models_listing

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "opencode"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# Real ids from `opencode session list`: a session, its fork, and a third one.
SESSION_IDS = tuple(entry["id"] for entry in json.loads(fixture("session-list.json")))
SOURCE_ID = "ses_dd477e2caffeRx4w8c0S7Feig0"  # the session the captured fork was made from


PROVIDER = registered(clanker_opencode.plugin, "opencode")


# -- launch ----------------------------------------------------------------------------


def plan(**fields: object) -> tuple[str, ...]:
    return launch_argv(PROVIDER, **fields)


def test_fresh_launch_is_the_bare_tui_without_a_project() -> None:
    assert plan() == ("opencode",)


def test_the_model_is_provider_slash_model() -> None:
    assert plan(model="loop/m2") == ("opencode", "-m", "loop/m2")
    assert plan(model="openrouter/~anthropic/claude-fable-latest") == (
        "opencode", "-m", "openrouter/~anthropic/claude-fable-latest"
    )


def test_resume_and_fork_by_id() -> None:
    session = SessionTarget(native_id=SOURCE_ID)
    assert plan(operation="resume", session=session) == ("opencode", "-s", SOURCE_ID)
    assert plan(operation="fork", session=session) == ("opencode", "-s", SOURCE_ID, "--fork")


def test_a_store_path_is_never_passed() -> None:
    # opencode takes ids only; a path would be refused as "Invalid session ID".
    session = SessionTarget(native_id=SOURCE_ID, store_path="/data/opencode/opencode.db")
    assert plan(operation="fork", session=session) == ("opencode", "-s", SOURCE_ID, "--fork")


def test_user_flags_come_last_in_order() -> None:
    session = SessionTarget(native_id=SOURCE_ID)
    flags = ("--agent", "plan", "--port", "0", "-m", "x/y")
    assert plan(operation="fork", session=session, model="loop/m1", user_flags=flags) == (
        "opencode", "-m", "loop/m1", "-s", SOURCE_ID, "--fork", *flags
    )
    assert plan(user_flags=("--pure",)) == ("opencode", "--pure")


def test_no_environment_is_set_for_opencode() -> None:
    provider = PROVIDER
    assert dict(plan_launch(provider, LaunchRequest(cwd="/w", model="loop/m1")).env) == {}


def test_the_version_probe_waits_for_opencodes_start_up() -> None:
    # (Its argv and upper bound: the contract's.)
    assert OpenCodeLaunch().version_request().timeout >= 5.0


@pytest.mark.parametrize(
    ("result", "kind"),
    [
        # An unknown flag prints the root help on stderr and exits 1.
        (CommandResult("", fixture("help.stderr.txt"), 1), ErrorKind.COMMAND_FAILED),
        (CommandResult("", fixture("version.txt"), 0), ErrorKind.PARSE_FAILURE),
        (CommandResult(fixture("models-offline.txt"), "", 0), ErrorKind.PARSE_FAILURE),
        (CommandResult("opencode 1.18.33\n", "", 0), ErrorKind.PARSE_FAILURE),
        (CommandResult(fixture("version.txt") * 2, "", 0), ErrorKind.PARSE_FAILURE),
    ],
)
def test_version_failures(result: CommandResult, kind: ErrorKind) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        OpenCodeLaunch().parse_version(result)
    assert caught.value.kind is kind


# -- models: the parser ------------------------------------------------------------------


def test_the_offline_listing_is_the_free_opencode_models() -> None:
    models = parse_models_listing(fixture("models-offline.txt"))
    assert len(models) == 8
    assert models[0] == Model(id="opencode/big-pickle", provider="opencode")
    assert models[-1] == Model(id="opencode/space-bunny-free", provider="opencode")
    assert {m.provider for m in models} == {"opencode"}
    assert not any(m.label or m.is_default for m in models)


def test_a_provider_with_a_key_is_listed_after_opencode() -> None:
    stdout = fixture("models-dummy-anthropic.txt")
    models = parse_models_listing(stdout)
    assert [m.id for m in models] == stdout.splitlines()
    assert [m.provider for m in models] == ["opencode"] * 8 + ["anthropic"] * 18
    assert Model(id="anthropic/claude-fable-5", provider="anthropic") in models


def test_model_keys_with_slashes_keep_the_whole_line_as_the_id() -> None:
    models = parse_models_listing(fixture("models-dummy-openrouter.txt"))
    assert len(models) == 384
    assert {m.provider for m in models} == {"openrouter"}
    assert models[0] == Model(id="openrouter/~anthropic/claude-fable-latest", provider="openrouter")
    assert all(m.id.startswith("openrouter/") and m.id.count("/") >= 2 for m in models)


def test_empty_output_is_a_valid_empty_listing() -> None:
    assert parse_models_listing("") == ()
    assert parse_models_listing("\n") == ()


def test_duplicates_are_listed_once() -> None:
    assert parse_models_listing("loop/m1\nloop/m2\nloop/m1\n") == (
        Model(id="loop/m1", provider="loop"),
        Model(id="loop/m2", provider="loop"),
    )


@pytest.mark.parametrize(
    "stdout",
    [
        "\n\n",
        "loop/m1\n\nloop/m2\n",
        "noslash\n",
        "/m1\n",
        "loop/\n",
        " loop/m1\n",
        "loop /m1\n",
        "loop/ m1\n",
        "loop/m1\r\n",
        "loop/m\x00\n",
        "\x1b[92mloop/m1\x1b[0m\n",
        fixture("models-offline-verbose.txt"),
        fixture("models-unknown-provider.stderr.txt"),
        fixture("help-models.stderr.txt"),
    ],
)
def test_malformed_output_is_a_parse_failure(stdout: str) -> None:
    with pytest.raises(HarnessCapabilityError) as caught:
        parse_models_listing(stdout)
    assert caught.value.kind is ErrorKind.PARSE_FAILURE


def test_the_fallback_is_the_captured_offline_listing() -> None:
    assert OpenCodeModels.fallback == parse_models_listing(fixture("models-offline.txt"))


# -- models: the command, replayed from the capture -------------------------------------------


def replayed_opencode(stdout: str = "models-offline.txt", exit_code: int = 0) -> ScriptedExecutor:
    """Answer like opencode 1.18.33 did offline with no keys: `models` and
    `models --refresh` print the captured listing (the refresh also its
    "Models cache refreshed" on stderr, although its fetch failed); anything
    else fails the way opencode rejects an unknown option, with its help."""
    captured = {
        ("models",): (fixture(stdout), ""),
        ("models", "--refresh"): (fixture(stdout), fixture("models-refresh-offline.stderr.txt")),
    }

    def respond(request: CommandRequest) -> CommandResult:
        if request.command != "opencode" or request.args not in captured:
            return CommandResult("", fixture("help-models.stderr.txt"), 1)
        out, err = captured[request.args]
        return CommandResult(out, err, exit_code)

    return ScriptedExecutor(respond)


def discover(executor: ScriptedExecutor, refresh: bool = False) -> tuple[Model, ...]:
    context = ModelsContext(files=LocalFiles(), environ={},
                            executor=executor, session_executor=None, refresh=refresh)
    return asyncio.run(OpenCodeModels().discover(context))


def test_discovery_runs_opencode_models() -> None:
    executor = replayed_opencode("models-dummy-anthropic.txt")
    assert len(discover(executor)) == 26
    [request] = executor.requests
    assert request.argv == ("opencode", "models")
    assert request.stdin is None
    assert request.max_output_bytes == MAX_OUTPUT
    assert 10.0 < request.timeout <= 30.0


def test_refresh_reads_the_printed_list_like_a_plain_one() -> None:
    executor = replayed_opencode()
    assert discover(executor, refresh=True) == discover(replayed_opencode())
    assert executor.requests[0].argv == ("opencode", "models", "--refresh")
    assert listing_args(True) == executor.requests[0].args


def test_a_failed_exit_is_a_command_failure_without_opencode_text() -> None:
    stderr = fixture("models-unknown-provider.stderr.txt")
    with pytest.raises(HarnessCapabilityError) as caught:
        discover(ScriptedExecutor.returning("", stderr, 1))
    assert caught.value.kind is ErrorKind.COMMAND_FAILED
    assert "Provider not found" not in caught.value.message


def test_empty_output_counts_only_with_a_clean_exit() -> None:
    assert discover(ScriptedExecutor.returning("")) == ()
    with pytest.raises(HarnessCapabilityError) as caught:
        discover(ScriptedExecutor.returning("", "", 1))
    assert caught.value.kind is ErrorKind.COMMAND_FAILED


# -- the real CLI, when it is installed ---------------------------------------------------

# The loopback provider the captures used: a refused port and a placeholder key.
LOOPBACK_CONFIG = {
    "provider": {
        "loop": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Loop",
            "options": {"baseURL": "http://127.0.0.1:9/v1", "apiKey": "dummy-not-a-key"},
            "models": {"m1": {"name": "Loop M1"}, "m2": {"name": "Loop M2"}},
        }
    },
    "model": "loop/m1",
}


@pytest.fixture
def loopback_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh home whose only configured opencode provider is a refused loopback port."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, str(tmp_path / "xdg" / name.lower()))
    for name in ("OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "OPENCODE_MODELS_PATH", "OPENCODE_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENCODE_CONFIG_CONTENT", json.dumps(LOOPBACK_CONFIG))
    return tmp_path


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("opencode") is None, reason="opencode is not installed")
def test_real_opencode_lists_its_configured_provider(loopback_home: Path) -> None:
    transport = LocalTransport()
    models = asyncio.run(OpenCodeModels().discover(
        ModelsContext(files=LocalFiles(), environ={},
                      executor=transport, session_executor=transport)
    ))
    assert Model(id="loop/m1", provider="loop") in models
    assert Model(id="loop/m2", provider="loop") in models


@pytest.mark.real_cli
@pytest.mark.skipif(shutil.which("opencode") is None, reason="opencode is not installed")
def test_real_opencode_version(loopback_home: Path) -> None:
    launch = OpenCodeLaunch()
    result = asyncio.run(LocalTransport().run(launch.version_request()))
    assert result.stdout == launch.parse_version(result) + "\n"
